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
  FaBinding binds[16];
  int nb = 0;
  for (int i = 0; i < nconsts && nb < 16; i++)
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

/* The constexprs every attention kernel draws from. */
static int attn_consts(const FaAttnShape *s, DType dtype, int bq, int bk, FaBinding *b) {
  int n = 0;
  b[n].name = "n_groups";
  b[n++].value = const_int(s->H / s->KVH);
  b[n].name = "d_head";
  b[n++].value = const_int(s->D);
  b[n].name = "is_causal";
  b[n].value = const_int(s->causal);
  b[n++].value.kind = CK_BOOL;
  b[n].name = "T";
  b[n].value.kind = CK_DTYPE;
  b[n++].value.dtype = dtype;
  b[n].name = "BLOCK_Q";
  b[n++].value = const_int(bq);
  b[n].name = "BLOCK_K";
  b[n++].value = const_int(bk);
  return n;
}

static int64_t nq_elems(const FaAttnShape *s) { return (int64_t)s->B * s->H * s->Nq * s->D; }
static int64_t nkv_elems(const FaAttnShape *s) { return (int64_t)s->B * s->KVH * s->Nkv * s->D; }
static int64_t nrows(const FaAttnShape *s) { return (int64_t)s->B * s->H * s->Nq; }

bool fa_attn_forward(FaAttnRunner *r, const FaAttnShape *s, DType dtype, const void *q, const void *k, const void *v,
                     void *o, float *lse2) {
  FaBinding c[8];
  int nc = attn_consts(s, dtype, r->block_q, r->block_k, c);
  KArg a[] = {
      buf_arg("t_q", dtype, q, nq_elems(s)),       buf_arg("t_k", dtype, k, nkv_elems(s)),
      buf_arg("t_v", dtype, v, nkv_elems(s)),      float_arg("sm_scale", s->scale),
      buf_arg("t_lse", DT_F32, lse2, nrows(s)),    buf_arg("t_o", dtype, o, nq_elems(s)),
      int_arg("n_zh", (int64_t)s->B * s->KVH),     int_arg("q_seq_len", s->Nq),
      int_arg("kv_seq_len", s->Nkv),
  };
  return run_kernel(r, "attn_fwd", c, nc, a, FA_ARRAY_LEN(a));
}

bool fa_attn_backward(FaAttnRunner *r, const FaAttnShape *s, DType dtype, const void *q, const void *k,
                      const void *v, const void *o, const void *dO, const float *lse2, void *dq, void *dk, void *dv) {
  float *pdp = malloc((size_t)nrows(s) * sizeof *pdp);
  if (!pdp) {
    fa_error(&r->fc->diag, fa_noloc(), "out of memory");
    return false;
  }
  for (int64_t i = 0; i < nrows(s); i++)
    pdp[i] = NAN;   /* every row must be written by attn_bwd_d */
  FaBinding c[8];
  KArg a[] = {
      buf_arg("t_q", dtype, q, nq_elems(s)),        buf_arg("t_k", dtype, k, nkv_elems(s)),
      buf_arg("t_v", dtype, v, nkv_elems(s)),       float_arg("sm_scale", s->scale),
      buf_arg("t_o", dtype, o, nq_elems(s)),        buf_arg("t_do", dtype, dO, nq_elems(s)),
      buf_arg("t_dq", dtype, dq, nq_elems(s)),      buf_arg("t_dk", dtype, dk, nkv_elems(s)),
      buf_arg("t_dv", dtype, dv, nkv_elems(s)),     buf_arg("t_lse", DT_F32, lse2, nrows(s)),
      buf_arg("t_pdp", DT_F32, pdp, nrows(s)),      int_arg("n_zh", (int64_t)s->B * s->KVH),
      int_arg("q_seq_len", s->Nq),                  int_arg("kv_seq_len", s->Nkv),
  };
  int small = r->block_q < r->block_k ? r->block_q : r->block_k;
  int large = r->block_q < r->block_k ? r->block_k : r->block_q;
  /* attn_bwd_d keeps its own BLOCK_Q default (it is not given one) */
  int nc = attn_consts(s, dtype, r->block_q, r->block_k, c);
  bool ok = run_kernel(r, "attn_bwd_d", c, nc - 2, a, FA_ARRAY_LEN(a));
  if (ok) {
    nc = attn_consts(s, dtype, small, large, c);
    ok = run_kernel(r, "attn_bwd_dkdv", c, nc, a, FA_ARRAY_LEN(a));
  }
  if (ok) {
    nc = attn_consts(s, dtype, large, small, c);
    ok = run_kernel(r, "attn_bwd_dq", c, nc, a, FA_ARRAY_LEN(a));
  }
  free(pdp);
  return ok;
}
