/* attention_delta.c - the backward pass from a delta the caller computed,
 * and checking a shape without running anything.
 *
 * The backward kernels read delta_i = rowsum(dO_i * O_i), the correction of
 * the softmax's backward pass: dS = P * (dP - delta).  When the loss also
 * depends on the log-sum-exp the forward pass returned (ring attention and
 * other context-parallel schemes combine partial results through it), its
 * gradient g_i = dLoss / d lse_i (natural log) enters the same place, since
 * d lse_i / d s_ij = P_ij: dS = P * (dP - (delta - g)).  A caller with such a
 * gradient computes delta - g itself and hands it to these calls, which skip
 * attn_bwd_d. */
#include "config.h"

#include "attention_handle.h"

fadsl_status fadsl_attention_backward_delta(fadsl_attention *a, uint64_t q, uint64_t k, uint64_t v, uint64_t lse,
                                            uint64_t do_, uint64_t dq, uint64_t dk, uint64_t dv, uint64_t delta,
                                            int B, int H, int KVH, int Nq, int Nkv, int D, int causal, float scale,
                                            fadsl_attention_dtype dtype, void *stream) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, causal != 0, scale, NULL};
  FaAttnNamedPtr ptrs[] = {{"q", q},   {"k", k},   {"v", v},   {"lse", lse},    {"do", do_},
                           {"dq", dq}, {"dk", dk}, {"dv", dv}, {"delta", delta}};
  fadsl_status st = fa_attn_api_check(a, "fadsl_attention_backward_delta", &c, dtype, ptrs, 9, 16);
  if (st != FADSL_SUCCESS)
    return st;
  FaAttnTensors t = {q, k, v, 0, lse, do_, dq, dk, dv, delta, 0, 0};
  FaAttnTarget where = {stream, NULL, 0, 0};
  return fa_attn_api_backward(a, &t, &c, &where, 1, NULL);
}

fadsl_status fadsl_attention_check_shape(fadsl_attention *a, int B, int H, int KVH, int Nq, int Nkv, int D,
                                         int causal, float scale, fadsl_attention_dtype dtype) {
  if (!a)
    return FADSL_ERROR_INVALID_ARGUMENT;
  FaAttnCall c = {B, H, KVH, Nq, Nkv, D, causal != 0, scale, NULL};
  return fa_attn_api_check(a, "fadsl_attention_check_shape", &c, dtype, NULL, 0, 1);
}
