/* attn_interp.c - attention.fa's kernels run on the CPU interpreter (see
 * attn_interp.h).  Each kernel is specialised for the shape at hand and its
 * parameters are bound by name, from the names attention.fa uses. */
#include "attn_interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interp.h"

#ifndef FADSL_ATTENTION_SRC
#define FADSL_ATTENTION_SRC "examples/attention/attention.fa"
#endif
#ifndef FADSL_ATTENTION_DATA
#define FADSL_ATTENTION_DATA "/usr/local/share/fadsl/attention.fa"
#endif
const char *fa_attn_find_program(const char *override) {
  if (override)
    return override;
  const char *env = getenv("FADSL_ATTENTION_PROGRAM");
  if (env && *env)
    return env;
  if (access(FADSL_ATTENTION_SRC, R_OK) == 0)
    return FADSL_ATTENTION_SRC;
  if (access(FADSL_ATTENTION_DATA, R_OK) == 0)
    return FADSL_ATTENTION_DATA;
  fprintf(stderr, "fadsl: attention.fa not found (looked for %s and %s); give its path with --program\n",
          FADSL_ATTENTION_SRC, FADSL_ATTENTION_DATA);
  return NULL;
}

const char *fa_attn_find_sibling(const char *override, const char *file, char *buf, size_t len) {
  if (override)
    return override;
  const char *plain = fa_attn_find_program(NULL);
  if (!plain)
    return NULL;
  const char *slash = strrchr(plain, '/');
  int dir = slash ? (int)(slash - plain + 1) : 0;
  if ((size_t)snprintf(buf, len, "%.*s%s", dir, plain, file) >= len) {
    fprintf(stderr, "fadsl: the path of %s beside %s is too long\n", file, plain);
    return NULL;
  }
  if (access(buf, R_OK) == 0)
    return buf;
  fprintf(stderr, "fadsl: %s not found beside %s (%s); give its path with --program\n", file, plain, buf);
  return NULL;
}

bool fa_attn_open(FaAttnRunner *r, FaCompiler *fc, const char *path, int block_q, int block_k, int threads) {
  memset(r, 0, sizeof *r);
  r->fc = fc;
  r->block_q = block_q;
  r->block_k = block_k;
  r->threads = threads;
  Source *src = fa_source_read(fc, path);
  Node *mod = src ? fa_parse(fc, src) : NULL;
  r->prog = mod ? fa_program_check(fc, mod) : NULL;
  return r->prog != NULL;
}

static bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

bool fa_attn_shape_ok(const FaAttnShape *s, bool backward, char *why, size_t whylen) {
  (void)backward;   /* the backward kernels take every shape the forward one does */
  if (s->B < 1 || s->H < 1 || s->KVH < 1 || s->Nq < 1 || s->Nkv < 1 || s->D < 1) {
    snprintf(why, whylen, "every dimension must be at least 1 (B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d)", s->B, s->H,
             s->KVH, s->Nq, s->Nkv, s->D);
    return false;
  }
  if (s->H % s->KVH) {
    snprintf(why, whylen, "the %d query heads must be a multiple of the %d key/value heads", s->H, s->KVH);
    return false;
  }
  if (!is_pow2(s->D) || s->D < 16 || s->D > 256) {
    snprintf(why, whylen, "head dimension %d: the kernels take D in {16, 32, 64, 128, 256}", s->D);
    return false;
  }
  if (s->causal && s->Nq != s->Nkv) {
    snprintf(why, whylen, "causal attention needs as many queries as keys (Nq = %d, Nkv = %d): query i sees keys 0..i",
             s->Nq, s->Nkv);
    return false;
  }
  return true;
}

/* ---- running one kernel ------------------------------------------------------ */

enum { MAX_ARGS = 40, MAX_CONSTS = 16 };

typedef struct KArg {
  const char *name;
  DType dtype;          /* buffer element dtype; DT_VOID for scalars */
  void *data;
  int64_t count;
  FaHostValue value;    /* scalars */
} KArg;

static KArg buf_arg(const char *name, DType dt, const void *data, int64_t count) {
  KArg a = {name, dt, (void *)data, count, {DT_VOID, 0, 0}};
  return a;
}

static KArg int_arg(const char *name, int64_t v) {
  KArg a = {name, DT_VOID, NULL, 0, fa_host_int(DT_I64, v)};
  return a;
}

static KArg float_arg(const char *name, double v) {
  KArg a = {name, DT_VOID, NULL, 0, fa_host_float(DT_F64, v)};
  return a;
}

static FaConst const_int(int64_t v) {
  FaConst c = {CK_INT, v, 0, DT_VOID, NULL};
  return c;
}

/* Specialises `kernel` on the constexprs it declares among `consts`, binds
 * its runtime parameters from `args` by name and runs it. */
static bool run_kernel(FaAttnRunner *r, const char *kernel, const FaBinding *consts, int nconsts, const KArg *args,
                       int nargs) {
  FaCompiler *fc = r->fc;
  const FaKernelInfo *k = fa_program_kernel(r->prog, kernel);
  if (!k) {
    fa_error(&fc->diag, fa_noloc(), "the attention program has no kernel '%s'", kernel);
    return false;
  }
  FaBinding binds[MAX_CONSTS];
  int nb = 0;
  for (int i = 0; i < nconsts && nb < MAX_CONSTS; i++)
    for (int p = 0; p < k->nparams; p++)
      if (k->params[p].kind == PARAM_CONSTEXPR && !strcmp(k->params[p].name, consts[i].name))
        binds[nb++] = consts[i];
  FaLaunchConfig cfg = {.warps = 4, .stages = 2};
  IrKernel *ik = fa_specialize(fc, r->prog, k, binds, nb, cfg);
  if (!ik)
    return false;
  FaInterp *in = fa_interp_new(fc, ik);
  if (!in)
    return false;
  bool ok = true;
  const IrFunction *fn = ik->device;
  for (int p = 0; p < fn->nparams && ok; p++) {
    const KArg *a = NULL;
    for (int i = 0; i < nargs; i++)
      if (!strcmp(args[i].name, fn->params[p].name))
        a = &args[i];
    if (!a) {
      fa_error(&fc->diag, fn->params[p].value->loc, "no value for parameter '%s' of kernel '%s'", fn->params[p].name,
               kernel);
      ok = false;
    } else if (a->data) {
      ok = fa_interp_bind_buffer(in, p, a->dtype, a->data, a->count);
    } else {
      ok = fa_interp_bind_scalar(in, p, a->value);
    }
  }
  FaInterpOptions opt = {r->threads, NULL};
  if (ok)
    ok = fa_interp_run(in, &opt);
  fa_interp_free(in);
  return ok;
}

/* ---- the arguments of a run ------------------------------------------------------ */

/* Everything the kernels of attention.fa and of its variants may take, by
 * name: each kernel binds the constexprs it declares and must find every
 * runtime parameter it has here. */
typedef struct RunArgs {
  KArg a[MAX_ARGS];
  int na;
  FaBinding c[MAX_CONSTS];
  int nc;
  float *zeros_h;                 /* [H] zeros: the slopes or sinks a kernel takes but the run does not use */
  int32_t cu_q[2], cu_k[2];       /* one sequence, for a kernel with packed-layout parameters on padded inputs */
} RunArgs;

static void add_arg(RunArgs *ra, KArg a) {
  if (ra->na < MAX_ARGS)
    ra->a[ra->na++] = a;
}

static void add_const(RunArgs *ra, const char *name, FaConst v) {
  if (ra->nc < MAX_CONSTS) {
    ra->c[ra->nc].name = name;
    ra->c[ra->nc++].value = v;
  }
}

static FaConst const_bool(bool b) {
  FaConst c = {CK_BOOL, b, 0, DT_VOID, NULL};
  return c;
}

static int64_t nq_elems(const FaAttnShape *s) { return (int64_t)s->B * s->H * s->Nq * s->D; }
static int64_t nkv_elems(const FaAttnShape *s) { return (int64_t)s->B * s->KVH * s->Nkv * s->D; }
static int64_t nrows(const FaAttnShape *s) { return (int64_t)s->B * s->H * s->Nq; }

static bool kernel_has(const FaKernelInfo *k, const char *name) {
  for (int p = 0; k && p < k->nparams; p++)
    if (!strcmp(k->params[p].name, name))
      return true;
  return false;
}

static int max_len(const int32_t *cu, int n) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (cu[i + 1] - cu[i] > m)
      m = cu[i + 1] - cu[i];
  return m;
}

/* The constexprs and the variant's arguments (flags, window, softcap,
 * slopes, sinks, packed offsets), for the kernels of `r`'s program. */
static bool variant_args(FaAttnRunner *r, const FaAttnShape *s, const FaAttnVariant *v, DType dtype, int bq, int bk,
                         RunArgs *ra) {
  const FaKernelInfo *fwd = fa_program_kernel(r->prog, "attn_fwd");
  bool has_causal = kernel_has(fwd, "is_causal"), has_window = kernel_has(fwd, "window_left");
  int left, right;
  bool window = fa_attn_variant_window(v, s, &left, &right);
  if (has_causal && v && v->window)
    right = v->window_right;   /* the kernel applies is_causal itself */
  const char *missing = NULL;
  if (s->causal && !has_causal && !has_window)
    missing = "causal attention (is_causal or window_left/window_right)";
  else if (v && v->window && !has_window)
    missing = "a window (window_left, window_right)";
  else if (v && v->softcap > 0 && !kernel_has(fwd, "softcap"))
    missing = "softcap";
  else if (v && v->alibi && !kernel_has(fwd, "t_alibi"))
    missing = "ALiBi slopes (t_alibi)";
  else if (v && v->sinks && !kernel_has(fwd, "t_sinks"))
    missing = "attention sinks (t_sinks)";
  else if (v && v->cu_seqlens_q && !kernel_has(fwd, "t_cu_seqlens_q"))
    missing = "packed sequences (t_cu_seqlens_q)";
  if (missing) {
    fa_error(&r->fc->diag, fa_noloc(), "the attention program's attn_fwd has no parameters for %s", missing);
    return false;
  }
  add_const(ra, "n_groups", const_int(s->H / s->KVH));
  add_const(ra, "d_head", const_int(s->D));
  add_const(ra, "is_causal", const_bool(s->causal));
  FaConst t = {CK_DTYPE, 0, 0, dtype, NULL};
  add_const(ra, "T", t);
  add_const(ra, "BLOCK_Q", const_int(bq));
  add_const(ra, "BLOCK_K", const_int(bk));
  /* the flags of a program that has every variant behind constexprs */
  add_const(ra, "HAS_WINDOW", const_bool(window && !has_causal));
  add_const(ra, "HAS_SOFTCAP", const_bool(v && v->softcap > 0));
  add_const(ra, "HAS_ALIBI", const_bool(v && v->alibi));
  add_const(ra, "HAS_SINKS", const_bool(v && v->sinks));
  add_const(ra, "VARLEN", const_bool(v && v->cu_seqlens_q));
  add_arg(ra, int_arg("window_left", has_causal && !(v && v->window) ? -1 : left));
  add_arg(ra, int_arg("window_right", has_causal && !(v && v->window) ? -1 : right));
  add_arg(ra, float_arg("softcap", v && v->softcap > 0 ? v->softcap : 1.0));
  add_arg(ra, int_arg("n_heads", s->H));
  ra->zeros_h = calloc((size_t)s->H, sizeof *ra->zeros_h);
  if (!ra->zeros_h)
    return false;
  add_arg(ra, buf_arg("t_alibi", DT_F32, v && v->alibi ? v->alibi : ra->zeros_h, s->H));
  add_arg(ra, buf_arg("t_sinks", DT_F32, v && v->sinks ? v->sinks : ra->zeros_h, s->H));
  const int32_t *cq = ra->cu_q, *ck = ra->cu_k;
  int nseq = 1;
  ra->cu_q[0] = ra->cu_k[0] = 0;
  ra->cu_q[1] = s->Nq;
  ra->cu_k[1] = s->Nkv;
  if (v && v->cu_seqlens_q) {
    cq = v->cu_seqlens_q;
    ck = v->cu_seqlens_k ? v->cu_seqlens_k : v->cu_seqlens_q;
    nseq = v->nseq;
  }
  add_arg(ra, buf_arg("t_cu_seqlens_q", DT_I32, cq, nseq + 1));
  add_arg(ra, buf_arg("t_cu_seqlens_k", DT_I32, ck, nseq + 1));
  add_arg(ra, int_arg("n_seqs", nseq));
  add_arg(ra, int_arg("max_seqlen_q", max_len(cq, nseq)));
  add_arg(ra, int_arg("max_seqlen_k", max_len(ck, nseq)));
  return true;
}

static void free_args(RunArgs *ra) { free(ra->zeros_h); }

/* Whether the program's kernels can take this shape and variant. */
static bool variant_shape_ok(FaAttnRunner *r, const FaAttnShape *s, const FaAttnVariant *v) {
  char why[300];
  if (!fa_attn_variant_ok(v, s, why, sizeof why)) {
    fa_error(&r->fc->diag, fa_noloc(), "%s", why);
    return false;
  }
  return true;
}

bool fa_attn_forward_variant(FaAttnRunner *r, const FaAttnShape *s, const FaAttnVariant *var, DType dtype,
                             const void *q, const void *k, const void *v, void *o, float *lse2) {
  RunArgs ra;
  memset(&ra, 0, sizeof ra);
  bool ok = variant_shape_ok(r, s, var) && variant_args(r, s, var, dtype, r->block_q, r->block_k, &ra);
  if (ok) {
    add_arg(&ra, buf_arg("t_q", dtype, q, nq_elems(s)));
    add_arg(&ra, buf_arg("t_k", dtype, k, nkv_elems(s)));
    add_arg(&ra, buf_arg("t_v", dtype, v, nkv_elems(s)));
    add_arg(&ra, float_arg("sm_scale", s->scale));
    add_arg(&ra, buf_arg("t_lse", DT_F32, lse2, nrows(s)));
    add_arg(&ra, buf_arg("t_o", dtype, o, nq_elems(s)));
    add_arg(&ra, int_arg("n_zh", (int64_t)s->B * s->KVH));
    add_arg(&ra, int_arg("q_seq_len", s->Nq));
    add_arg(&ra, int_arg("kv_seq_len", s->Nkv));
    ok = run_kernel(r, "attn_fwd", ra.c, ra.nc, ra.a, ra.na);
  }
  free_args(&ra);
  return ok;
}

bool fa_attn_forward(FaAttnRunner *r, const FaAttnShape *s, DType dtype, const void *q, const void *k, const void *v,
                     void *o, float *lse2) {
  return fa_attn_forward_variant(r, s, NULL, dtype, q, k, v, o, lse2);
}

/* The tile sizes a kernel takes: dK/dV loops over queries, so its key block
 * is the larger one; attn_bwd_d keeps its own default. */
static void set_tiles(RunArgs *ra, int bq, int bk) {
  for (int i = 0; i < ra->nc; i++) {
    if (!strcmp(ra->c[i].name, "BLOCK_Q"))
      ra->c[i].value = const_int(bq);
    else if (!strcmp(ra->c[i].name, "BLOCK_K"))
      ra->c[i].value = const_int(bk);
  }
}

static void drop_tiles(RunArgs *ra) {
  int n = 0;
  for (int i = 0; i < ra->nc; i++)
    if (strcmp(ra->c[i].name, "BLOCK_Q") && strcmp(ra->c[i].name, "BLOCK_K"))
      ra->c[n++] = ra->c[i];
  ra->nc = n;
}

/* Whether the program has the fused backward pass's three kernels. */
static bool has_fused_backward(const FaAttnRunner *r) {
  return fa_program_kernel(r->prog, "attn_bwd_prep") && fa_program_kernel(r->prog, "attn_bwd") &&
         fa_program_kernel(r->prog, "attn_bwd_dq_convert");
}

/* The fused pass: attn_bwd_prep (D and zeros in the float32 accumulator),
 * attn_bwd (dK, dV, and dQ added into the accumulator), attn_bwd_dq_convert.
 * With r->heads and grouped queries (as the library: H > KVH),
 * attn_bwd_dkdv_zero, attn_bwd_heads (dK and dV added into float32
 * accumulators too, a program per query head) and attn_bwd_dkdv_convert in
 * attn_bwd's place. */
static bool run_fused_backward(FaAttnRunner *r, const FaAttnShape *s, RunArgs *ra, int small, int large) {
  bool heads = r->heads && s->H > s->KVH;
  const char *bwd = heads ? "attn_bwd_heads" : "attn_bwd";
  if (heads && (!fa_program_kernel(r->prog, "attn_bwd_heads") || !fa_program_kernel(r->prog, "attn_bwd_dkdv_zero") ||
                   !fa_program_kernel(r->prog, "attn_bwd_dkdv_convert"))) {
    fa_error(&r->fc->diag, fa_noloc(),
             "the attention program has no attn_bwd_heads, attn_bwd_dkdv_zero and attn_bwd_dkdv_convert");
    return false;
  }
  if (r->fuse_delta && !kernel_has(fa_program_kernel(r->prog, bwd), "FUSE_D")) {
    fa_error(&r->fc->diag, fa_noloc(), "the attention program's %s has no FUSE_D: it cannot compute D itself", bwd);
    return false;
  }
  /* the accumulators, poisoned: the kernels that zero them must reach every element */
  int64_t nacc = nq_elems(s) + (heads ? 2 * nkv_elems(s) : 0);
  float *acc = malloc((size_t)nacc * sizeof *acc);
  if (!acc) {
    fa_error(&r->fc->diag, fa_noloc(), "out of memory");
    return false;
  }
  for (int64_t i = 0; i < nacc; i++)
    acc[i] = NAN;
  RunArgs a = *ra;
  add_arg(&a, buf_arg("t_dq_acc", DT_F32, acc, nq_elems(s)));
  if (heads) {
    add_arg(&a, buf_arg("t_dk_acc", DT_F32, acc + nq_elems(s), nkv_elems(s)));
    add_arg(&a, buf_arg("t_dv_acc", DT_F32, acc + nq_elems(s) + nkv_elems(s), nkv_elems(s)));
  }
  add_const(&a, "WRITE_D", const_bool(!r->fuse_delta));
  add_const(&a, "FUSE_D", const_bool(r->fuse_delta));
  RunArgs d = a;
  drop_tiles(&d);
  bool ok = run_kernel(r, "attn_bwd_prep", d.c, d.nc, d.a, d.na);
  ok = ok && (!heads || run_kernel(r, "attn_bwd_dkdv_zero", d.c, d.nc, d.a, d.na));
  if (ok) {
    set_tiles(&a, small, large);
    ok = run_kernel(r, bwd, a.c, a.nc, a.a, a.na);
  }
  ok = ok && run_kernel(r, "attn_bwd_dq_convert", d.c, d.nc, d.a, d.na);
  ok = ok && (!heads || run_kernel(r, "attn_bwd_dkdv_convert", d.c, d.nc, d.a, d.na));
  free(acc);
  return ok;
}

bool fa_attn_backward_variant(FaAttnRunner *r, const FaAttnShape *s, const FaAttnVariant *var, DType dtype,
                              const void *q, const void *k, const void *v, const void *o, const void *dO,
                              const float *lse2, void *dq, void *dk, void *dv, float *dsinks) {
  float *pdp = malloc((size_t)nrows(s) * sizeof *pdp);
  float *dsinks_work = calloc((size_t)s->H, sizeof *dsinks_work);
  RunArgs ra;
  memset(&ra, 0, sizeof ra);
  bool ok = pdp && dsinks_work;
  if (!ok)
    fa_error(&r->fc->diag, fa_noloc(), "out of memory");
  for (int64_t i = 0; ok && i < nrows(s); i++)
    pdp[i] = NAN;   /* every row must be written by attn_bwd_d */
  ok = ok && variant_shape_ok(r, s, var) && variant_args(r, s, var, dtype, r->block_q, r->block_k, &ra);
  bool fused = !r->deterministic && has_fused_backward(r);
  r->ran_fused = fused;
  r->ran_heads = fused && r->heads && s->H > s->KVH;
  if (ok && var && var->sinks && dsinks &&
      !kernel_has(fa_program_kernel(r->prog, fused ? "attn_bwd_prep" : "attn_bwd_d"), "t_dsinks")) {
    fa_error(&r->fc->diag, fa_noloc(), "the attention program's %s has no t_dsinks: it cannot give the "
                                       "sinks' gradient", fused ? "attn_bwd_prep" : "attn_bwd_d");
    ok = false;
  }
  if (ok) {
    add_arg(&ra, buf_arg("t_q", dtype, q, nq_elems(s)));
    add_arg(&ra, buf_arg("t_k", dtype, k, nkv_elems(s)));
    add_arg(&ra, buf_arg("t_v", dtype, v, nkv_elems(s)));
    add_arg(&ra, float_arg("sm_scale", s->scale));
    add_arg(&ra, buf_arg("t_o", dtype, o, nq_elems(s)));
    add_arg(&ra, buf_arg("t_do", dtype, dO, nq_elems(s)));
    add_arg(&ra, buf_arg("t_dq", dtype, dq, nq_elems(s)));
    add_arg(&ra, buf_arg("t_dk", dtype, dk, nkv_elems(s)));
    add_arg(&ra, buf_arg("t_dv", dtype, dv, nkv_elems(s)));
    add_arg(&ra, buf_arg("t_lse", DT_F32, lse2, nrows(s)));
    add_arg(&ra, buf_arg("t_pdp", DT_F32, pdp, nrows(s)));
    add_arg(&ra, buf_arg("t_dsinks", DT_F32, dsinks_work, s->H));
    add_arg(&ra, int_arg("n_zh", (int64_t)s->B * s->KVH));
    add_arg(&ra, int_arg("q_seq_len", s->Nq));
    add_arg(&ra, int_arg("kv_seq_len", s->Nkv));
  }
  int small = r->block_q < r->block_k ? r->block_q : r->block_k;
  int large = r->block_q < r->block_k ? r->block_k : r->block_q;
  if (ok && fused) {
    ok = run_fused_backward(r, s, &ra, small, large);
  } else if (ok) {
    RunArgs d = ra;
    drop_tiles(&d);
    ok = run_kernel(r, "attn_bwd_d", d.c, d.nc, d.a, d.na);
    if (ok) {
      set_tiles(&ra, small, large);
      ok = run_kernel(r, "attn_bwd_dkdv", ra.c, ra.nc, ra.a, ra.na);
    }
    if (ok) {
      set_tiles(&ra, large, small);
      ok = run_kernel(r, "attn_bwd_dq", ra.c, ra.nc, ra.a, ra.na);
    }
  }
  if (ok && dsinks)
    memcpy(dsinks, dsinks_work, (size_t)s->H * sizeof *dsinks);
  free_args(&ra);
  free(pdp);
  free(dsinks_work);
  return ok;
}

bool fa_attn_backward(FaAttnRunner *r, const FaAttnShape *s, DType dtype, const void *q, const void *k,
                      const void *v, const void *o, const void *dO, const float *lse2, void *dq, void *dk, void *dv) {
  return fa_attn_backward_variant(r, s, NULL, dtype, q, k, v, o, dO, lse2, dq, dk, dv, NULL);
}

/* ---- decoding from a paged KV cache (decode.fa) ------------------------------------- */

#include "attn_decode.h"

bool fa_decode_run(FaAttnRunner *r, const FaDecodeShape *s, const FaDecodeData *d, int num_splits, int block_k,
                   void *o, float *lse2) {
  int rows = fa_decode_rows(s), splits_pow2 = 1;
  while (splits_pow2 < num_splits)
    splits_pow2 *= 2;
  int64_t nq = (int64_t)s->B * s->Sq * s->H * s->D, ncache = (int64_t)s->num_blocks * s->page_size * s->KVH * s->D;
  int64_t nparts = (int64_t)s->B * s->KVH * num_splits * rows;
  float *lse_part = malloc((size_t)nparts * sizeof *lse_part);
  float *o_part = malloc((size_t)nparts * (size_t)s->D * sizeof *o_part);
  if (!lse_part || !o_part) {
    free(lse_part);
    free(o_part);
    fa_error(&r->fc->diag, fa_noloc(), "out of memory");
    return false;
  }
  for (int64_t i = 0; i < nparts; i++)
    lse_part[i] = NAN;   /* every part must be written by attn_decode_split */
  RunArgs ra;
  memset(&ra, 0, sizeof ra);
  add_const(&ra, "n_groups", const_int(s->H / s->KVH));
  add_const(&ra, "d_head", const_int(s->D));
  add_const(&ra, "page_size", const_int(s->page_size));
  add_const(&ra, "is_causal", const_bool(s->causal));
  FaConst t = {CK_DTYPE, 0, 0, d->dtype, NULL};
  add_const(&ra, "T", t);
  add_const(&ra, "ROWS", const_int(rows));
  add_const(&ra, "SPLITS", const_int(splits_pow2));
  /* key blocks within a page: the kernel's default point, 64 keys, or the page */
  add_const(&ra, "BLOCK_K", const_int(block_k ? block_k : s->page_size < 64 ? s->page_size : 64));
  add_arg(&ra, buf_arg("t_q", d->dtype, d->q, nq));
  add_arg(&ra, buf_arg("t_k_cache", d->dtype, d->k_cache, ncache));
  add_arg(&ra, buf_arg("t_v_cache", d->dtype, d->v_cache, ncache));
  add_arg(&ra, buf_arg("t_block_table", DT_I32, d->block_table, (int64_t)s->B * s->max_blocks));
  add_arg(&ra, buf_arg("t_cache_seqlens", DT_I32, d->cache_seqlens, s->B));
  add_arg(&ra, float_arg("sm_scale", s->scale));
  add_arg(&ra, buf_arg("t_o_part", DT_F32, o_part, nparts * s->D));
  add_arg(&ra, buf_arg("t_lse_part", DT_F32, lse_part, nparts));
  add_arg(&ra, buf_arg("t_o", d->dtype, o, nq));
  add_arg(&ra, buf_arg("t_lse", DT_F32, lse2, (int64_t)s->B * s->H * s->Sq));
  add_arg(&ra, int_arg("batch", s->B));
  add_arg(&ra, int_arg("q_len", s->Sq));
  add_arg(&ra, int_arg("n_kv_heads", s->KVH));
  add_arg(&ra, int_arg("num_blocks", s->num_blocks));
  add_arg(&ra, int_arg("max_blocks", s->max_blocks));
  add_arg(&ra, int_arg("num_splits", num_splits));
  bool ok = run_kernel(r, "attn_decode_split", ra.c, ra.nc, ra.a, ra.na) &&
            run_kernel(r, "attn_decode_combine", ra.c, ra.nc, ra.a, ra.na);
  free(lse_part);
  free(o_part);
  return ok;
}
