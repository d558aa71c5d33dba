/* attention_handle.h - inside libfadsl_attention: the handle, and the
 * checking, binding and running that the device calls (fadsl_attention.c),
 * the host calls (attention_host.c) and the calls with a given delta
 * (attention_delta.c) share.  Not installed; nothing here is exported (the
 * library exports fadsl_attention_* only). */
#ifndef FADSL_ATTENTION_HANDLE_H
#define FADSL_ATTENTION_HANDLE_H

#include <pthread.h>
#include <stdbool.h>

#include "fadsl_attention.h"

struct fadsl_attention {
  fadsl_context *ctx;
  fadsl_program *prog;
  fadsl_kernel *kernels[FADSL_ATTENTION_KERNELS];
  fadsl_args *args[FADSL_ATTENTION_KERNELS];
  fadsl_kernel_info info[FADSL_ATTENTION_KERNELS];   /* of the last launch */
  int launched[FADSL_ATTENTION_KERNELS];
  int block_q, block_k, warps, stages;                /* 0: automatic */
  int own[FADSL_ATTENTION_KERNELS][4];                /* fadsl_attention_set_kernel_config's BLOCK_Q,
                                                         BLOCK_K, warps, stages per kernel (0: not given) */
  int own_pipeline[FADSL_ATTENTION_KERNELS];          /* fadsl_attention_set_kernel_launch's, as */
  int own_schedule[FADSL_ATTENTION_KERNELS];          /* fadsl_config_value gives them (0: not given) */
  pthread_mutex_t lock;                               /* the args and info are shared state */
  char error[4096];
  struct FaAttnExtra *extra;                          /* attention_variants.c: variant and decoding programs */
};

/* The shape and numbers of one call. */
typedef struct FaAttnCall {
  int B, H, KVH, Nq, Nkv, D, causal;
  float scale;
  const char *dtype;            /* "f16" / "bf16", set by fa_attn_api_check */
} FaAttnCall;

typedef struct FaAttnNamedPtr {
  const char *name;
  uint64_t ptr;
} FaAttnNamedPtr;

/* The tensors of a call (device or host addresses); unused ones 0.
 * dq_accum: the fused backward pass's float32 accumulator; dkv_accum: dK's
 * and then dV's, for its form with a program per query head. */
typedef struct FaAttnTensors {
  uint64_t q, k, v, o, lse, do_, dq, dk, dv, delta, dq_accum, dkv_accum;
} FaAttnTensors;

/* How the backward pass runs: fused (when the tensors have a dq_accum and
 * the program the fused kernels) unless deterministic. */
typedef struct FaAttnBwdMode {
  bool deterministic;
  bool fuse_delta;              /* the fused pass with delta computed in attn_bwd */
} FaAttnBwdMode;

/* Where the kernels run: on a device stream, or on the interpreter over
 * host regions (regions != NULL). */
typedef struct FaAttnTarget {
  void *stream;
  const fadsl_host_region *regions;
  int nregions;
  int threads;
} FaAttnTarget;

/* Records a failure's message on the handle and returns st. */
fadsl_status fa_attn_api_fail(fadsl_attention *a, fadsl_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks the handle, the shape and the pointers (non-zero, multiples of
 * `align` bytes); sets c->dtype and resolves a zero scale.  `fn` names the
 * public call in messages. */
fadsl_status fa_attn_api_check(fadsl_attention *a, const char *fn, FaAttnCall *c, fadsl_attention_dtype dtype,
                               const FaAttnNamedPtr *ptrs, int nptrs, unsigned align);

/* attn_fwd: o and lse from q, k, v. */
fadsl_status fa_attn_api_forward(fadsl_attention *a, const FaAttnTensors *t, const FaAttnCall *c,
                                 const FaAttnTarget *where);

/* The backward kernels: attn_bwd_d (delta = rowsum(dO * O)) unless
 * delta_given, then attn_bwd_dkdv and attn_bwd_dq, which read delta; or,
 * when t->dq_accum is given, mode (may be NULL) does not ask for a
 * deterministic pass, delta is not given and the program has them,
 * attn_bwd_prep, attn_bwd and attn_bwd_dq_convert; with t->dkv_accum too,
 * grouped queries and the kernels in the program, attn_bwd_dkdv_zero and
 * attn_bwd_heads in attn_bwd's place, and attn_bwd_dkdv_convert. */
fadsl_status fa_attn_api_backward(fadsl_attention *a, const FaAttnTensors *t, const FaAttnCall *c,
                                  const FaAttnTarget *where, int delta_given, const FaAttnBwdMode *mode);

#endif
