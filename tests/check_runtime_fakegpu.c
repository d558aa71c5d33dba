/* check_runtime_fakegpu.c - libfadsl's launch path against a stand-in CUDA
 * driver (runtime_fake_cuda.c, loaded through FADSL_CUDA_DRIVER_PATH by
 * tests/runtime-fake-driver.sh), so that it runs on machines without a GPU:
 * device queries and the architecture rule, the grid computed from
 * @kernel(grid=...) or given by the caller, the default configuration, the kernel parameters as packed for cuLaunchKernel,
 * declared extents checked against allocations, the dynamic shared memory
 * attribute and the device's shared memory limit, the context push/pop
 * balance, FADSL_LOG=info's lines (launch; libraries loaded).
 * Nothing runs on a device here: the GPU tests check results. */
#define _GNU_SOURCE
#include "config.h"

#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"
#include "tune_db.h"

/* LeakSanitizer (sanitizer builds): NVRTC and the CUDA driver keep allocations
 * for the life of the process (their caches, the C++ runtime NVRTC brings),
 * which are not leaks of fadsl's.  Only reports whose allocation stack passes
 * through those two libraries are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\nleak:libcuda\n"; }

#ifndef FADSL_TOP_SRCDIR
#define FADSL_TOP_SRCDIR "."
#endif

static fadsl_context *ctx;
static char cache_dir[256];
static void *fake;

static void setup(void) {
  unsetenv("FADSL_NO_DRIVER");
  unsetenv("FADSL_PIPELINE");
  unsetenv("FADSL_SCHEDULE");
  unsetenv("FAKE_CUDA_OCCUPANCY");
  unsetenv("FAKE_CUDA_CC");
  unsetenv("FAKE_CUDA_DEVICES");
  unsetenv("FAKE_CUDA_INIT_ERROR");
  snprintf(cache_dir, sizeof cache_dir, "/tmp/fadsl-fake-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(cache_dir));
  setenv("FADSL_CACHE_DIR", cache_dir, 1);
  setenv("FADSL_TUNE_DB", "/nonexistent/tune.json", 1);
  fadsl_status st = fadsl_context_create(0, &ctx);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  const char *path = getenv("FADSL_CUDA_DRIVER_PATH");
  ck_assert_msg(path != NULL, "run this through runtime-fake-driver.sh");
  fake = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  ck_assert_msg(fake && dlsym(fake, "fake_cuda_launches"), "%s is not the stand-in driver", path);
}

static void teardown(void) {
  fadsl_context_destroy(ctx);
  if (fake) dlclose(fake);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache_dir);
}

static int fake_int(const char *name) {
  int (*f)(void);
  void *p = dlsym(fake, name);
  memcpy(&f, &p, sizeof p);
  return f();
}

typedef struct Launch {
  unsigned grid[3], block[3], shared;
  uint64_t params[64];
  int nparams;
  const char *entry;
} Launch;

static Launch last_launch(void) {
  Launch l;
  const char *(*f)(unsigned *, unsigned *, unsigned *, uint64_t *, int *);
  void *p = dlsym(fake, "fake_cuda_last_launch");
  memcpy(&f, &p, sizeof p);
  l.entry = f(l.grid, l.block, &l.shared, l.params, &l.nparams);
  return l;
}

static float param_f32(uint64_t v) {
  float f;
  uint32_t bits = (uint32_t)v;
  memcpy(&f, &bits, 4);
  return f;
}

static const char *scale_fa =
    "@kernel(grid=(cdiv(n, BLOCK), 3, 1))\n"
    "@autotune(BLOCK=[128, 256], warps=[4, 8], key=(n,))\n"
    "def scale(x: *f32[n], y: *f32[n], a: f32, n: i32, BLOCK: constexpr):\n"
    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
    "    m = i < n\n"
    "    store(y + i, load(x + i, mask=m) * a, mask=m)\n";

START_TEST(test_device_and_arch) {
  fadsl_device_info info;
  ck_assert_int_eq(fadsl_context_device_info(ctx, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.name, "Fake GPU");
  ck_assert_str_eq(info.arch, "sm_90a");
  ck_assert_int_eq(info.multiprocessors, 132);
  ck_assert_int_eq(info.driver_version, 13000);
  fadsl_context_destroy(ctx);

  /* FADSL_LOG=info names the driver's file and version once, when the
   * device is opened (stderr captured) */
  fflush(stderr);
  int saved_fd = dup(2);
  FILE *cap = tmpfile();
  ck_assert(saved_fd >= 0 && cap && dup2(fileno(cap), 2) >= 0);
  setenv("FADSL_LOG", "info", 1);
  fadsl_status st = fadsl_context_create(0, &ctx);
  fadsl_context_device_info(ctx, &info);
  unsetenv("FADSL_LOG");
  fflush(stderr);
  dup2(saved_fd, 2);
  close(saved_fd);
  ck_assert_int_eq(st, FADSL_SUCCESS);
  fadsl_context_destroy(ctx);
  char text[1024] = "", want[700];
  rewind(cap);
  size_t got = fread(text, 1, sizeof text - 1, cap);
  text[got] = '\0';
  fclose(cap);
  snprintf(want, sizeof want, "fadsl: CUDA driver 13.0 from %s; device 0: Fake GPU (sm_90a)\n",
           getenv("FADSL_CUDA_DRIVER_PATH"));
  ck_assert_str_eq(text, want);
  setenv("FAKE_CUDA_CC", "86", 1);
  ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_context_device_info(ctx, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.arch, "sm_86");
  fadsl_context_destroy(ctx);
  /* FADSL_ARCH: an older architecture is taken; a newer one, an arch-specific
     one of another device, or a word that is no architecture is refused */
  unsetenv("FAKE_CUDA_CC");
  setenv("FADSL_ARCH", "sm_90", 1);
  ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_context_device_info(ctx, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.arch, "sm_90");
  fadsl_context_destroy(ctx);
  setenv("FADSL_ARCH", "sm_80", 1);
  ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_context_device_info(ctx, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.arch, "sm_80");
  fadsl_context_destroy(ctx);
  static const char *const refused[] = {"sm_100", "sm_86a", "gfx90a", "sm_"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    setenv("FADSL_ARCH", refused[i], 1);
    ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_ERROR_UNSUPPORTED);
    ck_assert_msg(strstr(fadsl_context_last_error(ctx), "FADSL_ARCH=") &&
                      strstr(fadsl_context_last_error(ctx), "compute capability 9.0"),
                  "%s", fadsl_context_last_error(ctx));
    fadsl_context_destroy(ctx);
  }
  unsetenv("FADSL_ARCH");
  setenv("FAKE_CUDA_CC", "86", 1);
  /* a device number the machine does not have */
  ck_assert_int_eq(fadsl_context_create(1, &ctx), FADSL_ERROR_NO_DEVICE);
  ck_assert_str_eq(fadsl_context_last_error(ctx), "no CUDA device 1 (this machine has 1)");
  fadsl_context_destroy(ctx);
  /* a driver that finds no device at all */
  setenv("FAKE_CUDA_INIT_ERROR", "100", 1);
  ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_ERROR_NO_DEVICE);
  ck_assert_str_eq(fadsl_context_last_error(ctx),
                   "no CUDA device found (cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected))");
  uint64_t p;
  ck_assert_int_eq(fadsl_malloc(ctx, 64, &p), FADSL_ERROR_NO_DEVICE);
  unsetenv("FAKE_CUDA_INIT_ERROR");
  unsetenv("FAKE_CUDA_CC");
  fadsl_context_destroy(ctx);
  /* a driver path that does not load */
  char *saved = strdup(getenv("FADSL_CUDA_DRIVER_PATH"));
  setenv("FADSL_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
  ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_ERROR_NO_DRIVER);
  ck_assert_msg(strstr(fadsl_context_last_error(ctx), "no CUDA driver found (libcuda.so.1 could not be "
                                                      "loaded: /nonexistent/libcuda.so.1") &&
                    strstr(fadsl_context_last_error(ctx), "FADSL_CUDA_DRIVER_PATH"),
                "%s", fadsl_context_last_error(ctx));
  setenv("FADSL_CUDA_DRIVER_PATH", saved, 1);
  free(saved);
}
END_TEST

/* A launch takes its configuration from the tuning database, and follows
 * the file when it changes (the context keeps it parsed between launches). */
static void store_scale_entry(const char *path, long block, int warps) {
  FaBinding key = {"n", {CK_INT, 1000, 0, DT_I32, NULL}};
  FaBinding axis = {"BLOCK", {CK_INT, block, 0, DT_I32, NULL}};
  static const char *const exact[] = {"n"};
  FaTuneEntry e;
  memset(&e, 0, sizeof e);
  e.program = "scale.fa";
  e.kernel = "scale";
  e.key = &key;
  e.nkey = 1;
  e.exact_keys = exact;
  e.nexact_keys = 1;
  e.gpu_name = "Fake GPU";
  e.arch = "sm_90a";
  e.fadsl_version = PACKAGE_VERSION;
  e.best.values = &axis;
  e.best.nvalues = 1;
  e.best.config.warps = warps;
  e.best.config.stages = 2;
  e.best.median_ms = 0.01;
  e.dflt.median_ms = -1;
  e.candidates = 4;
  StrBuf err;
  fa_sb_init(&err);
  ck_assert_msg(fa_tune_db_store(path, &e, 1, &err, NULL), "%s", err.data ? err.data : "");
  fa_sb_free(&err);
}

START_TEST(test_tuned_launch_follows_the_database) {
  char db[300];
  snprintf(db, sizeof db, "%s/tuned.json", cache_dir);
  ck_assert_int_eq(fadsl_context_set_tune_db(ctx, db), FADSL_SUCCESS);
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(ctx, "scale.fa", scale_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "scale", &k), FADSL_SUCCESS);
  uint64_t x, y;
  ck_assert_int_eq(fadsl_malloc(ctx, 4000, &x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 4000, &y), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", y), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 2.0f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", 1000), FADSL_SUCCESS);
  fadsl_kernel_info info;
  /* no database yet: the default (BLOCK=128, 4 warps) */
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.config_source, "default");
  ck_assert_uint_eq(last_launch().block[0], 128);
  static const struct { long block; int warps; } rounds[] = {{256, 8}, {128, 8}, {256, 4}};
  for (size_t r = 0; r < sizeof rounds / sizeof *rounds; r++) {
    store_scale_entry(db, rounds[r].block, rounds[r].warps);
    for (int again = 0; again < 2; again++) {   /* the second launch: the kept copy */
      ck_assert_msg(fadsl_launch(k, a, NULL, &info) == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
      ck_assert_str_eq(info.config_source, "tuned");
      ck_assert_int_eq(info.warps, rounds[r].warps);
      Launch l = last_launch();
      ck_assert_uint_eq(l.block[0], 32u * (unsigned)rounds[r].warps);
      ck_assert_uint_eq(l.grid[0], (unsigned)((1000 + rounds[r].block - 1) / rounds[r].block));
    }
  }
  /* the file removed: the default again */
  ck_assert_int_eq(unlink(db), 0);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.config_source, "default");
  fadsl_args_destroy(a);
  fadsl_free(ctx, x);
  fadsl_free(ctx, y);
  fadsl_program_destroy(prog);
}
END_TEST

START_TEST(test_launch_parameters_and_grid) {
  FILE *log = tmpfile();
  ctx->log.stream = log;
  ctx->log.level = FA_LOG_INFO;
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(ctx, "scale.fa", scale_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "scale", &k), FADSL_SUCCESS);
  enum { N = 1000 };
  uint64_t x, y, small;
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * N, &x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * N, &y), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * N - 4, &small), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", y), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 2.5f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", N), FADSL_SUCCESS);
  fadsl_kernel_info info;
  fadsl_status st = fadsl_launch(k, a, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_int_eq(fake_int("fake_cuda_launches"), 1);
  Launch l = last_launch();
  ck_assert_str_eq(l.entry, info.entry);
  ck_assert_uint_eq(l.grid[0], (N + 127) / 128);
  ck_assert_uint_eq(l.grid[1], 3);
  ck_assert_uint_eq(l.grid[2], 1);
  ck_assert_uint_eq(l.block[0], 128);
  ck_assert_uint_eq(l.block[1], 1);
  ck_assert_int_eq(l.nparams, 4);
  ck_assert_uint_eq(l.params[0], x);
  ck_assert_uint_eq(l.params[1], y);
  ck_assert_float_eq(param_f32(l.params[2]), 2.5f);
  ck_assert_int_eq((int32_t)l.params[3], N);
  ck_assert_uint_eq(info.grid[0], l.grid[0]);
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);   /* every push popped */

  /* the log: which NVRTC (once per context), then the launch line */
  fflush(log);
  rewind(log);
  char line[512] = "";
  ck_assert_ptr_nonnull(fgets(line, sizeof line, log));
  ck_assert_msg(strncmp(line, "fadsl: NVRTC ", 13) == 0 && strstr(line, " from /") &&
                    strstr(line, "libnvrtc"),
                "%s", line);
  ck_assert_ptr_nonnull(fgets(line, sizeof line, log));
  ck_assert_msg(strstr(line, "fadsl: launch scale [BLOCK=128] warps=4 stages=2 (default) assume=[n%8] arch=sm_90a "
                             "grid=(8,3,1) threads=128") &&
                    strstr(line, "cache=miss"),
                "%s", line);

  /* a second launch: cached; a bigger explicit config */
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.cache, "memory");
  ck_assert_int_eq(fadsl_args_set_config(a, 8, 0), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  l = last_launch();
  ck_assert_uint_eq(l.block[0], 256);
  ck_assert_str_eq(info.config_source, "explicit+default");

  /* declared extents against allocations */
  fadsl_args_clear(a);
  fadsl_args_set_ptr(a, "x", x);
  fadsl_args_set_ptr(a, "y", small);
  fadsl_args_set_f32(a, "a", 1);
  fadsl_args_set_i32(a, "n", N);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(fadsl_context_last_error(ctx),
                       "kernel 'scale': buffer 'y' is too small: the kernel declares f32[1000] "
                       "(4000 bytes) but the allocation holds 3996 bytes from that address"),
                "%s", fadsl_context_last_error(ctx));
  fadsl_args_clear(a);
  fadsl_args_set_ptr(a, "x", x + 8);   /* an offset into an allocation counts from there */
  fadsl_args_set_ptr(a, "y", y);
  fadsl_args_set_f32(a, "a", 1);
  fadsl_args_set_i32(a, "n", N);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "buffer 'x' is too small"));
  fadsl_args_clear(a);
  fadsl_args_set_ptr(a, "x", 0);
  fadsl_args_set_ptr(a, "y", y);
  fadsl_args_set_f32(a, "a", 1);
  fadsl_args_set_i32(a, "n", N);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "'x' is a null pointer"));
  /* an empty problem launches nothing */
  int before = fake_int("fake_cuda_launches");
  fadsl_args_clear(a);
  fadsl_args_set_ptr(a, "x", x);
  fadsl_args_set_ptr(a, "y", y);
  fadsl_args_set_f32(a, "a", 1);
  fadsl_args_set_i32(a, "n", 0);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_launches"), before);
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  /* NVRTC was named once, though it compiled three times */
  fflush(log);
  rewind(log);
  int nvrtc_lines = 0;
  while (fgets(line, sizeof line, log)) nvrtc_lines += strncmp(line, "fadsl: NVRTC ", 13) == 0;
  ck_assert_int_eq(nvrtc_lines, 1);

  fadsl_args_destroy(a);
  fadsl_program_destroy(prog);
  fadsl_free(ctx, x);
  fadsl_free(ctx, y);
  fadsl_free(ctx, small);
  fclose(log);
}
END_TEST

/* A grid given by the caller (fadsl_args_set_grid) is the launch's, in
 * place of @kernel(grid=...), until fadsl_args_clear; a zero dimension
 * launches nothing; out of CUDA's range is refused when set. */
/* A variant keeps the grid and extents of its last launch's scalars
 * (launch.c's host memo): launches with other values of n, on the same
 * specialisation (1000, 3000 and 1001 are all 8 mod 16), get their own
 * grid, and their own extents checked against the buffers. */
static fadsl_status launch_scale(fadsl_kernel *k, fadsl_args *a, uint64_t x, uint64_t y, int n,
                                 fadsl_kernel_info *info) {
  fadsl_args_clear(a);
  fadsl_status st = fadsl_args_set_ptr(a, "x", x);
  if (st == FADSL_SUCCESS) st = fadsl_args_set_ptr(a, "y", y);
  if (st == FADSL_SUCCESS) st = fadsl_args_set_f32(a, "a", 1.0f);
  if (st == FADSL_SUCCESS) st = fadsl_args_set_i32(a, "n", n);
  return st == FADSL_SUCCESS ? fadsl_launch(k, a, NULL, info) : st;
}

START_TEST(test_grid_and_extents_follow_the_scalars) {
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(ctx, "scale.fa", scale_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "scale", &k), FADSL_SUCCESS);
  uint64_t x, y;
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * 3000, &x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * 1000, &y), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  static const struct { int n; unsigned blocks; } runs[] = {{1000, 8}, {3000, 24}, {1000, 8}, {1000, 8}, {3000, 24}};
  fadsl_kernel_info info;
  char entry[128] = "";
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    fadsl_status st = launch_scale(k, a, x, x, runs[r].n, &info);
    ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
    Launch l = last_launch();
    ck_assert_uint_eq(l.grid[0], runs[r].blocks);
    ck_assert_uint_eq(info.grid[0], runs[r].blocks);
    if (r == 0) snprintf(entry, sizeof entry, "%s", l.entry);
    ck_assert_str_eq(l.entry, entry);   /* one specialisation throughout */
  }
  /* y holds 1000 floats: fine at n=1000, too small at 1001, fine again at 1000 */
  ck_assert_int_eq(launch_scale(k, a, x, y, 1000, &info), FADSL_SUCCESS);
  ck_assert_int_eq(launch_scale(k, a, x, y, 1001, &info), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "buffer 'y' is too small"));
  ck_assert_int_eq(launch_scale(k, a, x, y, 1000, &info), FADSL_SUCCESS);
  ck_assert_uint_eq(last_launch().grid[0], 8);
  fadsl_args_destroy(a);
  fadsl_free(ctx, x);
  fadsl_free(ctx, y);
  fadsl_program_destroy(prog);
}
END_TEST

START_TEST(test_caller_grid) {
  FILE *log = tmpfile();
  ctx->log.stream = log;
  ctx->log.level = FA_LOG_INFO;
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(ctx, "scale.fa", scale_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "scale", &k), FADSL_SUCCESS);
  enum { N = 1000 };
  uint64_t x, y;
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * N, &x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * N, &y), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", y), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 2.5f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", N), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_grid(a, 5, 2, 7), FADSL_SUCCESS);
  fadsl_kernel_info info;
  ck_assert_msg(fadsl_launch(k, a, NULL, &info) == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  Launch l = last_launch();
  ck_assert_uint_eq(l.grid[0], 5);
  ck_assert_uint_eq(l.grid[1], 2);
  ck_assert_uint_eq(l.grid[2], 7);
  ck_assert_uint_eq(info.grid[0], 5);
  ck_assert_uint_eq(info.grid[2], 7);
  ck_assert_uint_eq(l.block[0], 128);   /* the configuration is still the default one */
  fflush(log);
  rewind(log);
  char line[512] = "";
  while (fgets(line, sizeof line, log) && strncmp(line, "fadsl: launch ", 14) != 0) line[0] = '\0';
  ck_assert_msg(strstr(line, "grid=(5,2,7)"), "%s", line);
  /* a zero dimension launches nothing, (0, 0, 0) too */
  int before = fake_int("fake_cuda_launches");
  ck_assert_int_eq(fadsl_args_set_grid(a, 4, 0, 1), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_launches"), before);
  ck_assert_uint_eq(info.grid[0], 4);
  ck_assert_uint_eq(info.grid[1], 0);
  ck_assert_int_eq(fadsl_args_set_grid(a, 0, 0, 0), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_launches"), before);
  /* limits, checked when the grid is set; a refused grid leaves the old one */
  ck_assert_int_eq(fadsl_args_set_grid(a, 1, 65536, 1), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_str_eq(fadsl_context_last_error(ctx), "kernel 'scale': grid dimension 1 is 65536 (must be 0..65535)");
  ck_assert_int_eq(fadsl_args_set_grid(a, 2147483648LL, 1, 1), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(fadsl_args_set_grid(a, 1, 1, -3), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_launches"), before);
  ck_assert_int_eq(fadsl_args_set_grid(a, 2147483647LL, 65535, 65535), FADSL_SUCCESS);
  /* fadsl_args_clear forgets it */
  fadsl_args_clear(a);
  fadsl_args_set_ptr(a, "x", x);
  fadsl_args_set_ptr(a, "y", y);
  fadsl_args_set_f32(a, "a", 1);
  fadsl_args_set_i32(a, "n", N);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  l = last_launch();
  ck_assert_uint_eq(l.grid[0], (N + 127) / 128);
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  fadsl_args_destroy(a);
  fadsl_program_destroy(prog);
  fadsl_free(ctx, x);
  fadsl_free(ctx, y);
  fclose(log);
}
END_TEST

/* The default point at a launch (autotune_point.h): the first point the
 * prune admits with the launch's values (here its runtime size n); explicit
 * values are taken as given even where the prune rejects them; when no point
 * passes (a problem smaller than every tile), the first values, with a
 * warning under FADSL_LOG=warn. */
static const char *tiles_fa =
    "@kernel(grid=(cdiv(n, BLOCK),))\n"
    "@autotune(BLOCK=[64, 128, 256], warps=[4, 8], prune=BLOCK >= 32 * warps and BLOCK <= n)\n"
    "def tiles(x: *f32[n], n: i32, BLOCK: constexpr):\n"
    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
    "    store(x + i, zeros((BLOCK,), f32), mask=i < n)\n";

static void launch_tiles(fadsl_kernel *k, uint64_t x, int n, int block, int warps, fadsl_kernel_info *info) {
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", n), FADSL_SUCCESS);
  if (block) ck_assert_int_eq(fadsl_args_set_int(a, "BLOCK", block), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_config(a, warps, 0), FADSL_SUCCESS);
  ck_assert_msg(fadsl_launch(k, a, NULL, info) == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  fadsl_args_destroy(a);
}

START_TEST(test_default_point_at_launch) {
  FILE *log = tmpfile();
  ctx->log.stream = log;
  ctx->log.level = FA_LOG_WARN;
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(ctx, "tiles.fa", tiles_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "tiles", &k), FADSL_SUCCESS);
  uint64_t x;
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * 1000, &x), FADSL_SUCCESS);
  fadsl_kernel_info info;
  /* 64 >= 32 * 4 fails; 128 with 4 warps is the first that passes */
  launch_tiles(k, x, 1000, 0, 0, &info);
  ck_assert_str_eq(info.constexprs, "BLOCK=128");
  ck_assert_int_eq(info.warps, 4);
  ck_assert_str_eq(info.config_source, "default");
  /* warps=8 given: BLOCK=256 is the first that passes with it */
  launch_tiles(k, x, 1000, 0, 8, &info);
  ck_assert_str_eq(info.constexprs, "BLOCK=256");
  ck_assert_str_eq(info.config_source, "explicit+default");
  /* BLOCK=64 and 8 warps, which the prune rejects, are launched as given */
  launch_tiles(k, x, 1000, 64, 8, &info);
  ck_assert_str_eq(info.constexprs, "BLOCK=64");
  ck_assert_int_eq(info.warps, 8);
  ck_assert_uint_eq(last_launch().block[0], 256);
  ck_assert_str_eq(info.config_source, "explicit");
  fflush(log);
  ck_assert_int_eq(ftell(log), 0);   /* no warning so far */
  /* n = 40: no tile fits; the first values run, and the log says why */
  launch_tiles(k, x, 40, 0, 0, &info);
  ck_assert_str_eq(info.constexprs, "BLOCK=64");
  ck_assert_int_eq(info.warps, 4);
  ck_assert_str_eq(info.config_source, "default");
  ck_assert_uint_eq(last_launch().grid[0], 1);
  fflush(log);
  rewind(log);
  char line[512] = "";
  ck_assert_ptr_nonnull(fgets(line, sizeof line, log));
  ck_assert_str_eq(line, "fadsl: warning: tiles.fa:2:53: no point of the @autotune space of kernel 'tiles' passes "
                         "its prune; using the first values: BLOCK=64 warps=4\n");
  fadsl_program_destroy(prog);
  fadsl_free(ctx, x);
  fclose(log);
}
END_TEST

/* A prune reads the compute capability of the target a launch compiles for
 * as `arch`: the device's (FAKE_CUDA_CC), or FADSL_ARCH's where that is set. */
static const char *arch_fa =
    "@kernel(grid=(cdiv(n, BLOCK),))\n"
    "@autotune(BLOCK=[256, 128], prune=BLOCK == 128 or arch >= 90)\n"
    "def fill(x: *f32[n], n: i32, BLOCK: constexpr):\n"
    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
    "    store(x + i, zeros((BLOCK,), f32), mask=i < n)\n";

/* The constexprs of fill's default launch on a context made with FAKE_CUDA_CC
 * and FADSL_ARCH as given (NULL: unset). */
static const char *fill_src;   /* arch_fa unless a test sets another */

static void default_fill(const char *cc, const char *arch, char *out, size_t size) {
  if (cc) setenv("FAKE_CUDA_CC", cc, 1);
  if (arch) setenv("FADSL_ARCH", arch, 1);
  fadsl_context *c;
  ck_assert_int_eq(fadsl_context_create(0, &c), FADSL_SUCCESS);
  unsetenv("FAKE_CUDA_CC");
  unsetenv("FADSL_ARCH");
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(c, "arch.fa", fill_src ? fill_src : arch_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "fill", &k), FADSL_SUCCESS);
  uint64_t x;
  ck_assert_int_eq(fadsl_malloc(c, 4 * 1000, &x), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", 1000), FADSL_SUCCESS);
  fadsl_kernel_info info;
  ck_assert_msg(fadsl_launch(k, a, NULL, &info) == FADSL_SUCCESS, "%s", fadsl_context_last_error(c));
  snprintf(out, size, "%s %s %s", info.arch, info.constexprs, info.config_source);
  fadsl_args_destroy(a);
  fadsl_free(c, x);
  fadsl_program_destroy(prog);
  fadsl_context_destroy(c);
}

START_TEST(test_default_point_follows_the_target) {
  char got[256];
  default_fill("90", NULL, got, sizeof got);
  ck_assert_str_eq(got, "sm_90a BLOCK=256 default");
  default_fill("80", NULL, got, sizeof got);
  ck_assert_str_eq(got, "sm_80 BLOCK=128 default");
  default_fill("86", NULL, got, sizeof got);
  ck_assert_str_eq(got, "sm_86 BLOCK=128 default");
  default_fill("90", "sm_80", got, sizeof got);   /* compiled for sm_80: the prune sees 80 */
  ck_assert_str_eq(got, "sm_80 BLOCK=128 default");
}
END_TEST

/* @autotune(prefer=...) at a launch: on the target it reads as `arch` (and
 * with the launch's scalars, n = 1000 here) the first point the prune admits
 * and prefer takes, elsewhere the prune's first. */
static const char *prefer_fa =
    "@kernel(grid=(cdiv(n, BLOCK),))\n"
    "@autotune(BLOCK=[256, 128, 64], prune=BLOCK <= 128 or arch >= 90, prefer=BLOCK == 64 and arch >= 90 and n > 500)\n"
    "def fill(x: *f32[n], n: i32, BLOCK: constexpr):\n"
    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
    "    store(x + i, zeros((BLOCK,), f32), mask=i < n)\n";

START_TEST(test_default_point_prefer) {
  char got[256];
  fill_src = prefer_fa;
  default_fill("90", NULL, got, sizeof got);
  ck_assert_str_eq(got, "sm_90a BLOCK=64 default");
  default_fill("80", NULL, got, sizeof got);
  ck_assert_str_eq(got, "sm_80 BLOCK=128 default");
  default_fill("90", "sm_80", got, sizeof got);   /* compiled for sm_80: prefer sees 80 */
  ck_assert_str_eq(got, "sm_80 BLOCK=128 default");
  fill_src = NULL;
}
END_TEST

/* The default point a launch chose is kept on the kernel, keyed on the values
 * the prune and prefer read: one program, launches with n = 1000, 100 and
 * 1000 again must follow prefer's `n > 500` each time (a point kept without
 * n in its key would answer 64 for n = 100), while a scalar they do not read
 * (m) shares the kept point. */
static const char *kept_fa =
    "@kernel(grid=(cdiv(n, BLOCK),))\n"
    "@autotune(BLOCK=[256, 128, 64], prune=BLOCK <= 128, prefer=BLOCK == 64 and n > 500)\n"
    "def fill(x: *f32[n], n: i32, m: i32, BLOCK: constexpr):\n"
    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
    "    store(x + i, zeros((BLOCK,), f32) + m, mask=i < n)\n";

static void launch_kept(fadsl_kernel *k, uint64_t x, int n, int m, char *out, size_t size) {
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", n), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "m", m), FADSL_SUCCESS);
  fadsl_kernel_info info;
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  snprintf(out, size, "%s %s", info.constexprs, info.config_source);
  fadsl_args_destroy(a);
}

START_TEST(test_default_point_kept_per_values) {
  fadsl_context *c;
  ck_assert_int_eq(fadsl_context_create(0, &c), FADSL_SUCCESS);
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(c, "kept.fa", kept_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "fill", &k), FADSL_SUCCESS);
  uint64_t x;
  ck_assert_int_eq(fadsl_malloc(c, 4 * 1000, &x), FADSL_SUCCESS);
  char got[128];
  const struct { int n, m; const char *want; } launches[] = {
      {1000, 1, "BLOCK=64 default"}, {100, 1, "BLOCK=128 default"}, {1000, 2, "BLOCK=64 default"},
      {100, 3, "BLOCK=128 default"}, {600, 1, "BLOCK=64 default"}};
  for (size_t i = 0; i < sizeof launches / sizeof *launches; i++) {
    launch_kept(k, x, launches[i].n, launches[i].m, got, sizeof got);
    ck_assert_msg(!strcmp(got, launches[i].want), "n=%d m=%d: %s, want %s", launches[i].n, launches[i].m, got,
                  launches[i].want);
  }
  fadsl_free(c, x);
  fadsl_program_destroy(prog);
  fadsl_context_destroy(c);
}
END_TEST

/* attention.fa's forward kernel: the grid of its @kernel and its
 * parameters in order.  The shared memory the backend asks for depends on
 * the configuration (and changes as the backend does), so the test picks
 * the first of a few configurations that fits the device, by what
 * fadsl_compile reports, and judges the launch by that report. */
static void bind_attention(fadsl_args *a, uint64_t q, uint64_t kk, uint64_t v, uint64_t lse,
                           uint64_t o, int n_zh, int n, int groups, int d) {
  fadsl_args_clear(a);
  fadsl_args_set_ptr(a, "t_q", q);
  fadsl_args_set_ptr(a, "t_k", kk);
  fadsl_args_set_ptr(a, "t_v", v);
  fadsl_args_set_f32(a, "sm_scale", 0.125f);
  fadsl_args_set_ptr(a, "t_lse", lse);
  fadsl_args_set_ptr(a, "t_o", o);
  fadsl_args_set_i32(a, "n_zh", n_zh);
  fadsl_args_set_i32(a, "q_seq_len", n);
  fadsl_args_set_i32(a, "kv_seq_len", n);
  fadsl_args_set_int(a, "n_groups", groups);
  fadsl_args_set_int(a, "d_head", d);
  fadsl_args_set_bool(a, "is_causal", 1);
  fadsl_args_set_dtype(a, "T", "f16");
}

START_TEST(test_attention_launch) {
  enum { B = 2, H = 8, KVH = 2, G = H / KVH, N = 1000, D = 128 };
  fadsl_device_info dev;
  ck_assert_int_eq(fadsl_context_device_info(ctx, &dev), FADSL_SUCCESS);
  fadsl_program *prog;
  fadsl_status st = fadsl_program_load_file(ctx, FADSL_TOP_SRCDIR "/examples/attention/attention.fa", &prog);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "attn_fwd", &k), FADSL_SUCCESS);
  size_t nq = (size_t)B * H * N * D * 2, nkv = (size_t)B * KVH * N * D * 2;
  uint64_t q, kk, v, o, lse;
  ck_assert_int_eq(fadsl_malloc(ctx, nq, &q), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nkv, &kk), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nkv, &v), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nq, &o), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, (size_t)B * H * N * 4, &lse), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);

  /* big tiles first; the first that fits is launched, one that does not
   * must be refused with the reported size */
  static const int configs[][4] = {   /* BLOCK_Q, BLOCK_K, warps, stages */
      {128, 128, 8, 3}, {128, 64, 8, 2}, {64, 64, 4, 2}, {64, 32, 4, 1}, {32, 32, 4, 1}};
  int chosen = -1, too_big = -1;
  fadsl_kernel_info info;
  for (int c = 0; c < (int)(sizeof configs / sizeof configs[0]) && chosen < 0; c++) {
    bind_attention(a, q, kk, v, lse, o, B * KVH, N, G, D);
    fadsl_args_set_int(a, "BLOCK_Q", configs[c][0]);
    fadsl_args_set_int(a, "BLOCK_K", configs[c][1]);
    fadsl_args_set_config(a, configs[c][2], configs[c][3]);
    st = fadsl_compile(k, a, NULL, &info);
    if (st != FADSL_SUCCESS) {   /* a configuration the kernel rejects: try the next */
      fprintf(stderr, "config %d not compiled: %s\n", c, fadsl_context_last_error(ctx));
      continue;
    }
    ck_assert_str_eq(info.arch, dev.arch);
    if (info.shared_bytes <= dev.shared_per_block_optin)
      chosen = c;
    else if (too_big < 0)
      too_big = c;
  }
  ck_assert_msg(chosen >= 0, "no attention configuration fits %zu bytes of shared memory",
                dev.shared_per_block_optin);

  if (too_big >= 0) {   /* refused before anything reaches the driver */
    bind_attention(a, q, kk, v, lse, o, B * KVH, N, G, D);
    fadsl_args_set_int(a, "BLOCK_Q", configs[too_big][0]);
    fadsl_args_set_int(a, "BLOCK_K", configs[too_big][1]);
    fadsl_args_set_config(a, configs[too_big][2], configs[too_big][3]);
    ck_assert_int_eq(fadsl_compile(k, a, NULL, &info), FADSL_SUCCESS);
    int launches = fake_int("fake_cuda_launches");
    ck_assert_int_eq(fadsl_launch(k, a, NULL, NULL), FADSL_ERROR_UNSUPPORTED);
    char want[512];
    snprintf(want, sizeof want, "needs %zu bytes of shared memory per block; %s allows at most %zu",
             info.shared_bytes, dev.name, dev.shared_per_block_optin);
    ck_assert_msg(strstr(fadsl_context_last_error(ctx), want), "%s", fadsl_context_last_error(ctx));
    ck_assert_int_eq(fake_int("fake_cuda_launches"), launches);
    ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  }

  bind_attention(a, q, kk, v, lse, o, B * KVH, N, G, D);
  fadsl_args_set_int(a, "BLOCK_Q", configs[chosen][0]);
  fadsl_args_set_int(a, "BLOCK_K", configs[chosen][1]);
  fadsl_args_set_config(a, configs[chosen][2], configs[chosen][3]);
  /* attn_fwd's space lists the pipeline and the schedule too: every axis fixed makes the launch explicit */
  ck_assert_int_eq(fadsl_args_set_config_axis(a, "pipeline", 2), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_config_axis(a, "schedule", 1), FADSL_SUCCESS);   /* and the schedule (grid) */
  fadsl_kernel_info compiled;
  ck_assert_int_eq(fadsl_compile(k, a, NULL, &compiled), FADSL_SUCCESS);
  int attribute_before = fake_int("fake_cuda_max_dynamic_shared");
  st = fadsl_launch(k, a, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_str_eq(info.config_source, "explicit");
  ck_assert_str_eq(info.cache, "memory");   /* the specialisation fadsl_compile made */
  ck_assert_uint_eq(info.shared_bytes, compiled.shared_bytes);
  Launch l = last_launch();
  ck_assert_uint_eq(l.grid[0], (N + configs[chosen][0] - 1) / configs[chosen][0]);
  ck_assert_uint_eq(l.grid[1], B * KVH * G);
  ck_assert_uint_eq(l.block[0], (unsigned)info.threads);
  ck_assert_uint_eq(l.shared, info.shared_bytes);
  if (info.shared_bytes > 48 * 1024)
    ck_assert_int_eq(fake_int("fake_cuda_max_dynamic_shared"), (int)info.shared_bytes);
  else
    ck_assert_int_eq(fake_int("fake_cuda_max_dynamic_shared"), attribute_before);
  ck_assert_int_gt(info.registers, 0);
  fprintf(stderr, "attn_fwd [%s] warps=%d stages=%d: %d threads, %zu bytes of shared memory, "
          "%d registers, %d parameters, %d tensor maps\n", info.constexprs, info.warps, info.stages,
          info.threads, info.shared_bytes, info.registers, l.nparams, fake_int("fake_cuda_tensor_maps"));
  /* pointers and scalars appear with their values (TMA descriptors, when the
   * backend asks for them, carry the address in this stand-in) */
  int seen_q = 0, seen_scale = 0, seen_n = 0;
  for (int i = 0; i < l.nparams; i++) {
    seen_q |= l.params[i] == q;
    seen_scale |= param_f32(l.params[i]) == 0.125f;
    seen_n |= (int32_t)l.params[i] == N;
  }
  ck_assert(seen_q && seen_scale && seen_n);
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  fadsl_args_destroy(a);
  fadsl_program_destroy(prog);
  fadsl_free(ctx, q);
  fadsl_free(ctx, kk);
  fadsl_free(ctx, v);
  fadsl_free(ctx, o);
  fadsl_free(ctx, lse);
}
END_TEST

/* FADSL_PIPELINE=tma: attention's forward kernel reads Q, K and V with the
 * bulk copy engine and writes O with it (a bulk store from a staging tile).
 * The runtime encodes one tensor map per view from the declared extents
 * ([B*H, N, D] and [B*KVH, N, D], row-major), innermost dimension first as
 * the driver takes them: dims (D, N, heads), strides (D, N*D elements, in
 * bytes), a box of one 128-byte swizzle width of a row (64 f16) by the
 * block's rows, 128-byte swizzle, zero fill (the store's map too: the fill
 * is for loads); the maps follow the kernel's parameters (the stand-in
 * writes the address into a map's first bytes), the store's after the
 * loads'.  A pointer the copy engine cannot read and a driver without
 * cuTensorMapEncodeTiled are refused with a message naming the way out. */
typedef int (*FakeMapFn)(int, uint64_t *, uint64_t *, uint64_t *, unsigned *, int *, int *, int *);

START_TEST(test_attention_tma_tensor_maps) {
  enum { B = 2, H = 8, KVH = 2, G = H / KVH, N = 1000, D = 128, BQ = 128, BK = 32 };
  fadsl_device_info dev;
  ck_assert_int_eq(fadsl_context_device_info(ctx, &dev), FADSL_SUCCESS);
  ck_assert_str_eq(dev.arch, "sm_90a");
  setenv("FADSL_PIPELINE", "tma", 1);
  fadsl_program *prog;
  fadsl_status st = fadsl_program_load_file(ctx, FADSL_TOP_SRCDIR "/examples/attention/attention.fa", &prog);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "attn_fwd", &k), FADSL_SUCCESS);
  size_t nq = (size_t)B * H * N * D * 2, nkv = (size_t)B * KVH * N * D * 2;
  uint64_t q, kk, v, o, lse;
  ck_assert_int_eq(fadsl_malloc(ctx, nq + 64, &q), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nkv, &kk), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nkv, &v), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nq, &o), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, (size_t)B * H * N * 4, &lse), FADSL_SUCCESS);
  ck_assert_uint_eq(q % 16, 0);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  bind_attention(a, q, kk, v, lse, o, B * KVH, N, G, D);
  fadsl_args_set_int(a, "BLOCK_Q", BQ);
  fadsl_args_set_int(a, "BLOCK_K", BK);
  fadsl_args_set_config(a, 4, 2);
  int maps_before = fake_int("fake_cuda_tensor_maps");
  fadsl_kernel_info info;
  st = fadsl_launch(k, a, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_msg(strstr(info.cuda_source, "pipeline tma") && strstr(info.cuda_source, "fa::tma_load<3>") &&
                    strstr(info.cuda_source, "fa::tma_store<3>(fa_tmap3") && strstr(info.cuda_source, "fa::bulk_wait_read<0>"),
                "the kernel was not generated for the bulk copy engine");
  ck_assert_int_eq(fake_int("fake_cuda_tensor_maps"), maps_before + 4);
  Launch l = last_launch();
  ck_assert_int_eq(l.nparams, 9 + 4);
  void *fp = dlsym(fake, "fake_cuda_tensor_map");
  FakeMapFn map;
  memcpy(&map, &fp, sizeof fp);
  /* in the plan's order: the pipelined loads (K as its transposed view, V), Q, then O's store */
  const uint64_t want_addr[4] = {kk, v, q, o};
  const uint64_t want_heads[4] = {B * KVH, B * KVH, B * H, B * H};
  const unsigned want_rows[4] = {BK, BK, BQ, BQ};
  for (int i = 0; i < 4; i++) {
    uint64_t addr, dims[5], strides[5];
    unsigned box[5];
    int sw, oob, dt;
    ck_assert_int_eq(map(maps_before + i, &addr, dims, strides, box, &sw, &oob, &dt), 3);
    ck_assert_uint_eq(addr, want_addr[i]);
    ck_assert_uint_eq(l.params[9 + i], want_addr[i]);
    ck_assert_uint_eq(dims[0], D);
    ck_assert_uint_eq(dims[1], N);
    ck_assert_uint_eq(dims[2], want_heads[i]);
    ck_assert_uint_eq(strides[0], (uint64_t)D * 2);
    ck_assert_uint_eq(strides[1], (uint64_t)N * D * 2);
    ck_assert_uint_eq(box[0], 64);
    ck_assert_uint_eq(box[1], want_rows[i]);
    ck_assert_uint_eq(box[2], 1);
    ck_assert_int_eq(sw, CU_TENSOR_MAP_SWIZZLE_128B);
    ck_assert_int_eq(oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    ck_assert_int_eq(dt, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  }

  /* the same launch again: the variant's descriptors are reused, not encoded
     again; with another O only O's store is encoded again, and the launch
     passes the new descriptor */
  int maps_after = fake_int("fake_cuda_tensor_maps");
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_tensor_maps"), maps_after);
  l = last_launch();
  for (int i = 0; i < 4; i++) ck_assert_uint_eq(l.params[9 + i], want_addr[i]);
  uint64_t o2;
  ck_assert_int_eq(fadsl_malloc(ctx, nq, &o2), FADSL_SUCCESS);
  bind_attention(a, q, kk, v, lse, o2, B * KVH, N, G, D);
  fadsl_args_set_int(a, "BLOCK_Q", BQ);
  fadsl_args_set_int(a, "BLOCK_K", BK);
  fadsl_args_set_config(a, 4, 2);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_tensor_maps"), maps_after + 1);
  l = last_launch();
  ck_assert_uint_eq(l.params[9 + 3], o2);
  for (int i = 0; i < 3; i++) ck_assert_uint_eq(l.params[9 + i], want_addr[i]);
  fadsl_free(ctx, o2);

  /* a Q only 2-byte aligned: the launch specialises on the pointer's
     alignment, so its variant reads Q with vector loads and only K and V
     with the copy engine (and writes O with it) */
  int launches = fake_int("fake_cuda_launches");
  maps_before = fake_int("fake_cuda_tensor_maps");
  bind_attention(a, q + 2, kk, v, lse, o, B * KVH, N, G, D);
  fadsl_args_set_int(a, "BLOCK_Q", BQ);
  fadsl_args_set_int(a, "BLOCK_K", BK);
  fadsl_args_set_config(a, 4, 2);
  st = fadsl_launch(k, a, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_int_eq(fake_int("fake_cuda_launches"), launches + 1);
  ck_assert_int_eq(fake_int("fake_cuda_tensor_maps"), maps_before + 3);
  ck_assert(strstr(info.cuda_source, "fa::tma_store<3>(fa_tmap2") && !strstr(info.cuda_source, "fa_tmap3"));
  launches = fake_int("fake_cuda_launches");

  /* a driver without the entry point (CUDA 11) */
  FaDriverApi *drv = (FaDriverApi *)ctx->drv;
  ck_assert_ptr_nonnull(drv);
  void *saved = (void *)drv->cuTensorMapEncodeTiled;
  drv->cuTensorMapEncodeTiled = NULL;
  bind_attention(a, q, kk, v, lse, o, B * KVH, N, G, D);
  fadsl_args_set_int(a, "BLOCK_Q", BQ);
  fadsl_args_set_int(a, "BLOCK_K", BK);
  fadsl_args_set_config(a, 4, 2);
  st = fadsl_launch(k, a, NULL, NULL);
  memcpy(&drv->cuTensorMapEncodeTiled, &saved, sizeof saved);
  ck_assert_int_eq(st, FADSL_ERROR_UNSUPPORTED);
  ck_assert_msg(strstr(fadsl_context_last_error(ctx), "no cuTensorMapEncodeTiled") &&
                    strstr(fadsl_context_last_error(ctx), "FADSL_PIPELINE=cp_async"),
                "%s", fadsl_context_last_error(ctx));
  ck_assert_int_eq(fake_int("fake_cuda_launches"), launches);

  /* a pipeline that is not one */
  setenv("FADSL_PIPELINE", "tmaa", 1);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(fadsl_context_last_error(ctx), "FADSL_PIPELINE=tmaa: not one of cp_async, tma"), "%s",
                fadsl_context_last_error(ctx));
  unsetenv("FADSL_PIPELINE");
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  fadsl_args_destroy(a);
  fadsl_program_destroy(prog);
  fadsl_free(ctx, q);
  fadsl_free(ctx, kk);
  fadsl_free(ctx, v);
  fadsl_free(ctx, o);
  fadsl_free(ctx, lse);
}
END_TEST

/* FADSL_SCHEDULE=persistent: the kernel is launched on as many thread
 * blocks as the device holds at once (the driver's occupancy times the
 * multiprocessors: 2 x 132 in the stand-in), at most one per program, in a
 * one-dimensional grid; the grid of programs (@kernel(grid=...)) follows
 * the parameters (and the tensor maps) as three 32-bit integers.  A grid of
 * fewer programs gets one block each; the launch line says so; without the
 * occupancy query one block per multiprocessor. */
START_TEST(test_attention_persistent) {
  enum { B = 2, H = 8, KVH = 2, G = H / KVH, N = 4096, D = 64, BQ = 128, BK = 32 };
  setenv("FADSL_SCHEDULE", "persistent", 1);
  fadsl_program *prog;
  fadsl_status st = fadsl_program_load_file(ctx, FADSL_TOP_SRCDIR "/examples/attention/attention.fa", &prog);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "attn_fwd", &k), FADSL_SUCCESS);
  size_t nq = (size_t)B * H * N * D * 2, nkv = (size_t)B * KVH * N * D * 2;
  uint64_t q, kk, v, o, lse;
  ck_assert_int_eq(fadsl_malloc(ctx, nq, &q), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nkv, &kk), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nkv, &v), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, nq, &o), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, (size_t)B * H * N * 4, &lse), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  uint64_t counter = 0;
  for (int pass = 0; pass < 4; pass++) {
    /* 0: 32 x 16 programs on 264 blocks; 1: 4 x 16 programs, one block each;
       2: the tma pipeline (tensor maps before the grid); 3: no occupancy query
       (on a variant not launched before: a variant asks once) */
    int n = pass == 1 ? 512 : N;
    bind_attention(a, q, kk, v, lse, o, B * KVH, n, G, D);
    fadsl_args_set_int(a, "BLOCK_Q", BQ);
    fadsl_args_set_int(a, "BLOCK_K", BK);
    fadsl_args_set_config(a, 4, pass == 3 ? 3 : 2);
    setenv("FADSL_PIPELINE", pass == 2 ? "tma" : "cp_async", 1);
    FaDriverApi *drv = (FaDriverApi *)ctx->drv;
    void *saved = drv ? (void *)drv->cuOccupancyMaxActiveBlocksPerMultiprocessor : NULL;
    if (pass == 3 && drv) drv->cuOccupancyMaxActiveBlocksPerMultiprocessor = NULL;
    fadsl_kernel_info info;
    st = fadsl_launch(k, a, NULL, &info);
    if (pass == 3 && drv) memcpy(&drv->cuOccupancyMaxActiveBlocksPerMultiprocessor, &saved, sizeof saved);
    unsetenv("FADSL_PIPELINE");
    ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
    ck_assert_msg(strstr(info.cuda_source, ", persistent.") && strstr(info.cuda_source, "fa::tile_coords<0, true, 8>"),
                  "not a persistent kernel with the longest programs first");
    unsigned programs = (unsigned)(n / BQ) * (B * H);
    ck_assert_uint_eq(info.grid[0], n / BQ);
    ck_assert_uint_eq(info.grid[1], B * H);
    Launch l = last_launch();
    unsigned want = pass == 1 ? programs : pass == 3 ? 132 : 2 * 132;
    ck_assert_uint_eq(l.grid[0], want);
    ck_assert_uint_eq(l.grid[1], 1);
    ck_assert_uint_eq(l.grid[2], 1);
    int tmaps = pass == 2 ? 4 : 0; /* K, V, Q and O's store */
    /* causal: the programs differ in work, so the blocks take them from a counter (the last argument) */
    ck_assert_int_eq(l.nparams, 9 + tmaps + 3 + 1);
    ck_assert_uint_eq(l.params[9 + tmaps] & 0xffffffffu, n / BQ);
    ck_assert_uint_eq(l.params[10 + tmaps] & 0xffffffffu, B * H);
    ck_assert_uint_eq(l.params[11 + tmaps] & 0xffffffffu, 1);
    uint64_t c = l.params[12 + tmaps];
    ck_assert_msg(c != 0, "no program counter");
    ck_assert_msg(strstr(info.cuda_source, "fa::next_tile_shared(fa_tile_counter"), "not taken from the counter");
    if (counter)
      ck_assert_msg(c == counter, "one counter per stream");   /* the same stream each pass */
    counter = c;
    unsigned zero = 1;
    memcpy(&zero, (const void *)(uintptr_t)c, 4);   /* the fake driver's memory is the host's */
    ck_assert_uint_eq(zero, 0);
    unsigned taken = 77;   /* as a run leaves it: the next launch must zero it again */
    memcpy((void *)(uintptr_t)c, &taken, 4);
  }
  setenv("FADSL_SCHEDULE", "persistant", 1);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(fadsl_context_last_error(ctx), "FADSL_SCHEDULE=persistant: not one of grid, persistent"), "%s",
                fadsl_context_last_error(ctx));
  unsetenv("FADSL_SCHEDULE");
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  fadsl_args_destroy(a);
  fadsl_program_destroy(prog);
  fadsl_free(ctx, q);
  fadsl_free(ctx, kk);
  fadsl_free(ctx, v);
  fadsl_free(ctx, o);
  fadsl_free(ctx, lse);
}
END_TEST

/* Launches specialise on their runtime arguments: an integer that is a
 * multiple of 16 (or of 8) and a pointer's alignment are part of the
 * variant's key, so n = 1004 and n = 1024 run different code (scalar
 * loads, and 16-byte vectors along the row of stride n), each compiled once
 * and then found in memory; n = 1000 (n%8) is a variant whose code is
 * n = 1024's; n = 2048 shares n = 1024's variant; a pointer aligned to 2 bytes
 * only gets its own.  The launch line says which facts a variant assumed. */
static const char *rows_fa =
    "@kernel(grid=(cdiv(m, 16),))\n"
    "def rows(x: *f16[m, n], y: *f16[m, n], m: i32, n: i32):\n"
    "    p = make_block_ptr(x, shape=(m, n), strides=(n, 1), offsets=(program_id(0) * 16, 0),\n"
    "                       block_shape=(16, 64), order=(1, 0))\n"
    "    q = make_block_ptr(y, shape=(m, n), strides=(n, 1), offsets=(program_id(0) * 16, 0),\n"
    "                       block_shape=(16, 64), order=(1, 0))\n"
    "    store(q, load(p, boundary_check=(0, 1), padding=\"zero\"), boundary_check=(0, 1))\n";

static void launch_rows(fadsl_kernel *k, uint64_t x, uint64_t y, int m, int n, fadsl_kernel_info *info) {
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", y), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "m", m), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", n), FADSL_SUCCESS);
  fadsl_status st = fadsl_launch(k, a, NULL, info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  fadsl_args_destroy(a);
}

/* The next launch line of the log. */
static void next_launch_line(FILE *log, long *pos, char *line, size_t size) {
  fflush(log);
  fseek(log, *pos, SEEK_SET);
  line[0] = '\0';
  while (fgets(line, (int)size, log) && strncmp(line, "fadsl: launch ", 14) != 0)
    line[0] = '\0';
  *pos = ftell(log);
}

START_TEST(test_launches_specialise_on_arguments) {
  FILE *log = tmpfile();
  ctx->log.stream = log;
  ctx->log.level = FA_LOG_INFO;
  fadsl_program *prog;
  ck_assert_int_eq(fadsl_program_load_string(ctx, "rows.fa", rows_fa, &prog), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "rows", &k), FADSL_SUCCESS);
  uint64_t x, y;
  size_t bytes = 2 * 33 * 2048 + 64;
  ck_assert_int_eq(fadsl_malloc(ctx, bytes, &x), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, bytes, &y), FADSL_SUCCESS);
  ck_assert_uint_eq(x % 16, 0);
  char line[512];
  long pos = 0;
  fadsl_kernel_info info;
  launch_rows(k, x, y, 33, 1004, &info);
  ck_assert_str_eq(info.cache, "miss");
  char *scalar_src = strdup(info.cuda_source);
  next_launch_line(log, &pos, line, sizeof line);
  ck_assert_msg(strstr(line, "fadsl: launch rows [] warps=4 stages=2 (default) assume=[] arch="), "%s", line);

  launch_rows(k, x, y, 33, 1024, &info);
  ck_assert_str_eq(info.cache, "miss");   /* other code: compiled */
  ck_assert_str_ne(info.cuda_source, scalar_src);
  char *vector_src = strdup(info.cuda_source);
  next_launch_line(log, &pos, line, sizeof line);
  ck_assert_msg(strstr(line, "assume=[n%16] arch="), "%s", line);

  /* a multiple of 8 only: a fact of its own, and here the same code as
     n = 1024's (a 16-byte vector is 8 halves), whose binary is found in memory */
  launch_rows(k, x, y, 33, 1000, &info);
  ck_assert_str_eq(info.cache, "memory");
  ck_assert_str_eq(info.cuda_source, vector_src);
  next_launch_line(log, &pos, line, sizeof line);
  ck_assert_msg(strstr(line, "assume=[n%8] arch="), "%s", line);

  /* the variants are kept */
  launch_rows(k, x, y, 33, 1004, &info);
  ck_assert_str_eq(info.cache, "memory");
  ck_assert_str_eq(info.cuda_source, scalar_src);
  launch_rows(k, x, y, 33, 1024, &info);
  ck_assert_str_eq(info.cache, "memory");
  launch_rows(k, x, y, 33, 2048, &info);   /* the same facts as 1024 */
  ck_assert_str_eq(info.cache, "memory");
  launch_rows(k, x, y, 33, 1000, &info);
  ck_assert_str_eq(info.cache, "memory");
  next_launch_line(log, &pos, line, sizeof line);
  next_launch_line(log, &pos, line, sizeof line);
  next_launch_line(log, &pos, line, sizeof line);
  ck_assert_msg(strstr(line, "assume=[n%16] arch=") && strstr(line, "cache=memory"), "%s", line);

  /* m a multiple of 16 as well: a fact of its own (a new variant) */
  launch_rows(k, x, y, 32, 1024, &info);
  next_launch_line(log, &pos, line, sizeof line);
  ck_assert_msg(strstr(line, "assume=[m%16 n%16] arch="), "%s", line);

  /* a pointer 2 bytes past an aligned one: scalar code again, its own variant */
  launch_rows(k, x + 2, y, 33, 1024, &info);
  next_launch_line(log, &pos, line, sizeof line);
  ck_assert_msg(strstr(line, "assume=[x%2 n%16] arch="), "%s", line);
  ck_assert_str_ne(info.cache, "memory");
  free(scalar_src);
  free(vector_src);
  fadsl_free(ctx, x);
  fadsl_free(ctx, y);
  fadsl_program_destroy(prog);
  fclose(log);
}
END_TEST

/* The dynamic shared memory attribute, on a hand-written kernel whose
 * shared memory the test chooses: raised above the default 48 KiB, left
 * alone below it, and a request beyond the device's limit refused. */
START_TEST(test_dynamic_shared_attribute) {
  static const char *src =
      "extern \"C\" __global__ void dyn_smem(float *y) {\n"
      "  extern __shared__ float buf[];\n"
      "  buf[threadIdx.x] = y[threadIdx.x];\n"
      "  __syncthreads();\n"
      "  y[threadIdx.x] = buf[threadIdx.x ^ 1];\n"
      "}\n";
  fadsl_device_info dev;
  ck_assert_int_eq(fadsl_context_device_info(ctx, &dev), FADSL_SUCCESS);
  FaRtBinary bin;
  fadsl_status st = fa_rt_build_cubin(ctx, src, "dyn.cu", NULL, NULL, 0, dev.arch, &bin);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));

  FaRtModule m;
  int before = fake_int("fake_cuda_max_dynamic_shared");
  ck_assert_int_eq(fa_rt_module_load(ctx, bin.cubin, "dyn_smem", 40 * 1024, &m), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_max_dynamic_shared"), before);   /* not needed */
  ck_assert_int_gt(m.registers, 0);
  ck_assert_int_ge(m.static_shared, 0);
  fa_rt_module_unload(ctx, &m);

  size_t want = 64 * 1024 + 256;
  ck_assert_int_eq(fa_rt_module_load(ctx, bin.cubin, "dyn_smem", want, &m), FADSL_SUCCESS);
  ck_assert_int_eq(fake_int("fake_cuda_max_dynamic_shared"), (int)want);
  unsigned grid[3] = {1, 1, 1};
  uint64_t y = 0;
  void *params[] = {&y, NULL};   /* the stand-in counts parameters up to a NULL */
  ck_assert_int_eq(fa_rt_launch_raw(ctx, &m, grid, 128, want, NULL, params), FADSL_SUCCESS);
  Launch l = last_launch();
  ck_assert_uint_eq(l.shared, want);
  fa_rt_module_unload(ctx, &m);

  size_t over = dev.shared_per_block_optin + 1;
  ck_assert_int_eq(fa_rt_module_load(ctx, bin.cubin, "dyn_smem", over, &m), FADSL_ERROR_UNSUPPORTED);
  char msg[512];
  snprintf(msg, sizeof msg, "kernel dyn_smem needs %zu bytes of shared memory per block; %s allows at most %zu",
           over, dev.name, dev.shared_per_block_optin);
  ck_assert_str_eq(fadsl_context_last_error(ctx), msg);
  ck_assert_ptr_null(m.module);
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  fa_rt_binary_free(&bin);
}
END_TEST

START_TEST(test_device_helpers) {
  uint64_t p;
  ck_assert_int_eq(fadsl_malloc(ctx, 256, &p), FADSL_SUCCESS);
  unsigned char in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (unsigned char)i;
  ck_assert_int_eq(fadsl_memcpy_htod(ctx, p, in, 256), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, out, p, 256), FADSL_SUCCESS);
  ck_assert_mem_eq(in, out, 256);
  ck_assert_int_eq(fadsl_memset(ctx, p, 7, 100), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, out, p, 256), FADSL_SUCCESS);
  ck_assert_int_eq(out[99], 7);
  ck_assert_int_eq(out[100], 100);
  ck_assert_int_eq(fadsl_synchronize(ctx, NULL), FADSL_SUCCESS);   /* needs the context current */
  /* waiting with a limit: done at once, or (no recorded work ever completes) a timeout that says so */
  ck_assert_int_eq(fadsl_synchronize_within(ctx, NULL, 1.0), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_synchronize_within(ctx, NULL, 0), FADSL_ERROR_INVALID_ARGUMENT);
  setenv("FAKE_CUDA_HANG", "1", 1);
  ck_assert_int_eq(fadsl_synchronize_within(ctx, NULL, 0.05), FADSL_ERROR_TIMEOUT);
  unsetenv("FAKE_CUDA_HANG");
  ck_assert_msg(strstr(fadsl_context_last_error(ctx), "did not finish the work queued on the device within 0.05 s"), "%s",
                fadsl_context_last_error(ctx));
  ck_assert_str_eq(fadsl_status_string(FADSL_ERROR_TIMEOUT), "timed out");
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
  void *e1, *e2;
  ck_assert_int_eq(fadsl_event_create(ctx, &e1), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_event_create(ctx, &e2), FADSL_SUCCESS);
  float ms = 0;
  ck_assert_int_eq(fadsl_event_elapsed_ms(ctx, e1, e2, &ms), FADSL_SUCCESS);
  ck_assert_float_eq(ms, 1.5f);
  fadsl_event_destroy(ctx, e1);
  fadsl_event_destroy(ctx, e2);
  ck_assert_int_eq(fadsl_free(ctx, p), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_free(ctx, p), FADSL_ERROR_CUDA);   /* twice: the driver's error */
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "cuMemFree failed: CUDA_ERROR_INVALID_VALUE"));
  ck_assert_int_eq(fake_int("fake_cuda_context_depth"), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_fakegpu");
  TCase *tc = tcase_create("fakegpu");
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_device_and_arch);
  tcase_add_test(tc, test_launch_parameters_and_grid);
  tcase_add_test(tc, test_caller_grid);
  tcase_add_test(tc, test_grid_and_extents_follow_the_scalars);
  tcase_add_test(tc, test_default_point_at_launch);
  tcase_add_test(tc, test_default_point_follows_the_target);
  tcase_add_test(tc, test_default_point_prefer);
  tcase_add_test(tc, test_default_point_kept_per_values);
  tcase_add_test(tc, test_tuned_launch_follows_the_database);
  tcase_add_test(tc, test_attention_launch);
  tcase_add_test(tc, test_attention_tma_tensor_maps);
  tcase_add_test(tc, test_attention_persistent);
  tcase_add_test(tc, test_launches_specialise_on_arguments);
  tcase_add_test(tc, test_dynamic_shared_attribute);
  tcase_add_test(tc, test_device_helpers);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
