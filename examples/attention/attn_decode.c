/* attn_decode.c - the float64 reference of paged-KV decoding and the checks
 * of its shape (see attn_decode.h). */
#include "attn_decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"

static bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

bool fa_decode_ok(const FaDecodeShape *s, const int32_t *table, const int32_t *lens, char *why, size_t len) {
  if (s->B < 1 || s->Sq < 1 || s->H < 1 || s->KVH < 1 || s->num_blocks < 1 || s->max_blocks < 1) {
    snprintf(why, len, "every dimension must be at least 1 (B=%d Sq=%d H=%d KVH=%d blocks=%d max_blocks=%d)", s->B,
             s->Sq, s->H, s->KVH, s->num_blocks, s->max_blocks);
    return false;
  }
  if (!is_pow2(s->D) || s->D < 16 || s->D > 256) {
    snprintf(why, len, "head dimension %d: the kernels take D in {16, 32, 64, 128, 256}", s->D);
    return false;
  }
  if (s->H % s->KVH) {
    snprintf(why, len, "the %d query heads must be a multiple of the %d key/value heads", s->H, s->KVH);
    return false;
  }
  if (!is_pow2(s->page_size) || s->page_size < 16) {
    snprintf(why, len, "page size %d: want a power of two, at least 16", s->page_size);
    return false;
  }
  if (fa_decode_rows(s) > 256) {
    snprintf(why, len, "%d new tokens times %d query heads per kv head is more than 256 rows per tile", s->Sq,
             s->H / s->KVH);
    return false;
  }
  for (int b = 0; table && lens && b < s->B; b++) {
    if (lens[b] < 0 || (int64_t)lens[b] > (int64_t)s->max_blocks * s->page_size) {
      snprintf(why, len, "cache_seqlens[%d] = %d: want 0 .. max_blocks * page_size = %lld", b, lens[b],
               (long long)s->max_blocks * s->page_size);
      return false;
    }
    for (int p = 0; p * s->page_size < lens[b]; p++) {
      int32_t page = table[(int64_t)b * s->max_blocks + p];
      if (page < 0 || page >= s->num_blocks) {
        snprintf(why, len, "block_table[%d, %d] = %d: not a page of the cache (0 .. %d)", b, p, page,
                 s->num_blocks - 1);
        return false;
      }
    }
  }
  return true;
}

int fa_decode_rows(const FaDecodeShape *s) {
  int want = s->Sq * (s->H / s->KVH), rows = 16;
  while (rows < want)
    rows *= 2;
  return rows;
}

double fa_decode_kv_bytes(const FaDecodeShape *s, const int32_t *lens, int elem_bytes) {
  double keys = 0;
  for (int b = 0; b < s->B; b++)
    keys += lens[b];
  return keys * s->KVH * s->D * elem_bytes * 2.0;
}

/* The float64 reference of one (sequence, token, head): o[D] and the natural-log LSE. */
static double reference_row(const FaDecodeShape *s, const FaDecodeData *d, int b, int t, int h, double *p, double *o,
                            double *o2) {
  int D = s->D, kvh = h / (s->H / s->KVH), len = d->cache_seqlens[b];
  int last = s->causal ? len - s->Sq + t : len - 1;
  int64_t qoff = (((int64_t)b * s->Sq + t) * s->H + h) * D;
  double m = -INFINITY;
  for (int j = 0; j < len; j++) {
    p[j] = -INFINITY;
    if (j > last)
      continue;
    int64_t page = d->block_table[(int64_t)b * s->max_blocks + j / s->page_size];
    int64_t koff = ((page * s->page_size + j % s->page_size) * s->KVH + kvh) * D;
    double dot = 0;
    for (int e = 0; e < D; e++)
      dot += fa_host_get(d->dtype, d->q, qoff + e) * fa_host_get(d->dtype, d->k_cache, koff + e);
    p[j] = dot * s->scale;
    if (p[j] > m)
      m = p[j];
  }
  memset(o, 0, (size_t)D * sizeof *o);
  memset(o2, 0, (size_t)D * sizeof *o2);
  if (m == -INFINITY)
    return INFINITY;
  double l = 0;
  for (int j = 0; j < len; j++) {
    p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - m);
    l += p[j];
  }
  for (int j = 0; j < len; j++) {
    if (p[j] == 0)
      continue;
    int64_t page = d->block_table[(int64_t)b * s->max_blocks + j / s->page_size];
    int64_t voff = ((page * s->page_size + j % s->page_size) * s->KVH + kvh) * D;
    for (int e = 0; e < D; e++) {
      double x = p[j] / l * fa_host_get(d->dtype, d->v_cache, voff + e);
      o[e] += x;
      o2[e] += x * x;
    }
  }
  return m + log(l);
}

bool fa_decode_check(const FaDecodeShape *s, const FaDecodeData *d, FaDecodeCheck *res) {
  memset(res, 0, sizeof *res);
  int maxlen = 1;
  for (int b = 0; b < s->B; b++)
    if (d->cache_seqlens[b] > maxlen)
      maxlen = d->cache_seqlens[b];
  double *p = malloc((size_t)maxlen * sizeof *p), *o = malloc((size_t)s->D * 2 * sizeof *o);
  if (!p || !o) {
    free(p);
    free(o);
    return false;
  }
  double d2[2] = {0, 0}, r2[2] = {0, 0}, s2 = 0;
  int64_t bad[2] = {0, 0};
  for (int b = 0; b < s->B; b++)
    for (int t = 0; t < s->Sq; t++)
      for (int h = 0; h < s->H; h++) {
        double lse = reference_row(s, d, b, t, h, p, o, o + s->D);
        int64_t ooff = (((int64_t)b * s->Sq + t) * s->H + h) * s->D, loff = ((int64_t)b * s->H + h) * s->Sq + t;
        for (int e = 0; e < s->D; e++) {
          double got = fa_host_get(d->dtype, d->o, ooff + e);
          if (!isfinite(got))
            bad[0]++;
          else
            d2[0] += (got - o[e]) * (got - o[e]);
          r2[0] += o[e] * o[e];
          s2 += o[s->D + e];
        }
        double got = (double)d->lse2[loff] * M_LN2;
        if (isinf(lse)) {
          bad[1] += got != lse;
        } else if (!isfinite(got)) {
          bad[1]++;
        } else {
          d2[1] += (got - lse) * (got - lse);
          r2[1] += lse * lse;
        }
      }
  double den0 = r2[0] > s2 ? r2[0] : s2;
  res->err[0] = bad[0] ? NAN : den0 > 0 ? sqrt(d2[0] / den0) : (d2[0] > 0 ? INFINITY : 0);
  res->err[1] = bad[1] ? NAN : r2[1] > 0 ? sqrt(d2[1] / r2[1]) : (d2[1] > 0 ? INFINITY : 0);
  res->ref_norm[0] = sqrt(r2[0]);
  res->ref_norm[1] = sqrt(r2[1]);
  res->nonfinite[0] = bad[0];
  res->nonfinite[1] = bad[1];
  free(p);
  free(o);
  return true;
}
