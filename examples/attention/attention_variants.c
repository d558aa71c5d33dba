/* attention_variants.c - fadsl_attention_forward_ex / _backward_ex: the
 * variants (windows, softcapping, ALiBi, sinks, packed sequences) through the
 * variant program, attention_variants.fa (built into the library with the
 * modules it imports), or the handle's own program when it was created from
 * a file whose kernels take the variant parameters.
 *
 * Arguments are bound by name from one table of every value a variant
 * kernel may take, so any program whose kernels use the parameter names of
 * examples/attention/variants/ runs here: a kernel binds the constexprs it
 * declares and must find each runtime parameter in the table.  A flag that
 * is off still needs its buffers bound: q stands in for them (the kernels do
 * not read them then, and q's allocation covers their declared extents). */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"

static const char *const vk_names[VK_N] = {"attn_fwd",      "attn_bwd_d", "attn_bwd_dkdv",       "attn_bwd_dq",
                                           "attn_bwd_prep", "attn_bwd",   "attn_bwd_dq_convert", "attn_zero_f32"};

/* Kernels a variant program may lack: attn_zero_f32 (then no sinks) and the
 * fused backward pass's (then the deterministic kernels run). */
static bool vk_optional(int which) { return which >= VK_PREP; }

void fa_attn_extra_free(FaAttnExtra *x) {
  if (!x)
    return;
  for (int i = 0; i < VK_N; i++)
    fadsl_args_destroy(x->args[i]);
  for (int i = 0; i < DK_N; i++)
    fadsl_args_destroy(x->dargs[i]);
  if (x->owned)
    fadsl_program_destroy(x->prog);
  if (x->downed)
    fadsl_program_destroy(x->dprog);
  free(x);
}

static fadsl_status fail(FaAttnHandle *h, fadsl_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static fadsl_status fail(FaAttnHandle *h, fadsl_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->error, h->error_size, fmt, ap);
  va_end(ap);
  return st;
}

static fadsl_status fail_rt(FaAttnHandle *h, fadsl_status st, const char *what) {
  return fail(h, st, "%s: %s: %s", what, fadsl_status_string(st), fadsl_context_last_error(h->ctx));
}

void fadsl_attention_options_init_size(fadsl_attention_options *o, size_t size) {
  if (!o)
    return;
  fadsl_attention_options d;
  memset(&d, 0, sizeof d);
  d.window_left = d.window_right = -1;
  d.size = size < sizeof d ? size : sizeof d;
  memcpy(o, &d, d.size);   /* nothing past the caller's struct */
}

/* Before dkv_accum the struct ended at fuse_delta: the size those programs
   have. */
enum { OPTIONS_SIZE_BEFORE_DKV_ACCUM = offsetof(fadsl_attention_options, dkv_accum) };

void(fadsl_attention_options_init)(fadsl_attention_options *o) {
  fadsl_attention_options_init_size(o, OPTIONS_SIZE_BEFORE_DKV_ACCUM);
}

/* The caller's options as this library knows them: fields past the caller's
 * `size` keep their defaults. */
static bool read_options(const fadsl_attention_options *in, fadsl_attention_options *o) {
  fadsl_attention_options_init(o);
  if (!in)
    return true;
  if (in->size < offsetof(fadsl_attention_options, causal) + sizeof in->causal)
    return false;
  memcpy(o, in, in->size < sizeof *o ? in->size : sizeof *o);
  o->size = sizeof *o;
  return true;
}

static bool any_variant(const fadsl_attention_options *o) {
  return o->window_left != -1 || o->window_right != -1 || o->softcap != 0 || o->alibi || o->sinks ||
         o->cu_seqlens_q || o->cu_seqlens_k;
}

/* ---- the variant program --------------------------------------------------------- */

/* The handle's own program when its attn_fwd takes variant parameters, else
 * the built-in attention_variants.fa. */
static fadsl_status open_variants(FaAttnHandle *h, FaAttnExtra **out) {
  if (*h->extra && (*h->extra)->prog) {
    *out = *h->extra;
    return FADSL_SUCCESS;
  }
  FaAttnExtra *x = *h->extra ? *h->extra : calloc(1, sizeof *x);
  if (!x)
    return fail(h, FADSL_ERROR_OUT_OF_MEMORY, "out of memory");
  *h->extra = x;
  fadsl_kernel *own = NULL;
  static const char *const variant_params[] = {"window_left", "softcap", "t_alibi", "t_sinks", "t_cu_seqlens_q"};
  bool own_variants = false;
  if (fadsl_program_kernel(h->prog, "attn_fwd", &own) == FADSL_SUCCESS)
    for (int i = 0; i < FA_ATTN_ARRAY_LEN(variant_params); i++)
      own_variants |= fa_attn_kernel_has(own, variant_params[i]);
  fadsl_status st = FADSL_SUCCESS;
  if (own_variants) {
    x->prog = h->prog;
  } else {
    const char *text = fa_attn_module_text("attention_variants.fa");
    if (!text)
      return fail(h, FADSL_ERROR_PROGRAM, "the library carries no attention_variants.fa");
    st = fadsl_program_load_with_modules(h->ctx, "attention_variants.fa", text, fa_attention_modules,
                                         fa_attention_nmodules, &x->prog);
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, "the built-in attention_variants.fa");
    x->owned = true;
  }
  for (int i = 0; i < VK_N; i++) {
    st = fadsl_program_kernel(x->prog, vk_names[i], &x->k[i]);
    if (st == FADSL_SUCCESS)
      st = fadsl_args_create(x->k[i], &x->args[i]);
    else if (vk_optional(i) && st == FADSL_ERROR_NOT_FOUND)
      st = FADSL_SUCCESS, x->k[i] = NULL;
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, vk_names[i]);
  }
  *out = x;
  return FADSL_SUCCESS;
}

/* ---- checking a call ------------------------------------------------------------- */

typedef struct Call {
  int B, H, KVH, Nq, Nkv, D;
  float scale;
  const char *dtype;
  fadsl_attention_options o;
  bool packed;
} Call;

typedef struct NamedPtr {
  const char *name;
  uint64_t ptr;
  unsigned align;
  bool optional;
} NamedPtr;

static bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static fadsl_status check_call(FaAttnHandle *h, const char *fn, Call *c, fadsl_attention_dtype dtype,
                               const NamedPtr *ptrs, int nptrs) {
  const fadsl_attention_options *o = &c->o;
  if (c->B < 1 || c->H < 1 || c->KVH < 1 || c->Nq < 1 || c->Nkv < 1)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: every dimension must be at least 1 (B=%d H=%d KVH=%d Nq=%d Nkv=%d)",
                fn, c->B, c->H, c->KVH, c->Nq, c->Nkv);
  if (!is_pow2(c->D) || c->D < 16 || c->D > 256)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: head dimension D=%d: it must be 16, 32, 64, 128 or 256", fn, c->D);
  if (c->H % c->KVH)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: H=%d query heads are not a multiple of KVH=%d key/value heads",
                fn, c->H, c->KVH);
  if ((int64_t)c->B * c->H > 65535)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: B * H = %lld programs along the grid's y axis; CUDA allows at "
                "most 65535", fn, (long long)c->B * c->H);
  if (o->window_left < -1 || o->window_right < -1)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: window %d,%d: each bound must be >= 0, or -1 for unbounded", fn,
                o->window_left, o->window_right);
  if (!(o->softcap >= 0) || !isfinite(o->softcap))
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: softcap %g: want a positive number, or 0 for none", fn,
                (double)o->softcap);
  if (c->packed) {
    if (c->B != 1)
      return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: packed sequences (cu_seqlens_q) need B = 1, got B = %d", fn,
                  c->B);
    if (o->nseq < 1 || o->nseq > 65535)
      return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: nseq = %d sequences: want 1 to 65535 (the grid's z axis)", fn,
                  o->nseq);
    if (o->max_seqlen_q < 1 || o->max_seqlen_q > c->Nq || o->max_seqlen_k < 1 || o->max_seqlen_k > c->Nkv)
      return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: max_seqlen_q = %d and max_seqlen_k = %d must be the longest "
                  "sequences: 1 to Nq = %d and to Nkv = %d", fn, o->max_seqlen_q, o->max_seqlen_k, c->Nq, c->Nkv);
  } else if (o->cu_seqlens_k) {
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: cu_seqlens_k without cu_seqlens_q", fn);
  }
  if (dtype == FADSL_ATTENTION_F16)
    c->dtype = "f16";
  else if (dtype == FADSL_ATTENTION_BF16)
    c->dtype = "bf16";
  else
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: unknown dtype %d (FADSL_ATTENTION_F16 or _BF16)", fn, (int)dtype);
  if (c->scale == 0)
    c->scale = 1.0f / sqrtf((float)c->D);
  if (!(c->scale > 0) || !isfinite(c->scale))
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: scale %g: want a positive finite number (0: 1/sqrt(D))", fn,
                (double)c->scale);
  for (int i = 0; i < nptrs; i++) {
    if (!ptrs[i].ptr) {
      if (ptrs[i].optional)
        continue;
      return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: %s is a null pointer", fn, ptrs[i].name);
    }
    if (ptrs[i].ptr % ptrs[i].align)
      return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: %s (0x%llx) is not %u-byte aligned", fn, ptrs[i].name,
                  (unsigned long long)ptrs[i].ptr, ptrs[i].align);
  }
  return FADSL_SUCCESS;
}

/* A variant the program has no parameters for is refused, not ignored. */
static fadsl_status check_support(FaAttnHandle *h, const char *fn, FaAttnExtra *x, const Call *c) {
  fadsl_kernel *k = x->k[VK_FWD];
  const fadsl_attention_options *o = &c->o;
  bool causal_param = fa_attn_kernel_has(k, "is_causal"), window_param = fa_attn_kernel_has(k, "window_left");
  const char *missing = NULL;
  if (o->causal && !causal_param && !window_param)
    missing = "causal attention";
  else if ((o->window_left != -1 || o->window_right != -1) && !window_param)
    missing = "a window (window_left, window_right)";
  else if (o->softcap > 0 && !fa_attn_kernel_has(k, "softcap"))
    missing = "softcap";
  else if (o->alibi && !fa_attn_kernel_has(k, "t_alibi"))
    missing = "ALiBi slopes (t_alibi)";
  else if (o->sinks && !fa_attn_kernel_has(k, "t_sinks"))
    missing = "attention sinks (t_sinks)";
  else if (c->packed && !fa_attn_kernel_has(k, "t_cu_seqlens_q"))
    missing = "packed sequences (t_cu_seqlens_q)";
  if (missing)
    return fail(h, FADSL_ERROR_UNSUPPORTED, "%s: the variant program has no parameters for %s", fn, missing);
  return FADSL_SUCCESS;
}

/* ---- binding and launching ------------------------------------------------------- */

typedef struct Named {
  const char *name;
  fadsl_value v;
} Named;

typedef struct Table {
  Named e[64];
  int n;
} Table;

static void put(Table *t, const char *name, fadsl_value v) {
  if (t->n < FA_ATTN_ARRAY_LEN(t->e)) {
    t->e[t->n].name = name;
    t->e[t->n++].v = v;
  }
}

static const Named *find(const Table *t, const char *name) {
  for (int i = 0; i < t->n; i++)
    if (!strcmp(t->e[i].name, name))
      return &t->e[i];
  return NULL;
}

/* Every value a variant kernel may take.  q stands in for the buffers of
 * variants that are off. */
static void fill_table(Table *t, const Call *c, fadsl_kernel *fwd, uint64_t q) {
  const fadsl_attention_options *o = &c->o;
  bool causal_param = fa_attn_kernel_has(fwd, "is_causal");
  int left = o->window_left, right = o->window_right;
  if (o->causal && !causal_param)
    right = 0;
  bool window = left != -1 || right != -1;
  put(t, "sm_scale", fadsl_f32(c->scale));
  put(t, "n_zh", fadsl_i32(c->B * c->KVH));
  put(t, "q_seq_len", fadsl_i32(c->Nq));
  put(t, "kv_seq_len", fadsl_i32(c->Nkv));
  put(t, "window_left", fadsl_i32(left));
  put(t, "window_right", fadsl_i32(right));
  put(t, "softcap", fadsl_f32(o->softcap > 0 ? o->softcap : 1.0f));
  put(t, "n_heads", fadsl_i32(c->H));
  put(t, "t_alibi", fadsl_ptr(o->alibi ? o->alibi : q));
  put(t, "t_sinks", fadsl_ptr(o->sinks ? o->sinks : q));
  put(t, "t_dsinks", fadsl_ptr(o->dsinks ? o->dsinks : q));
  put(t, "t_cu_seqlens_q", fadsl_ptr(c->packed ? o->cu_seqlens_q : q));
  put(t, "t_cu_seqlens_k", fadsl_ptr(c->packed ? (o->cu_seqlens_k ? o->cu_seqlens_k : o->cu_seqlens_q) : q));
  put(t, "n_seqs", fadsl_i32(c->packed ? o->nseq : 1));
  put(t, "max_seqlen_q", fadsl_i32(c->packed ? o->max_seqlen_q : c->Nq));
  put(t, "max_seqlen_k", fadsl_i32(c->packed ? o->max_seqlen_k : c->Nkv));
  put(t, "n_groups", fadsl_int(c->H / c->KVH));
  put(t, "d_head", fadsl_int(c->D));
  put(t, "T", fadsl_dtype(c->dtype));
  put(t, "is_causal", fadsl_bool(o->causal));
  put(t, "HAS_WINDOW", fadsl_bool(window));
  put(t, "HAS_SOFTCAP", fadsl_bool(o->softcap > 0));
  put(t, "HAS_ALIBI", fadsl_bool(o->alibi != 0));
  put(t, "HAS_SINKS", fadsl_bool(o->sinks != 0));
  put(t, "VARLEN", fadsl_bool(c->packed));
}

/* Binds kernel `which` from the table (and the handle's fixed config). */
static fadsl_status bind(FaAttnHandle *h, FaAttnExtra *x, int which, const Table *t) {
  fadsl_kernel *k = x->k[which];
  fadsl_args *args = x->args[which];
  fadsl_args_clear(args);
  int bq = *h->block_q, bk = *h->block_k;
  if (which == VK_DKDV || which == VK_BWD) {   /* they loop over queries: the key block is the larger one */
    bq = *h->block_k;
    bk = *h->block_q;
  }
  /* the configuration fadsl_attention_set_config fixes applies to the four
   * kernels that multiply tiles, as for the plain calls */
  bool tiled = which == VK_FWD || which == VK_DKDV || which == VK_DQ || which == VK_BWD;
  int n = fadsl_kernel_param_count(k);
  char what[128];
  for (int i = 0; i < n; i++) {
    const char *name;
    fadsl_param_kind kind;
    fadsl_status st = fadsl_kernel_param(k, i, &name, &kind);
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, vk_names[which]);
    const Named *e = find(t, name);
    fadsl_value v;
    if (e) {
      v = e->v;
    } else if (tiled && *h->block_q && (!strcmp(name, "BLOCK_Q") || !strcmp(name, "BLOCK_K"))) {
      v = fadsl_int(!strcmp(name, "BLOCK_Q") ? bq : bk);
    } else if (kind == FADSL_PARAM_CONSTEXPR) {
      continue;   /* its default, the tuning database's or the @autotune default */
    } else {
      return fail(h, FADSL_ERROR_BINDING, "%s of the variant program has a parameter '%s' that the attention API "
                  "does not know", vk_names[which], name);
    }
    st = fadsl_args_set(args, name, v);
    if (st != FADSL_SUCCESS) {
      snprintf(what, sizeof what, "binding '%s' of %s", name, vk_names[which]);
      return fail_rt(h, st, what);
    }
  }
  if (tiled && (*h->warps || *h->stages)) {
    fadsl_status st = fadsl_args_set_config(args, *h->warps, *h->stages);
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, "fixing the configuration");
  }
  return FADSL_SUCCESS;
}

/* Launches kernel `which`, bound, on the stream. */
static fadsl_status launch_bound(FaAttnHandle *h, FaAttnExtra *x, int which, void *stream) {
  char what[128];
  fadsl_kernel_info info;
  fadsl_status st = fadsl_launch(x->k[which], x->args[which], stream, &info);
  if (st != FADSL_SUCCESS) {
    snprintf(what, sizeof what, "launching %s of the variant program", vk_names[which]);
    return fail_rt(h, st, what);
  }
  if (which <= VK_CONVERT) {   /* one of the fadsl_attention_kernel values */
    h->info[which] = info;
    h->launched[which] = 1;
  }
  x->launched[which] = true;
  return FADSL_SUCCESS;
}

static fadsl_status launch(FaAttnHandle *h, FaAttnExtra *x, int which, const Table *t, void *stream) {
  fadsl_status st = bind(h, x, which, t);
  return st == FADSL_SUCCESS ? launch_bound(h, x, which, stream) : st;
}

/* Binds the n kernels of a pass, compiles those not launched before side by
 * side (fa_attn_compile_together), then launches them in order. */
static fadsl_status launch_pass(FaAttnHandle *h, FaAttnExtra *x, const int *pass, int n, const Table *t,
                                void *stream) {
  fadsl_kernel *kernels[VK_N] = {NULL};
  fadsl_args *args[VK_N] = {NULL};
  const char *cache[VK_N] = {NULL};
  fadsl_status st = FADSL_SUCCESS;
  for (int i = 0; i < n && st == FADSL_SUCCESS; i++) {
    st = bind(h, x, pass[i], t);
    if (st == FADSL_SUCCESS && !x->launched[pass[i]]) {
      kernels[i] = x->k[pass[i]];
      args[i] = x->args[pass[i]];
    }
  }
  if (st != FADSL_SUCCESS)
    return st;
  fa_attn_compile_together(kernels, args, n, cache);
  for (int i = 0; i < n && st == FADSL_SUCCESS; i++) {
    st = launch_bound(h, x, pass[i], stream);
    if (st == FADSL_SUCCESS && pass[i] <= VK_CONVERT)
      fa_attn_note_compiled(&h->info[pass[i]], cache[i]);
  }
  return st;
}

/* Checks, finds the program and fills the table; then the caller launches. */
static fadsl_status prepare(FaAttnHandle *h, const char *fn, Call *c, fadsl_attention_dtype dtype,
                            const NamedPtr *ptrs, int nptrs, FaAttnExtra **x) {
  fadsl_status st = check_call(h, fn, c, dtype, ptrs, nptrs);
  if (st == FADSL_SUCCESS)
    st = open_variants(h, x);
  if (st == FADSL_SUCCESS)
    st = check_support(h, fn, *x, c);
  return st;
}

fadsl_status fadsl_attention_forward_ex(fadsl_attention *attn, const fadsl_attention_options *opts, uint64_t q,
                                        uint64_t k, uint64_t v, uint64_t o, uint64_t lse, int B, int H, int KVH,
                                        int Nq, int Nkv, int D, float scale, fadsl_attention_dtype dtype,
                                        void *stream) {
  if (!attn)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnHandle h = fa_attn_handle(attn);
  Call c = {B, H, KVH, Nq, Nkv, D, scale, NULL, {0}, false};
  if (!read_options(opts, &c.o))
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_forward_ex: the options' size %zu is too small "
                "(set them up with fadsl_attention_options_init)", opts->size);
  if (!any_variant(&c.o))
    return fadsl_attention_forward(attn, q, k, v, o, lse, B, H, KVH, Nq, Nkv, D, c.o.causal, scale, dtype, stream);
  if (!h.prog)
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_forward_ex: the handle has no program");
  c.packed = c.o.cu_seqlens_q != 0;
  NamedPtr ptrs[] = {{"q", q, 16, false},          {"k", k, 16, false},
                     {"v", v, 16, false},          {"o", o, 16, false},
                     {"lse", lse, 16, false},      {"alibi", c.o.alibi, 4, true},
                     {"sinks", c.o.sinks, 4, true}, {"cu_seqlens_q", c.o.cu_seqlens_q, 4, true},
                     {"cu_seqlens_k", c.o.cu_seqlens_k, 4, true}};
  pthread_mutex_lock(h.lock);
  FaAttnExtra *x = NULL;
  fadsl_status st = prepare(&h, "fadsl_attention_forward_ex", &c, dtype, ptrs, FA_ATTN_ARRAY_LEN(ptrs), &x);
  if (st == FADSL_SUCCESS) {
    Table t = {.n = 0};
    fill_table(&t, &c, x->k[VK_FWD], q);
    put(&t, "t_q", fadsl_ptr(q));
    put(&t, "t_k", fadsl_ptr(k));
    put(&t, "t_v", fadsl_ptr(v));
    put(&t, "t_o", fadsl_ptr(o));
    put(&t, "t_lse", fadsl_ptr(lse));
    st = launch(&h, x, VK_FWD, &t, stream);
  }
  pthread_mutex_unlock(h.lock);
  return st;
}

fadsl_status fadsl_attention_backward_ex(fadsl_attention *attn, const fadsl_attention_options *opts, uint64_t q,
                                         uint64_t k, uint64_t v, uint64_t o, uint64_t lse, uint64_t do_,
                                         uint64_t dq, uint64_t dk, uint64_t dv, uint64_t delta, int B, int H,
                                         int KVH, int Nq, int Nkv, int D, float scale, fadsl_attention_dtype dtype,
                                         void *stream) {
  if (!attn)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnHandle h = fa_attn_handle(attn);
  Call c = {B, H, KVH, Nq, Nkv, D, scale, NULL, {0}, false};
  if (!read_options(opts, &c.o))
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_backward_ex: the options' size %zu is too small "
                "(set them up with fadsl_attention_options_init)", opts->size);
  if (!any_variant(&c.o))
    return fa_attn_api_backward_plain(attn, &c.o, q, k, v, o, lse, do_, dq, dk, dv, delta, B, H, KVH, Nq, Nkv, D,
                                      scale, dtype, stream);
  if (c.o.fuse_delta)
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_backward_ex: fuse_delta is for plain attention");
  if (!h.prog)
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_backward_ex: the handle has no program");
  c.packed = c.o.cu_seqlens_q != 0;
  if (c.o.sinks && !c.o.dsinks)
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_backward_ex: with sinks the backward pass writes "
                "their gradient: give dsinks (float32 [H])");
  NamedPtr ptrs[] = {{"q", q, 16, false},           {"k", k, 16, false},
                     {"v", v, 16, false},           {"o", o, 16, false},
                     {"lse", lse, 16, false},       {"do", do_, 16, false},
                     {"dq", dq, 16, false},         {"dk", dk, 16, false},
                     {"dv", dv, 16, false},         {"delta", delta, 16, false},
                     {"alibi", c.o.alibi, 4, true}, {"sinks", c.o.sinks, 4, true},
                     {"dsinks", c.o.dsinks, 4, true}, {"cu_seqlens_q", c.o.cu_seqlens_q, 4, true},
                     {"cu_seqlens_k", c.o.cu_seqlens_k, 4, true}, {"dq_accum", c.o.dq_accum, 16, true}};
  pthread_mutex_lock(h.lock);
  FaAttnExtra *x = NULL;
  fadsl_status st = prepare(&h, "fadsl_attention_backward_ex", &c, dtype, ptrs, FA_ATTN_ARRAY_LEN(ptrs), &x);
  /* fused when there is an accumulator, no deterministic pass is asked for
     and the program has the kernels */
  bool fused = st == FADSL_SUCCESS && c.o.dq_accum && !c.o.deterministic && x->k[VK_PREP] && x->k[VK_BWD] &&
               x->k[VK_CONVERT];
  if (st == FADSL_SUCCESS && c.o.sinks && !x->k[VK_ZERO])
    st = fail(&h, FADSL_ERROR_UNSUPPORTED, "fadsl_attention_backward_ex: the variant program has no attn_zero_f32 "
              "to clear dsinks with");
  if (st == FADSL_SUCCESS) {
    Table t = {.n = 0};
    fill_table(&t, &c, x->k[VK_FWD], q);
    put(&t, "t_q", fadsl_ptr(q));
    put(&t, "t_k", fadsl_ptr(k));
    put(&t, "t_v", fadsl_ptr(v));
    put(&t, "t_o", fadsl_ptr(o));
    put(&t, "t_lse", fadsl_ptr(lse));
    put(&t, "t_do", fadsl_ptr(do_));
    put(&t, "t_dq", fadsl_ptr(dq));
    put(&t, "t_dk", fadsl_ptr(dk));
    put(&t, "t_dv", fadsl_ptr(dv));
    put(&t, "t_pdp", fadsl_ptr(delta));
    put(&t, "t_dq_acc", fadsl_ptr(c.o.dq_accum));
    /* the sinks' gradient is summed atomically: clear it first, on the stream */
    if (c.o.sinks) {
      Table z = {.n = 0};
      put(&z, "t_x", fadsl_ptr(c.o.dsinks));
      put(&z, "n", fadsl_i32(H));
      st = launch(&h, x, VK_ZERO, &z, stream);
    }
    static const int deterministic[] = {VK_BWD_D, VK_DKDV, VK_DQ}, fused_pass[] = {VK_PREP, VK_BWD, VK_CONVERT};
    if (st == FADSL_SUCCESS)
      st = launch_pass(&h, x, fused ? fused_pass : deterministic, 3, &t, stream);
  }
  pthread_mutex_unlock(h.lock);
  return st;
}
