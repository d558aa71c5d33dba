/* attn_variant.c - the arithmetic of attention variants (see attn_variant.h). */
#include "attn_variant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool fa_attn_variant_any(const FaAttnVariant *v) {
  return v && (v->window || v->softcap > 0 || v->alibi || v->sinks || v->cu_seqlens_q);
}

bool fa_attn_variant_window(const FaAttnVariant *v, const FaAttnShape *s, int *left, int *right) {
  *left = v && v->window ? v->window_left : -1;
  *right = v && v->window ? v->window_right : -1;
  if (s->causal)
    *right = 0;
  return *left >= 0 || *right >= 0;
}

static const int32_t *offsets(const FaAttnVariant *v, bool keys) {
  if (!v || !v->cu_seqlens_q)
    return NULL;
  return keys && v->cu_seqlens_k ? v->cu_seqlens_k : v->cu_seqlens_q;
}

int fa_attn_variant_seq(const FaAttnVariant *v, const FaAttnShape *s, int64_t row, bool keys, int64_t *pos) {
  (void)s;
  const int32_t *cu = offsets(v, keys);
  if (!cu) {
    *pos = row;
    return 0;
  }
  /* the last sequence that starts at or before the row (binary search) */
  int lo = 0, hi = v->nseq - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  /* empty sequences share their start with the next: take the one that holds the row */
  while (lo + 1 < v->nseq && cu[lo + 1] <= row)
    lo++;
  *pos = row - cu[lo];
  return lo;
}

bool fa_attn_variant_visible(const FaAttnVariant *v, const FaAttnShape *s, int64_t i, int64_t j) {
  int64_t pi, pj;
  if (fa_attn_variant_seq(v, s, i, false, &pi) != fa_attn_variant_seq(v, s, j, true, &pj))
    return false;
  int left, right;
  if (!fa_attn_variant_window(v, s, &left, &right))
    return true;
  return (left < 0 || pj >= pi - left) && (right < 0 || pj <= pi + right);
}

double fa_attn_variant_score(const FaAttnVariant *v, int h, double s, int64_t pi, int64_t pj, double *grad) {
  *grad = 1;
  if (!v)
    return s;
  if (v->softcap > 0) {
    double t = tanh(s / v->softcap);
    s = v->softcap * t;
    *grad = 1 - t * t;
  }
  if (v->alibi)
    s -= (double)v->alibi[h] * (double)llabs(pi - pj);
  return s;
}

double fa_attn_variant_sink(const FaAttnVariant *v, int h) {
  return v && v->sinks ? (double)v->sinks[h] : -INFINITY;
}

/* Keys [lo, hi) of a sequence of n keys that query position p sees. */
static int64_t row_pairs(int64_t p, int64_t n, int left, int right) {
  int64_t lo = left < 0 ? 0 : p - left, hi = right < 0 ? n : p + right + 1;
  if (lo < 0)
    lo = 0;
  if (hi > n)
    hi = n;
  return hi > lo ? hi - lo : 0;
}

double fa_attn_variant_pairs(const FaAttnVariant *v, const FaAttnShape *s) {
  int left, right;
  fa_attn_variant_window(v, s, &left, &right);
  double total = 0;
  int nseq = v && v->cu_seqlens_q ? v->nseq : 1;
  for (int q = 0; q < nseq; q++) {
    const int32_t *cq = offsets(v, false), *ck = offsets(v, true);
    int64_t nq = cq ? cq[q + 1] - cq[q] : s->Nq, nk = ck ? ck[q + 1] - ck[q] : s->Nkv;
    for (int64_t p = 0; p < nq; p++)
      total += (double)row_pairs(p, nk, left, right);
  }
  return total * (v && v->cu_seqlens_q ? 1 : s->B);
}

static bool check_offsets(const int32_t *cu, int nseq, int total, const char *what, char *why, size_t len) {
  if (cu[0] != 0) {
    snprintf(why, len, "%s[0] is %d: the offsets must start at 0", what, cu[0]);
    return false;
  }
  for (int i = 0; i < nseq; i++)
    if (cu[i + 1] < cu[i]) {
      snprintf(why, len, "%s decreases at %d (%d, then %d): offsets must not decrease", what, i, cu[i], cu[i + 1]);
      return false;
    }
  if (cu[nseq] != total) {
    snprintf(why, len, "%s ends at %d but the packed tensors hold %d rows", what, cu[nseq], total);
    return false;
  }
  return true;
}

bool fa_attn_variant_ok(const FaAttnVariant *v, const FaAttnShape *s, char *why, size_t len) {
  if (!v)
    return true;
  if (v->window && (v->window_left < -1 || v->window_right < -1)) {
    snprintf(why, len, "window %d,%d: each bound must be >= 0, or -1 for unbounded", v->window_left, v->window_right);
    return false;
  }
  if (v->softcap < 0 || !isfinite(v->softcap)) {
    snprintf(why, len, "softcap %g: want a positive number (or 0 for none)", v->softcap);
    return false;
  }
  if (v->cu_seqlens_q) {
    if (s->B != 1) {
      snprintf(why, len, "packed sequences (cu_seqlens) need B = 1: q is [1, H, total, D], not B = %d", s->B);
      return false;
    }
    if (v->nseq < 1) {
      snprintf(why, len, "cu_seqlens needs at least 2 offsets (one sequence)");
      return false;
    }
    if (!check_offsets(v->cu_seqlens_q, v->nseq, s->Nq, "cu_seqlens", why, len))
      return false;
    if (!check_offsets(v->cu_seqlens_k ? v->cu_seqlens_k : v->cu_seqlens_q, v->nseq, s->Nkv,
                       v->cu_seqlens_k ? "cu_seqlens_k" : "cu_seqlens (for the keys)", why, len))
      return false;
  }
  return true;
}

const char *fa_attn_variant_describe(const FaAttnVariant *v, const FaAttnShape *s, char *buf, size_t len) {
  int left, right;
  size_t n = 0;
  buf[0] = '\0';
  if (fa_attn_variant_window(v, s, &left, &right) && !(s->causal && left < 0 && !(v && v->window)))
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "window %d,%d ", left, right);
  else if (s->causal)
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "causal ");
  if (v && v->softcap > 0)
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "softcap %g ", v->softcap);
  if (v && v->alibi)
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "alibi ");
  if (v && v->sinks)
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "sinks ");
  if (v && v->cu_seqlens_q)
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "packed (%d sequences) ", v->nseq);
  if (n == 0)
    snprintf(buf, len, "full");
  else if (n <= len)
    buf[n - 1] = '\0';
  return buf;
}
