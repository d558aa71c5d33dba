/* check_attention_variants_api.c - the variant and decoding calls of the
 * attention C API (fadsl_attention_forward_ex / _backward_ex,
 * fadsl_attention_decode_plan / _decode) without a GPU: the options struct's
 * defaults and its size field (an older or newer caller), every bad option,
 * size and pointer refused with FADSL_ERROR_INVALID_ARGUMENT and a message
 * that names it, a variant the handle's program lacks refused with
 * FADSL_ERROR_UNSUPPORTED, and every correct call binding all of its
 * kernel's arguments (the built-in attention_variants.fa and decode.fa, and a
 * variant's own file) and then failing cleanly at the launch, which a
 * context without a device cannot do.  Linked as users link. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fadsl.h"
#include "fadsl_attention.h"

#ifndef FA_SRCDIR
#error "FA_SRCDIR must name the source tree"
#endif

static int failures;

static void expect(int cond, const char *what, const char *detail) {
  printf("%s: %s%s%s\n", cond ? "ok" : "FAIL", what, detail && !cond ? "\n    got: " : "",
         detail && !cond ? detail : "");
  if (!cond)
    failures++;
}

static void expect_error(fadsl_attention *a, fadsl_status st, fadsl_status want, const char *substring,
                         const char *what) {
  const char *msg = fadsl_attention_last_error(a);
  char detail[4400];
  snprintf(detail, sizeof detail, "status %s, message '%s'", fadsl_status_string(st), msg);
  expect(st == want && strstr(msg, substring) != NULL, what, detail);
}

enum { P = 0x10000 };   /* 16-byte aligned stand-ins for device pointers */

static fadsl_status fwd(fadsl_attention *a, const fadsl_attention_options *o, int B, int H, int KVH, int Nq, int Nkv) {
  return fadsl_attention_forward_ex(a, o, P, P + 0x100, P + 0x200, P + 0x300, P + 0x400, B, H, KVH, Nq, Nkv, 64, 0,
                                    FADSL_ATTENTION_F16, NULL);
}

static fadsl_status bwd(fadsl_attention *a, const fadsl_attention_options *o, int B, int H, int KVH, int Nq, int Nkv) {
  return fadsl_attention_backward_ex(a, o, P, P + 0x100, P + 0x200, P + 0x300, P + 0x400, P + 0x500, P + 0x600,
                                     P + 0x700, P + 0x800, P + 0x900, B, H, KVH, Nq, Nkv, 64, 0, FADSL_ATTENTION_BF16,
                                     NULL);
}

static void options(fadsl_attention *a) {
  /* a program per query head where a group has 4 query heads or more */
  expect(fadsl_attention_heads_preferred(8, 2) && fadsl_attention_heads_preferred(64, 8) &&
             !fadsl_attention_heads_preferred(6, 2) && !fadsl_attention_heads_preferred(4, 4) &&
             !fadsl_attention_heads_preferred(8, 0) && !fadsl_attention_heads_preferred(6, 4),
         "fadsl_attention_heads_preferred: groups of 4 or more", NULL);
  fadsl_attention_options o;
  fadsl_attention_options_init(&o);
  expect(o.size == sizeof o && o.window_left == -1 && o.window_right == -1 && !o.causal && o.softcap == 0 &&
             !o.alibi && !o.sinks && !o.cu_seqlens_q && !o.dkv_accum,
         "fadsl_attention_options_init: no variant", NULL);
  /* a struct of an older header (or a binding's mirror) is set up to its
     own size and not a byte past it: the function of the old name stops
     before dkv_accum, the sized one where it is told */
  unsigned char raw[sizeof o + 16];
  memset(raw, 0xa5, sizeof raw);
  (fadsl_attention_options_init)((fadsl_attention_options *)(void *)raw);
  size_t old_size = offsetof(fadsl_attention_options, dkv_accum), got;
  memcpy(&got, raw, sizeof got);
  bool untouched = true;
  for (size_t i = old_size; i < sizeof raw; i++)
    untouched = untouched && raw[i] == 0xa5;
  expect(got == old_size && untouched, "fadsl_attention_options_init (the function): the fields before dkv_accum",
         NULL);
  memset(raw, 0xa5, sizeof raw);
  fadsl_attention_options_init_size((fadsl_attention_options *)(void *)raw, 12);
  memcpy(&got, raw, sizeof got);
  untouched = true;
  for (size_t i = 12; i < sizeof raw; i++)
    untouched = untouched && raw[i] == 0xa5;
  expect(got == 12 && untouched, "fadsl_attention_options_init_size: 12 bytes", NULL);
  memset(raw, 0xa5, sizeof raw);
  fadsl_attention_options_init_size((fadsl_attention_options *)(void *)raw, sizeof raw);
  memcpy(&got, raw, sizeof got);
  expect(got == sizeof o && raw[sizeof o] == 0xa5, "fadsl_attention_options_init_size: larger than the library's",
         NULL);
  /* no variant: the plain call, with its rules */
  o.causal = 1;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 65), FADSL_ERROR_INVALID_ARGUMENT, "causal attention needs Nq == Nkv",
               "no variant: the plain forward pass and its rules");
  expect_error(a, fwd(a, NULL, 1, 2, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_fwd",
               "NULL options: the plain forward pass");
  /* every bad option */
  fadsl_attention_options_init(&o);
  o.size = 4;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "options' size 4 is too small",
               "an options struct too small to hold anything");
  fadsl_attention_options_init(&o);
  o.window_left = -2;
  o.window_right = 0;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "window -2,0",
               "a window bound below -1");
  fadsl_attention_options_init(&o);
  o.softcap = NAN;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "softcap nan", "a NaN softcap");
  o.softcap = -3;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "softcap -3", "a negative softcap");
  fadsl_attention_options_init(&o);
  o.alibi = P + 0x1002;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "alibi (0x11002) is not 4-byte aligned",
               "misaligned slopes");
  fadsl_attention_options_init(&o);
  o.cu_seqlens_q = P + 0x1000;
  o.nseq = 2;
  o.max_seqlen_q = o.max_seqlen_k = 40;
  expect_error(a, fwd(a, &o, 2, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "need B = 1", "packed with B = 2");
  o.nseq = 0;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "nseq = 0", "packed without sequences");
  o.nseq = 2;
  o.max_seqlen_q = 65;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "max_seqlen_q = 65",
               "a longest sequence longer than the batch");
  fadsl_attention_options_init(&o);
  o.cu_seqlens_k = P + 0x1000;
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "cu_seqlens_k without cu_seqlens_q",
               "key offsets alone");
  fadsl_attention_options_init(&o);
  o.sinks = P + 0x1000;
  expect_error(a, bwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "give dsinks",
               "backward with sinks but nowhere for their gradient");

  /* correct calls: every argument bound, then the launch fails without a device */
  fadsl_attention_options_init(&o);
  o.window_left = 100;
  o.window_right = 0;
  expect_error(a, fwd(a, &o, 2, 8, 2, 1000, 1000), FADSL_ERROR_NO_DEVICE, "launching attn_fwd of the variant program",
               "a window: every argument of the variant program's attn_fwd bound");
  o.causal = 1;
  o.window_left = -1;
  o.softcap = 30;
  o.alibi = P + 0x1000;
  o.sinks = P + 0x2000;
  o.dsinks = P + 0x3000;
  expect_error(a, fwd(a, &o, 1, 4, 4, 77, 50), FADSL_ERROR_NO_DEVICE, "launching attn_fwd of the variant program",
               "causal with Nq != Nkv, softcap, ALiBi and sinks together");
  expect_error(a, bwd(a, &o, 1, 4, 4, 77, 50), FADSL_ERROR_NO_DEVICE, "launching attn_zero_f32",
               "their backward pass: dsinks is cleared first, on the stream");
  fadsl_attention_options_init(&o);
  o.cu_seqlens_q = P + 0x1000;
  o.nseq = 3;
  o.max_seqlen_q = o.max_seqlen_k = 30;
  o.causal = 1;
  expect_error(a, bwd(a, &o, 1, 6, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_bwd_d of the variant program",
               "packed sequences, GQA 3:1: the backward pass binds");

  /* the backward pass: fused with an accumulator, deterministic when asked (or without one) */
  o.dq_accum = P + 0x4000;
  expect_error(a, bwd(a, &o, 1, 6, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_bwd_prep of the variant program",
               "packed sequences with dq_accum: the fused backward pass");
  o.deterministic = 1;
  expect_error(a, bwd(a, &o, 1, 6, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_bwd_d of the variant program",
               "deterministic with dq_accum: the deterministic kernels");
  o.deterministic = 0;
  o.fuse_delta = 1;
  expect_error(a, bwd(a, &o, 1, 6, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "fuse_delta is for plain attention",
               "fuse_delta with a variant");
  o.fuse_delta = 0;
  o.dq_accum = P + 0x4008;
  expect_error(a, bwd(a, &o, 1, 6, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "dq_accum (0x14008) is not 16-byte aligned",
               "a misaligned accumulator");
  fadsl_attention_options_init(&o);
  o.dq_accum = P + 0x4000;
  expect_error(a, bwd(a, &o, 1, 4, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_bwd_prep",
               "no variant, dq_accum: the plain program's fused backward pass");
  o.dq_accum = P + 0x4008;
  expect_error(a, bwd(a, &o, 1, 4, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT, "dq_accum (0x14008) is not 16-byte aligned",
               "no variant: a misaligned accumulator");
  o.dq_accum = P + 0x4000;
  o.deterministic = 1;
  expect_error(a, bwd(a, &o, 1, 4, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_bwd_d",
               "no variant, deterministic: the plain program's deterministic kernels");
  o.fuse_delta = 1;
  expect_error(a, bwd(a, &o, 1, 4, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT,
               "fuse_delta is for the fused backward pass, which a deterministic call does not run",
               "fuse_delta with deterministic");
  fadsl_attention_options_init(&o);
  o.fuse_delta = 1;
  expect_error(a, bwd(a, &o, 1, 4, 2, 64, 64), FADSL_ERROR_INVALID_ARGUMENT,
               "fuse_delta is for the fused backward pass, which needs dq_accum", "fuse_delta without dq_accum");
  o.dq_accum = P + 0x4000;
  expect_error(a, bwd(a, &o, 1, 4, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_bwd_prep",
               "fuse_delta with dq_accum: the fused pass");
  fadsl_attention_options_init(&o);
  expect_error(a, bwd(a, &o, 1, 4, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_bwd_d",
               "the defaults without an accumulator: the deterministic kernels");

  /* an older caller: fields past its size keep their defaults (here the sinks) */
  fadsl_attention_options_init(&o);
  o.alibi = P + 0x1000;
  o.sinks = 7;   /* misaligned, but beyond the caller's size: not read */
  o.size = offsetof(fadsl_attention_options, sinks);
  expect_error(a, fwd(a, &o, 1, 2, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_fwd of the variant program",
               "an older caller's smaller struct: the fields it does not know are defaults");
  /* a newer caller: a larger struct whose extra fields this library does not know */
  struct {
    fadsl_attention_options o;
    int future_field;
  } newer;
  fadsl_attention_options_init(&newer.o);
  newer.o.size = sizeof newer;
  newer.o.window_left = 4;
  newer.future_field = 1;
  expect_error(a, fwd(a, &newer.o, 1, 2, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_fwd of the variant program",
               "a newer caller's larger struct is read as far as this library knows it");
}

static void own_program(fadsl_context *ctx) {
  fadsl_attention *w = NULL;
  fadsl_status st = fadsl_attention_create_from_file(ctx, FA_SRCDIR "/examples/attention/variants/window.fa", &w);
  expect(st == FADSL_SUCCESS, "a handle on variants/window.fa", fadsl_attention_last_error(w));
  fadsl_attention_options o;
  fadsl_attention_options_init(&o);
  o.window_left = 8;
  o.window_right = 8;
  expect_error(w, fwd(w, &o, 1, 2, 2, 64, 64), FADSL_ERROR_NO_DEVICE, "launching attn_fwd of the variant program",
               "the handle's own variant program takes the window");
  o.softcap = 5;
  expect_error(w, fwd(w, &o, 1, 2, 2, 64, 64), FADSL_ERROR_UNSUPPORTED, "no parameters for softcap",
               "a variant the handle's program lacks is refused, not ignored");
  fadsl_attention_destroy(w);
}

static void decoding(fadsl_attention *a) {
  fadsl_attention_kvcache kv;
  fadsl_attention_kvcache_init(&kv);
  expect(kv.size == sizeof kv && kv.num_splits == 0 && kv.scale == 0, "fadsl_attention_kvcache_init", NULL);
  /* set up to the size asked for and not a byte past it */
  unsigned char raw[sizeof kv + 16];
  size_t got;
  memset(raw, 0xa5, sizeof raw);
  fadsl_attention_kvcache_init_size((fadsl_attention_kvcache *)(void *)raw, 20);
  memcpy(&got, raw, sizeof got);
  bool untouched = true;
  for (size_t i = 20; i < sizeof raw; i++)
    untouched = untouched && raw[i] == 0xa5;
  expect(got == 20 && untouched && raw[sizeof got] == 0, "fadsl_attention_kvcache_init_size: 20 bytes", NULL);
  memset(raw, 0xa5, sizeof raw);
  (fadsl_attention_kvcache_init)((fadsl_attention_kvcache *)(void *)raw);
  memcpy(&got, raw, sizeof got);
  expect(got == offsetof(fadsl_attention_kvcache, scale) + sizeof(float) && raw[got] == 0xa5,
         "fadsl_attention_kvcache_init (the function): the fields up to scale", NULL);
  memset(raw, 0xa5, sizeof raw);
  fadsl_attention_kvcache_init_size((fadsl_attention_kvcache *)(void *)raw, sizeof raw);
  memcpy(&got, raw, sizeof got);
  expect(got == sizeof kv && raw[sizeof kv] == 0xa5, "fadsl_attention_kvcache_init_size: larger than the library's",
         NULL);
  kv.B = 4, kv.Sq = 1, kv.H = 32, kv.KVH = 8, kv.D = 128;
  kv.num_blocks = 4096, kv.page_size = 64, kv.max_blocks = 512, kv.max_seqlen = 32768;
  int splits = 0;
  size_t ws = 0;
  fadsl_status st = fadsl_attention_decode_plan(a, &kv, &splits, &ws);
  /* 132 multiprocessors assumed without a device: 2 * 132 programs over 32 (sequence, kv head) pairs */
  expect(st == FADSL_SUCCESS && splits == 9 && ws == (size_t)4 * 8 * 9 * 16 * (128 + 1) * 4,
         "decode_plan: 9 splits of 32k keys for 4 x 8 kv heads, workspace [32, 9, 16, 129] float32",
         fadsl_attention_last_error(a));
  kv.max_seqlen = 300;
  st = fadsl_attention_decode_plan(a, &kv, &splits, NULL);
  expect(st == FADSL_SUCCESS && splits == 1, "decode_plan: short caches are not split (chunks >= 256 keys)", NULL);
  kv.num_splits = 5;
  st = fadsl_attention_decode_plan(a, &kv, &splits, NULL);
  expect(st == FADSL_SUCCESS && splits == 5, "decode_plan: an explicit num_splits is kept", NULL);
  uint64_t W = P + 0x100000;
  st = fadsl_attention_decode(a, &kv, P, P + 0x100, P + 0x200, P + 0x300, P + 0x400, P + 0x500, P + 0x600, W,
                              FADSL_ATTENTION_BF16, NULL);
  expect_error(a, st, FADSL_ERROR_NO_DEVICE, "launching attn_decode_split",
               "a correct decoding call binds every argument of decode.fa's attn_decode_split");
  fadsl_attention_kvcache bad = kv;
  bad.page_size = 8;
  expect_error(a, fadsl_attention_decode_plan(a, &bad, &splits, NULL), FADSL_ERROR_INVALID_ARGUMENT, "page_size 8",
               "a page of 8");
  bad = kv;
  bad.D = 48;
  expect_error(a, fadsl_attention_decode_plan(a, &bad, &splits, NULL), FADSL_ERROR_INVALID_ARGUMENT,
               "head dimension D=48", "D = 48");
  bad = kv;
  bad.Sq = 80;
  expect_error(a, fadsl_attention_decode_plan(a, &bad, &splits, NULL), FADSL_ERROR_INVALID_ARGUMENT, "at most 256",
               "more than 256 rows per kv head");
  bad = kv;
  bad.H = 30;
  expect_error(a, fadsl_attention_decode_plan(a, &bad, &splits, NULL), FADSL_ERROR_INVALID_ARGUMENT,
               "not a multiple of KVH=8", "H % KVH != 0");
  bad = kv;
  bad.size = 8;
  expect_error(a, fadsl_attention_decode_plan(a, &bad, &splits, NULL), FADSL_ERROR_INVALID_ARGUMENT,
               "size field is too small", "a sizes struct too small");
  st = fadsl_attention_decode(a, &kv, P, P + 0x100, P + 0x200, 0, P + 0x400, P + 0x500, P + 0x600, W,
                              FADSL_ATTENTION_BF16, NULL);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "block_table is a null pointer", "no block table");
  st = fadsl_attention_decode(a, &kv, P, P + 0x100, P + 0x208, P + 0x300, P + 0x400, P + 0x500, P + 0x600, W,
                              FADSL_ATTENTION_BF16, NULL);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "v_cache (0x10208) is not 16-byte aligned", "misaligned V cache");
  st = fadsl_attention_decode(a, &kv, P, P + 0x100, P + 0x200, P + 0x300, P + 0x400, P + 0x500, P + 0x600, W, 9,
                              NULL);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "unknown dtype 9", "an unknown dtype");
}

int main(void) {
  fadsl_context *ctx = NULL;
  fadsl_attention *a = NULL;
  expect(fadsl_context_create(-1, &ctx) == FADSL_SUCCESS, "a context without a device", NULL);
  fadsl_status st = fadsl_attention_create(ctx, &a);
  expect(st == FADSL_SUCCESS && a, "the built-in programs load", fadsl_attention_last_error(a));
  options(a);
  decoding(a);
  fadsl_attention_destroy(a);
  own_program(ctx);
  expect(fadsl_attention_forward_ex(NULL, NULL, P, P, P, P, P, 1, 1, 1, 1, 1, 16, 0, FADSL_ATTENTION_F16, NULL) ==
             FADSL_ERROR_INVALID_ARGUMENT,
         "a NULL handle", NULL);
  fadsl_attention_options_init(NULL);
  fadsl_attention_kvcache_init(NULL);
  fadsl_context_destroy(ctx);
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
