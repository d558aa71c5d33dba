/* attention_host.c - the attention calls on host memory, run by the CPU
 * interpreter (fadsl_interpret): the same kernels, shapes, checks and
 * messages as the device calls, for testing and for machines without a GPU.
 * Each tensor is handed to the interpreter as its own region, so a kernel
 * that reached past a tensor's end would fail with the located access
 * rather than touch other memory. */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "attention_handle.h"

/* The bytes of each tensor of a call. */
static void sizes(const FaAttnCall *c, size_t *q, size_t *kv, size_t *rows) {
  *q = (size_t)2 * c->B * c->H * c->Nq * c->D;
  *kv = (size_t)2 * c->B * c->KVH * c->Nkv * c->D;
  *rows = (size_t)4 * c->B * c->H * c->Nq;
}

static void region(fadsl_host_region *r, int *n, uint64_t p, size_t bytes) {
  if (!p)
    return;
  r[*n].data = (void *)(uintptr_t)p;
  r[*n].bytes = bytes;
  (*n)++;
}

enum { MAX_REGIONS = 12 };

/* The regions of the tensors a call names: one per tensor. */
static int regions_of(const FaAttnTensors *t, const FaAttnCall *c, fadsl_host_region r[MAX_REGIONS]) {
  size_t q, kv, rows;
  sizes(c, &q, &kv, &rows);
  int n = 0;
  region(r, &n, t->q, q);
  region(r, &n, t->k, kv);
  region(r, &n, t->v, kv);
  region(r, &n, t->o, q);
  region(r, &n, t->lse, rows);
  region(r, &n, t->do_, q);
  region(r, &n, t->dq, q);
  region(r, &n, t->dk, kv);
  region(r, &n, t->dv, kv);
  region(r, &n, t->delta, rows);
  region(r, &n, t->dq_accum, rows * (size_t)c->D);
  region(r, &n, t->dkv_accum, fadsl_attention_dkv_accum_bytes(c->B, c->KVH, c->Nkv, c->D));
  return n;
}

static uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }

fadsl_status fadsl_attention_forward_host(fadsl_attention *a, const void *q, const void *k, const void *v, void *o,
                                          float *lse, int B, int H, int KVH, int Nq, int Nkv, int D, int causal,
                                          float scale, fadsl_attention_dtype dtype, int threads) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, causal != 0, scale, NULL};
  FaAttnTensors t = {addr(q), addr(k), addr(v), addr(o), addr(lse), 0, 0, 0, 0, 0, 0, 0};
  FaAttnNamedPtr ptrs[] = {{"q", t.q}, {"k", t.k}, {"v", t.v}, {"o", t.o}, {"lse", t.lse}};
  fadsl_status st = fa_attn_api_check(a, "fadsl_attention_forward_host", &c, dtype, ptrs, 5, 2);
  if (st != FADSL_SUCCESS)
    return st;
  fadsl_host_region r[MAX_REGIONS];
  FaAttnTarget where = {NULL, r, regions_of(&t, &c, r), threads};
  return fa_attn_api_forward(a, &t, &c, &where);
}

fadsl_status fadsl_attention_backward_host(fadsl_attention *a, const void *q, const void *k, const void *v,
                                           const void *o, const float *lse, const void *do_, void *dq, void *dk,
                                           void *dv, float *delta, int B, int H, int KVH, int Nq, int Nkv, int D,
                                           int causal, float scale, fadsl_attention_dtype dtype, int threads) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, causal != 0, scale, NULL};
  FaAttnTensors t = {addr(q), addr(k),   addr(v),  addr(o),  addr(lse), addr(do_),
                     addr(dq), addr(dk), addr(dv), addr(delta), 0, 0};
  FaAttnNamedPtr ptrs[] = {{"q", t.q},    {"k", t.k},   {"v", t.v},   {"o", t.o},   {"lse", t.lse},
                           {"do", t.do_}, {"dq", t.dq}, {"dk", t.dk}, {"dv", t.dv}, {"delta", t.delta}};
  fadsl_status st = fa_attn_api_check(a, "fadsl_attention_backward_host", &c, dtype, ptrs, 10, 2);
  if (st != FADSL_SUCCESS)
    return st;
  fadsl_host_region r[MAX_REGIONS];
  FaAttnTarget where = {NULL, r, regions_of(&t, &c, r), threads};
  return fa_attn_api_backward(a, &t, &c, &where, 0, NULL);
}

fadsl_status fadsl_attention_backward_host_ex(fadsl_attention *a, const fadsl_attention_options *opts, const void *q,
                                              const void *k, const void *v, const void *o, const float *lse,
                                              const void *do_, void *dq, void *dk, void *dv, float *delta, int B,
                                              int H, int KVH, int Nq, int Nkv, int D, float scale,
                                              fadsl_attention_dtype dtype, int threads) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  const char *fn = "fadsl_attention_backward_host_ex";
  fadsl_attention_options op;
  fadsl_attention_options_init(&op);
  if (opts && opts->size < offsetof(fadsl_attention_options, causal) + sizeof op.causal)
    return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT,
                            "%s: the options' size %zu is too small (set them up with fadsl_attention_options_init)",
                            fn, opts->size);
  if (opts)
    memcpy(&op, opts, opts->size < sizeof op ? opts->size : sizeof op);
  if (op.window_left != -1 || op.window_right != -1 || op.softcap != 0 || op.alibi || op.sinks || op.cu_seqlens_q ||
      op.cu_seqlens_k)
    return fa_attn_api_fail(a, FADSL_ERROR_UNSUPPORTED, "%s: the host calls run plain attention; a variant needs the "
                            "device calls", fn);
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, op.causal != 0, scale, NULL};
  FaAttnTensors t = {addr(q),  addr(k),  addr(v),  addr(o),     addr(lse),  addr(do_),
                     addr(dq), addr(dk), addr(dv), addr(delta), op.dq_accum, op.dkv_accum};
  FaAttnNamedPtr ptrs[12] = {{"q", t.q},    {"k", t.k},   {"v", t.v},   {"o", t.o},   {"lse", t.lse},
                             {"do", t.do_}, {"dq", t.dq}, {"dk", t.dk}, {"dv", t.dv}, {"delta", t.delta}};
  int nptrs = 10;
  if (t.dq_accum)
    ptrs[nptrs++] = (FaAttnNamedPtr){"dq_accum", t.dq_accum};
  if (t.dkv_accum)
    ptrs[nptrs++] = (FaAttnNamedPtr){"dkv_accum", t.dkv_accum};
  fadsl_status st = fa_attn_api_check(a, fn, &c, dtype, ptrs, nptrs, 2);
  if (st != FADSL_SUCCESS)
    return st;
  for (int i = 10; i < nptrs; i++)
    if (ptrs[i].ptr % 4)
      return fa_attn_api_fail(a, FADSL_ERROR_INVALID_ARGUMENT, "%s: %s is not 4-byte aligned", fn, ptrs[i].name);
  /* the fused pass needs an accumulator: the call's own when none is given */
  float *own = NULL;
  if (!t.dq_accum && !op.deterministic) {
    size_t bytes = fadsl_attention_dq_accum_bytes(B, H, Nq, D);
    own = malloc(bytes ? bytes : 1);
    if (!own)
      return fa_attn_api_fail(a, FADSL_ERROR_OUT_OF_MEMORY, "%s: no memory for the dQ accumulator (%zu bytes)", fn,
                              bytes);
    t.dq_accum = addr(own);
  }
  fadsl_host_region r[MAX_REGIONS];
  FaAttnTarget where = {NULL, r, regions_of(&t, &c, r), threads};
  FaAttnBwdMode mode = {op.deterministic != 0, op.fuse_delta != 0};
  st = fa_attn_api_backward(a, &t, &c, &where, 0, &mode);
  free(own);
  return st;
}

fadsl_status fadsl_attention_backward_delta_host(fadsl_attention *a, const void *q, const void *k, const void *v,
                                                 const float *lse, const void *do_, void *dq, void *dk, void *dv,
                                                 const float *delta, int B, int H, int KVH, int Nq, int Nkv, int D,
                                                 int causal, float scale, fadsl_attention_dtype dtype, int threads) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, causal != 0, scale, NULL};
  FaAttnTensors t = {addr(q),  addr(k),  addr(v),  0, addr(lse), addr(do_), addr(dq),
                     addr(dk), addr(dv), addr(delta), 0, 0};
  FaAttnNamedPtr ptrs[] = {{"q", t.q},   {"k", t.k},   {"v", t.v},   {"lse", t.lse}, {"do", t.do_},
                           {"dq", t.dq}, {"dk", t.dk}, {"dv", t.dv}, {"delta", t.delta}};
  fadsl_status st = fa_attn_api_check(a, "fadsl_attention_backward_delta_host", &c, dtype, ptrs, 9, 2);
  if (st != FADSL_SUCCESS)
    return st;
  fadsl_host_region r[MAX_REGIONS];
  FaAttnTarget where = {NULL, r, regions_of(&t, &c, r), threads};
  return fa_attn_api_backward(a, &t, &c, &where, 1, NULL);
}
