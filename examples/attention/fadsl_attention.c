/* fadsl_attention.c - the attention C API (fadsl_attention.h) on top of
 * libfadsl's public API: attention.fa, built into the library as text, is
 * loaded once per handle; each call checks the shape, binds the kernels'
 * arguments by name and launches them on the caller's stream (or, for the
 * host calls of attention_host.c, runs them on the interpreter).  Compiled
 * kernels are cached by libfadsl (in memory for the handle's program, and on
 * disk), so repeated calls cost a lookup. */
#include "config.h"

#include "attention_handle.h"
#include "attention_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* attention.fa and the modules it and the variants import, as texts:
 * fa_attention_modules (attention_internal.h). */

static const char *const kernel_names[FADSL_ATTENTION_KERNELS] = {
    "attn_fwd",      "attn_bwd_d",          "attn_bwd_dkdv",      "attn_bwd_dq",    "attn_bwd_prep",
    "attn_bwd",      "attn_bwd_dq_convert", "attn_bwd_dkdv_zero", "attn_bwd_heads", "attn_bwd_dkdv_convert"};

/* The fused backward kernels are optional: a program of its own without them
 * runs the deterministic ones (and without the last three, the fused pass
 * with a program per kv head). */
static bool optional_kernel(int which) { return which >= FADSL_ATTENTION_BWD_PREP; }

FaAttnHandle fa_attn_handle(fadsl_attention *a) {
  FaAttnHandle h = {a->ctx,     a->prog,     &a->lock,   a->error,  sizeof a->error, &a->block_q,
                    &a->block_k, &a->warps, &a->stages, a->info, a->launched,     &a->extra};
  return h;
}

fadsl_status fa_attn_api_fail(fadsl_attention *a, fadsl_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->error, sizeof a->error, fmt, ap);
  va_end(ap);
  return st;
}

/* A libfadsl call failed: keep its message (the context's last error). */
static fadsl_status fail_rt(fadsl_attention *a, fadsl_status st, const char *what) {
  return fa_attn_api_fail(a, st, "%s: %s: %s", what, fadsl_status_string(st), fadsl_context_last_error(a->ctx));
}

const char *fadsl_attention_kernel_name(fadsl_attention_kernel which) {
  return (int)which >= 0 && which < FADSL_ATTENTION_KERNELS ? kernel_names[which] : NULL;
}

static fadsl_status open_program(fadsl_attention *a, const char *path) {
  fadsl_status st = path ? fadsl_program_load_file(a->ctx, path, &a->prog)
                         : fadsl_program_load_with_modules(a->ctx, "attention.fa", fa_attention_modules[0].text,
                                                           fa_attention_modules, fa_attention_nmodules, &a->prog);
  if (st != FADSL_SUCCESS)
    return fail_rt(a, st, path ? path : "the built-in attention.fa");
  for (int i = 0; i < FADSL_ATTENTION_KERNELS; i++) {
    st = fadsl_program_kernel(a->prog, kernel_names[i], &a->kernels[i]);
    if (st == FADSL_SUCCESS)
      st = fadsl_args_create(a->kernels[i], &a->args[i]);
    else if (optional_kernel(i) && st == FADSL_ERROR_NOT_FOUND)
      st = FADSL_SUCCESS, a->kernels[i] = NULL;
    if (st != FADSL_SUCCESS)
      return fail_rt(a, st, kernel_names[i]);
  }
  return FADSL_SUCCESS;
}

/* path NULL: the built-in program. */
static fadsl_status create(fadsl_context *ctx, bool builtin, const char *path, fadsl_attention **out) {
  if (!out)
    return FADSL_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  fadsl_attention *a = calloc(1, sizeof *a);
  if (!a)
    return FADSL_ERROR_OUT_OF_MEMORY;
  if (pthread_mutex_init(&a->lock, NULL) != 0) {
    free(a);
    return FADSL_ERROR_OUT_OF_MEMORY;
  }
  a->ctx = ctx;
  *out = a;
  if (!ctx)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_create: no context (NULL)");
  if (!builtin && !path)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_create_from_file: no path (NULL)");
  return open_program(a, path);
}

fadsl_status fadsl_attention_create(fadsl_context *ctx, fadsl_attention **out) {
  return create(ctx, true, NULL, out);
}

fadsl_status fadsl_attention_create_from_file(fadsl_context *ctx, const char *path, fadsl_attention **out) {
  return create(ctx, false, path, out);
}

void fadsl_attention_destroy(fadsl_attention *a) {
  if (!a)
    return;
  for (int i = 0; i < FADSL_ATTENTION_KERNELS; i++)
    fadsl_args_destroy(a->args[i]);
  fa_attn_extra_free(a->extra);
  fadsl_program_destroy(a->prog);
  pthread_mutex_destroy(&a->lock);
  free(a);
}

const char *fadsl_attention_last_error(const fadsl_attention *a) { return a ? a->error : "no handle (NULL)"; }

size_t fadsl_attention_workspace_bytes(int B, int H, int Nq) {
  if (B < 1 || H < 1 || Nq < 1)
    return 0;
  return (size_t)4 * (size_t)B * (size_t)H * (size_t)Nq;
}

size_t fadsl_attention_dq_accum_bytes(int B, int H, int Nq, int D) {
  if (D < 1)
    return 0;
  return fadsl_attention_workspace_bytes(B, H, Nq) * (size_t)D;
}

size_t fadsl_attention_dkv_accum_bytes(int B, int KVH, int Nkv, int D) {
  if (B < 1 || KVH < 1 || Nkv < 1 || D < 1)
    return 0;
  return (size_t)2 * 4 * (size_t)B * (size_t)KVH * (size_t)Nkv * (size_t)D;
}

/* Query heads a group needs for a program per query head: on an H100
 * (bench/results/2026-12-05-h100, runs 53 and 54) it was 1.02 to 1.53x the
 * pass with a program per kv head with 4 and 8 query heads a group (D=64
 * and 128, causal), the same at 8 without the mask, and 0.94 to 0.96x
 * with 2. */
enum { HEADS_MIN_GROUP = 4 };

int fadsl_attention_heads_preferred(int H, int KVH) {
  return KVH > 0 && H > KVH && H % KVH == 0 && H / KVH >= HEADS_MIN_GROUP;
}

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

fadsl_status fadsl_attention_set_config(fadsl_attention *a, int block_q, int block_k, int warps, int stages) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  if ((block_q == 0) != (block_k == 0))
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                "fadsl_attention_set_config: give both block_q and block_k, or neither (got %d and %d)", block_q,
                block_k);
  if (block_q && (!is_pow2(block_q) || !is_pow2(block_k) || block_q < block_k))
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                "fadsl_attention_set_config: block_q %d and block_k %d must be powers of two with block_q >= block_k "
                "(attn_fwd walks the causal diagonal in block_k steps)",
                block_q, block_k);
  if (warps < 0 || stages < 0 || (warps && !is_pow2(warps)))
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_set_config: bad warps %d or stages %d", warps,
                stages);
  pthread_mutex_lock(&a->lock);
  a->block_q = block_q;
  a->block_k = block_k;
  a->warps = warps;
  a->stages = stages;
  pthread_mutex_unlock(&a->lock);
  return FADSL_SUCCESS;
}

fadsl_status fadsl_attention_kernel_info(const fadsl_attention *a, fadsl_attention_kernel which,
                                         fadsl_kernel_info *out) {
  if (!a || !out || (int)which < 0 || which >= FADSL_ATTENTION_KERNELS)
    return FADSL_ERROR_INVALID_ARGUMENT;
  pthread_mutex_t *lock = (pthread_mutex_t *)&a->lock;   /* a launch may be updating it */
  pthread_mutex_lock(lock);
  fadsl_status st = a->launched[which] ? FADSL_SUCCESS : FADSL_ERROR_NOT_FOUND;
  if (st == FADSL_SUCCESS)
    *out = a->info[which];
  pthread_mutex_unlock(lock);
  return st;
}

/* ---- checking a call ------------------------------------------------------ */


fadsl_status fa_attn_api_check(fadsl_attention *a, const char *fn, FaAttnCall *c, fadsl_attention_dtype dtype,
                               const FaAttnNamedPtr *ptrs, int nptrs, unsigned align) {
  if (!a->prog)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "%s: the handle has no program (%s)", fn,
                            a->error[0] ? "its creation failed" : "not created");
  if (c->B < 1 || c->H < 1 || c->KVH < 1 || c->Nq < 1 || c->Nkv < 1 || c->D < 1)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                "%s: every dimension must be at least 1 (B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d)", fn, c->B, c->H, c->KVH,
                c->Nq, c->Nkv, c->D);
  if (c->D != 16 && c->D != 32 && c->D != 64 && c->D != 128 && c->D != 256)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "%s: head dimension D=%d: it must be 16, 32, 64, 128 or 256", fn,
                c->D);
  if (c->H % c->KVH)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                "%s: H=%d query heads are not a multiple of KVH=%d key/value heads", fn, c->H, c->KVH);
  if (c->causal && c->Nq != c->Nkv)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                "%s: causal attention needs Nq == Nkv (query i sees keys 0..i), got Nq=%d Nkv=%d", fn, c->Nq, c->Nkv);
  if ((int64_t)c->B * c->H > 65535)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                "%s: B * H = %lld programs along the grid's y axis; CUDA allows at most 65535", fn,
                (long long)c->B * c->H);
  /* No limit on the number of elements: attention.fa computes the offsets
   * of heads in i64 and block pointers address rows in i64. */
  if (dtype == FADSL_ATTENTION_F16)
    c->dtype = "f16";
  else if (dtype == FADSL_ATTENTION_BF16)
    c->dtype = "bf16";
  else
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "%s: unknown dtype %d (FADSL_ATTENTION_F16 or _BF16)", fn,
                (int)dtype);
  if (c->scale == 0)
    c->scale = 1.0f / sqrtf((float)c->D);
  if (!(c->scale > 0) || !isfinite(c->scale))
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "%s: scale %g: want a positive finite number (0: 1/sqrt(D))", fn,
                (double)c->scale);
  for (int i = 0; i < nptrs; i++) {
    if (!ptrs[i].ptr)
      return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "%s: %s is a null pointer", fn, ptrs[i].name);
    if (ptrs[i].ptr % align)
      return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                  "%s: %s (0x%llx) is not %u-byte aligned%s", fn, ptrs[i].name, (unsigned long long)ptrs[i].ptr,
                  align, align == 16 ? " (the kernels load 16 bytes at a time)" : "");
  }
  return FADSL_SUCCESS;
}

/* ---- binding and launching ------------------------------------------------ */
static bool has_tiles(fadsl_attention_kernel which) {
  return which == FADSL_ATTENTION_FWD || which == FADSL_ATTENTION_BWD_DKDV || which == FADSL_ATTENTION_BWD_DQ ||
         which == FADSL_ATTENTION_BWD || which == FADSL_ATTENTION_BWD_HEADS;
}

static fadsl_status no_tiles(fadsl_attention *a, const char *fn, fadsl_attention_kernel which) {
  return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                          "%s: kernel %d has no tiles (attn_fwd, attn_bwd_dkdv, attn_bwd_dq, attn_bwd and "
                          "attn_bwd_heads have)", fn, (int)which);
}

fadsl_status fadsl_attention_set_kernel_config(fadsl_attention *a, fadsl_attention_kernel which, int block_q,
                                               int block_k, int warps, int stages) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  if (!has_tiles(which))
    return no_tiles(a, "fadsl_attention_set_kernel_config", which);
  if ((block_q && !is_pow2(block_q)) || (block_k && !is_pow2(block_k)) || warps < 0 || stages < 0 ||
      (warps && !is_pow2(warps)))
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                            "fadsl_attention_set_kernel_config: %s: bad BLOCK_Q %d, BLOCK_K %d, warps %d or stages %d "
                            "(powers of two, stages > 0; 0 for not given)",
                            kernel_names[which], block_q, block_k, warps, stages);
  pthread_mutex_lock(&a->lock);
  int *own = a->own[which];
  own[0] = block_q;
  own[1] = block_k;
  own[2] = warps;
  own[3] = stages;
  pthread_mutex_unlock(&a->lock);
  return FADSL_SUCCESS;
}

fadsl_status fadsl_attention_set_kernel_launch(fadsl_attention *a, fadsl_attention_kernel which, const char *pipeline,
                                               const char *schedule) {
  static const char fn[] = "fadsl_attention_set_kernel_launch";
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  if (!has_tiles(which))
    return no_tiles(a, fn, which);
  const char *axes[2] = {"pipeline", "schedule"}, *names[2] = {pipeline, schedule};
  int v[2];
  for (int i = 0; i < 2; i++)
    if ((v[i] = fadsl_config_value(axes[i], names[i])) < 0)
      return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "%s: %s: %s '%s': want %s (NULL: not given)", fn,
                              kernel_names[which], axes[i], names[i], fadsl_config_allowed(axes[i]));
  pthread_mutex_lock(&a->lock);
  a->own_pipeline[which] = v[0];
  a->own_schedule[which] = v[1];
  pthread_mutex_unlock(&a->lock);
  return FADSL_SUCCESS;
}


/* Binds one argument, stopping at the first failure (st carries it). */
#define BIND(st, call)                                                         \
  do {                                                                         \
    if ((st) == FADSL_SUCCESS)                                                 \
      (st) = (call);                                                           \
  } while (0)

/* The arguments every kernel takes (sizes and constexprs); the runtime
 * checks each pointer against its declared extent.  `kind` selects the
 * tile rule of the kernel (see fadsl_attention_set_config). */
static fadsl_status bind_common(fadsl_attention *a, fadsl_attention_kernel which, const FaAttnCall *c) {
  fadsl_args *args = a->args[which];
  fadsl_status st = FADSL_SUCCESS;
  BIND(st, fadsl_args_set_i32(args, "n_zh", c->B * c->KVH));
  if (which == FADSL_ATTENTION_BWD_DKDV_ZERO || which == FADSL_ATTENTION_BWD_DKDV_CONVERT) {
    /* per kv head: no query sizes */
    BIND(st, fadsl_args_set_i32(args, "kv_seq_len", c->Nkv));
    BIND(st, fadsl_args_set_int(args, "d_head", c->D));
    if (which == FADSL_ATTENTION_BWD_DKDV_CONVERT)
      BIND(st, fadsl_args_set_dtype(args, "T", c->dtype));
    return st;
  }
  BIND(st, fadsl_args_set_i32(args, "q_seq_len", c->Nq));
  BIND(st, fadsl_args_set_int(args, "n_groups", c->H / c->KVH));
  BIND(st, fadsl_args_set_int(args, "d_head", c->D));
  BIND(st, fadsl_args_set_dtype(args, "T", c->dtype));
  if (which == FADSL_ATTENTION_BWD_D || which == FADSL_ATTENTION_BWD_PREP)
    return st;
  BIND(st, fadsl_args_set_f32(args, "sm_scale", c->scale));
  if (which == FADSL_ATTENTION_BWD_DQ_CONVERT)
    return st;
  BIND(st, fadsl_args_set_i32(args, "kv_seq_len", c->Nkv));
  BIND(st, fadsl_args_set_bool(args, "is_causal", c->causal));
  /* the kernel's own configuration first, then the one of every kernel:
     attn_bwd_dkdv and attn_bwd loop over queries, their key block the larger one */
  int dkdv = which == FADSL_ATTENTION_BWD_DKDV || which == FADSL_ATTENTION_BWD || which == FADSL_ATTENTION_BWD_HEADS;
  const int *own = a->own[which];
  int bq = own[0] ? own[0] : dkdv ? a->block_k : a->block_q;
  int bk = own[1] ? own[1] : dkdv ? a->block_q : a->block_k;
  int warps = own[2] ? own[2] : a->warps, stages = own[3] ? own[3] : a->stages;
  if (bq)
    BIND(st, fadsl_args_set_int(args, "BLOCK_Q", bq));
  if (bk)
    BIND(st, fadsl_args_set_int(args, "BLOCK_K", bk));
  if (warps || stages)
    BIND(st, fadsl_args_set_config(args, warps, stages));
  if (a->own_pipeline[which])
    BIND(st, fadsl_args_set_config_axis(args, "pipeline", a->own_pipeline[which]));
  if (a->own_schedule[which])
    BIND(st, fadsl_args_set_config_axis(args, "schedule", a->own_schedule[which]));
  return st;
}

/* Runs one bound kernel where the call says: launched on a stream, or on the
 * interpreter over host regions. */
static fadsl_status run(fadsl_attention *a, fadsl_attention_kernel which, fadsl_status bound,
                        const FaAttnTarget *where) {
  char what[96];
  snprintf(what, sizeof what, "binding the arguments of %s", kernel_names[which]);
  if (bound != FADSL_SUCCESS)
    return fail_rt(a, bound, what);
  fadsl_status st;
  if (where->regions) {
    fadsl_interpret_options opt;
    memset(&opt, 0, sizeof opt);
    opt.threads = where->threads;
    st = fadsl_interpret(a->kernels[which], a->args[which], where->regions, where->nregions, &opt, NULL);
    snprintf(what, sizeof what, "interpreting %s", kernel_names[which]);
    return st == FADSL_SUCCESS ? st : fail_rt(a, st, what);
  }
  fadsl_kernel_info info;
  st = fadsl_launch(a->kernels[which], a->args[which], where->stream, &info);
  if (st != FADSL_SUCCESS) {
    snprintf(what, sizeof what, "launching %s", kernel_names[which]);
    return fail_rt(a, st, what);
  }
  a->info[which] = info;
  a->launched[which] = 1;
  return FADSL_SUCCESS;
}

fadsl_status fa_attn_api_forward(fadsl_attention *a, const FaAttnTensors *t, const FaAttnCall *c,
                                 const FaAttnTarget *where) {
  pthread_mutex_lock(&a->lock);
  fadsl_args *args = a->args[FADSL_ATTENTION_FWD];
  fadsl_args_clear(args);
  fadsl_status st = bind_common(a, FADSL_ATTENTION_FWD, c);
  BIND(st, fadsl_args_set_ptr(args, "t_q", t->q));
  BIND(st, fadsl_args_set_ptr(args, "t_k", t->k));
  BIND(st, fadsl_args_set_ptr(args, "t_v", t->v));
  BIND(st, fadsl_args_set_ptr(args, "t_lse", t->lse));
  BIND(st, fadsl_args_set_ptr(args, "t_o", t->o));
  st = run(a, FADSL_ATTENTION_FWD, st, where);
  pthread_mutex_unlock(&a->lock);
  return st;
}

bool fa_attn_kernel_has(fadsl_kernel *k, const char *name) {
  int n = k ? fadsl_kernel_param_count(k) : 0;
  for (int i = 0; i < n; i++) {
    const char *p;
    fadsl_param_kind kind;
    if (fadsl_kernel_param(k, i, &p, &kind) == FADSL_SUCCESS && !strcmp(p, name))
      return true;
  }
  return false;
}

const char *fa_attn_module_text(const char *name) {
  for (int i = 0; i < fa_attention_nmodules; i++)
    if (!strcmp(fa_attention_modules[i].name, name))
      return fa_attention_modules[i].text;
  return NULL;
}

/* Before a pass's launches on the GPU: its kernels that this handle has not
 * launched yet (with their arguments bound) compiled side by side. */
static void compile_pass(fadsl_attention *a, const int *pass, const fadsl_status *bound, int n,
                         const FaAttnTarget *where, const char **cache) {
  fadsl_kernel *kernels[FADSL_ATTENTION_KERNELS] = {NULL};
  fadsl_args *args[FADSL_ATTENTION_KERNELS] = {NULL};
  for (int i = 0; i < n && !where->regions; i++)   /* the interpreter compiles nothing */
    if (bound[i] == FADSL_SUCCESS && !a->launched[pass[i]]) {
      kernels[i] = a->kernels[pass[i]];
      args[i] = a->args[pass[i]];
    }
  fa_attn_compile_together(kernels, args, n, cache);
}

/* Compiles (compile_pass) and runs the bound kernels of a pass in order,
 * stopping at the first failure. */
static fadsl_status run_pass(fadsl_attention *a, const int *pass, const fadsl_status *bound, int n,
                             const FaAttnTarget *where) {
  const char *cache[FADSL_ATTENTION_KERNELS];
  compile_pass(a, pass, bound, n, where, cache);
  fadsl_status st = FADSL_SUCCESS;
  for (int i = 0; i < n && st == FADSL_SUCCESS; i++) {
    st = run(a, (fadsl_attention_kernel)pass[i], bound[i], where);
    if (st == FADSL_SUCCESS)
      fa_attn_note_compiled(&a->info[pass[i]], cache[i]);
  }
  return st;
}

/* The kernels of a pass, bound (or the binding's failure), in order. */
typedef struct BoundPass {
  int which[FADSL_ATTENTION_KERNELS];
  fadsl_status bound[FADSL_ATTENTION_KERNELS];
  int n;
} BoundPass;

/* Kernel `which` joins the pass with its arguments cleared and the common
 * ones bound; returns its arguments for the rest. */
static fadsl_args *pass_add(fadsl_attention *a, BoundPass *p, fadsl_attention_kernel which, const FaAttnCall *c) {
  fadsl_args *args = a->args[which];
  fadsl_args_clear(args);
  p->which[p->n] = which;
  p->bound[p->n++] = bind_common(a, which, c);
  return args;
}

/* Binds one more argument of the pass's last kernel. */
#define BIND_LAST(p, call) BIND((p)->bound[(p)->n - 1], call)

/* The float32 accumulators of dK and dV (t->dkv_accum: dK's, then dV's). */
static void bind_dkdv_accum(BoundPass *p, fadsl_args *args, const FaAttnTensors *t, const FaAttnCall *c) {
  uint64_t dv = t->dkv_accum + fadsl_attention_dkv_accum_bytes(c->B, c->KVH, c->Nkv, c->D) / 2;
  BIND_LAST(p, fadsl_args_set_ptr(args, "t_dk_acc", t->dkv_accum));
  BIND_LAST(p, fadsl_args_set_ptr(args, "t_dv_acc", dv));
}

/* The fused pass: attn_bwd_prep (delta and zeros in the accumulator),
 * attn_bwd (dK, dV; dQ added into the accumulator), attn_bwd_dq_convert.
 * With heads, attn_bwd_dkdv_zero, then attn_bwd_heads in attn_bwd's place
 * (dK and dV added into t->dkv_accum as well), and attn_bwd_dkdv_convert
 * last.  The lock is held. */
static fadsl_status fused_backward(fadsl_attention *a, const FaAttnTensors *t, const FaAttnCall *c,
                                   const FaAttnTarget *where, bool fuse_delta, bool heads) {
  fadsl_attention_kernel bwd = heads ? FADSL_ATTENTION_BWD_HEADS : FADSL_ATTENTION_BWD;
  if (fuse_delta && !fa_attn_kernel_has(a->kernels[bwd], "FUSE_D"))
    return fa_attn_api_fail(a, FADSL_ERROR_UNSUPPORTED, "fuse_delta: the program's %s has no FUSE_D",
                            kernel_names[bwd]);
  BoundPass p = {.n = 0};
  fadsl_args *args = pass_add(a, &p, FADSL_ATTENTION_BWD_PREP, c);
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_o", t->o));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_do", t->do_));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_pdp", t->delta));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dq_acc", t->dq_accum));
  if (fuse_delta)
    BIND_LAST(&p, fadsl_args_set_bool(args, "WRITE_D", false));
  if (heads)
    bind_dkdv_accum(&p, pass_add(a, &p, FADSL_ATTENTION_BWD_DKDV_ZERO, c), t, c);
  args = pass_add(a, &p, bwd, c);
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_q", t->q));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_k", t->k));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_v", t->v));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_do", t->do_));
  if (heads) {
    bind_dkdv_accum(&p, args, t, c);
  } else {
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dk", t->dk));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dv", t->dv));
  }
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dq_acc", t->dq_accum));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_lse", t->lse));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_pdp", t->delta));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_o", t->o));
  if (fuse_delta)
    BIND_LAST(&p, fadsl_args_set_bool(args, "FUSE_D", true));
  args = pass_add(a, &p, FADSL_ATTENTION_BWD_DQ_CONVERT, c);
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dq_acc", t->dq_accum));
  BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dq", t->dq));
  if (heads) {
    args = pass_add(a, &p, FADSL_ATTENTION_BWD_DKDV_CONVERT, c);
    bind_dkdv_accum(&p, args, t, c);
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dk", t->dk));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dv", t->dv));
  }
  return run_pass(a, p.which, p.bound, p.n, where);
}

static bool has_fused(const fadsl_attention *a) {
  return a->kernels[FADSL_ATTENTION_BWD_PREP] && a->kernels[FADSL_ATTENTION_BWD] &&
         a->kernels[FADSL_ATTENTION_BWD_DQ_CONVERT];
}

/* The fused pass with a program per query head: asked for (dkv_accum), of
 * use (grouped queries) and in the program. */
static bool use_heads(const fadsl_attention *a, const FaAttnTensors *t, const FaAttnCall *c) {
  return t->dkv_accum && c->H > c->KVH && a->kernels[FADSL_ATTENTION_BWD_DKDV_ZERO] &&
         a->kernels[FADSL_ATTENTION_BWD_HEADS] && a->kernels[FADSL_ATTENTION_BWD_DKDV_CONVERT];
}

fadsl_status fa_attn_api_backward(fadsl_attention *a, const FaAttnTensors *t, const FaAttnCall *c,
                                  const FaAttnTarget *where, int delta_given, const FaAttnBwdMode *mode) {
  pthread_mutex_lock(&a->lock);
  fadsl_status st = FADSL_SUCCESS;
  fadsl_args *args;
  if (t->dq_accum && !delta_given && !(mode && mode->deterministic) && has_fused(a)) {
    st = fused_backward(a, t, c, where, mode && mode->fuse_delta, use_heads(a, t, c));
    pthread_mutex_unlock(&a->lock);
    return st;
  }
  if (mode && mode->fuse_delta) {
    pthread_mutex_unlock(&a->lock);
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                            "fuse_delta is for the fused backward pass, which %s",
                            mode->deterministic ? "a deterministic call does not run"
                            : !has_fused(a)     ? "the program does not have"
                                                : "needs dq_accum");
  }
  BoundPass p = {.n = 0};
  if (!delta_given) {
    /* delta = rowsum(dO * O) */
    args = pass_add(a, &p, FADSL_ATTENTION_BWD_D, c);
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_o", t->o));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_do", t->do_));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_pdp", t->delta));
  }
  /* dK and dV, then dQ: both read q, k, v, dO, lse and delta */
  for (int which = FADSL_ATTENTION_BWD_DKDV; which <= FADSL_ATTENTION_BWD_DQ; which++) {
    args = pass_add(a, &p, (fadsl_attention_kernel)which, c);
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_q", t->q));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_k", t->k));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_v", t->v));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_do", t->do_));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_lse", t->lse));
    BIND_LAST(&p, fadsl_args_set_ptr(args, "t_pdp", t->delta));
    if (which == FADSL_ATTENTION_BWD_DKDV) {
      BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dk", t->dk));
      BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dv", t->dv));
    } else {
      BIND_LAST(&p, fadsl_args_set_ptr(args, "t_dq", t->dq));
    }
  }
  st = run_pass(a, p.which, p.bound, p.n, where);
  pthread_mutex_unlock(&a->lock);
  return st;
}

fadsl_status fadsl_attention_forward(fadsl_attention *a, uint64_t q, uint64_t k, uint64_t v, uint64_t o,
                                     uint64_t lse, int B, int H, int KVH, int Nq, int Nkv, int D, int causal,
                                     float scale, fadsl_attention_dtype dtype, void *stream) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, causal != 0, scale, NULL};
  FaAttnNamedPtr ptrs[] = {{"q", q}, {"k", k}, {"v", v}, {"o", o}, {"lse", lse}};
  fadsl_status st = fa_attn_api_check(a, "fadsl_attention_forward", &c, dtype, ptrs, 5, 16);
  if (st != FADSL_SUCCESS)
    return st;
  FaAttnTensors t = {q, k, v, o, lse, 0, 0, 0, 0, 0, 0, 0};
  FaAttnTarget where = {stream, NULL, 0, 0};
  return fa_attn_api_forward(a, &t, &c, &where);
}

fadsl_status fadsl_attention_backward(fadsl_attention *a, uint64_t q, uint64_t k, uint64_t v, uint64_t o,
                                      uint64_t lse, uint64_t do_, uint64_t dq, uint64_t dk, uint64_t dv,
                                      uint64_t delta, int B, int H, int KVH, int Nq, int Nkv, int D, int causal,
                                      float scale, fadsl_attention_dtype dtype, void *stream) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, causal != 0, scale, NULL};
  FaAttnNamedPtr ptrs[] = {{"q", q},   {"k", k},   {"v", v},   {"o", o},   {"lse", lse},
                           {"do", do_}, {"dq", dq}, {"dk", dk}, {"dv", dv}, {"delta", delta}};
  fadsl_status st = fa_attn_api_check(a, "fadsl_attention_backward", &c, dtype, ptrs, 10, 16);
  if (st != FADSL_SUCCESS)
    return st;
  FaAttnTensors t = {q, k, v, o, lse, do_, dq, dk, dv, delta, 0, 0};
  FaAttnTarget where = {stream, NULL, 0, 0};
  return fa_attn_api_backward(a, &t, &c, &where, 0, NULL);
}

/* fadsl_attention_backward_ex without a variant (attention_variants.c):
 * the plain program, fused when opts->dq_accum is given. */
fadsl_status fa_attn_api_backward_plain(fadsl_attention *a, const fadsl_attention_options *opts, uint64_t q,
                                        uint64_t k, uint64_t v, uint64_t o, uint64_t lse, uint64_t do_, uint64_t dq,
                                        uint64_t dk, uint64_t dv, uint64_t delta, int B, int H, int KVH, int Nq,
                                        int Nkv, int D, float scale, fadsl_attention_dtype dtype, void *stream) {
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, opts->causal != 0, scale, NULL};
  FaAttnNamedPtr ptrs[12] = {{"q", q},   {"k", k},   {"v", v},   {"o", o},         {"lse", lse}, {"do", do_},
                             {"dq", dq}, {"dk", dk}, {"dv", dv}, {"delta", delta}};
  int nptrs = 10;
  if (opts->dq_accum)
    ptrs[nptrs++] = (FaAttnNamedPtr){"dq_accum", opts->dq_accum};
  if (opts->dkv_accum)
    ptrs[nptrs++] = (FaAttnNamedPtr){"dkv_accum", opts->dkv_accum};
  fadsl_status st = fa_attn_api_check(a, "fadsl_attention_backward_ex", &c, dtype, ptrs, nptrs, 16);
  if (st != FADSL_SUCCESS)
    return st;
  FaAttnTensors t = {q, k, v, o, lse, do_, dq, dk, dv, delta, opts->dq_accum, opts->dkv_accum};
  FaAttnTarget where = {stream, NULL, 0, 0};
  FaAttnBwdMode mode = {opts->deterministic != 0, opts->fuse_delta != 0};
  return fa_attn_api_backward(a, &t, &c, &where, 0, &mode);
}
