/* fadsl_attention.h - exact attention (FlashAttention) forward and backward
 * on your device buffers and CUDA stream, from C or C++.
 *
 * Build against the installed library with
 *
 *     cc app.c $(pkg-config --cflags --libs fadsl-attention)
 *
 * (libfadsl_attention, which needs libfadsl; see docs/runtime.md).  The
 * kernels are those of attention.fa, which is built into the library: nothing
 * has to be found at run time but the CUDA driver and libnvrtc.
 *
 * Layout: contiguous, row-major tensors of B batches, H query heads and KVH
 * key/value heads (grouped-query attention: H is a multiple of KVH and query
 * head h reads key/value head h / (H / KVH); KVH = H is multi-head attention):
 *     q, o, do, dq   [B, H,   Nq,  D]   dtype (f16 or bf16)
 *     k, v, dk, dv   [B, KVH, Nkv, D]   dtype
 *     lse, delta     [B, H,   Nq]       float32
 * Device pointers are uint64_t (a CUdeviceptr, or a pointer from cudaMalloc
 * cast to uintptr_t) and must be 16-byte aligned (cudaMalloc's are).
 *
 *     O = softmax(scale * Q K^T [+ causal mask]) V
 *
 * With causal masking query i sees keys 0..i, which needs Nq == Nkv.
 * D must be one of 16, 32, 64, 128, 256.
 *
 * A handle (fadsl_attention) holds the loaded program; the kernels it
 * compiles for each distinct (D, dtype, causal, H / KVH, config) are kept by
 * libfadsl in memory and on disk (see docs/runtime.md, "The kernel cache"), so
 * only the first call of a kind pays for NVRTC.  Calls are asynchronous on the
 * given stream, like a CUDA kernel launch: errors of the running kernels show
 * up at the next synchronisation.  A handle may be used from several threads
 * (calls on one handle are serialised while they launch).
 *
 * Every function returns an fadsl_status; after a failure
 * fadsl_attention_last_error(handle) says why (bad shapes, null or misaligned
 * pointers and NVRTC/driver failures alike). */
#ifndef FADSL_ATTENTION_H
#define FADSL_ATTENTION_H

#include <fadsl.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fadsl_attention fadsl_attention;

typedef enum fadsl_attention_dtype {
  FADSL_ATTENTION_F16 = 0,      /* IEEE half */
  FADSL_ATTENTION_BF16 = 1,     /* bfloat16 */
} fadsl_attention_dtype;

/* The kernels, in the order a training step runs them.  The backward pass is
 * either deterministic (BWD_D, BWD_DKDV, BWD_DQ: bitwise-reproducible
 * gradients) or fused (BWD_PREP, BWD, BWD_DQ_CONVERT: the scores computed
 * once, dQ accumulated with atomic additions); see fadsl_attention_backward.
 * The last three are the fused pass's form for grouped queries with
 * fadsl_attention_options.dkv_accum: BWD_DKDV_ZERO, BWD_HEADS in BWD's
 * place, BWD_DKDV_CONVERT. */
typedef enum fadsl_attention_kernel {
  FADSL_ATTENTION_FWD = 0,      /* attn_fwd: O and LSE */
  FADSL_ATTENTION_BWD_D,        /* attn_bwd_d: delta = rowsum(dO * O) */
  FADSL_ATTENTION_BWD_DKDV,     /* attn_bwd_dkdv: dK and dV */
  FADSL_ATTENTION_BWD_DQ,       /* attn_bwd_dq: dQ */
  FADSL_ATTENTION_BWD_PREP,     /* attn_bwd_prep: delta, and zeros in the dQ accumulator */
  FADSL_ATTENTION_BWD,          /* attn_bwd: dK, dV, and dQ added into the accumulator */
  FADSL_ATTENTION_BWD_DQ_CONVERT, /* attn_bwd_dq_convert: dQ = scale * accumulator, in the dtype */
  FADSL_ATTENTION_BWD_DKDV_ZERO,  /* attn_bwd_dkdv_zero: zeros in the dK and dV accumulators */
  FADSL_ATTENTION_BWD_HEADS,      /* attn_bwd_heads: attn_bwd with a program per query head, dK and dV
                                     added into float32 accumulators */
  FADSL_ATTENTION_BWD_DKDV_CONVERT, /* attn_bwd_dkdv_convert: dK and dV from the accumulators, in the dtype */
  FADSL_ATTENTION_KERNELS
} fadsl_attention_kernel;

/* Creates a handle on a context (fadsl_context_create) with the built-in
 * attention.fa.  The context must outlive the handle.  Like
 * fadsl_context_create, a failing call still stores a handle in *out whose
 * fadsl_attention_last_error() says why (unless out is NULL or host memory
 * ran out: then *out is NULL); destroy it either way. */
FADSL_API fadsl_status fadsl_attention_create(fadsl_context *ctx, fadsl_attention **out);

/* The same with another attention.fa (same kernel names and parameters), e.g.
 * a modified copy.  FADSL_ERROR_IO / FADSL_ERROR_PROGRAM when it cannot be
 * read or compiled. */
FADSL_API fadsl_status fadsl_attention_create_from_file(fadsl_context *ctx, const char *path,
                                                        fadsl_attention **out);

/* Frees the handle (NULL is allowed).  Wait for its launches first. */
FADSL_API void fadsl_attention_destroy(fadsl_attention *attn);

/* The message of the last failure on this handle ("" when none). */
FADSL_API const char *fadsl_attention_last_error(const fadsl_attention *attn);

/* Forward pass: o and lse from q, k, v.
 * lse receives the base-2 log-sum-exp of each query row's scaled scores,
 * log2(sum_j exp(scale * q_i . k_j)) (multiply by ln 2 for the natural log);
 * the backward pass takes it as it is.
 * scale: the softmax scale; 0 means 1/sqrt(D).
 * stream: a CUstream / cudaStream_t (NULL: the legacy default stream).
 * FADSL_ERROR_INVALID_ARGUMENT for a bad shape or pointer (the message says
 * which): a dimension < 1, D not in {16, 32, 64, 128, 256}, H not a multiple
 * of KVH, causal with Nq != Nkv, B * H > 65535 (the grid's y limit), a zero
 * or misaligned pointer, a bad scale or dtype.  Tensors may hold 2^31
 * elements or more (offsets are 64-bit). */
FADSL_API fadsl_status fadsl_attention_forward(fadsl_attention *attn, uint64_t q, uint64_t k,
                                               uint64_t v, uint64_t o, uint64_t lse, int B, int H,
                                               int KVH, int Nq, int Nkv, int D, int causal,
                                               float scale, fadsl_attention_dtype dtype,
                                               void *stream);

/* Backward pass: dq, dk, dv (overwritten, not accumulated) from the forward
 * pass's inputs, its o and lse, and do = dLoss/dO.  delta is a float32
 * workspace of B * H * Nq elements (fadsl_attention_workspace_bytes) that the
 * call overwrites; it may be reused once the call's kernels have run.  Same
 * shape rules and statuses as the forward pass.
 *
 * This call runs the deterministic kernels (attn_bwd_d, attn_bwd_dkdv,
 * attn_bwd_dq): the same inputs give the same gradients to the bit, on every
 * run.  The fused pass (attn_bwd_prep, attn_bwd, attn_bwd_dq_convert), which
 * computes the scores once instead of twice but adds dQ up with atomics in
 * an order that varies from run to run, needs a float32 dQ accumulator of
 * fadsl_attention_dq_accum_bytes: give it in the options of
 * fadsl_attention_backward_ex (dq_accum), which then runs the fused pass
 * unless the options ask for a deterministic one. */
FADSL_API fadsl_status fadsl_attention_backward(fadsl_attention *attn, uint64_t q, uint64_t k,
                                                uint64_t v, uint64_t o, uint64_t lse,
                                                uint64_t do_, uint64_t dq, uint64_t dk,
                                                uint64_t dv, uint64_t delta, int B, int H,
                                                int KVH, int Nq, int Nkv, int D, int causal,
                                                float scale, fadsl_attention_dtype dtype,
                                                void *stream);

/* Bytes of the backward pass's delta workspace: 4 * B * H * Nq. */
FADSL_API size_t fadsl_attention_workspace_bytes(int B, int H, int Nq);

/* Bytes of the fused backward pass's float32 dQ accumulator
 * (fadsl_attention_options.dq_accum): 4 * B * H * Nq * D (0 for a bad size). */
FADSL_API size_t fadsl_attention_dq_accum_bytes(int B, int H, int Nq, int D);

/* Bytes of the float32 dK and dV accumulators of the fused pass with a
 * program per query head (fadsl_attention_options.dkv_accum):
 * 2 * 4 * B * KVH * Nkv * D (0 for a bad size). */
FADSL_API size_t fadsl_attention_dkv_accum_bytes(int B, int KVH, int Nkv, int D);

/* 1 where giving dkv_accum (a program per query head) is measured to be the
 * faster fused pass for H query heads over KVH kv heads: groups of 4 query
 * heads or more (docs/runtime.md has the table); 0 otherwise.  fadsl-attn
 * and the Python package ask it. */
FADSL_API int fadsl_attention_heads_preferred(int H, int KVH);

/* ---- variants: windows, softcapping, ALiBi, sinks, packed sequences -------
 * The calls below take the same tensors as fadsl_attention_forward /
 * _backward plus an options struct (docs/variants.md).  Scores are the scaled
 * scores s = scale * q.k; query and key positions are aligned at 0 (of their
 * sequence, when packed):
 *   window_left, window_right  query i sees keys i - left .. i + right (-1:
 *                              unbounded on that side); causal sets right = 0
 *   softcap > 0                s = softcap * tanh(s / softcap), before masking
 *   alibi                      float32 [H]: s -= alibi[h] * |i - j| (after the cap)
 *   sinks                      float32 [H]: exp(sinks[h]) joins every row's softmax
 *                              denominator; the backward pass writes their
 *                              gradient, summed over the batch and the rows,
 *                              into dsinks (float32 [H], overwritten)
 *   cu_seqlens_q, _k           int32 [nseq + 1]: packed variable-length sequences,
 *                              q, o, do, dq [1, H, total_q, D], k, v, dk, dv
 *                              [1, KVH, total_k, D] (B = 1, Nq = total_q, Nkv =
 *                              total_k); sequence s holds rows cu[s] .. cu[s+1] - 1;
 *                              attention stays inside a sequence (causal within
 *                              it); cu_seqlens_k 0 means cu_seqlens_q.  max_seqlen_q
 *                              and max_seqlen_k (the longest sequences) size the grid.
 * They combine freely and take GQA, f16/bf16 and any lengths (causal too when
 * Nq != Nkv: causal alone is plain attention, which needs Nq == Nkv, but
 * window_right = 0 is the same mask through the variant program).  The
 * backward pass is fused when dq_accum is given and deterministic is not
 * set (and the program has the fused kernels; a program without them runs
 * the deterministic ones), else deterministic.  A row that sees no key gets O = 0 and LSE = +inf (which the
 * backward pass reads as "no probability").  The tensors are 16-byte aligned
 * as for the plain calls, the arrays of the options 4-byte.  lse is base 2
 * as for fadsl_attention_forward.
 *
 * The struct can grow: set it up with fadsl_attention_options_init, which
 * fills `size` with the caller's sizeof and writes nothing past it; a library
 * that knows more fields treats the ones past `size` as their defaults, so a
 * program built against this header keeps working. */
typedef struct fadsl_attention_options {
  size_t size;                  /* sizeof(fadsl_attention_options), set by _init */
  int causal;                   /* 0 or 1 */
  int window_left, window_right;/* -1: unbounded (the default); both -1: no window */
  float softcap;                /* 0: none */
  uint64_t alibi;               /* device float32 [H] slopes, or 0 */
  uint64_t sinks;               /* device float32 [H] logits, or 0 */
  uint64_t dsinks;              /* device float32 [H]: the backward pass's gradient of the sinks, or 0 */
  uint64_t cu_seqlens_q;        /* device int32 [nseq + 1], or 0: unpacked [B, H, N, D] tensors */
  uint64_t cu_seqlens_k;        /* device int32 [nseq + 1], or 0: the same as cu_seqlens_q */
  int nseq;                     /* sequences (with cu_seqlens_q) */
  int max_seqlen_q, max_seqlen_k; /* the longest query and key sequence (with cu_seqlens_q) */
  /* the backward pass (fadsl_attention_backward_ex), with or without a variant */
  uint64_t dq_accum;            /* device float32 [B, H, Nq, D] (fadsl_attention_dq_accum_bytes, 16-byte
                                   aligned), overwritten: the fused pass's dQ accumulator.  0: the
                                   deterministic kernels run */
  int deterministic;            /* 1: bitwise-reproducible gradients (the deterministic kernels) even
                                   with dq_accum: dQ by its own kernel, the scores computed twice, no
                                   atomics (with sinks their gradient [H] is still summed atomically) */
  int fuse_delta;               /* 1: the fused pass computes delta inside attn_bwd (from o, for every
                                   key block) and attn_bwd_prep only zeroes the accumulator; for
                                   measurements (docs/performance.md).  Plain attention only */
  uint64_t dkv_accum;           /* device float32 [2, B, KVH, Nkv, D] (fadsl_attention_dkv_accum_bytes,
                                   16-byte aligned), overwritten, or 0.  With dq_accum, grouped queries
                                   (H > KVH) and no variant, the fused pass runs a program per query
                                   head (attn_bwd_heads) that adds its share of dK and dV into these,
                                   rather than a program per kv head that walks the group's query
                                   heads one after another (docs/performance.md says when each is
                                   faster).  Ignored otherwise */
} fadsl_attention_options;

/* Defaults: no variant (plain attention, not causal); the backward pass
 * fused when dq_accum is given.  fadsl_attention_options_init(opts) sets up
 * a struct of this header's size; fadsl_attention_options_init_size, of
 * `size` bytes (a binding that mirrors the struct passes its own size), writes
 * only those.  (The function fadsl_attention_options_init, which programs
 * built against headers before dkv_accum call, sets up the fields before
 * dkv_accum.) */
FADSL_API void fadsl_attention_options_init_size(fadsl_attention_options *opts, size_t size);
FADSL_API void(fadsl_attention_options_init)(fadsl_attention_options *opts);
#define fadsl_attention_options_init(opts) fadsl_attention_options_init_size((opts), sizeof *(opts))

/* Forward and backward passes with options (NULL: the defaults).  With no
 * variant they are fadsl_attention_forward / _backward (causal needing
 * Nq == Nkv there); with any they run the variant program (the built-in
 * attention_variants.fa, or the handle's own file when it was created from a
 * file whose kernels take the variant parameters, such as variants/window.fa).
 * FADSL_ERROR_INVALID_ARGUMENT for bad options (the message says which), and
 * FADSL_ERROR_UNSUPPORTED for a variant the handle's program has no
 * parameters for. */
FADSL_API fadsl_status fadsl_attention_forward_ex(fadsl_attention *attn,
                                                  const fadsl_attention_options *opts, uint64_t q,
                                                  uint64_t k, uint64_t v, uint64_t o, uint64_t lse,
                                                  int B, int H, int KVH, int Nq, int Nkv, int D,
                                                  float scale, fadsl_attention_dtype dtype,
                                                  void *stream);

FADSL_API fadsl_status fadsl_attention_backward_ex(fadsl_attention *attn,
                                                   const fadsl_attention_options *opts, uint64_t q,
                                                   uint64_t k, uint64_t v, uint64_t o, uint64_t lse,
                                                   uint64_t do_, uint64_t dq, uint64_t dk,
                                                   uint64_t dv, uint64_t delta, int B, int H,
                                                   int KVH, int Nq, int Nkv, int D, float scale,
                                                   fadsl_attention_dtype dtype, void *stream);

/* ---- decoding from a paged KV cache (flash-decoding) ----------------------
 * A few new query tokens per sequence against a KV cache kept in pages, with
 * the layout of FlashAttention's flash_attn_with_kvcache (docs/variants.md):
 *     q, o           [B, Sq, H, D]                dtype
 *     k_cache,       [num_blocks, page_size, KVH, D]  dtype: the cache's pages
 *       v_cache
 *     block_table    int32 [B, max_blocks]: key j of sequence b is row
 *                    j % page_size of page block_table[b, j / page_size]
 *     cache_seqlens  int32 [B]: the keys of each sequence, the Sq new tokens'
 *                    included (write their k and v into the cache first)
 *     lse            float32 [B, H, Sq], base 2 (as fadsl_attention_forward's)
 * With causal the new tokens are the sequence's last Sq positions: token t
 * sees keys 0 .. cache_seqlens[b] - Sq + t (bottom-right alignment, as
 * flash_attn_with_kvcache); without, every key.  A token that sees no key
 * gets o = 0 and lse = +inf.  The keys are split into num_splits chunks
 * processed in parallel and then combined (in the workspace); the H / KVH
 * query heads of a kv head are packed with the Sq tokens into one tile
 * (Sq * H / KVH <= 256), so that each page is read once per kv head.
 * page_size is a power of two, at least 16. */
typedef struct fadsl_attention_kvcache {
  size_t size;                  /* sizeof(fadsl_attention_kvcache), set by _init */
  int B, Sq, H, KVH, D;
  int num_blocks, page_size, max_blocks;
  int causal;
  int num_splits;               /* 0: chosen from the GPU (fadsl_attention_decode_plan) */
  int max_seqlen;               /* the longest cache_seqlens, for that choice (0: max_blocks * page_size) */
  float scale;                  /* 0: 1/sqrt(D) */
} fadsl_attention_kvcache;

/* Defaults (zeros; num_splits and scale chosen by the library).  As
 * fadsl_attention_options_init: fadsl_attention_kvcache_init(kv) sets up a
 * struct of this header's size, fadsl_attention_kvcache_init_size one of
 * `size` bytes (a binding that mirrors the struct passes its own), writing
 * nothing past it; the function of the old name, which programs built
 * against earlier headers call, sets up the fields up to `scale`, so that a
 * field added later does not make it write past their struct. */
FADSL_API void fadsl_attention_kvcache_init_size(fadsl_attention_kvcache *kv, size_t size);
FADSL_API void(fadsl_attention_kvcache_init)(fadsl_attention_kvcache *kv);
#define fadsl_attention_kvcache_init(kv) fadsl_attention_kvcache_init_size((kv), sizeof *(kv))

/* The number of splits a decoding call with these sizes uses and the bytes
 * of float32 workspace it needs (allocate them once; any 16-byte aligned
 * device memory). */
FADSL_API fadsl_status fadsl_attention_decode_plan(fadsl_attention *attn,
                                                   const fadsl_attention_kvcache *kv,
                                                   int *num_splits, size_t *workspace_bytes);

/* One decoding step: o and lse from q and the cache.  Runs attn_decode_split
 * and attn_decode_combine of decode.fa (built into the library) on the
 * stream.  FADSL_ERROR_INVALID_ARGUMENT for bad sizes or pointers (the
 * message says which).  The lengths and the table are not read on the host:
 * they must lie within max_blocks * page_size and num_blocks. */
FADSL_API fadsl_status fadsl_attention_decode(fadsl_attention *attn,
                                              const fadsl_attention_kvcache *kv, uint64_t q,
                                              uint64_t k_cache, uint64_t v_cache,
                                              uint64_t block_table, uint64_t cache_seqlens,
                                              uint64_t o, uint64_t lse, uint64_t workspace,
                                              fadsl_attention_dtype dtype, void *stream);

/* Fixes the configuration of the next calls (for benchmarks and
 * experiments); 0 leaves a value to the tuning database or the default (see
 * docs/runtime.md, "Configuration").  block_q and block_k are the tiles of
 * attn_fwd and attn_bwd_dq (block_q a multiple of block_k); attn_bwd_dkdv and
 * attn_bwd, which loop over queries, take the smaller as their BLOCK_Q and
 * the larger as their BLOCK_K.  warps and stages apply to those four
 * kernels.  All zeros restores the automatic choice. */
FADSL_API fadsl_status fadsl_attention_set_config(fadsl_attention *attn, int block_q, int block_k,
                                                  int warps, int stages);

/* Fixes the configuration of one kernel for the next calls, over what
 * fadsl_attention_set_config fixes: block_q and block_k are that kernel's own
 * BLOCK_Q and BLOCK_K (attn_bwd_dkdv's and attn_bwd's too, not exchanged), so
 * that each kernel can take a tile of its own space (attn_bwd 64 x 128 on 8
 * warps while attn_fwd keeps its own).  0 leaves a value to
 * fadsl_attention_set_config, the tuning database or the default; all zeros
 * clears the kernel's own configuration.  Kernels with tiles only
 * (FWD, BWD_DKDV, BWD_DQ, BWD); the variants' kernels take
 * fadsl_attention_set_config's.  Values are used as given (a tile that the
 * kernel cannot take fails at its launch). */
FADSL_API fadsl_status fadsl_attention_set_kernel_config(fadsl_attention *attn, fadsl_attention_kernel which,
                                                         int block_q, int block_k, int warps, int stages);

/* Fixes how one kernel pipelines its loads and maps its programs onto thread
 * blocks for the next calls, by name: pipeline "cp_async", "tma", "tma_async",
 * "tma_ws" or "tma_ws_pp" (sm_90a; other targets use cp.async), schedule
 * "grid" or "persistent".  NULL or "" leaves that one to the tuning database,
 * the default or FADSL_PIPELINE / FADSL_SCHEDULE (and clears an earlier
 * choice).  Kernels with tiles only, as fadsl_attention_set_kernel_config;
 * a pipeline the kernel cannot take (a producer warpgroup on too few warps,
 * say) fails at its launch. */
FADSL_API fadsl_status fadsl_attention_set_kernel_launch(fadsl_attention *attn, fadsl_attention_kernel which,
                                                         const char *pipeline, const char *schedule);

/* What the last launch of a kernel used: constexprs (BLOCK_Q, BLOCK_K, ...),
 * warps, stages, where they came from ("tuned", "default", "explicit", ...),
 * architecture, grid and kernel-cache hit.  The strings stay valid until the
 * handle is destroyed.  FADSL_ERROR_NOT_FOUND before the first launch. */
FADSL_API fadsl_status fadsl_attention_kernel_info(const fadsl_attention *attn,
                                                   fadsl_attention_kernel which,
                                                   fadsl_kernel_info *out);

/* The kernel's name in attention.fa ("attn_fwd", ...), or NULL. */
FADSL_API const char *fadsl_attention_kernel_name(fadsl_attention_kernel which);

/* ---- the backward pass from a given delta ---------------------------------
 * The backward pass without attn_bwd_d: delta (float32 [B, H, Nq]) is an
 * input, and the call runs attn_bwd_dkdv and attn_bwd_dq.  With
 * delta = rowsum(dO * O) it gives what fadsl_attention_backward gives; with
 * delta = rowsum(dO * O) - g, where g = dLoss / d lse_nat is the gradient of
 * a loss that also reads the natural log-sum-exp (lse_nat = lse * ln 2; ring
 * attention and other context-parallel schemes combine partial results
 * through it), it gives the gradients of that loss.  Same shape rules and
 * statuses as fadsl_attention_backward; o is not needed. */
FADSL_API fadsl_status fadsl_attention_backward_delta(fadsl_attention *attn, uint64_t q, uint64_t k,
                                                      uint64_t v, uint64_t lse, uint64_t do_,
                                                      uint64_t dq, uint64_t dk, uint64_t dv,
                                                      uint64_t delta, int B, int H, int KVH, int Nq,
                                                      int Nkv, int D, int causal, float scale,
                                                      fadsl_attention_dtype dtype, void *stream);

/* Checks a shape (and scale and dtype) as the calls do, without running
 * anything: FADSL_SUCCESS, or the status and message a call would fail with.
 * For wrappers that must reject a shape before any data exists (a tracing
 * compiler's fake tensors, for instance). */
FADSL_API fadsl_status fadsl_attention_check_shape(fadsl_attention *attn, int B, int H, int KVH,
                                                   int Nq, int Nkv, int D, int causal, float scale,
                                                   fadsl_attention_dtype dtype);

/* ---- on the CPU interpreter, over host memory ------------------------------
 * The same calls on host arrays of the same layouts (f16 and bf16 as their
 * 16-bit patterns), run by the CPU interpreter (fadsl_interpret) with the
 * numerics of the GPU kernels: for tests, and for machines without a GPU.
 * They return when the kernels have run; `threads` interpreter threads share
 * the programs (0 or 1: one).  Pointers must be aligned to their element size;
 * each tensor is given to the interpreter as its own region, so every access
 * is checked against it.  They work with a handle on any context, a device -1
 * one included.  The configuration is the one fadsl_attention_set_config
 * fixed, else each kernel's default (the tuning database describes GPUs). */
FADSL_API fadsl_status fadsl_attention_forward_host(fadsl_attention *attn, const void *q,
                                                    const void *k, const void *v, void *o, float *lse,
                                                    int B, int H, int KVH, int Nq, int Nkv, int D,
                                                    int causal, float scale,
                                                    fadsl_attention_dtype dtype, int threads);

FADSL_API fadsl_status fadsl_attention_backward_host(fadsl_attention *attn, const void *q,
                                                     const void *k, const void *v, const void *o,
                                                     const float *lse, const void *do_, void *dq,
                                                     void *dk, void *dv, float *delta, int B, int H,
                                                     int KVH, int Nq, int Nkv, int D, int causal,
                                                     float scale, fadsl_attention_dtype dtype,
                                                     int threads);

/* The backward pass with options on the interpreter: plain attention (a
 * variant is FADSL_ERROR_UNSUPPORTED here; causal from opts->causal), fused
 * unless opts->deterministic (NULL: the defaults, fused).  opts->dq_accum is
 * a host float32 array [B, H, Nq, D] for the accumulator, or 0: the call
 * allocates one for itself. */
FADSL_API fadsl_status fadsl_attention_backward_host_ex(fadsl_attention *attn,
                                                        const fadsl_attention_options *opts,
                                                        const void *q, const void *k, const void *v,
                                                        const void *o, const float *lse,
                                                        const void *do_, void *dq, void *dk, void *dv,
                                                        float *delta, int B, int H, int KVH, int Nq,
                                                        int Nkv, int D, float scale,
                                                        fadsl_attention_dtype dtype, int threads);

FADSL_API fadsl_status fadsl_attention_backward_delta_host(fadsl_attention *attn, const void *q,
                                                           const void *k, const void *v,
                                                           const float *lse, const void *do_,
                                                           void *dq, void *dk, void *dv,
                                                           const float *delta, int B, int H,
                                                           int KVH, int Nq, int Nkv, int D,
                                                           int causal, float scale,
                                                           fadsl_attention_dtype dtype,
                                                           int threads);

#ifdef __cplusplus
}
#endif

#endif
