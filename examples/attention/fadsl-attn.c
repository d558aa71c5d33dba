/* fadsl-attn - exact attention (attention.fa) as a user runs it, on the CPU
 * interpreter or on the GPU.
 *
 *   fadsl-attn --interpret|--gpu [--causal] [--dtype f16|bf16] --q q.npy --k k.npy --v v.npy
 *              [--do do.npy] [--o o.npy] [--lse lse.npy] [--dq dq.npy --dk dk.npy --dv dv.npy]
 *              [--scale S] [--check] [--program attention.fa]
 *   fadsl-attn --interpret|--gpu --shape B,H,KVH,N,D [--backward] [--seed N] [--check] ...
 *   fadsl-attn --gpu --shape B,H,KVH,N,D --bench [--json FILE] [--block-q N --block-k N]
 *              [--warps N] [--stages N] ...
 *   variants (any of them, combined): [--window L,R] [--softcap C] [--alibi SLOPES.npy]
 *              [--sinks SINKS.npy [--dsinks OUT.npy]] [--cu-seqlens OFFS.npy]
 *
 * q is [B, H, Nq, D]; k and v are [B, KVH, Nkv, D] with H a multiple of KVH
 * (grouped-query attention).  Inputs may be float16 or float32 .npy files and
 * are rounded to --dtype (default f16); outputs are float32 .npy.  The scale
 * defaults to 1/sqrt(D).  Causal masking lets query i see keys 0..i, so it
 * needs Nq == Nkv.  --lse writes the natural-log log-sum-exp of each query
 * row, [B, H, Nq].  With --do (or --backward on random inputs) the backward
 * kernels run too and --dq/--dk/--dv are written.
 *
 * --gpu goes through the attention C API (fadsl_attention.h): inputs are
 * copied to device memory, outputs are filled with NaN before the kernels run
 * (so that an element a kernel does not write shows), and the configuration
 * of every kernel is printed with where it came from.  The backward pass is
 * the deterministic one (attn_bwd_d + attn_bwd_dkdv + attn_bwd_dq, the same
 * bits on every run) unless --fused asks for the fused one (attn_bwd_prep +
 * attn_bwd + attn_bwd_dq_convert, dQ added with atomics).  --bench times the forward pass
 * and both backward passes with CUDA events.
 *
 * Variants (docs/variants.md) run attention_variants.fa (or --program, e.g.
 * variants/window.fa): --window L,R lets query i see keys i-L .. i+R (-1:
 * unbounded; --causal sets R = 0); --softcap C caps the scaled scores s to
 * C tanh(s / C); --alibi adds -slope_h |i - j| (float32 [H]); --sinks adds
 * exp(sink_h) to every row's denominator (float32 [H]) and --dsinks writes
 * their gradient; --cu-seqlens (int32 [nseq + 1]) packs variable-length
 * sequences along N of q [1, H, total, D] and k, v [1, KVH, total, D].
 *
 * Exit status: 0 success, 1 errors (or --check beyond the bounds, or NaN),
 * 2 usage.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attention_ref.h"
#include "attn_check.h"
#include "attn_decode.h"
#include "attn_interp.h"
#include "attn_variant.h"
#include "fadsl.h"
#include "fadsl_attention.h"
#include "interp.h"
#include "npy.h"

enum { EXIT_ERRORS = 1, EXIT_USAGE = 2 };

typedef struct Options {
  bool interpret, gpu, causal, check, backward, bench, forward_only;
  bool deterministic, fused, fuse_delta;              /* the backward pass: which one (--deterministic,
                                                         --fused and --fuse-delta as given; after
                                                         parse_options deterministic is the choice) */
  int heads;                                          /* the fused pass with a program a query head: 1
                                                         --heads, 0 --no-heads, -1 where the library
                                                         prefers it (run_heads) */
  DType dtype;
  const char *q, *k, *v, *dO, *o, *lse, *dq, *dk, *dv, *program, *json, *save_inputs;
  const char *alibi, *sinks, *dsinks, *cu_seqlens;   /* variants' files */
  const char *label;                                  /* --label: a name for the --json record */
  bool decode;                                        /* --decode: from a paged KV cache */
  const char *k_cache, *v_cache, *block_table, *cache_seqlens;
  bool has_decode_shape;
  int decode_shape[7];                                /* B, Sq, H, KVH, D, page, length */
  int num_splits;
  bool has_window;
  int window[2];                                      /* left, right; -1 unbounded */
  double softcap;
  double scale;
  bool has_scale, has_shape, has_seed;
  int shape[6];         /* B, H, KVH, Nq, Nkv, D */
  uint64_t seed;
  int block_q, block_k, warps, stages, threads, device;
  int own[FADSL_ATTENTION_KERNELS][4];  /* --config: a kernel's BLOCK_Q, BLOCK_K, warps, stages (0: not given) */
  char own_launch[FADSL_ATTENTION_KERNELS][2][32];  /* --config: its pipeline and schedule ("": not given) */
  bool has_own;
  int bench_iters;      /* at least this many timed runs ... */
  double bench_ms;      /* ... and at least this much time */
  double timeout_s;     /* --timeout: a pass not finished by then stops the program */
} Options;

static void usage(FILE *f) {
  fputs("usage: fadsl-attn --interpret|--gpu [--causal] [--dtype f16|bf16] --q q.npy --k k.npy --v v.npy\n"
        "                  [--do do.npy] [--o o.npy] [--lse lse.npy] [--dq dq.npy --dk dk.npy --dv dv.npy]\n"
        "                  [--scale S] [--check]\n"
        "       fadsl-attn --interpret|--gpu --shape B,H,KVH,N,D [--backward] [--seed N] [--check] [outputs...]\n"
        "       fadsl-attn --gpu --shape B,H,KVH,N,D --bench [--json FILE] [--check]\n"
        "Exact attention (attention.fa): O = softmax(scale * Q K^T) V, and its gradients.\n"
        "  q: [B, H, Nq, D]; k, v: [B, KVH, Nkv, D], H a multiple of KVH (grouped-query attention)\n"
        "  --interpret          run the kernels on the CPU interpreter\n"
        "  --gpu                run them on the GPU (through libfadsl_attention)\n"
        "  --dtype f16|bf16     precision of the kernels (default f16); inputs (float16 or float32\n"
        "                       .npy) are rounded to it; outputs are written as float32 .npy\n"
        "  --causal             query i sees keys 0..i (needs Nq == Nkv)\n"
        "  --scale S            softmax scale (default 1/sqrt(D))\n"
        "  --do FILE            gradient of the loss with respect to O: runs the backward pass\n"
        "  --lse FILE           natural-log log-sum-exp of each query row, [B, H, Nq]\n"
        "  --shape B,H,KVH,N,D  random normal inputs instead of files (B,H,KVH,NQ,NKV,D also works)\n"
        "  --backward           with --shape: a random dO too, and the backward pass\n"
        "  --deterministic      the backward pass that gives the same gradients to the bit on every run\n"
        "                       (attn_bwd_d, attn_bwd_dkdv, attn_bwd_dq: no atomics, the scores computed\n"
        "                       twice); the default\n"
        "  --fused              the fused backward pass (attn_bwd_prep, attn_bwd, attn_bwd_dq_convert:\n"
        "                       the scores once, dQ summed with atomic additions in a varying order);\n"
        "                       on Hopper the faster one at most shapes\n"
        "  --fuse-delta         the fused pass with D = rowsum(dO * O) computed inside attn_bwd (plain\n"
        "                       attention; for measurements)\n"
        "  --heads              the fused pass with one program per query head where H > KVH\n"
        "                       (attn_bwd_heads: dK and dV added into float32 accumulators, then\n"
        "                       attn_bwd_dkdv_convert; the C API's dkv_accum), for grouped queries;\n"
        "                       the default where H >= 4 KVH (plain attention), faster there on an H100\n"
        "  --no-heads           the fused pass with one program per kv head, walking its query heads\n"
        "  --seed N             seed of the random inputs (printed when not given)\n"
        "  --save-inputs PREFIX write the inputs as PREFIXq.npy, PREFIXk.npy, PREFIXv.npy (and PREFIXdo.npy),\n"
        "                       float32 holding the rounded values\n"
        "  --check              compare every output with a float64 reference (on large shapes a stated\n"
        "                       subset of heads and rows): print ||out - ref|| / max(||ref||, ||ref_rss||),\n"
        "                       where ref_rss is the reference recomputed with every sum and difference\n"
        "                       replaced by the root-sum-square of its terms' magnitudes (the scale of the\n"
        "                       rounding errors, which stays nonzero where terms cancel: one key gives\n"
        "                       dQ = dK = 0 exactly); fail above the bounds (f16: o 2e-3, dq/dk/dv 1e-2;\n"
        "                       bf16: 1e-2, 3e-2; lse 1e-4, against ||ref||) or on NaN/inf\n"
        "  --bench              (--gpu) time forward and backward with CUDA events: median of at least\n"
        "                       --iters runs (default 20) and --min-ms of runs (default 200), L2 flushed\n"
        "                       before each; prints ms and TFLOP/s (with --shape it implies --backward);\n"
        "  --forward-only       (--bench --shape) time the forward pass alone\n"
        "  --timeout S          (--gpu) a pass that has not finished within S seconds (default 300) stops\n"
        "                       the program with a message: the GPU would stay busy with it\n"
        "                       the backward pass chosen, and the other one (fused / deterministic) beside it\n"
        "  --json FILE          (--bench) append one JSON line with shape, configs, times, errors\n"
        "  --label TEXT         (--json) a name for the record (its \"label\")\n"
        "  --block-q N, --block-k N  tile sizes (interpreter default 32 and 32; on the GPU they fix\n"
        "                       the config, which otherwise comes from the tuning database or the default)\n"
        "  --warps N, --stages N  (--gpu) fix warps and pipeline stages\n"
        "  --config KERNEL:BLOCK_Q=N,BLOCK_K=N,warps=N,stages=N,pipeline=NAME,schedule=NAME\n"
        "                       (--gpu) one kernel's own tiles, warps, stages, pipeline (cp_async, tma,\n"
        "                       tma_async, tma_ws, tma_ws_pp) and schedule (grid, persistent), any of\n"
        "                       them, over --block-q, FADSL_PIPELINE and the others, e.g.\n"
        "                       --config attn_bwd:BLOCK_Q=64,BLOCK_K=128,warps=8,pipeline=tma_ws\n"
        "                       (repeatable; kernels with tiles: attn_fwd, attn_bwd_dkdv, attn_bwd_dq,\n"
        "                       attn_bwd, attn_bwd_heads)\n"
        "Decoding from a paged KV cache (decode.fa; the layout of flash_attn_with_kvcache):\n"
        "  --decode             q [B, Sq, H, D] against --k-cache/--v-cache [blocks, page, KVH, D] through\n"
        "                       --block-table (int32 [B, max_blocks]) with --cache-seqlens (int32 [B], the new\n"
        "                       tokens included); --causal: token t sees keys 0 .. len - Sq + t; writes --o, --lse\n"
        "  --decode-shape B,SQ,H,KVH,D,PAGE,LENGTH  random inputs: every sequence LENGTH keys, pages in a random order\n"
        "  --num-splits N       split the keys N ways (default: from the GPU's multiprocessors)\n"
        "  --bench              (--gpu) also times a device copy of the cache, the bandwidth to compare with\n"
        "Variants (any combination; they run attention_variants.fa unless --program names another):\n"
        "  --window L,R         query i sees keys i-L .. i+R (-1: unbounded on that side; --causal: R = 0)\n"
        "  --softcap C          scores s = scale q.k become C tanh(s / C), before masking and softmax\n"
        "  --alibi SLOPES.npy   float32 [H]: -slope_h |i - j| is added to the scores\n"
        "  --sinks SINKS.npy    float32 [H]: exp(sink_h) joins every row's softmax denominator\n"
        "  --dsinks OUT.npy     with --sinks and the backward pass: their gradient [H] (float32)\n"
        "  --cu-seqlens OFFS.npy  int32 [nseq + 1]: sequences packed along N of q [1, H, total, D] and\n"
        "                       k, v [1, KVH, total, D]; attention only within a sequence (causal within it)\n"
        "  --threads N          interpreter and float64-check threads (default: one per CPU)\n"
        "  --device N           (--gpu) CUDA device (default 0)\n"
        "  --program FILE       attention.fa to use (default: --interpret the installed or source copy,\n"
        "                       --gpu the copy built into libfadsl_attention)\n"
        "\n"
        "Environment (--gpu; docs/runtime.md): FADSL_LOG=info prints each launch's configuration and\n"
        "where it came from (tuned, nearest, default); FADSL_TUNE_DB names the tuning database;\n"
        "FADSL_CACHE_DIR the kernel cache; FADSL_ARCH=sm_90 compiles without Hopper's warpgroup\n"
        "products (to compare with the default sm_90a code on an H100/H200).\n",
        f);
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "fadsl-attn: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(try fadsl-attn --help)\n");
  return EXIT_USAGE;
}

static bool parse_pos_int(const char *s, int *out) {
  char *e;
  errno = 0;
  long v = strtol(s, &e, 10);
  if (errno || *e || e == s || v <= 0 || v > (1L << 30))
    return false;
  *out = (int)v;
  return true;
}

/* --config KERNEL:NAME=VALUE,...: one kernel's own configuration.  NULL when
 * it parses, else what is wrong (a constant, or written into msg). */
static const char *parse_kernel_config(const char *text, Options *o, char *msg, size_t msg_size) {
  static const char *const axes[6] = {"BLOCK_Q", "BLOCK_K", "warps", "stages", "pipeline", "schedule"};
  const char *colon = strchr(text, ':');
  int which = -1;
  for (int k = 0; colon && k < FADSL_ATTENTION_KERNELS; k++) {
    const char *name = fadsl_attention_kernel_name((fadsl_attention_kernel)k);
    if (strlen(name) == (size_t)(colon - text) && !strncmp(text, name, (size_t)(colon - text)))
      which = k;
  }
  if (which != FADSL_ATTENTION_FWD && which != FADSL_ATTENTION_BWD_DKDV && which != FADSL_ATTENTION_BWD_DQ &&
      which != FADSL_ATTENTION_BWD && which != FADSL_ATTENTION_BWD_HEADS)
    return "--config wants KERNEL:NAME=VALUE,... with KERNEL one of attn_fwd, attn_bwd_dkdv, attn_bwd_dq, attn_bwd, "
           "attn_bwd_heads";
  int got[4] = {0, 0, 0, 0};
  char launch[2][32] = {"", ""};
  for (const char *item = colon + 1; *item;) {
    const char *end = strchr(item, ',');
    size_t len = end ? (size_t)(end - item) : strlen(item);
    const char *eq = memchr(item, '=', len);
    char value[32];
    int a = -1;
    for (int i = 0; eq && i < 6; i++)
      if (strlen(axes[i]) == (size_t)(eq - item) && !strncmp(item, axes[i], (size_t)(eq - item)))
        a = i;
    if (a < 0 || len - (size_t)(eq - item) >= sizeof value)
      return "--config takes BLOCK_Q=N, BLOCK_K=N, warps=N, stages=N, pipeline=NAME and schedule=NAME, "
             "comma-separated";
    snprintf(value, sizeof value, "%.*s", (int)(len - (size_t)(eq - item) - 1), eq + 1);
    if (a >= 4) {
      if (fadsl_config_value(axes[a], value) <= 0) {
        snprintf(msg, msg_size, "--config: %s=%s: want %s", axes[a], value, fadsl_config_allowed(axes[a]));
        return msg;
      }
      snprintf(launch[a - 4], sizeof launch[a - 4], "%s", value);
    } else if (!parse_pos_int(value, &got[a])) {
      return "--config: BLOCK_Q, BLOCK_K, warps and stages each a positive number";
    }
    item += len + (end != NULL);
  }
  memcpy(o->own[which], got, sizeof got);
  memcpy(o->own_launch[which], launch, sizeof launch);
  o->has_own = true;
  return NULL;
}

static int parse_options(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->heads = -1;
  o->dtype = DT_F16;
  o->bench_iters = 20;
  o->bench_ms = 200;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    struct {
      const char *opt;
      const char **dst;
    } files[] = {{"--q", &o->q},       {"--k", &o->k},     {"--v", &o->v},       {"--do", &o->dO},
                 {"--o", &o->o},       {"--lse", &o->lse}, {"--dq", &o->dq},     {"--dk", &o->dk},
                 {"--dv", &o->dv},     {"--program", &o->program}, {"--json", &o->json},
                 {"--save-inputs", &o->save_inputs}, {"--alibi", &o->alibi}, {"--sinks", &o->sinks},
                 {"--dsinks", &o->dsinks}, {"--cu-seqlens", &o->cu_seqlens}, {"--k-cache", &o->k_cache},
                 {"--v-cache", &o->v_cache}, {"--block-table", &o->block_table},
                 {"--cache-seqlens", &o->cache_seqlens}, {"--label", &o->label}};
    bool matched = false;
    for (int f = 0; f < FA_ARRAY_LEN(files); f++)
      if (!strcmp(a, files[f].opt)) {
        if (!val)
          return usage_error("%s needs a file name", a);
        *files[f].dst = val;
        i++;
        matched = true;
      }
    if (matched)
      continue;
    struct {
      const char *opt;
      int *dst;
    } ints[] = {{"--block-q", &o->block_q}, {"--block-k", &o->block_k}, {"--warps", &o->warps},
                {"--stages", &o->stages},   {"--threads", &o->threads}, {"--iters", &o->bench_iters},
                {"--num-splits", &o->num_splits}};
    for (int f = 0; f < FA_ARRAY_LEN(ints); f++)
      if (!strcmp(a, ints[f].opt)) {
        if (!val || !parse_pos_int(val, ints[f].dst))
          return usage_error("%s needs a positive number", a);
        i++;
        matched = true;
      }
    if (matched)
      continue;
    if (!strcmp(a, "--config")) {
      char msg[160];
      const char *why = val ? parse_kernel_config(val, o, msg, sizeof msg) : "--config needs KERNEL:NAME=N,...";
      if (why)
        return usage_error("%s", why);
      i++;
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--interpret")) {
      o->interpret = true;
    } else if (!strcmp(a, "--gpu")) {
      o->gpu = true;
    } else if (!strcmp(a, "--causal")) {
      o->causal = true;
    } else if (!strcmp(a, "--check")) {
      o->check = true;
    } else if (!strcmp(a, "--backward")) {
      o->backward = true;
    } else if (!strcmp(a, "--deterministic")) {
      o->deterministic = true;
    } else if (!strcmp(a, "--fused")) {
      o->fused = true;
    } else if (!strcmp(a, "--fuse-delta")) {
      o->fuse_delta = true;
    } else if (!strcmp(a, "--heads")) {
      o->heads = 1;
    } else if (!strcmp(a, "--no-heads")) {
      o->heads = 0;
    } else if (!strcmp(a, "--bench")) {
      o->bench = true;
    } else if (!strcmp(a, "--forward-only")) {
      o->forward_only = true;
    } else if (!strcmp(a, "--dtype")) {
      if (!val)
        return usage_error("%s needs f16 or bf16", a);
      if (!strcmp(val, "f16") || !strcmp(val, "float16"))
        o->dtype = DT_F16;
      else if (!strcmp(val, "bf16") || !strcmp(val, "bfloat16"))
        o->dtype = DT_BF16;
      else
        return usage_error("--dtype takes f16 or bf16, not '%s'", val);
      i++;
    } else if (!strcmp(a, "--scale")) {
      char *e;
      if (!val || (o->scale = strtod(val, &e), *e) || e == val || !(o->scale > 0) || !isfinite(o->scale))
        return usage_error("--scale needs a positive number", a);
      o->has_scale = true;
      i++;
    } else if (!strcmp(a, "--decode")) {
      o->decode = true;
    } else if (!strcmp(a, "--decode-shape")) {
      int n = 0;
      char *copy = val ? strdup(val) : NULL, *save = NULL;
      for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
        if (n == 7 || !parse_pos_int(t, &o->decode_shape[n++]))
          n = 8;
      free(copy);
      if (n != 7)
        return usage_error("--decode-shape wants B,SQ,H,KVH,D,PAGE,LENGTH (positive integers), not '%s'",
                           val ? val : "");
      o->has_decode_shape = o->decode = true;
      i++;
    } else if (!strcmp(a, "--window")) {
      char *e1, *e2;
      long l = val ? strtol(val, &e1, 10) : 0, r = 0;
      bool ok = val && e1 != val && *e1 == ',' && (r = strtol(e1 + 1, &e2, 10), e2 != e1 + 1 && !*e2);
      if (!ok || l < -1 || r < -1 || l > (1L << 30) || r > (1L << 30))
        return usage_error("--window wants L,R (each >= 0, or -1 for unbounded), not '%s'", val ? val : "");
      o->has_window = true;
      o->window[0] = (int)l;
      o->window[1] = (int)r;
      i++;
    } else if (!strcmp(a, "--softcap")) {
      char *e;
      if (!val || (o->softcap = strtod(val, &e), *e) || e == val || !(o->softcap > 0) || !isfinite(o->softcap))
        return usage_error("--softcap needs a positive number", a);
      i++;
    } else if (!strcmp(a, "--timeout")) {
      char *e;
      if (!val || (o->timeout_s = strtod(val, &e), *e) || e == val || !(o->timeout_s > 0) || o->timeout_s > 86400)
        return usage_error("--timeout needs a number of seconds", a);
      i++;
    } else if (!strcmp(a, "--min-ms")) {
      char *e;
      if (!val || (o->bench_ms = strtod(val, &e), *e) || e == val || !(o->bench_ms >= 0) || o->bench_ms > 1e5)
        return usage_error("--min-ms needs a number of milliseconds", a);
      i++;
    } else if (!strcmp(a, "--device")) {
      char *e;
      long d = val ? strtol(val, &e, 10) : -1;
      if (!val || *e || e == val || d < 0 || d > 1024)
        return usage_error("--device needs a device number (0, 1, ...)", a);
      o->device = (int)d;
      i++;
    } else if (!strcmp(a, "--shape")) {
      if (!val)
        return usage_error("%s needs B,H,KVH,N,D", a);
      int v[6], n = 0;
      char *copy = strdup(val), *save = NULL;
      for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == 6 || !parse_pos_int(t, &v[n])) {
          free(copy);
          return usage_error("--shape wants B,H,KVH,N,D (positive integers), not '%s'", val);
        }
        n++;
      }
      free(copy);
      if (n == 5) {
        int s[6] = {v[0], v[1], v[2], v[3], v[3], v[4]};
        memcpy(o->shape, s, sizeof s);
      } else if (n == 6) {
        memcpy(o->shape, v, sizeof v);
      } else {
        return usage_error("--shape wants B,H,KVH,N,D, not '%s'", val);
      }
      o->has_shape = true;
      i++;
    } else if (!strcmp(a, "--seed")) {
      char *e;
      if (!val || (o->seed = strtoull(val, &e, 0), *e) || e == val)
        return usage_error("--seed needs a number", a);
      o->has_seed = true;
      i++;
    } else {
      return usage_error("unknown argument '%s'", a);
    }
  }
  if (o->interpret == o->gpu)
    return usage_error("%s", "choose one of --interpret and --gpu");
  if (o->decode) {
    if (o->has_shape || o->k || o->v || o->dO || o->backward || o->has_window || o->softcap > 0 || o->alibi ||
        o->sinks || o->cu_seqlens)
      return usage_error("%s", "--decode takes --q, --k-cache, --v-cache, --block-table and --cache-seqlens (or "
                               "--decode-shape), and --causal; not the options of the other passes");
    if (!o->has_decode_shape && (!o->q || !o->k_cache || !o->v_cache || !o->block_table || !o->cache_seqlens))
      return usage_error("%s", "--decode needs --q, --k-cache, --v-cache, --block-table and --cache-seqlens, or "
                               "--decode-shape for random inputs");
    if (o->deterministic || o->fused || o->fuse_delta)
      return usage_error("%s", "--deterministic, --fused and --fuse-delta choose the backward pass; --decode has "
                               "none");
    if (o->has_decode_shape && (o->q || o->k_cache || o->v_cache || o->block_table || o->cache_seqlens))
      return usage_error("%s", "--decode-shape makes random inputs: give it without the input files");
    if (o->json && !o->bench)
      return usage_error("%s", "--json writes the --bench record: give --bench too");
    if (o->interpret && (o->bench || o->warps || o->stages))
      return usage_error("%s", "--bench, --warps and --stages are for --gpu");
    return 0;
  }
  if (o->k_cache || o->v_cache || o->block_table || o->cache_seqlens || o->num_splits)
    return usage_error("%s", "--k-cache, --v-cache, --block-table, --cache-seqlens and --num-splits are for --decode");
  if (o->interpret && (o->bench || o->json || o->warps || o->stages || o->has_own))
    return usage_error("%s", "--bench, --json, --warps, --stages and --config are for --gpu");
  if (o->json && !o->bench)
    return usage_error("%s", "--json writes the --bench record: give --bench too");
  if ((o->block_q == 0) != (o->block_k == 0) && o->gpu)
    return usage_error("%s", "give --block-q and --block-k together");
  if (o->has_shape) {
    if (o->q || o->k || o->v || o->dO)
      return usage_error("%s", "--shape makes random inputs: give it without --q/--k/--v/--do");
    if (o->bench && !o->forward_only)
      o->backward = true;
  } else {
    if (!o->q || !o->k || !o->v)
      return usage_error("%s", "needs --q, --k and --v (or --shape for random inputs)");
    if (o->backward)
      return usage_error("%s", "--backward is for random inputs (--shape); with files give --do");
  }
  if (o->forward_only && (!o->bench || !o->has_shape || o->backward))
    return usage_error("%s", "--forward-only times the forward pass alone: give it with --bench and --shape, "
                             "without --backward");
  if ((o->dq || o->dk || o->dv) && !o->dO && !o->backward)
    return usage_error("%s", "--dq/--dk/--dv need --do (the backward pass)");
  if (o->dsinks && !o->sinks)
    return usage_error("%s", "--dsinks is the gradient of --sinks: give --sinks too");
  if (o->dsinks && !o->dO && !o->backward)
    return usage_error("%s", "--dsinks needs the backward pass (--do, or --backward with --shape)");
  if ((o->deterministic || o->fused || o->fuse_delta) && !o->dO && !o->backward)
    return usage_error("%s", "--deterministic, --fused and --fuse-delta choose the backward pass: give --do (or "
                             "--backward with --shape)");
  if (o->deterministic && (o->fused || o->fuse_delta))
    return usage_error("%s", o->fused ? "--fused and --deterministic are the two backward passes: give one"
                                      : "--fuse-delta is a form of the fused backward pass, not of --deterministic");
  if (o->fuse_delta && (o->has_window || o->softcap > 0 || o->alibi || o->sinks || o->cu_seqlens))
    return usage_error("%s", "--fuse-delta is for plain attention (no variant)");
  if (o->heads == 1 &&
      (o->deterministic || o->has_window || o->softcap > 0 || o->alibi || o->sinks || o->cu_seqlens))
    return usage_error("%s", o->deterministic ? "--heads is a form of the fused backward pass, not of --deterministic"
                                              : "--heads is for plain attention (no variant)");
  if (o->heads == 1)
    o->fused = true;
  if (o->interpret && !o->block_q)
    o->block_q = o->block_k = 32;
  if (o->interpret && (o->block_q % o->block_k && o->block_k % o->block_q))
    return usage_error("%s", "--block-q and --block-k must divide one another");
  /* the deterministic pass unless the fused one is asked for: the
     reproducible one, and what the tests and scripts built on this tool
     expect; since the Hopper defaults of 2026-12-04 and 12-05 the fused pass
     is the faster one on most shapes (bench/results/2026-12-05-h100) */
  o->deterministic = !(o->fused || o->fuse_delta);
  return 0;
}

/* ---- inputs ------------------------------------------------------------------- */

/* splitmix64, seeded; random_tensor turns it into standard normal samples */
typedef struct Rng {
  uint64_t state;
} Rng;

static uint64_t rng_next(Rng *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A tensor in the kernels' dtype (f16/bf16 as 16-bit patterns, or f32). */
typedef struct Tensor {
  int64_t shape[4];
  int64_t n;
  void *data;
} Tensor;

static bool alloc_tensor(Tensor *t, DType dt, const int64_t *shape) {
  memcpy(t->shape, shape, sizeof t->shape);
  t->n = shape[0] * shape[1] * shape[2] * shape[3];
  t->data = malloc((size_t)(t->n ? t->n : 1) * (size_t)fa_dtype_size(dt));
  if (!t->data)
    fprintf(stderr, "fadsl-attn: out of memory for a tensor of %lld elements\n", (long long)t->n);
  return t->data != NULL;
}

/* Random tensors are filled in chunks of RANDOM_CHUNK elements, each from a
 * stream of its own (the tensor's seed, drawn from the caller's generator,
 * and the chunk's index), so that threads may fill the chunks in any order
 * and the values depend on the seed alone.  A paged KV cache for decoding
 * holds billions of elements: one thread took minutes over them. */
enum { RANDOM_CHUNK = 1 << 16, RANDOM_MAX_THREADS = 64 };

typedef struct RandomFill {
  Tensor *t;
  DType dt;
  uint64_t seed;
  int64_t nchunks;
  atomic_llong next;   /* the next chunk to fill */
} RandomFill;

/* Box-Muller, both outputs: a pair of standard normals per two draws. */
static void fill_chunk(RandomFill *f, int64_t c) {
  Rng r = {f->seed ^ ((uint64_t)c * 0xd1b54a32d192ed03ULL)};
  rng_next(&r);
  int64_t lo = c * RANDOM_CHUNK, hi = lo + RANDOM_CHUNK < f->t->n ? lo + RANDOM_CHUNK : f->t->n;
  for (int64_t i = lo; i < hi; i += 2) {
    double u1 = ((double)(rng_next(&r) >> 11) + 0.5) * 0x1p-53, u2 = (double)(rng_next(&r) >> 11) * 0x1p-53;
    double rad = sqrt(-2 * log(u1)), a = 2 * M_PI * u2;
    fa_host_set(f->dt, f->t->data, i, rad * cos(a));
    if (i + 1 < hi)
      fa_host_set(f->dt, f->t->data, i + 1, rad * sin(a));
  }
}

static void *fill_worker(void *arg) {
  RandomFill *f = arg;
  for (int64_t c; (c = atomic_fetch_add(&f->next, 1)) < f->nchunks;)
    fill_chunk(f, c);
  return NULL;
}

/* threads: at most this many (0: one per CPU); a thread that cannot be
 * started leaves its share to the others. */
static bool random_tensor(Tensor *t, DType dt, const int64_t *shape, Rng *r, int threads) {
  if (!alloc_tensor(t, dt, shape))
    return false;
  RandomFill f = {t, dt, rng_next(r), (t->n + RANDOM_CHUNK - 1) / RANDOM_CHUNK, 0};
  if (threads <= 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cpus > 0 ? (int)cpus : 1;
  }
  if (threads > RANDOM_MAX_THREADS)
    threads = RANDOM_MAX_THREADS;
  if (threads > f.nchunks)
    threads = (int)f.nchunks;
  pthread_t tid[RANDOM_MAX_THREADS];
  int started = 0;
  for (int i = 1; i < threads; i++)
    if (pthread_create(&tid[started], NULL, fill_worker, &f) == 0)
      started++;
  fill_worker(&f);
  for (int i = 0; i < started; i++)
    pthread_join(tid[i], NULL);
  return true;
}

static bool read_tensor(const char *what, const char *path, DType dt, Tensor *t) {
  FaNpy a;
  char err[600];
  if (!fa_npy_read(path, &a, err, sizeof err)) {
    fprintf(stderr, "fadsl-attn: --%s: %s\n", what, err);
    return false;
  }
  if (a.ndim != 4 || (a.dtype != DT_F16 && a.dtype != DT_F32)) {
    fprintf(stderr, "fadsl-attn: --%s %s: want a 4-D float16 or float32 array, got a %d-D %s array\n", what, path,
            a.ndim, fa_npy_dtype_name(a.dtype));
    fa_npy_free(&a);
    return false;
  }
  if (a.shape[0] > INT32_MAX || a.shape[1] > INT32_MAX || a.shape[2] > INT32_MAX || a.shape[3] > INT32_MAX) {
    fprintf(stderr, "fadsl-attn: --%s %s: dimensions too large\n", what, path);
    fa_npy_free(&a);
    return false;
  }
  bool ok = alloc_tensor(t, dt, a.shape);
  if (ok)
    fa_host_convert(a.dtype, a.data, dt, t->data, t->n);
  fa_npy_free(&a);
  return ok;
}

static void free_tensor(Tensor *t) {
  free(t->data);
  t->data = NULL;
}

/* The variant of a run: what the options ask for and the arrays they name. */
typedef struct Variant {
  bool on;                      /* some variant option was given */
  FaAttnVariant v;
  float *alibi, *sinks;         /* [H] */
  int32_t *cu;                  /* [nseq + 1] */
} Variant;

/* Whether the fused pass runs a program per query head (--heads,
 * --no-heads, or where the library prefers it): plain attention only. */
static bool run_heads(const Options *o, const FaAttnShape *s, const Variant *var) {
  if (o->heads >= 0)
    return o->heads == 1;
  return !var->on && fadsl_attention_heads_preferred(s->H, s->KVH);
}

/* A 1-D .npy of `n` elements (n < 0: any), converted to `to` (DT_F32 or
 * DT_I32); float16/float32 for floats, int32 (or int64 that fits) for ints. */
static void *read_vector(const char *what, const char *path, DType to, int64_t n, int64_t *got) {
  FaNpy a;
  char err[600];
  if (!fa_npy_read(path, &a, err, sizeof err)) {
    fprintf(stderr, "fadsl-attn: --%s: %s\n", what, err);
    return NULL;
  }
  bool is_float = a.dtype == DT_F32 || a.dtype == DT_F16;
  bool is_int = a.dtype == DT_I32 || a.dtype == DT_I64;
  void *out = NULL;
  if (a.ndim != 1 || (to == DT_F32 ? !is_float : !is_int)) {
    fprintf(stderr, "fadsl-attn: --%s %s: want a 1-D %s array, got a %d-D %s array\n", what, path,
            to == DT_F32 ? "float32" : "int32", a.ndim, fa_npy_dtype_name(a.dtype));
  } else if (n >= 0 && a.shape[0] != n) {
    fprintf(stderr, "fadsl-attn: --%s %s: want %lld values (one per query head), got %lld\n", what, path,
            (long long)n, (long long)a.shape[0]);
  } else if ((out = malloc((size_t)(a.shape[0] ? a.shape[0] : 1) * 4))) {
    *got = a.shape[0];
    for (int64_t i = 0; i < a.shape[0]; i++) {
      double x = fa_host_get(a.dtype, a.data, i);
      if (to == DT_I32 && (x != (double)(int32_t)x)) {
        fprintf(stderr, "fadsl-attn: --%s %s: value %g at %lld does not fit int32\n", what, path, x, (long long)i);
        free(out);
        out = NULL;
        break;
      }
      if (to == DT_F32)
        ((float *)out)[i] = (float)x;
      else
        ((int32_t *)out)[i] = (int32_t)x;
    }
  }
  fa_npy_free(&a);
  return out;
}

/* Reads the variant's arrays once the number of heads is known. */
static bool read_variant(const Options *o, int H, Variant *var) {
  memset(var, 0, sizeof *var);
  var->on = o->has_window || o->softcap > 0 || o->alibi || o->sinks || o->cu_seqlens;
  var->v.window = o->has_window;
  var->v.window_left = o->has_window ? o->window[0] : -1;
  var->v.window_right = o->has_window ? o->window[1] : -1;
  var->v.softcap = o->softcap;
  int64_t n = 0;
  if (o->alibi && !(var->alibi = read_vector("alibi", o->alibi, DT_F32, H, &n)))
    return false;
  if (o->sinks && !(var->sinks = read_vector("sinks", o->sinks, DT_F32, H, &n)))
    return false;
  if (o->cu_seqlens && !(var->cu = read_vector("cu-seqlens", o->cu_seqlens, DT_I32, -1, &n)))
    return false;
  var->v.alibi = var->alibi;
  var->v.sinks = var->sinks;
  var->v.cu_seqlens_q = var->cu;
  var->v.nseq = var->cu ? (int)n - 1 : 0;
  return true;
}

static void free_variant(Variant *var) {
  free(var->alibi);
  free(var->sinks);
  free(var->cu);
}

static void *alloc_poisoned(DType dt, int64_t n) {
  void *p = malloc((size_t)(n ? n : 1) * (size_t)fa_dtype_size(dt));
  if (p)
    for (int64_t i = 0; i < n; i++)
      fa_host_set(dt, p, i, NAN);
  return p;
}

/* Writes n values of dtype as a float32 .npy of the given shape. */
static bool write_f32(const char *path, DType dt, const void *data, int ndim, const int64_t *shape, double mul) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
  if (!f) {
    fprintf(stderr, "fadsl-attn: out of memory writing %s\n", path);
    return false;
  }
  for (int64_t i = 0; i < n; i++)
    f[i] = (float)(fa_host_get(dt, data, i) * mul);
  char err[600];
  bool ok = fa_npy_write(path, DT_F32, ndim, shape, f, err, sizeof err);
  if (!ok)
    fprintf(stderr, "fadsl-attn: %s\n", err);
  free(f);
  return ok;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- what a run produces ------------------------------------------------------ */

typedef struct Outputs {
  void *o, *dq, *dk, *dv;       /* dtype */
  float *lse2;                  /* base-2 LSE */
  float *dsinks;                /* [H], with sinks and the backward pass */
} Outputs;

/* What one kernel's launch used (copied: the library's strings live only as
 * long as the attention handle). */
typedef struct KernelReport {
  char kernel[32], constexprs[256], source[32], cache[16], pipeline[16], schedule[16];
  int warps, stages, threads, registers, spill_bytes;
  size_t shared_bytes;
  unsigned grid[3];
} KernelReport;

/* GPU timings and configs, for the report and the JSON line. */
typedef struct GpuReport {
  char gpu[256], arch[16];
  KernelReport info[FADSL_ATTENTION_KERNELS];
  bool have_info[FADSL_ATTENTION_KERNELS];
  double first_fwd_s, first_bwd_s;          /* first calls, compilation included */
  double fwd_ms, bwd_ms;                    /* medians, 0 when not timed */
  int fwd_iters, bwd_iters;
  char bwd_mode[16];                        /* "fused" / "deterministic": the pass --deterministic chose */
  double other_bwd_ms;                      /* the other backward pass, timed beside it */
  int other_bwd_iters;
  char other_bwd_mode[16];
  double peak_mib;                          /* device memory this tool allocated for attention */
} GpuReport;

/* ---- the interpreter ----------------------------------------------------------- */

static bool run_interpreter(const Options *o, const FaAttnShape *s, DType dt, const Tensor *q, const Tensor *k,
                            const Tensor *v, const Tensor *dO, bool backward, const Variant *var, Outputs *out) {
  char path[4096];
  const char *program = var->on ? fa_attn_find_sibling(o->program, "attention_variants.fa", path, sizeof path)
                                : fa_attn_find_program(o->program);
  if (!program)
    return false;
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  FaAttnRunner r;
  int threads = o->threads > 0 ? o->threads : 1;
  bool ok = fa_attn_open(&r, &fc, program, o->block_q, o->block_k, threads);
  r.deterministic = o->deterministic;
  r.fuse_delta = o->fuse_delta;
  r.heads = run_heads(o, s, var);
  double t0 = now_s();
  ok = ok && fa_attn_forward_variant(&r, s, &var->v, dt, q->data, k->data, v->data, out->o, out->lse2);
  double t1 = now_s();
  if (ok)
    printf("forward: %.2f s on the interpreter (BLOCK_Q=%d BLOCK_K=%d)\n", t1 - t0, o->block_q, o->block_k);
  ok = ok && (!backward || fa_attn_backward_variant(&r, s, &var->v, dt, q->data, k->data, v->data, out->o, dO->data,
                                                    out->lse2, out->dq, out->dk, out->dv, out->dsinks));
  if (ok && backward)
    printf("backward: %.2f s on the interpreter (%s)\n", now_s() - t1,
           !r.ran_fused           ? "deterministic"
           : r.ran_heads          ? (o->fuse_delta ? "fused, a program per query head, D in attn_bwd_heads"
                                                   : "fused, a program per query head")
           : o->fuse_delta        ? "fused, D in attn_bwd"
                                  : "fused");
  fa_compiler_free(&fc);
  return ok;
}

/* ---- the GPU ---------------------------------------------------------------------- */

typedef struct Gpu {
  fadsl_context *ctx;
  fadsl_attention *attn;
  const FaAttnShape *s;
  fadsl_attention_dtype dtype;
  uint64_t q, k, v, o, lse, dO, dq, dk, dv, delta, flush;
  uint64_t alibi, sinks, dsinks, cu;          /* the variant's arrays */
  uint64_t dq_accum;            /* the fused backward pass's float32 accumulator */
  uint64_t dkv_accum;           /* dK's and dV's, with --heads */
  bool variant;                 /* through fadsl_attention_forward_ex / _backward_ex with opts */
  fadsl_attention_options opts;
  size_t flush_bytes;
  size_t allocated;             /* bytes this tool holds for attention (not the L2 flush buffer) */
  double timeout_s;             /* --timeout */
} Gpu;

/* Prints a libfadsl failure with the context's message. */
static bool rt_ok(Gpu *g, fadsl_status st, const char *what) {
  if (st == FADSL_SUCCESS)
    return true;
  fprintf(stderr, "fadsl-attn: %s failed: %s\n%s\n", what, fadsl_status_string(st),
          g->ctx ? fadsl_context_last_error(g->ctx) : "");
  return false;
}

/* A failure of the attention API: its own message. */
static bool attn_ok(Gpu *g, fadsl_status st, const char *what) {
  if (st == FADSL_SUCCESS)
    return true;
  fprintf(stderr, "fadsl-attn: %s failed: %s\n%s\n", what, fadsl_status_string(st),
          fadsl_attention_last_error(g->attn));
  return false;
}

static bool dev_alloc(Gpu *g, size_t bytes, uint64_t *ptr, const char *what) {
  char msg[128];
  snprintf(msg, sizeof msg, "allocating %s (%.1f MiB) on the GPU", what, (double)bytes / (1 << 20));
  if (!rt_ok(g, fadsl_malloc(g->ctx, bytes ? bytes : 16, ptr), msg))
    return false;
  g->allocated += bytes;
  return true;
}

static bool dev_upload_bytes(Gpu *g, const void *data, size_t bytes, uint64_t *ptr, const char *what) {
  return dev_alloc(g, bytes, ptr, what) && rt_ok(g, fadsl_memcpy_htod(g->ctx, *ptr, data, bytes), "copying inputs to the GPU");
}

static bool dev_upload(Gpu *g, const Tensor *t, DType dt, uint64_t *ptr, const char *what) {
  return dev_upload_bytes(g, t->data, (size_t)t->n * (size_t)fa_dtype_size(dt), ptr, what);
}

/* An output buffer, filled with NaN (all-ones bytes are NaN in f16, bf16 and
 * f32) so that an element no kernel writes cannot pass a check. */
static bool dev_output(Gpu *g, size_t bytes, uint64_t *ptr, const char *what) {
  return dev_alloc(g, bytes, ptr, what) && rt_ok(g, fadsl_memset(g->ctx, *ptr, 0xff, bytes), "poisoning outputs");
}

static fadsl_status gpu_forward(Gpu *g) {
  const FaAttnShape *s = g->s;
  if (g->variant)
    return fadsl_attention_forward_ex(g->attn, &g->opts, g->q, g->k, g->v, g->o, g->lse, s->B, s->H, s->KVH, s->Nq,
                                      s->Nkv, s->D, (float)s->scale, g->dtype, NULL);
  return fadsl_attention_forward(g->attn, g->q, g->k, g->v, g->o, g->lse, s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D,
                                 s->causal, (float)s->scale, g->dtype, NULL);
}

/* The backward pass through fadsl_attention_backward_ex, whose options
 * (g->opts) say which: fused (dq_accum given) or deterministic. */
static fadsl_status gpu_backward(Gpu *g) {
  const FaAttnShape *s = g->s;
  return fadsl_attention_backward_ex(g->attn, &g->opts, g->q, g->k, g->v, g->o, g->lse, g->dO, g->dq, g->dk, g->dv,
                                     g->delta, s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, (float)s->scale, g->dtype,
                                     NULL);
}

/* Which backward pass g->opts selects, in words (the kernels it runs). */
static const char *bwd_mode_name(const fadsl_attention_options *o, const FaAttnShape *s) {
  if (o->deterministic || !o->dq_accum)
    return "deterministic: attn_bwd_d + attn_bwd_dkdv + attn_bwd_dq";
  if (o->dkv_accum && s->H > s->KVH && !o->cu_seqlens_q && !o->alibi && !o->sinks && o->softcap == 0 &&
      o->window_left == -1 && o->window_right == -1)
    return o->fuse_delta ? "fused, a program per query head, D in attn_bwd_heads: attn_bwd_prep + attn_bwd_dkdv_zero "
                           "+ attn_bwd_heads + attn_bwd_dq_convert + attn_bwd_dkdv_convert"
                         : "fused, a program per query head: attn_bwd_prep + attn_bwd_dkdv_zero + attn_bwd_heads + "
                           "attn_bwd_dq_convert + attn_bwd_dkdv_convert";
  return o->fuse_delta ? "fused, D in attn_bwd: attn_bwd_prep + attn_bwd + attn_bwd_dq_convert"
                       : "fused: attn_bwd_prep + attn_bwd + attn_bwd_dq_convert";
}

/* The variant's arrays on the device and the options that name them. */
static bool gpu_variant(Gpu *g, const Variant *var, bool backward) {
  const FaAttnShape *s = g->s;
  fadsl_attention_options_init(&g->opts);
  g->variant = var->on;
  g->opts.causal = s->causal;
  g->opts.window_left = var->v.window ? var->v.window_left : -1;
  g->opts.window_right = var->v.window ? var->v.window_right : -1;
  g->opts.softcap = (float)var->v.softcap;
  size_t hb = (size_t)s->H * 4;
  if (var->alibi && !dev_upload_bytes(g, var->alibi, hb, &g->alibi, "the ALiBi slopes"))
    return false;
  if (var->sinks && !dev_upload_bytes(g, var->sinks, hb, &g->sinks, "the sinks"))
    return false;
  if (var->sinks && backward && !dev_output(g, hb, &g->dsinks, "dsinks"))
    return false;
  if (var->cu && !dev_upload_bytes(g, var->cu, (size_t)(var->v.nseq + 1) * 4, &g->cu, "cu_seqlens"))
    return false;
  g->opts.alibi = g->alibi;
  g->opts.sinks = g->sinks;
  g->opts.dsinks = g->dsinks;
  g->opts.cu_seqlens_q = g->cu;
  g->opts.nseq = var->v.nseq;
  for (int i = 0; var->cu && i < var->v.nseq; i++) {
    int len = var->cu[i + 1] - var->cu[i];
    if (len > g->opts.max_seqlen_q)
      g->opts.max_seqlen_q = g->opts.max_seqlen_k = len;
  }
  return true;
}

/* FLOPs of the forward pass (the backward pass: 2.5 times as many): only the
 * (query, key) pairs the variant lets through count. */
static double forward_flops(const FaAttnShape *s, const Variant *var) {
  if (var && var->on)
    return 4.0 * s->H * fa_attn_variant_pairs(&var->v, s) * s->D;
  return 4.0 * s->B * s->H * (double)s->Nq * s->Nkv * s->D * (s->causal ? 0.5 : 1.0);
}

/* Waits for the GPU, at most --timeout seconds (300): an attention pass
 * takes a second or two at the largest shapes, so one that has not
 * finished by then never will (a compiler bug); the GPU stays busy with it,
 * every later call (the clean-up included) would wait behind it, so the
 * program stops here. */
static bool wait_gpu(Gpu *g, const char *what) {
  fadsl_status st = fadsl_synchronize_within(g->ctx, NULL, g->timeout_s > 0 ? g->timeout_s : 300);
  if (st == FADSL_ERROR_TIMEOUT) {
    fprintf(stderr, "fadsl-attn: %s: %s; stopping\n", what, fadsl_context_last_error(g->ctx));
    fflush(NULL);
    _exit(1);
  }
  return rt_ok(g, st, what);
}

/* Runs one pass and waits for it, so that a fault shows here. */
static bool gpu_pass(Gpu *g, bool backward, double *seconds) {
  double t0 = now_s();
  const char *what = backward ? "the backward pass" : "the forward pass";
  if (!attn_ok(g, backward ? gpu_backward(g) : gpu_forward(g), what))
    return false;
  if (!wait_gpu(g, backward ? "running the backward kernels" : "running the forward kernel"))
    return false;
  if (seconds)
    *seconds = now_s() - t0;
  return true;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median time of one pass: warm-up (at least 25 ms), then n runs each preceded by an L2
 * flush, every run between its own pair of events; n is at least
 * opt->bench_iters and enough runs for opt->bench_ms. */
static bool time_pass(Gpu *g, const Options *o, bool backward, double *median_ms, int *iters) {
  enum { MAX_RUNS = 2000, WARMUP_MS = 25 };
  void *ev[2 * MAX_RUNS] = {0};
  int nev = 0;
  bool ok = true;
  double *ms = NULL;
  /* warm-up, and an estimate of one run */
  for (int i = 0; i < 3 && ok; i++)
    ok = gpu_pass(g, backward, NULL);
  for (; ok && nev < 2; nev++)
    ok = rt_ok(g, fadsl_event_create(g->ctx, &ev[nev]), "cuEventCreate");
  ok = ok && rt_ok(g, fadsl_event_record(g->ctx, ev[0], NULL), "cuEventRecord");
  for (int i = 0; i < 3 && ok; i++)
    ok = attn_ok(g, backward ? gpu_backward(g) : gpu_forward(g), "a timed pass");
  ok = ok && rt_ok(g, fadsl_event_record(g->ctx, ev[1], NULL), "cuEventRecord");
  float est = 0;
  ok = ok && rt_ok(g, fadsl_event_elapsed_ms(g->ctx, ev[0], ev[1], &est), "timing the warm-up");
  /* warm-up of at least WARMUP_MS in all, as triton's do_bench (which times the peers) warms
     up: the clocks settle to what sustained work gets before the timed runs */
  int warm = ok && est > 0 ? (int)ceil(WARMUP_MS / (est / 3)) - 6 : 0;
  for (int i = 0; ok && i < warm && i < MAX_RUNS; i++)
    ok = attn_ok(g, backward ? gpu_backward(g) : gpu_forward(g), "a warm-up pass");
  int n = o->bench_iters;
  if (ok && est > 0 && o->bench_ms / (est / 3) > n)
    n = (int)ceil(o->bench_ms / (est / 3));
  if (n > MAX_RUNS)
    n = MAX_RUNS;
  for (; ok && nev < 2 * n; nev++)
    ok = rt_ok(g, fadsl_event_create(g->ctx, &ev[nev]), "cuEventCreate");
  for (int i = 0; ok && i < n; i++) {
    if (g->flush)
      ok = rt_ok(g, fadsl_memset(g->ctx, g->flush, (unsigned char)i, g->flush_bytes), "flushing the L2 cache");
    ok = ok && rt_ok(g, fadsl_event_record(g->ctx, ev[2 * i], NULL), "cuEventRecord");
    ok = ok && attn_ok(g, backward ? gpu_backward(g) : gpu_forward(g), "a timed pass");
    ok = ok && rt_ok(g, fadsl_event_record(g->ctx, ev[2 * i + 1], NULL), "cuEventRecord");
  }
  ok = ok && wait_gpu(g, "running the timed passes");
  ms = ok ? malloc((size_t)n * sizeof *ms) : NULL;
  ok = ok && ms;
  for (int i = 0; ok && i < n; i++) {
    float t;
    ok = rt_ok(g, fadsl_event_elapsed_ms(g->ctx, ev[2 * i], ev[2 * i + 1], &t), "cuEventElapsedTime");
    ms[i] = t;
  }
  if (ok) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    *median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    *iters = n;
  }
  for (int i = 0; i < nev; i++)
    if (ev[i])
      fadsl_event_destroy(g->ctx, ev[i]);
  free(ms);
  return ok;
}

static void print_configs(Gpu *g, GpuReport *rep) {
  for (int w = 0; w < FADSL_ATTENTION_KERNELS; w++) {
    fadsl_kernel_info ki;
    KernelReport *in = &rep->info[w];
    rep->have_info[w] = fadsl_attention_kernel_info(g->attn, (fadsl_attention_kernel)w, &ki) == FADSL_SUCCESS;
    if (!rep->have_info[w])
      continue;
    snprintf(in->kernel, sizeof in->kernel, "%s", ki.kernel);
    snprintf(in->constexprs, sizeof in->constexprs, "%s", ki.constexprs);
    snprintf(in->source, sizeof in->source, "%s", ki.config_source);
    snprintf(in->cache, sizeof in->cache, "%s", ki.cache);
    snprintf(in->pipeline, sizeof in->pipeline, "%s", ki.pipeline ? ki.pipeline : "");
    snprintf(in->schedule, sizeof in->schedule, "%s", ki.schedule ? ki.schedule : "");
    in->warps = ki.warps;
    in->stages = ki.stages;
    in->threads = ki.threads;
    in->registers = ki.registers;
    in->spill_bytes = ki.spill_bytes;
    in->shared_bytes = ki.shared_bytes;
    memcpy(in->grid, ki.grid, sizeof in->grid);
    printf("  %-14s %s warps=%d stages=%d (%s) grid (%u, %u, %u), %d threads, %zu B shared, %d registers, "
           "kernel cache %s, pipeline %s, schedule %s\n",
           in->kernel, in->constexprs, in->warps, in->stages, in->source, in->grid[0], in->grid[1],
           in->grid[2], in->threads, in->shared_bytes, in->registers, in->cache, in->pipeline, in->schedule);
  }
}

static bool run_gpu(const Options *o, const FaAttnShape *s, DType dt, const Tensor *q, const Tensor *k,
                    const Tensor *v, const Tensor *dO, bool backward, const Variant *var, Outputs *out,
                    GpuReport *rep) {
  Gpu g;
  memset(&g, 0, sizeof g);
  g.s = s;
  g.timeout_s = o->timeout_s;
  g.dtype = dt == DT_BF16 ? FADSL_ATTENTION_BF16 : FADSL_ATTENTION_F16;
  bool ok = false;
  int64_t rows = (int64_t)s->B * s->H * s->Nq;
  size_t esz = (size_t)fa_dtype_size(dt), qbytes = (size_t)q->n * esz, kvbytes = (size_t)k->n * esz;

  fadsl_status st = fadsl_context_create(o->device, &g.ctx);
  if (st != FADSL_SUCCESS) {
    fprintf(stderr, "fadsl-attn: no GPU: %s\n", g.ctx ? fadsl_context_last_error(g.ctx) : fadsl_status_string(st));
    goto done;
  }
  fadsl_device_info di;
  if (!rt_ok(&g, fadsl_context_device_info(g.ctx, &di), "reading the device's properties"))
    goto done;
  snprintf(rep->gpu, sizeof rep->gpu, "%s", di.name);
  snprintf(rep->arch, sizeof rep->arch, "%s", di.arch);
  printf("GPU %d: %s (compute capability %d.%d, %s, %d SMs, %.0f GiB)\n", o->device, di.name, di.cc_major,
         di.cc_minor, di.arch, di.multiprocessors, (double)di.total_memory / (1 << 30));

  const char *program = o->program;
  if (!program) {
    const char *env = getenv("FADSL_ATTENTION_PROGRAM");
    program = env && *env ? env : NULL;
  }
  st = program ? fadsl_attention_create_from_file(g.ctx, program, &g.attn) : fadsl_attention_create(g.ctx, &g.attn);
  if (!attn_ok(&g, st, program ? "loading the attention program" : "loading the built-in attention program"))
    goto done;
  printf("program: %s\n", program ? program : "attention.fa built into libfadsl_attention");
  if ((o->block_q || o->warps || o->stages) &&
      !attn_ok(&g, fadsl_attention_set_config(g.attn, o->block_q, o->block_k, o->warps, o->stages),
               "fixing the configuration"))
    goto done;
  for (int k = 0; o->has_own && k < FADSL_ATTENTION_KERNELS; k++) {
    const int *c = o->own[k];
    if ((c[0] || c[1] || c[2] || c[3]) &&
        !attn_ok(&g, fadsl_attention_set_kernel_config(g.attn, (fadsl_attention_kernel)k, c[0], c[1], c[2], c[3]),
                 "fixing a kernel's configuration (--config)"))
      goto done;
    const char(*l)[32] = (const char(*)[32])o->own_launch[k];
    if ((l[0][0] || l[1][0]) &&
        !attn_ok(&g, fadsl_attention_set_kernel_launch(g.attn, (fadsl_attention_kernel)k, l[0], l[1]),
                 "fixing a kernel's pipeline or schedule (--config)"))
      goto done;
  }

  if (!dev_upload(&g, q, dt, &g.q, "q") || !dev_upload(&g, k, dt, &g.k, "k") || !dev_upload(&g, v, dt, &g.v, "v") ||
      !dev_output(&g, qbytes, &g.o, "o") || !dev_output(&g, (size_t)rows * 4, &g.lse, "lse"))
    goto done;
  if (backward && (!dev_upload(&g, dO, dt, &g.dO, "do") || !dev_output(&g, qbytes, &g.dq, "dq") ||
                   !dev_output(&g, kvbytes, &g.dk, "dk") || !dev_output(&g, kvbytes, &g.dv, "dv") ||
                   !dev_output(&g, fadsl_attention_workspace_bytes(s->B, s->H, s->Nq), &g.delta, "delta")))
    goto done;
  if (!gpu_variant(&g, var, backward))
    goto done;
  /* the fused backward pass's accumulator: also with --deterministic, so
     that --bench can time the fused pass beside it */
  if (backward && !dev_alloc(&g, fadsl_attention_dq_accum_bytes(s->B, s->H, s->Nq, s->D), &g.dq_accum,
                             "the dQ accumulator"))
    goto done;
  g.opts.dq_accum = g.dq_accum;
  if (backward && run_heads(o, s, var) && !dev_alloc(&g, fadsl_attention_dkv_accum_bytes(s->B, s->KVH, s->Nkv, s->D),
                                         &g.dkv_accum, "the dK and dV accumulators"))
    goto done;
  g.opts.dkv_accum = g.dkv_accum;
  g.opts.deterministic = o->deterministic;
  g.opts.fuse_delta = o->fuse_delta;
  rep->peak_mib = (double)g.allocated / (1 << 20);

  if (!gpu_pass(&g, false, &rep->first_fwd_s))
    goto done;
  printf("forward: first call %.3f s (compilation included)\n", rep->first_fwd_s);
  if (backward) {
    if (!gpu_pass(&g, true, &rep->first_bwd_s))
      goto done;
    printf("backward: first call %.3f s (compilation included; %s)\n", rep->first_bwd_s, bwd_mode_name(&g.opts, s));
  }
  printf("kernels (config and where it came from):\n");
  print_configs(&g, rep);

  /* the outputs of the first calls, before any timing runs */
  if (!rt_ok(&g, fadsl_memcpy_dtoh(g.ctx, out->o, g.o, qbytes), "copying o back") ||
      !rt_ok(&g, fadsl_memcpy_dtoh(g.ctx, out->lse2, g.lse, (size_t)rows * 4), "copying lse back"))
    goto done;
  if (backward && (!rt_ok(&g, fadsl_memcpy_dtoh(g.ctx, out->dq, g.dq, qbytes), "copying dq back") ||
                   !rt_ok(&g, fadsl_memcpy_dtoh(g.ctx, out->dk, g.dk, kvbytes), "copying dk back") ||
                   !rt_ok(&g, fadsl_memcpy_dtoh(g.ctx, out->dv, g.dv, kvbytes), "copying dv back")))
    goto done;
  if (backward && g.dsinks &&
      !rt_ok(&g, fadsl_memcpy_dtoh(g.ctx, out->dsinks, g.dsinks, (size_t)s->H * 4), "copying dsinks back"))
    goto done;

  if (o->bench) {
    /* a buffer larger than any L2 cache, rewritten before every timed run */
    g.flush_bytes = (size_t)256 << 20;
    if (!rt_ok(&g, fadsl_malloc(g.ctx, g.flush_bytes, &g.flush), "allocating the L2 flush buffer"))
      goto done;
    double fwd_flops = forward_flops(s, var);
    if (!time_pass(&g, o, false, &rep->fwd_ms, &rep->fwd_iters))
      goto done;
    printf("forward:  %9.3f ms  %7.1f TFLOP/s  (median of %d runs)\n", rep->fwd_ms,
           fwd_flops / (rep->fwd_ms * 1e-3) * 1e-12, rep->fwd_iters);
    if (backward) {
      if (!time_pass(&g, o, true, &rep->bwd_ms, &rep->bwd_iters))
        goto done;
      snprintf(rep->bwd_mode, sizeof rep->bwd_mode, "%s", g.opts.deterministic ? "deterministic" : "fused");
      printf("backward: %9.3f ms  %7.1f TFLOP/s  (median of %d runs; %s)\n", rep->bwd_ms,
             2.5 * fwd_flops / (rep->bwd_ms * 1e-3) * 1e-12, rep->bwd_iters, bwd_mode_name(&g.opts, s));
      /* the other backward pass, beside it (fuse_delta is a form of the fused one) */
      g.opts.deterministic = !g.opts.deterministic;
      bool fd = g.opts.fuse_delta;
      g.opts.fuse_delta = 0;
      if (!time_pass(&g, o, true, &rep->other_bwd_ms, &rep->other_bwd_iters))
        goto done;
      snprintf(rep->other_bwd_mode, sizeof rep->other_bwd_mode, "%s",
               g.opts.deterministic ? "deterministic" : "fused");
      printf("backward: %9.3f ms  %7.1f TFLOP/s  (median of %d runs; %s)\n", rep->other_bwd_ms,
             2.5 * fwd_flops / (rep->other_bwd_ms * 1e-3) * 1e-12, rep->other_bwd_iters, bwd_mode_name(&g.opts, s));
      g.opts.deterministic = !g.opts.deterministic;
      g.opts.fuse_delta = fd;
    }
    printf("device memory for attention: %.1f MiB (inputs, outputs, workspace; plus %zu MiB to flush L2)\n",
           rep->peak_mib, g.flush_bytes >> 20);
    print_configs(&g, rep);   /* the timed runs' (the same unless the tuning database changed) */
  }
  ok = true;
done:
  if (g.ctx) {
    uint64_t bufs[] = {g.q, g.k, g.v, g.o, g.lse, g.dO, g.dq, g.dk, g.dv, g.delta, g.flush,
                       g.alibi, g.sinks, g.dsinks, g.cu, g.dq_accum, g.dkv_accum};
    for (int i = 0; i < FA_ARRAY_LEN(bufs); i++)
      if (bufs[i])
        fadsl_free(g.ctx, bufs[i]);
  }
  fadsl_attention_destroy(g.attn);
  fadsl_context_destroy(g.ctx);
  return ok;
}

/* ---- checking and reporting --------------------------------------------------------- */

static bool check_outputs(const Options *o, const FaAttnShape *s, DType dt, const Tensor *q, const Tensor *k,
                          const Tensor *v, const Tensor *dO, bool backward, const Variant *var, const Outputs *out,
                          FaAttnCheckResult *res) {
  FaAttnData d = {dt, q->data, k->data, v->data, backward ? dO->data : NULL, out->o,
                  backward ? out->dq : NULL, backward ? out->dk : NULL, backward ? out->dv : NULL, out->lse2,
                  &var->v, out->dsinks};
  FaAttnCheckOptions co = fa_attn_check_defaults();
  co.threads = o->threads;
  double t0 = now_s();
  if (!fa_attn_check(s, &d, &co, res)) {
    fprintf(stderr, "fadsl-attn: out of memory computing the float64 reference\n");
    return false;
  }
  printf("against float64 (on the same %s inputs; %.1f s), checked %s:\n", fa_dtype_name(dt), now_s() - t0,
         res->subset);
  bool within = true;
  for (int w = 0; w < FA_CHECK_N; w++) {
    if (!res->checked[w])
      continue;
    double bound = fa_attn_check_bound(dt, w);
    bool ok = res->err[w] < bound && res->nonfinite[w] == 0;   /* false for NaN */
    printf("  %-3s ||out - ref|| / %s = %.3e", fa_attn_check_name(w),
           w == FA_CHECK_LSE ? "||ref||" : "max(||ref||, ||ref_rss||)", res->err[w]);
    if (res->nonfinite[w])
      printf("  (%lld NaN/inf values in the output)", (long long)res->nonfinite[w]);
    printf("%s\n", ok ? "" : "  (above the test bound)");
    if (!ok) {
      printf("      bound %.0e; %lld elements compared; ||ref|| %.3e, ||ref_rss|| %.3e\n", bound,
             (long long)res->elements[w], res->ref_norm[w], res->rss_norm[w]);
      within = false;
    }
  }
  return within;
}

static void json_number(FILE *f, const char *name, double x) {
  if (isfinite(x))
    fprintf(f, ", \"%s\": %.6g", name, x);
  else
    fprintf(f, ", \"%s\": null", name);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static bool write_json(const Options *o, const FaAttnShape *s, DType dt, bool backward, const Variant *var,
                       const GpuReport *rep, const FaAttnCheckResult *chk) {
  FILE *f = fopen(o->json, "a");
  if (!f) {
    fprintf(stderr, "fadsl-attn: cannot open %s: %s\n", o->json, strerror(errno));
    return false;
  }
  double fwd_flops = forward_flops(s, var);
  fprintf(f, "{\"provider\": \"fadsl\", \"B\": %d, \"H\": %d, \"KVH\": %d, \"N\": %d, \"Nkv\": %d, \"D\": %d, "
             "\"causal\": %s, \"dtype\": \"%s\", \"gpu\": ",
          s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, s->causal ? "true" : "false", dt == DT_BF16 ? "bf16" : "f16");
  json_string(f, rep->gpu);
  char desc[200];
  fprintf(f, ", \"variant\": ");
  json_string(f, fa_attn_variant_describe(&var->v, s, desc, sizeof desc));
  if (o->label) {
    fprintf(f, ", \"label\": ");
    json_string(f, o->label);
  }
  fprintf(f, ", \"arch\": ");
  json_string(f, rep->arch);
  fprintf(f, ", \"seed\": %llu", (unsigned long long)o->seed);
  fprintf(f, ", \"config\": {");
  bool first = true;
  for (int w = 0; w < FADSL_ATTENTION_KERNELS; w++) {
    const KernelReport *in = &rep->info[w];
    if (!rep->have_info[w])
      continue;
    fprintf(f, "%s\"%s\": {\"constexprs\": ", first ? "" : ", ", in->kernel);
    json_string(f, in->constexprs);
    fprintf(f, ", \"warps\": %d, \"stages\": %d, \"pipeline\": ", in->warps, in->stages);
    json_string(f, in->pipeline);
    fprintf(f, ", \"schedule\": ");
    json_string(f, in->schedule);
    fprintf(f, ", \"source\": ");
    json_string(f, in->source);
    fprintf(f, ", \"registers\": %d, \"spill_bytes\": %d, \"shared_bytes\": %zu}", in->registers, in->spill_bytes,
            in->shared_bytes);
    first = false;
  }
  fprintf(f, "}");
  json_number(f, "fwd_ms", rep->fwd_ms);
  json_number(f, "fwd_tflops", rep->fwd_ms > 0 ? fwd_flops / (rep->fwd_ms * 1e-3) * 1e-12 : NAN);
  if (backward) {
    json_number(f, "bwd_ms", rep->bwd_ms);
    json_number(f, "bwd_tflops", rep->bwd_ms > 0 ? 2.5 * fwd_flops / (rep->bwd_ms * 1e-3) * 1e-12 : NAN);
    fprintf(f, ", \"bwd_mode\": ");
    json_string(f, rep->bwd_mode[0] ? rep->bwd_mode : o->deterministic ? "deterministic" : "fused");
    if (o->fuse_delta)
      fprintf(f, ", \"fuse_delta\": true");
    if (run_heads(o, s, var))
      fprintf(f, ", \"heads\": true");
    /* the other pass, under its own name: bwd_deterministic_ms or bwd_fused_ms */
    if (rep->other_bwd_ms > 0) {
      char name[48];
      snprintf(name, sizeof name, "bwd_%s_ms", rep->other_bwd_mode);
      json_number(f, name, rep->other_bwd_ms);
      snprintf(name, sizeof name, "bwd_%s_tflops", rep->other_bwd_mode);
      json_number(f, name, 2.5 * fwd_flops / (rep->other_bwd_ms * 1e-3) * 1e-12);
    }
  }
  fprintf(f, ", \"fwd_iters\": %d, \"bwd_iters\": %d", rep->fwd_iters, rep->bwd_iters);
  json_number(f, "first_fwd_s", rep->first_fwd_s);
  if (backward)
    json_number(f, "first_bwd_s", rep->first_bwd_s);
  json_number(f, "peak_mem_mib", rep->peak_mib);
  if (chk) {
    fprintf(f, ", \"errors\": {");
    first = true;
    for (int w = 0; w < FA_CHECK_N; w++) {
      if (!chk->checked[w])
        continue;
      fprintf(f, "%s\"%s\": ", first ? "" : ", ", fa_attn_check_name(w));
      if (isfinite(chk->err[w]) && !chk->nonfinite[w])
        fprintf(f, "%.3e", chk->err[w]);
      else
        fprintf(f, "null");
      first = false;
    }
    fprintf(f, "}, \"checked\": ");
    json_string(f, chk->subset);
  }
  fprintf(f, "}\n");
  bool ok = !ferror(f);
  if (fclose(f) != 0 || !ok) {
    fprintf(stderr, "fadsl-attn: writing %s failed\n", o->json);
    return false;
  }
  return true;
}

static bool save_inputs(const char *prefix, DType dt, const Tensor *q, const Tensor *k, const Tensor *v,
                        const Tensor *dO) {
  const Tensor *t[4] = {q, k, v, dO};
  const char *name[4] = {"q", "k", "v", "do"};
  for (int i = 0; i < 4; i++) {
    if (!t[i]->data)
      continue;
    size_t len = strlen(prefix) + 8;
    char *path = malloc(len);
    if (!path)
      return false;
    snprintf(path, len, "%s%s.npy", prefix, name[i]);
    bool ok = write_f32(path, dt, t[i]->data, 4, t[i]->shape, 1.0);
    free(path);
    if (!ok)
      return false;
  }
  return true;
}

/* ---- decoding from a paged KV cache ------------------------------------------------------ */

/* A 2-D int32 .npy (int64 values that fit are converted). */
static int32_t *read_table(const char *what, const char *path, int64_t *rows, int64_t *cols) {
  FaNpy a;
  char err[600];
  if (!fa_npy_read(path, &a, err, sizeof err)) {
    fprintf(stderr, "fadsl-attn: --%s: %s\n", what, err);
    return NULL;
  }
  int32_t *out = NULL;
  if (a.ndim != 2 || (a.dtype != DT_I32 && a.dtype != DT_I64)) {
    fprintf(stderr, "fadsl-attn: --%s %s: want a 2-D int32 array, got a %d-D %s array\n", what, path, a.ndim,
            fa_npy_dtype_name(a.dtype));
  } else if ((out = malloc((size_t)(a.shape[0] * a.shape[1] > 0 ? a.shape[0] * a.shape[1] : 1) * 4))) {
    *rows = a.shape[0];
    *cols = a.shape[1];
    for (int64_t i = 0; i < a.shape[0] * a.shape[1]; i++)
      out[i] = (int32_t)fa_host_get(a.dtype, a.data, i);
  }
  fa_npy_free(&a);
  return out;
}

typedef struct DecodeRun {
  FaDecodeShape s;
  Tensor q, kc, vc;
  int32_t *table, *lens;
  void *o;
  float *lse2;
  int splits;
  double ms, copy_ms, first_s;   /* --bench */
  int iters;
} DecodeRun;

static bool decode_inputs(const Options *o, DType dt, DecodeRun *d) {
  FaDecodeShape *s = &d->s;
  if (o->has_decode_shape) {
    const int *v = o->decode_shape;
    s->B = v[0], s->Sq = v[1], s->H = v[2], s->KVH = v[3], s->D = v[4], s->page_size = v[5];
    s->max_blocks = (v[6] + v[5] - 1) / v[5];
    s->num_blocks = s->B * s->max_blocks + 1;
    Rng rng = {o->seed};
    int64_t qs[4] = {s->B, s->Sq, s->H, s->D}, cs[4] = {s->num_blocks, s->page_size, s->KVH, s->D};
    d->table = malloc((size_t)s->B * s->max_blocks * 4);
    d->lens = malloc((size_t)s->B * 4);
    if (!d->table || !d->lens || !random_tensor(&d->q, dt, qs, &rng, o->threads) ||
        !random_tensor(&d->kc, dt, cs, &rng, o->threads) || !random_tensor(&d->vc, dt, cs, &rng, o->threads))
      return false;
    /* the pages of the sequences in a random order over the cache (page 0 spare) */
    int n = s->B * s->max_blocks;
    for (int i = 0; i < n; i++)
      d->table[i] = i + 1;
    for (int i = n - 1; i > 0; i--) {
      int j = (int)(rng_next(&rng) % (uint64_t)(i + 1)), t = d->table[i];
      d->table[i] = d->table[j];
      d->table[j] = t;
    }
    for (int b = 0; b < s->B; b++)
      d->lens[b] = v[6];
    return true;
  }
  int64_t rows = 0, cols = 0, nlens = 0;
  if (!read_tensor("q", o->q, dt, &d->q) || !read_tensor("k-cache", o->k_cache, dt, &d->kc) ||
      !read_tensor("v-cache", o->v_cache, dt, &d->vc) ||
      !(d->table = read_table("block-table", o->block_table, &rows, &cols)) ||
      !(d->lens = read_vector("cache-seqlens", o->cache_seqlens, DT_I32, d->q.shape[0], &nlens)))
    return false;
  s->B = (int)d->q.shape[0], s->Sq = (int)d->q.shape[1], s->H = (int)d->q.shape[2], s->D = (int)d->q.shape[3];
  s->num_blocks = (int)d->kc.shape[0], s->page_size = (int)d->kc.shape[1], s->KVH = (int)d->kc.shape[2];
  s->max_blocks = (int)cols;
  if (memcmp(d->kc.shape, d->vc.shape, sizeof d->kc.shape) || d->kc.shape[3] != s->D || rows != s->B) {
    fprintf(stderr, "fadsl-attn: shapes do not fit: want q [B, Sq, H, D], k and v caches [blocks, page, KVH, D], "
                    "block table [B, max_blocks] and cache lengths [B]\n");
    return false;
  }
  return true;
}

/* The splits the library would take (a compile-only context knows no GPU:
 * it assumes 132 multiprocessors, an H100/H200's). */
static bool decode_plan(const Options *o, const DecodeRun *d, fadsl_attention *attn, int *splits, size_t *ws) {
  fadsl_attention_kvcache kv;
  fadsl_attention_kvcache_init(&kv);
  kv.B = d->s.B, kv.Sq = d->s.Sq, kv.H = d->s.H, kv.KVH = d->s.KVH, kv.D = d->s.D;
  kv.num_blocks = d->s.num_blocks, kv.page_size = d->s.page_size, kv.max_blocks = d->s.max_blocks;
  kv.causal = d->s.causal;
  kv.num_splits = o->num_splits;
  for (int b = 0; b < d->s.B; b++)
    if (d->lens[b] > kv.max_seqlen)
      kv.max_seqlen = d->lens[b];
  fadsl_status st = fadsl_attention_decode_plan(attn, &kv, splits, ws);
  if (st != FADSL_SUCCESS)
    fprintf(stderr, "fadsl-attn: planning the decoding: %s\n", fadsl_attention_last_error(attn));
  return st == FADSL_SUCCESS;
}

static bool decode_interpreter(const Options *o, DType dt, DecodeRun *d) {
  fadsl_context *ctx = NULL;
  fadsl_attention *attn = NULL;
  fadsl_context_create(-1, &ctx);
  bool ok = ctx && fadsl_attention_create(ctx, &attn) == FADSL_SUCCESS && decode_plan(o, d, attn, &d->splits, NULL);
  fadsl_attention_destroy(attn);
  fadsl_context_destroy(ctx);
  char path[4096];
  const char *program = ok ? fa_attn_find_sibling(o->program, "decode.fa", path, sizeof path) : NULL;
  if (!program)
    return false;
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  FaAttnRunner r;
  FaDecodeData dd = {dt, d->q.data, d->kc.data, d->vc.data, d->table, d->lens, d->o, d->lse2};
  double t0 = now_s();
  ok = fa_attn_open(&r, &fc, program, 0, 0, o->threads > 0 ? o->threads : 1) &&
       fa_decode_run(&r, &d->s, &dd, d->splits, o->block_k, d->o, d->lse2);
  if (ok)
    printf("decode: %.2f s on the interpreter (%d splits)\n", now_s() - t0, d->splits);
  fa_compiler_free(&fc);
  return ok;
}

typedef struct DecodeGpu {
  Gpu g;
  fadsl_attention_kvcache kv;
  uint64_t kc, vc, table, lens, ws, copy_dst;
} DecodeGpu;

static fadsl_status decode_call(DecodeGpu *x) {
  Gpu *g = &x->g;
  return fadsl_attention_decode(g->attn, &x->kv, g->q, x->kc, x->vc, x->table, x->lens, g->o, g->lse, x->ws,
                                g->dtype, NULL);
}

/* Median milliseconds of `runs` launches of fn, each between its own events. */
static bool time_median(Gpu *g, fadsl_status (*fn)(void *), void *arg, int runs, double *ms) {
  void *ev[2] = {NULL, NULL};
  double *t = malloc((size_t)runs * sizeof *t);
  bool ok = t && rt_ok(g, fadsl_event_create(g->ctx, &ev[0]), "cuEventCreate") &&
            rt_ok(g, fadsl_event_create(g->ctx, &ev[1]), "cuEventCreate");
  for (int i = 0; ok && i < runs; i++) {
    float e = 0;
    ok = rt_ok(g, fadsl_event_record(g->ctx, ev[0], NULL), "cuEventRecord") && fn(arg) == FADSL_SUCCESS &&
         rt_ok(g, fadsl_event_record(g->ctx, ev[1], NULL), "cuEventRecord") &&
         rt_ok(g, fadsl_synchronize(g->ctx, NULL), "running the timed launches") &&
         rt_ok(g, fadsl_event_elapsed_ms(g->ctx, ev[0], ev[1], &e), "cuEventElapsedTime");
    if (ok)
      t[i] = e;
  }
  if (ok) {
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    *ms = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
  }
  for (int i = 0; i < 2; i++)
    if (ev[i])
      fadsl_event_destroy(g->ctx, ev[i]);
  free(t);
  return ok;
}

static fadsl_status decode_thunk(void *x) { return decode_call(x); }

/* A device copy of the K cache through decode.fa's attn_copy. */
typedef struct CopyRun {
  fadsl_kernel *k;
  fadsl_args *args;
} CopyRun;

static fadsl_status copy_thunk(void *x) {
  CopyRun *c = x;
  return fadsl_launch(c->k, c->args, NULL, NULL);
}

static bool decode_copy_bandwidth(const Options *o, DecodeGpu *x, DType dt, size_t cache_bytes, double *ms) {
  Gpu *g = &x->g;
  char buf[4096];
  const char *path = fa_attn_find_sibling(o->program, "decode.fa", buf, sizeof buf);
  fadsl_program *prog = NULL;
  CopyRun c = {NULL, NULL};
  bool ok = path && rt_ok(g, fadsl_program_load_file(g->ctx, path, &prog), "loading decode.fa for the copy") &&
            rt_ok(g, fadsl_program_kernel(prog, "attn_copy", &c.k), "finding attn_copy") &&
            rt_ok(g, fadsl_args_create(c.k, &c.args), "binding attn_copy") &&
            dev_alloc(g, cache_bytes, &x->copy_dst, "the copy's destination");
  ok = ok && rt_ok(g, fadsl_args_set_ptr(c.args, "t_src", x->kc), "binding attn_copy") &&
       rt_ok(g, fadsl_args_set_ptr(c.args, "t_dst", x->copy_dst), "binding attn_copy") &&
       rt_ok(g, fadsl_args_set_i64(c.args, "n", (int64_t)(cache_bytes / (size_t)fa_dtype_size(dt))),
             "binding attn_copy") &&
       rt_ok(g, fadsl_args_set_dtype(c.args, "T", fa_dtype_name(dt)), "binding attn_copy");
  ok = ok && rt_ok(g, copy_thunk(&c), "the copy") && time_median(g, copy_thunk, &c, o->bench_iters, ms);
  fadsl_args_destroy(c.args);
  fadsl_program_destroy(prog);
  return ok;
}

static bool decode_gpu(const Options *o, DType dt, DecodeRun *d) {
  DecodeGpu x;
  memset(&x, 0, sizeof x);
  Gpu *g = &x.g;
  g->dtype = dt == DT_BF16 ? FADSL_ATTENTION_BF16 : FADSL_ATTENTION_F16;
  bool ok = false;
  size_t esz = (size_t)fa_dtype_size(dt), qbytes = (size_t)d->q.n * esz, cbytes = (size_t)d->kc.n * esz;
  size_t lbytes = (size_t)d->s.B * d->s.H * d->s.Sq * 4, ws = 0;
  fadsl_status st = fadsl_context_create(o->device, &g->ctx);
  if (st != FADSL_SUCCESS) {
    fprintf(stderr, "fadsl-attn: no GPU: %s\n", g->ctx ? fadsl_context_last_error(g->ctx) : fadsl_status_string(st));
    goto done;
  }
  st = o->program ? fadsl_attention_create_from_file(g->ctx, o->program, &g->attn) : fadsl_attention_create(g->ctx, &g->attn);
  if (!attn_ok(g, st, "loading the attention program") || !decode_plan(o, d, g->attn, &d->splits, &ws))
    goto done;
  if ((o->warps || o->stages) &&
      !attn_ok(g, fadsl_attention_set_config(g->attn, 0, 0, o->warps, o->stages), "fixing the configuration"))
    goto done;
  fadsl_attention_kvcache_init(&x.kv);
  x.kv.B = d->s.B, x.kv.Sq = d->s.Sq, x.kv.H = d->s.H, x.kv.KVH = d->s.KVH, x.kv.D = d->s.D;
  x.kv.num_blocks = d->s.num_blocks, x.kv.page_size = d->s.page_size, x.kv.max_blocks = d->s.max_blocks;
  x.kv.causal = d->s.causal, x.kv.num_splits = d->splits, x.kv.scale = (float)d->s.scale;
  if (!dev_upload(g, &d->q, dt, &g->q, "q") || !dev_upload(g, &d->kc, dt, &x.kc, "the K cache") ||
      !dev_upload(g, &d->vc, dt, &x.vc, "the V cache") ||
      !dev_upload_bytes(g, d->table, (size_t)d->s.B * d->s.max_blocks * 4, &x.table, "the block table") ||
      !dev_upload_bytes(g, d->lens, (size_t)d->s.B * 4, &x.lens, "cache_seqlens") ||
      !dev_output(g, qbytes, &g->o, "o") || !dev_output(g, lbytes, &g->lse, "lse") ||
      !dev_alloc(g, ws, &x.ws, "the workspace"))
    goto done;
  double t0 = now_s();
  if (!attn_ok(g, decode_call(&x), "decoding") || !rt_ok(g, fadsl_synchronize(g->ctx, NULL), "running the decoding"))
    goto done;
  d->first_s = now_s() - t0;
  printf("decode: first call %.3f s (compilation included), %d splits\n", d->first_s, d->splits);
  if (!rt_ok(g, fadsl_memcpy_dtoh(g->ctx, d->o, g->o, qbytes), "copying o back") ||
      !rt_ok(g, fadsl_memcpy_dtoh(g->ctx, d->lse2, g->lse, lbytes), "copying lse back"))
    goto done;
  if (o->bench) {
    d->iters = o->bench_iters;
    if (!time_median(g, decode_thunk, &x, d->iters, &d->ms) || !decode_copy_bandwidth(o, &x, dt, cbytes, &d->copy_ms))
      goto done;
    double kv = fa_decode_kv_bytes(&d->s, d->lens, (int)esz), copy = 2.0 * (double)cbytes;
    printf("decode:   %9.4f ms  %7.1f GB/s of K and V read (median of %d runs)\n", d->ms, kv / (d->ms * 1e-3) * 1e-9,
           d->iters);
    printf("copy:     %9.4f ms  %7.1f GB/s read + written (a device copy of the K cache, %zu MiB)\n", d->copy_ms,
           copy / (d->copy_ms * 1e-3) * 1e-9, cbytes >> 20);
    printf("decode at %.0f%% of the copy's bandwidth\n",
           100.0 * (kv / (d->ms * 1e-3)) / (copy / (d->copy_ms * 1e-3)));
  }
  ok = true;
done:
  if (g->ctx) {
    uint64_t bufs[] = {g->q, g->o, g->lse, x.kc, x.vc, x.table, x.lens, x.ws, x.copy_dst};
    for (int i = 0; i < FA_ARRAY_LEN(bufs); i++)
      if (bufs[i])
        fadsl_free(g->ctx, bufs[i]);
  }
  fadsl_attention_destroy(g->attn);
  fadsl_context_destroy(g->ctx);
  return ok;
}

static int run_decode(Options *o) {
  DType dt = o->dtype;
  DecodeRun d;
  memset(&d, 0, sizeof d);
  bool ok = true, within = true;
  if (o->has_decode_shape) {
    if (!o->has_seed)
      o->seed = (uint64_t)time(NULL);
    printf("random inputs, seed %llu\n", (unsigned long long)o->seed);
  }
  ok = decode_inputs(o, dt, &d);
  char why[300];
  d.s.causal = o->causal;
  d.s.scale = o->has_scale ? o->scale : 1.0 / sqrt((double)d.s.D);
  if (ok && !fa_decode_ok(&d.s, d.table, d.lens, why, sizeof why)) {
    fprintf(stderr, "fadsl-attn: %s\n", why);
    ok = false;
  }
  int64_t lrows = (int64_t)d.s.B * d.s.H * d.s.Sq;
  if (ok) {
    printf("decoding B=%d Sq=%d H=%d KVH=%d D=%d from %d pages of %d (at most %d per sequence) %s %s scale=%g\n",
           d.s.B, d.s.Sq, d.s.H, d.s.KVH, d.s.D, d.s.num_blocks, d.s.page_size, d.s.max_blocks,
           d.s.causal ? "causal" : "full", fa_dtype_name(dt), d.s.scale);
    d.o = alloc_poisoned(dt, d.q.n);
    d.lse2 = alloc_poisoned(DT_F32, lrows);
    ok = d.o && d.lse2 && (o->gpu ? decode_gpu(o, dt, &d) : decode_interpreter(o, dt, &d));
  }
  int64_t lshape[3] = {d.s.B, d.s.H, d.s.Sq};
  if (ok && o->o)
    ok = write_f32(o->o, dt, d.o, 4, d.q.shape, 1.0);
  if (ok && o->lse)
    ok = write_f32(o->lse, DT_F32, d.lse2, 3, lshape, M_LN2);
  FaDecodeCheck chk;
  if (ok && o->check) {
    FaDecodeData dd = {dt, d.q.data, d.kc.data, d.vc.data, d.table, d.lens, d.o, d.lse2};
    ok = fa_decode_check(&d.s, &dd, &chk);
    printf("against float64 (on the same %s inputs), every token of every head:\n", fa_dtype_name(dt));
    static const char *const names[2] = {"o", "lse"};
    for (int w = 0; ok && w < 2; w++) {
      double bound = fa_attn_check_bound(dt, w ? FA_CHECK_LSE : FA_CHECK_O);
      bool good = chk.err[w] < bound && chk.nonfinite[w] == 0;
      printf("  %-3s %s = %.3e%s\n", names[w], w ? "||out - ref|| / ||ref||" : "||out - ref|| / max(||ref||, ||ref_rss||)",
             chk.err[w], good ? "" : "  (above the test bound)");
      within = within && good;
    }
  }
  if (ok && o->json) {
    FILE *f = fopen(o->json, "a");
    if (f) {
      double kv = fa_decode_kv_bytes(&d.s, d.lens, fa_dtype_size(dt));
      fprintf(f, "{\"provider\": \"fadsl\", \"decode\": true, \"label\": ");
      json_string(f, o->label ? o->label : "");
      fprintf(f, ", \"B\": %d, \"Sq\": %d, \"H\": %d, \"KVH\": %d, \"D\": %d, "
                 "\"page_size\": %d, \"max_blocks\": %d, \"causal\": %s, \"dtype\": \"%s\", \"splits\": %d",
              d.s.B, d.s.Sq, d.s.H, d.s.KVH, d.s.D, d.s.page_size, d.s.max_blocks, d.s.causal ? "true" : "false",
              fa_dtype_name(dt), d.splits);
      json_number(f, "ms", d.ms);
      json_number(f, "kv_gbps", d.ms > 0 ? kv / (d.ms * 1e-3) * 1e-9 : NAN);
      json_number(f, "copy_ms", d.copy_ms);
      json_number(f, "copy_gbps", d.copy_ms > 0 ? 2.0 * (double)d.kc.n * fa_dtype_size(dt) / (d.copy_ms * 1e-3) * 1e-9 : NAN);
      json_number(f, "first_s", d.first_s);
      if (o->check)
        fprintf(f, ", \"errors\": {\"o\": %.3e, \"lse\": %.3e}", chk.err[0], chk.err[1]);
      fprintf(f, "}\n");
      ok = fclose(f) == 0;
    } else {
      fprintf(stderr, "fadsl-attn: cannot open %s: %s\n", o->json, strerror(errno));
      ok = false;
    }
  }
  free_tensor(&d.q);
  free_tensor(&d.kc);
  free_tensor(&d.vc);
  free(d.table);
  free(d.lens);
  free(d.o);
  free(d.lse2);
  return ok && within ? 0 : EXIT_ERRORS;
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc)
    return rc;
  if (o.threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = n > 0 ? (int)n : 1;
  }
  if (o.decode)
    return run_decode(&o);

  DType dt = o.dtype;
  Tensor q = {0}, k = {0}, v = {0}, dO = {0};
  Outputs out = {0};
  Variant var;
  memset(&var, 0, sizeof var);
  GpuReport rep;
  memset(&rep, 0, sizeof rep);
  FaAttnCheckResult chk;
  bool backward = o.dO || o.backward;
  bool ok = true, within = true, checked = false;
  if (o.has_shape) {
    if (!o.has_seed)
      o.seed = (uint64_t)time(NULL);
    Rng rng = {o.seed};
    printf("random inputs, seed %llu\n", (unsigned long long)o.seed);
    int64_t qs[4] = {o.shape[0], o.shape[1], o.shape[3], o.shape[5]};
    int64_t ks[4] = {o.shape[0], o.shape[2], o.shape[4], o.shape[5]};
    ok = random_tensor(&q, dt, qs, &rng, o.threads) && random_tensor(&k, dt, ks, &rng, o.threads) &&
         random_tensor(&v, dt, ks, &rng, o.threads) && (!backward || random_tensor(&dO, dt, qs, &rng, o.threads));
  } else {
    ok = read_tensor("q", o.q, dt, &q) && read_tensor("k", o.k, dt, &k) && read_tensor("v", o.v, dt, &v) &&
         (!o.dO || read_tensor("do", o.dO, dt, &dO));
  }
  if (!ok)
    goto done;

  FaAttnShape s = {(int)q.shape[0], (int)q.shape[1], (int)k.shape[1], (int)q.shape[2], (int)k.shape[2],
                   (int)q.shape[3], o.causal, 0};
  s.scale = o.has_scale ? o.scale : 1.0 / sqrt((double)s.D);
  if (k.shape[0] != q.shape[0] || k.shape[3] != q.shape[3] || memcmp(k.shape, v.shape, sizeof k.shape) ||
      (backward && memcmp(dO.shape, q.shape, sizeof q.shape))) {
    fprintf(stderr,
            "fadsl-attn: shapes do not fit: q [%lld, %lld, %lld, %lld], k [%lld, %lld, %lld, %lld], "
            "v [%lld, %lld, %lld, %lld]%s; want q [B, H, Nq, D], k and v [B, KVH, Nkv, D], dO like q\n",
            (long long)q.shape[0], (long long)q.shape[1], (long long)q.shape[2], (long long)q.shape[3],
            (long long)k.shape[0], (long long)k.shape[1], (long long)k.shape[2], (long long)k.shape[3],
            (long long)v.shape[0], (long long)v.shape[1], (long long)v.shape[2], (long long)v.shape[3],
            backward ? " and dO" : "");
    ok = false;
    goto done;
  }
  if (!(ok = read_variant(&o, s.H, &var)))
    goto done;
  char why[300];
  /* the variants take causal attention with Nq != Nkv (positions aligned at 0) */
  FaAttnShape plain = s;
  plain.causal = s.causal && !var.on;
  if (!fa_attn_shape_ok(&plain, backward, why, sizeof why) || !fa_attn_variant_ok(&var.v, &s, why, sizeof why)) {
    fprintf(stderr, "fadsl-attn: %s\n", why);
    ok = false;
    goto done;
  }
  char desc[200];
  printf("attention B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d %s %s scale=%g\n", s.B, s.H, s.KVH, s.Nq, s.Nkv, s.D,
         fa_attn_variant_describe(&var.v, &s, desc, sizeof desc), fa_dtype_name(dt), s.scale);
  if (o.save_inputs && !(ok = save_inputs(o.save_inputs, dt, &q, &k, &v, &dO)))
    goto done;

  int64_t rows = (int64_t)s.B * s.H * s.Nq;
  out.o = alloc_poisoned(dt, q.n);
  out.lse2 = alloc_poisoned(DT_F32, rows);
  if (backward) {
    out.dq = alloc_poisoned(dt, q.n);
    out.dk = alloc_poisoned(dt, k.n);
    out.dv = alloc_poisoned(dt, v.n);
  }
  if (backward && var.sinks)
    out.dsinks = alloc_poisoned(DT_F32, s.H);
  ok = out.o && out.lse2 && (!backward || (out.dq && out.dk && out.dv)) && (!(backward && var.sinks) || out.dsinks);
  if (!ok) {
    fprintf(stderr, "fadsl-attn: out of host memory for the outputs\n");
    goto done;
  }
  ok = o.gpu ? run_gpu(&o, &s, dt, &q, &k, &v, &dO, backward, &var, &out, &rep)
             : run_interpreter(&o, &s, dt, &q, &k, &v, &dO, backward, &var, &out);
  if (!ok)
    goto done;

  int64_t rshape[3] = {s.B, s.H, s.Nq};
  if (ok && o.o)
    ok = write_f32(o.o, dt, out.o, 4, q.shape, 1.0);
  if (ok && o.lse)
    ok = write_f32(o.lse, DT_F32, out.lse2, 3, rshape, M_LN2);
  if (ok && o.dq)
    ok = write_f32(o.dq, dt, out.dq, 4, q.shape, 1.0);
  if (ok && o.dk)
    ok = write_f32(o.dk, dt, out.dk, 4, k.shape, 1.0);
  if (ok && o.dv)
    ok = write_f32(o.dv, dt, out.dv, 4, v.shape, 1.0);
  int64_t hshape[1] = {s.H};
  if (ok && o.dsinks)
    ok = write_f32(o.dsinks, DT_F32, out.dsinks, 1, hshape, 1.0);
  if (ok && o.check) {
    within = check_outputs(&o, &s, dt, &q, &k, &v, &dO, backward, &var, &out, &chk);
    checked = true;
  }
  if (ok && o.json)
    ok = write_json(&o, &s, dt, backward, &var, &rep, checked ? &chk : NULL);
done:
  free_variant(&var);
  free(out.dsinks);
  free(out.o);
  free(out.lse2);
  free(out.dq);
  free(out.dk);
  free(out.dv);
  free_tensor(&q);
  free_tensor(&k);
  free_tensor(&v);
  free_tensor(&dO);
  return ok && within ? 0 : EXIT_ERRORS;
}
