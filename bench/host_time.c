/* host_time.c - host time per call of libfadsl_attention: the forward pass
 * and the (deterministic) backward pass at B=1, H=8, D=64, causal, N given,
 * called ITERS times back to back on one stream and synchronised once, so
 * the time is the host's wherever the GPU's is shorter (small N).
 * usage: host_time [N [ITERS]]; built and run by bench/host-time.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fadsl.h"
#include "fadsl_attention.h"

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 256, iters = argc > 2 ? atoi(argv[2]) : 500;
  const int B = 1, H = 8, D = 64;
  fadsl_context *ctx;
  fadsl_attention *attn;
  if (n <= 0 || iters <= 0) {
    fprintf(stderr, "usage: host_time [N [ITERS]]\n");
    return 2;
  }
  if (fadsl_context_create(0, &ctx) != FADSL_SUCCESS || fadsl_attention_create(ctx, &attn) != FADSL_SUCCESS) {
    fprintf(stderr, "host_time: no device: %s\n", fadsl_context_last_error(ctx));
    return 1;
  }
  size_t tensor = (size_t)B * H * n * D * 2, rows = (size_t)B * H * n * 4;
  uint64_t buf[10];   /* q k v o do dq dk dv, lse, delta */
  for (int i = 0; i < 10; i++)
    if (fadsl_malloc(ctx, i < 8 ? tensor : rows, &buf[i]) != FADSL_SUCCESS) {
      fprintf(stderr, "host_time: %s\n", fadsl_context_last_error(ctx));
      return 1;
    }
  double fwd = 0, bwd = 0;
  for (int pass = 0; pass < 2; pass++) {   /* the first compiles and warms up */
    int count = pass ? iters : 3;
    double t = seconds();
    for (int i = 0; i < count; i++)
      if (fadsl_attention_forward(attn, buf[0], buf[1], buf[2], buf[3], buf[8], B, H, H, n, n, D, 1, 0.125f,
                                  FADSL_ATTENTION_F16, NULL) != FADSL_SUCCESS) {
        fprintf(stderr, "host_time: forward: %s\n", fadsl_attention_last_error(attn));
        return 1;
      }
    fadsl_synchronize(ctx, NULL);
    fwd = (seconds() - t) / count;
    t = seconds();
    for (int i = 0; i < count; i++)
      if (fadsl_attention_backward(attn, buf[0], buf[1], buf[2], buf[3], buf[8], buf[4], buf[5], buf[6], buf[7],
                                   buf[9], B, H, H, n, n, D, 1, 0.125f, FADSL_ATTENTION_F16,
                                   NULL) != FADSL_SUCCESS) {
        fprintf(stderr, "host_time: backward: %s\n", fadsl_attention_last_error(attn));
        return 1;
      }
    fadsl_synchronize(ctx, NULL);
    bwd = (seconds() - t) / count;
  }
  printf("N=%d: forward %.1f us a call, backward %.1f us a call (%d calls each)\n", n, fwd * 1e6, bwd * 1e6, iters);
  for (int i = 0; i < 10; i++) fadsl_free(ctx, buf[i]);
  fadsl_attention_destroy(attn);
  fadsl_context_destroy(ctx);
  return 0;
}
