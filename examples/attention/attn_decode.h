/* attn_decode.h - decoding from a paged KV cache (decode.fa) on the CPU
 * interpreter, and its float64 reference.
 *
 * Layouts (decode.fa, as FlashAttention's flash_attn_with_kvcache): q and o
 * [B, Sq, H, D], k_cache and v_cache [num_blocks, page_size, KVH, D],
 * block_table int32 [B, max_blocks], cache_seqlens int32 [B] (every key of
 * the sequence, the Sq new tokens' included), lse2 float32 [B, H, Sq] in
 * base 2.  Causal: token t sees keys 0 .. cache_seqlens[b] - Sq + t.  A token
 * that sees no key gets o = 0 and lse = +inf. */
#ifndef FADSL_ATTN_DECODE_H
#define FADSL_ATTN_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "attn_interp.h"

typedef struct FaDecodeShape {
  int B, Sq, H, KVH, D;
  int num_blocks, page_size, max_blocks;
  bool causal;
  double scale;
} FaDecodeShape;

typedef struct FaDecodeData {
  DType dtype;
  const void *q, *k_cache, *v_cache;
  const int32_t *block_table, *cache_seqlens;
  const void *o;                  /* outputs */
  const float *lse2;
} FaDecodeData;

/* Checks the shape and the table: sizes, D, GQA, page size a power of two,
 * every length within the table and every page index within the cache. */
bool fa_decode_ok(const FaDecodeShape *s, const int32_t *block_table, const int32_t *cache_seqlens, char *why,
                  size_t len);

/* Rows of a program's tile: the next power of two >= max(16, Sq * H / KVH). */
int fa_decode_rows(const FaDecodeShape *s);

/* Runs attn_decode_split and attn_decode_combine of `r`'s program (decode.fa)
 * with num_splits splits and key blocks of block_k (0: 64 or the page, the
 * first point of the kernel's @autotune space that fits the page). */
bool fa_decode_run(FaAttnRunner *r, const FaDecodeShape *s, const FaDecodeData *d, int num_splits, int block_k,
                   void *o, float *lse2);

/* ||o - ref|| / max(||ref||, ||ref_rss||) over every element (err[0]) and
 * ||lse - ref|| / ||ref|| over the tokens that see a key (err[1]; an infinite
 * reference must be matched exactly); NaN when an output is not finite. */
typedef struct FaDecodeCheck {
  double err[2], ref_norm[2];
  int64_t nonfinite[2];
} FaDecodeCheck;
bool fa_decode_check(const FaDecodeShape *s, const FaDecodeData *d, FaDecodeCheck *res);

/* Bytes of K and V a decoding step reads (the sum of the lengths). */
double fa_decode_kv_bytes(const FaDecodeShape *s, const int32_t *cache_seqlens, int elem_bytes);

#endif
