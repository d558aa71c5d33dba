/* attention_decode.c - fadsl_attention_decode: flash-decoding from a paged
 * KV cache through decode.fa (built into the library), on the caller's
 * stream.  The workspace holds the splits' partial outputs and base-2
 * log-sum-exps (float32 [B * KVH, splits, ROWS, D] and [B * KVH, splits,
 * ROWS]), which attn_decode_combine merges. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"

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

static const char *const dk_names[DK_N] = {"attn_decode_split", "attn_decode_combine"};

void fadsl_attention_kvcache_init_size(fadsl_attention_kvcache *kv, size_t size) {
  if (!kv)
    return;
  fadsl_attention_kvcache d;
  memset(&d, 0, sizeof d);
  d.size = size < sizeof d ? size : sizeof d;
  memcpy(kv, &d, d.size);   /* nothing past the caller's struct */
}

/* The struct as the first header with this function had it: up to scale. */
enum { KVCACHE_SIZE_FIRST = offsetof(fadsl_attention_kvcache, scale) + sizeof(float) };

void(fadsl_attention_kvcache_init)(fadsl_attention_kvcache *kv) {
  fadsl_attention_kvcache_init_size(kv, KVCACHE_SIZE_FIRST);
}

static bool read_kv(const fadsl_attention_kvcache *in, fadsl_attention_kvcache *kv) {
  fadsl_attention_kvcache_init(kv);
  if (!in || in->size < offsetof(fadsl_attention_kvcache, scale) + sizeof in->scale)
    return false;
  memcpy(kv, in, in->size < sizeof *kv ? in->size : sizeof *kv);
  kv->size = sizeof *kv;
  return true;
}

static bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static int tile_rows(const fadsl_attention_kvcache *kv) {
  int want = kv->Sq * (kv->H / kv->KVH), rows = 16;
  while (rows < want)
    rows *= 2;
  return rows;
}

static fadsl_status check_sizes(FaAttnHandle *h, const char *fn, const fadsl_attention_kvcache *kv) {
  if (kv->B < 1 || kv->Sq < 1 || kv->H < 1 || kv->KVH < 1 || kv->num_blocks < 1 || kv->max_blocks < 1)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: every size must be at least 1 (B=%d Sq=%d H=%d KVH=%d "
                "num_blocks=%d max_blocks=%d)", fn, kv->B, kv->Sq, kv->H, kv->KVH, kv->num_blocks, kv->max_blocks);
  if (!is_pow2(kv->D) || kv->D < 16 || kv->D > 256)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: head dimension D=%d: it must be 16, 32, 64, 128 or 256", fn,
                kv->D);
  if (kv->H % kv->KVH)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: H=%d query heads are not a multiple of KVH=%d", fn, kv->H,
                kv->KVH);
  if (!is_pow2(kv->page_size) || kv->page_size < 16)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: page_size %d: want a power of two, at least 16", fn,
                kv->page_size);
  if (tile_rows(kv) > 256)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: Sq * H / KVH = %d rows per kv head: at most 256", fn,
                kv->Sq * (kv->H / kv->KVH));
  if (kv->num_splits < 0 || kv->num_splits > 256 || kv->max_seqlen < 0 ||
      (int64_t)kv->max_seqlen > (int64_t)kv->max_blocks * kv->page_size)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: num_splits %d (0 to 256) or max_seqlen %d (0 to max_blocks * "
                "page_size) out of range", fn, kv->num_splits, kv->max_seqlen);
  if ((int64_t)kv->B * kv->Sq > 2147483647 || kv->B > 65535)
    return fail(h, FADSL_ERROR_INVALID_ARGUMENT, "%s: B = %d sequences: at most 65535 (the grid's z axis)", fn, kv->B);
  return FADSL_SUCCESS;
}

/* Two programs per multiprocessor, chunks of at least 256 keys, at most 64 splits. */
static int choose_splits(FaAttnHandle *h, const fadsl_attention_kvcache *kv) {
  if (kv->num_splits)
    return kv->num_splits;
  fadsl_device_info di;
  int sms = fadsl_context_device_info(h->ctx, &di) == FADSL_SUCCESS && di.multiprocessors > 0 ? di.multiprocessors
                                                                                             : 132;
  int programs = kv->B * kv->KVH, maxlen = kv->max_seqlen ? kv->max_seqlen : kv->max_blocks * kv->page_size;
  int splits = programs >= 2 * sms ? 1 : (2 * sms + programs - 1) / programs;
  if (splits > maxlen / 256)
    splits = maxlen / 256;
  if (splits > 64)
    splits = 64;
  return splits < 1 ? 1 : splits;
}

/* Bytes of the partial outputs, then of the partial LSEs (16-byte multiples). */
static size_t part_bytes(const fadsl_attention_kvcache *kv, int splits, bool lse) {
  size_t n = (size_t)kv->B * kv->KVH * (size_t)splits * (size_t)tile_rows(kv) * 4;
  return lse ? (n + 15) / 16 * 16 : n * (size_t)kv->D;
}

fadsl_status fadsl_attention_decode_plan(fadsl_attention *attn, const fadsl_attention_kvcache *in, int *num_splits,
                                         size_t *workspace_bytes) {
  if (!attn)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnHandle h = fa_attn_handle(attn);
  fadsl_attention_kvcache kv;
  if (!read_kv(in, &kv))
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_attention_decode_plan: no sizes, or their size field is too "
                "small (set them up with fadsl_attention_kvcache_init)");
  fadsl_status st = check_sizes(&h, "fadsl_attention_decode_plan", &kv);
  if (st != FADSL_SUCCESS)
    return st;
  int splits = choose_splits(&h, &kv);
  if (num_splits)
    *num_splits = splits;
  if (workspace_bytes)
    *workspace_bytes = part_bytes(&kv, splits, false) + part_bytes(&kv, splits, true);
  return FADSL_SUCCESS;
}

/* The handle's own program when it has the decoding kernels, else the built-in decode.fa. */
static fadsl_status open_decode(FaAttnHandle *h, FaAttnExtra **out) {
  FaAttnExtra *x = *h->extra ? *h->extra : calloc(1, sizeof *x);
  if (!x)
    return fail(h, FADSL_ERROR_OUT_OF_MEMORY, "out of memory");
  *h->extra = x;
  *out = x;
  if (x->dprog)
    return FADSL_SUCCESS;
  fadsl_kernel *own;
  fadsl_status st;
  if (fadsl_program_kernel(h->prog, dk_names[0], &own) == FADSL_SUCCESS) {
    x->dprog = h->prog;
  } else {
    const char *text = fa_attn_module_text("decode.fa");
    if (!text)
      return fail(h, FADSL_ERROR_PROGRAM, "the library carries no decode.fa");
    st = fadsl_program_load_with_modules(h->ctx, "decode.fa", text, fa_attention_modules, fa_attention_nmodules,
                                         &x->dprog);
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, "the built-in decode.fa");
    x->downed = true;
  }
  for (int i = 0; i < DK_N; i++) {
    st = fadsl_program_kernel(x->dprog, dk_names[i], &x->dk[i]);
    if (st == FADSL_SUCCESS)
      st = fadsl_args_create(x->dk[i], &x->dargs[i]);
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, dk_names[i]);
  }
  return FADSL_SUCCESS;
}

typedef struct Named {
  const char *name;
  fadsl_value v;
} Named;

/* Binds every parameter of kernel `which` from `vals` (constexprs that are
 * not there keep their defaults) and launches it. */
static fadsl_status launch(FaAttnHandle *h, FaAttnExtra *x, int which, const Named *vals, int nvals, void *stream) {
  fadsl_kernel *k = x->dk[which];
  fadsl_args *args = x->dargs[which];
  fadsl_args_clear(args);
  int n = fadsl_kernel_param_count(k);
  char what[128];
  for (int i = 0; i < n; i++) {
    const char *name;
    fadsl_param_kind kind;
    fadsl_status st = fadsl_kernel_param(k, i, &name, &kind);
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, dk_names[which]);
    const Named *e = NULL;
    for (int j = 0; j < nvals && !e; j++)
      if (!strcmp(vals[j].name, name))
        e = &vals[j];
    if (!e) {
      if (kind == FADSL_PARAM_CONSTEXPR)
        continue;
      return fail(h, FADSL_ERROR_BINDING, "%s has a parameter '%s' that the decoding API does not know",
                  dk_names[which], name);
    }
    st = fadsl_args_set(args, name, e->v);
    if (st != FADSL_SUCCESS) {
      snprintf(what, sizeof what, "binding '%s' of %s", name, dk_names[which]);
      return fail_rt(h, st, what);
    }
  }
  if (which == DK_SPLIT && (*h->warps || *h->stages)) {
    fadsl_status st = fadsl_args_set_config(args, *h->warps, *h->stages);
    if (st != FADSL_SUCCESS)
      return fail_rt(h, st, "fixing the configuration");
  }
  fadsl_kernel_info info;
  fadsl_status st = fadsl_launch(k, args, stream, &info);
  if (st != FADSL_SUCCESS) {
    snprintf(what, sizeof what, "launching %s", dk_names[which]);
    return fail_rt(h, st, what);
  }
  return FADSL_SUCCESS;
}

fadsl_status fadsl_attention_decode(fadsl_attention *attn, const fadsl_attention_kvcache *in, uint64_t q,
                                    uint64_t k_cache, uint64_t v_cache, uint64_t block_table, uint64_t cache_seqlens,
                                    uint64_t o, uint64_t lse, uint64_t workspace, fadsl_attention_dtype dtype,
                                    void *stream) {
  if (!attn)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnHandle h = fa_attn_handle(attn);
  const char *fn = "fadsl_attention_decode";
  fadsl_attention_kvcache kv;
  if (!read_kv(in, &kv))
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "%s: no sizes, or their size field is too small (set them up with "
                "fadsl_attention_kvcache_init)", fn);
  fadsl_status st = check_sizes(&h, fn, &kv);
  if (st != FADSL_SUCCESS)
    return st;
  const char *dt = dtype == FADSL_ATTENTION_F16 ? "f16" : dtype == FADSL_ATTENTION_BF16 ? "bf16" : NULL;
  if (!dt)
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "%s: unknown dtype %d (FADSL_ATTENTION_F16 or _BF16)", fn,
                (int)dtype);
  float scale = kv.scale == 0 ? 1.0f / sqrtf((float)kv.D) : kv.scale;
  if (!(scale > 0) || !isfinite(scale))
    return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "%s: scale %g: want a positive finite number (0: 1/sqrt(D))", fn,
                (double)scale);
  struct {
    const char *name;
    uint64_t ptr;
    unsigned align;
  } ptrs[] = {{"q", q, 16}, {"k_cache", k_cache, 16}, {"v_cache", v_cache, 16}, {"block_table", block_table, 4},
              {"cache_seqlens", cache_seqlens, 4}, {"o", o, 16}, {"lse", lse, 4}, {"workspace", workspace, 16}};
  for (int i = 0; i < FA_ATTN_ARRAY_LEN(ptrs); i++) {
    if (!ptrs[i].ptr)
      return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "%s: %s is a null pointer", fn, ptrs[i].name);
    if (ptrs[i].ptr % ptrs[i].align)
      return fail(&h, FADSL_ERROR_INVALID_ARGUMENT, "%s: %s (0x%llx) is not %u-byte aligned", fn, ptrs[i].name,
                  (unsigned long long)ptrs[i].ptr, ptrs[i].align);
  }
  int splits = choose_splits(&h, &kv), splits_pow2 = 1;
  while (splits_pow2 < splits)
    splits_pow2 *= 2;
  uint64_t lse_part = workspace + part_bytes(&kv, splits, false);
  Named vals[] = {
      {"t_q", fadsl_ptr(q)},
      {"t_k_cache", fadsl_ptr(k_cache)},
      {"t_v_cache", fadsl_ptr(v_cache)},
      {"t_block_table", fadsl_ptr(block_table)},
      {"t_cache_seqlens", fadsl_ptr(cache_seqlens)},
      {"sm_scale", fadsl_f32(scale)},
      {"t_o_part", fadsl_ptr(workspace)},
      {"t_lse_part", fadsl_ptr(lse_part)},
      {"t_o", fadsl_ptr(o)},
      {"t_lse", fadsl_ptr(lse)},
      {"batch", fadsl_i32(kv.B)},
      {"q_len", fadsl_i32(kv.Sq)},
      {"n_kv_heads", fadsl_i32(kv.KVH)},
      {"num_blocks", fadsl_i32(kv.num_blocks)},
      {"max_blocks", fadsl_i32(kv.max_blocks)},
      {"num_splits", fadsl_i32(splits)},
      {"n_groups", fadsl_int(kv.H / kv.KVH)},
      {"d_head", fadsl_int(kv.D)},
      {"page_size", fadsl_int(kv.page_size)},
      {"is_causal", fadsl_bool(kv.causal)},
      {"T", fadsl_dtype(dt)},
      {"ROWS", fadsl_int(tile_rows(&kv))},
      {"SPLITS", fadsl_int(splits_pow2)},
  };
  pthread_mutex_lock(h.lock);
  FaAttnExtra *x = NULL;
  st = open_decode(&h, &x);
  for (int which = 0; which < DK_N && st == FADSL_SUCCESS; which++)
    st = launch(&h, x, which, vals, FA_ATTN_ARRAY_LEN(vals), stream);
  pthread_mutex_unlock(h.lock);
  return st;
}
