/* check_attention_api.c - the attention C API (fadsl_attention.h) without a
 * GPU: the built-in attention.fa loads; every bad shape, pointer, scale,
 * dtype and config is refused with FADSL_ERROR_INVALID_ARGUMENT and a message
 * that names the problem; a correct call in a context without a device or
 * driver fails cleanly at the launch (no crash, the runtime's message); a
 * program file that is missing or wrong is reported.  Linked against the
 * libraries as users link them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fadsl.h"
#include "fadsl_attention.h"

static int failures;

static void expect(int cond, const char *what, const char *detail) {
  printf("%s: %s%s%s\n", cond ? "ok" : "FAIL", what, detail && !cond ? "\n    got: " : "",
         detail && !cond ? detail : "");
  if (!cond)
    failures++;
}

/* A call's status and message. */
static void expect_error(fadsl_attention *a, fadsl_status st, fadsl_status want, const char *substring,
                         const char *what) {
  const char *msg = fadsl_attention_last_error(a);
  char detail[4400];
  snprintf(detail, sizeof detail, "status %s, message '%s'", fadsl_status_string(st), msg);
  expect(st == want && strstr(msg, substring) != NULL, what, detail);
}

/* 16-byte aligned stand-ins for device pointers: refused before any use */
enum { P = 0x10000 };

static fadsl_status fwd(fadsl_attention *a, uint64_t q, uint64_t o, int B, int H, int KVH, int Nq, int Nkv, int D,
                        int causal, float scale, int dtype) {
  return fadsl_attention_forward(a, q, P + 0x100, P + 0x200, o, P + 0x400, B, H, KVH, Nq, Nkv, D, causal, scale,
                                 (fadsl_attention_dtype)dtype, NULL);
}

static void bad_calls(fadsl_attention *a) {
  fadsl_status st;
  st = fwd(a, P, P + 0x300, 1, 2, 2, 64, 64, 48, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "head dimension D=48", "D = 48 is refused");
  st = fwd(a, P, P + 0x300, 1, 6, 4, 64, 64, 64, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "H=6 query heads are not a multiple of KVH=4", "H % KVH != 0");
  st = fwd(a, P, P + 0x300, 1, 2, 2, 64, 65, 64, 1, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "causal attention needs Nq == Nkv", "causal with Nq != Nkv");
  st = fwd(a, P, P + 0x300, 1, 2, 2, 0, 64, 64, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "every dimension must be at least 1", "Nq = 0");
  st = fwd(a, 0, P + 0x300, 1, 2, 2, 64, 64, 64, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "q is a null pointer", "null q");
  st = fwd(a, P, P + 0x308, 1, 2, 2, 64, 64, 64, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "o (0x10308) is not 16-byte aligned", "misaligned o");
  st = fwd(a, P, P + 0x300, 2, 40000, 40000, 1, 1, 16, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "at most 65535", "B * H beyond the grid");
  /* 2^31 elements in q: taken (64-bit offsets), so the call gets as far as the launch */
  st = fwd(a, P, P + 0x300, 1, 2, 1, 1 << 24, 16, 64, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_NO_DEVICE, "launching attn_fwd",
               "a tensor of 2^31 elements is not refused (without a device its launch fails)");
  st = fwd(a, P, P + 0x300, 1, 2, 2, 64, 64, 64, 0, 0, 7);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "unknown dtype 7", "an unknown dtype");
  st = fwd(a, P, P + 0x300, 1, 2, 2, 64, 64, 64, 0, NAN, FADSL_ATTENTION_BF16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "scale nan", "a NaN scale");
  st = fwd(a, P, P + 0x300, 1, 2, 2, 64, 64, 64, 0, -1, FADSL_ATTENTION_BF16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "scale -1", "a negative scale");
  st = fadsl_attention_backward(a, P, P, P, P, P, P, P, P, P, 0, 1, 2, 2, 64, 64, 64, 0, 0, FADSL_ATTENTION_F16,
                                NULL);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "delta is a null pointer", "backward without a workspace");
  st = fadsl_attention_backward(a, P, P, P, P, P, P + 4, P, P, P, P, 1, 2, 2, 64, 64, 64, 0, 0, FADSL_ATTENTION_F16,
                                NULL);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "do (0x10004) is not 16-byte aligned", "misaligned do");

  st = fadsl_attention_set_config(a, 64, 0, 0, 0);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "give both block_q and block_k", "set_config with one block");
  st = fadsl_attention_set_config(a, 32, 64, 0, 0);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "block_q >= block_k", "set_config with block_q < block_k");
  st = fadsl_attention_set_config(a, 128, 64, 3, 0);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "bad warps 3", "set_config with 3 warps");
  expect(fadsl_attention_set_config(a, 128, 64, 8, 3) == FADSL_SUCCESS, "set_config(128, 64, 8, 3)", NULL);
  expect(fadsl_attention_set_config(a, 0, 0, 0, 0) == FADSL_SUCCESS, "set_config back to automatic", NULL);
  st = fadsl_attention_set_kernel_config(a, FADSL_ATTENTION_BWD_D, 64, 64, 0, 0);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "has no tiles", "set_kernel_config of attn_bwd_d");
  st = fadsl_attention_set_kernel_config(a, FADSL_ATTENTION_BWD, 48, 128, 0, 0);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "attn_bwd: bad BLOCK_Q 48", "set_kernel_config with BLOCK_Q 48");
  expect(fadsl_attention_set_kernel_config(a, FADSL_ATTENTION_BWD, 64, 128, 8, 0) == FADSL_SUCCESS,
         "set_kernel_config(attn_bwd, 64, 128, 8, 0): BLOCK_Q < BLOCK_K for a kernel of its own", NULL);
  expect(fadsl_attention_set_kernel_config(a, FADSL_ATTENTION_BWD, 0, 0, 0, 0) == FADSL_SUCCESS,
         "set_kernel_config back to automatic", NULL);
  st = fadsl_attention_set_kernel_launch(a, FADSL_ATTENTION_BWD_DQ_CONVERT, "tma", NULL);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "set_kernel_launch: kernel", "set_kernel_launch of dq_convert");
  st = fadsl_attention_set_kernel_launch(a, FADSL_ATTENTION_BWD, "tma_wss", NULL);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "attn_bwd: pipeline 'tma_wss': want one of cp_async, tma",
               "set_kernel_launch with an unknown pipeline");
  st = fadsl_attention_set_kernel_launch(a, FADSL_ATTENTION_FWD, NULL, "3");
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "attn_fwd: schedule '3': want one of grid, persistent",
               "set_kernel_launch with schedule 3");
  expect(fadsl_attention_set_kernel_launch(a, FADSL_ATTENTION_FWD, "tma_ws_pp", "persistent") == FADSL_SUCCESS,
         "set_kernel_launch(attn_fwd, tma_ws_pp, persistent)", NULL);
  expect(fadsl_attention_set_kernel_launch(a, FADSL_ATTENTION_FWD, NULL, "") == FADSL_SUCCESS,
         "set_kernel_launch back to automatic", NULL);
  expect(fadsl_config_value("pipeline", "tma_ws") == 4 && fadsl_config_value("schedule", "persistent") == 2 &&
             fadsl_config_value("warps", "8") == 8 && fadsl_config_value("warps", "3") == -1 &&
             fadsl_config_value("pipelines", "tma") == -1 && fadsl_config_value("pipeline", NULL) == 0,
         "fadsl_config_value: names, numbers, unknown axes and values", NULL);
  fadsl_kernel_info info;
  expect(fadsl_attention_kernel_info(a, FADSL_ATTENTION_FWD, &info) == FADSL_ERROR_NOT_FOUND,
         "no kernel info before a launch", NULL);
  expect(fadsl_attention_kernel_info(a, FADSL_ATTENTION_KERNELS, &info) == FADSL_ERROR_INVALID_ARGUMENT,
         "kernel info of a kernel that does not exist", NULL);
}

int main(void) {
  fadsl_context *ctx = NULL;
  fadsl_attention *a = NULL;

  /* a compile-only context: the program loads; launches cannot happen */
  expect(fadsl_context_create(-1, &ctx) == FADSL_SUCCESS, "a context without a device", NULL);
  fadsl_status st = fadsl_attention_create(ctx, &a);
  expect(st == FADSL_SUCCESS && a, "the built-in attention.fa loads and checks", fadsl_attention_last_error(a));
  bad_calls(a);
  st = fwd(a, P, P + 0x300, 2, 8, 2, 100, 100, 64, 1, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_NO_DEVICE, "launching attn_fwd", "a correct call without a device fails cleanly");
  st = fadsl_attention_backward(a, P, P, P, P, P, P, P, P, P, P, 2, 6, 2, 100, 100, 32, 0, 0.1f,
                                FADSL_ATTENTION_BF16, NULL);
  expect_error(a, st, FADSL_ERROR_NO_DEVICE, "launching attn_bwd_d",
               "a correct backward call (GQA 3:1) without a device fails cleanly");
  fadsl_attention_destroy(a);

  /* program files */
  st = fadsl_attention_create_from_file(ctx, "/nonexistent/attention.fa", &a);
  expect_error(a, st, FADSL_ERROR_IO, "/nonexistent/attention.fa", "a missing program file");
  st = fwd(a, P, P + 0x300, 1, 2, 2, 64, 64, 64, 0, 0, FADSL_ATTENTION_F16);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "the handle has no program", "a handle whose creation failed");
  fadsl_attention_destroy(a);
  char path[] = "/tmp/fadsl-attn-api-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) {
    const char *bad = "@kernel(grid=(1,))\ndef attn_fwd(x: *f32):\n    y = = 1\n";
    expect(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad), "writing a bad program", NULL);
    close(fd);
    st = fadsl_attention_create_from_file(ctx, path, &a);
    expect_error(a, st, FADSL_ERROR_PROGRAM, "error:", "a program with a syntax error");
    fadsl_attention_destroy(a);
    unlink(path);
  }
  st = fadsl_attention_create_from_file(ctx, NULL, &a);
  expect_error(a, st, FADSL_ERROR_INVALID_ARGUMENT, "no path", "a NULL path");
  fadsl_attention_destroy(a);
  fadsl_context_destroy(ctx);

  /* no driver at all: the context still loads programs, a launch says why it cannot run */
  setenv("FADSL_NO_DRIVER", "1", 1);
  ctx = NULL;
  st = fadsl_context_create(0, &ctx);
  expect(st == FADSL_ERROR_NO_DRIVER && ctx, "FADSL_NO_DRIVER=1: the context says no driver", NULL);
  st = fadsl_attention_create(ctx, &a);
  expect(st == FADSL_SUCCESS, "the program loads without a driver", fadsl_attention_last_error(a));
  st = fwd(a, P, P + 0x300, 1, 4, 4, 77, 77, 128, 0, 0, FADSL_ATTENTION_F16);
  expect(st != FADSL_SUCCESS && strstr(fadsl_attention_last_error(a), "launching attn_fwd"),
         "a launch without a driver fails with the runtime's message", fadsl_attention_last_error(a));
  printf("    (%s: %s)\n", fadsl_status_string(st), fadsl_attention_last_error(a));
  fadsl_attention_destroy(a);
  fadsl_context_destroy(ctx);

  /* small things */
  expect(fadsl_attention_workspace_bytes(2, 3, 5) == 120 && fadsl_attention_workspace_bytes(0, 3, 5) == 0,
         "workspace bytes", NULL);
  expect(!strcmp(fadsl_attention_kernel_name(FADSL_ATTENTION_BWD_DKDV), "attn_bwd_dkdv") &&
             !fadsl_attention_kernel_name(FADSL_ATTENTION_KERNELS),
         "kernel names", NULL);
  expect(fadsl_attention_forward(NULL, P, P, P, P, P, 1, 1, 1, 1, 1, 16, 0, 0, FADSL_ATTENTION_F16, NULL) ==
             FADSL_ERROR_INVALID_ARGUMENT,
         "a NULL handle", NULL);
  fadsl_attention_destroy(NULL);
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
