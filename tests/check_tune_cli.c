/* check_tune_cli.c - fadsl-tune from the command line, without a GPU:
 *   --dry-run on attention.fa: the pruned space of each tunable kernel is
 *     recomputed here from the @autotune lists (read from the file with the
 *     compiler) and the prune rules as the file states them, and compared
 *     point by point with what fadsl-tune reports; sizes from the @problem,
 *     overridden by --size;
 *   a prune that uses a runtime argument (tests/tune/small.fa);
 *   --compile-only on small.fa and on one attention kernel with a reduced
 *     space (registers, shared memory, spills; the disk cache reused by a
 *     second run);
 *   bad input: exit status 2 with a clear message; no GPU: exit status 3. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sema.h"

#ifndef FADSL_TUNE_BIN
#error "FADSL_TUNE_BIN must name the fadsl-tune binary"
#endif
#ifndef FADSL_TOP_SRCDIR
#error "FADSL_TOP_SRCDIR must name the source tree"
#endif

static const char attention[] = FADSL_TOP_SRCDIR "/examples/attention/attention.fa";
static const char small[] = FADSL_TOP_SRCDIR "/tests/tune/small.fa";

static char tmpdir[256];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/fadsl-tune-cli-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  char cache[300];
  snprintf(cache, sizeof cache, "%s/cache", tmpdir);
  setenv("FADSL_CACHE_DIR", cache, 1);   /* a cold kernel cache, and no user database */
  unsetenv("FADSL_TUNE_DB");
  unsetenv("FADSL_LOG");
}

static void teardown(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = calloc((size_t)n + 1, 1);
  if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = '\0';
  fclose(f);
  return s;
}

typedef struct Result {
  int status;
  char *out, *err;
} Result;

/* Runs fadsl-tune with `args` (a shell fragment; @TMP stands for the test's
 * temporary directory). */
static Result tune(const char *args) {
  char expanded[4096];
  size_t len = 0;
  for (const char *p = args; *p && len + sizeof tmpdir + 1 < sizeof expanded;) {
    if (!strncmp(p, "@TMP", 4)) {
      len += (size_t)snprintf(expanded + len, sizeof expanded - len, "%s", tmpdir);
      p += 4;
    } else {
      expanded[len++] = *p++;
    }
  }
  expanded[len] = '\0';
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s %s >'%s/out' 2>'%s/err' </dev/null", FADSL_TUNE_BIN, expanded, tmpdir, tmpdir);
  int st = system(cmd);
  Result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  char path[400];
  snprintf(path, sizeof path, "%s/out", tmpdir);
  r.out = slurp(path);
  snprintf(path, sizeof path, "%s/err", tmpdir);
  r.err = slurp(path);
  return r;
}

static void result_free(Result *r) {
  free(r->out);
  free(r->err);
}

static json_t *load_json(const char *name) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  ck_assert_msg(root != NULL, "%s: %s", path, je.text);
  return root;
}

static json_t *result_for(json_t *root, const char *kernel) {
  size_t i;
  json_t *r;
  json_array_foreach(json_object_get(root, "results"), i, r) {
    if (!strcmp(json_string_value(json_object_get(r, "kernel")), kernel)) return r;
  }
  ck_abort_msg("no result for kernel %s", kernel);
  return NULL;
}

/* ---- the space, recomputed ------------------------------------------------------------- */

/* attention.fa's prunes, at d_head <= 128 (the problem's 64, or --size D=128):
 * the loop over keys (attn_fwd, attn_bwd_dq) needs BLOCK_Q % BLOCK_K == 0,
 * the loop over queries (attn_bwd_dkdv, attn_bwd) BLOCK_K % BLOCK_Q == 0;
 * attn_fwd and attn_bwd admit 8 warps from 128x64 tiles on, the others from
 * 128x128.  Every space lists the pipeline first; beside tma (every tile),
 * attn_fwd tries tma_ws_pp at every tile, attn_bwd_dkdv tma_async at the
 * 64-key blocks on 4 warps, attn_bwd tma_async at 64x64 on 4 warps and
 * 64x128 on 8 (above d_head 64 at 32x64 on 4 warps with 2 stages only; up
 * to 64 also 128x128 on 8 with 2 stages) and tma_ws with 2 stages at 64x64
 * on 4 warps and 64x128 on 8 (up to d_head 64 also 128x128 on 8; above
 * d_head 128 at every tile on 8 warps),
 * attn_bwd_dq tma_async at 64x64 on 4 warps and 128x128 on 8
 * and tma_ws_pp at 128x128 on 8, where Q, dO and each stage's K and V fit
 * 227 KB; attn_bwd_dkdv and attn_bwd_dq tma_ws at 64x64 on 4 warps with 2
 * stages. */
static bool attention_prune(const char *kernel, const char *pipeline, const char *schedule, long bq, long bk,
                            long warps, long stages, long d_head) {
  /* attn_fwd: persistent thread blocks only beside a producer warp (fwd_schedule_ok) */
  if (schedule && !strcmp(schedule, "persistent") && !strcmp(pipeline, "tma")) return false;
  bool loop_over_queries = !strcmp(kernel, "attn_bwd_dkdv") || !strcmp(kernel, "attn_bwd");
  bool divides = loop_over_queries ? bk % bq == 0 : bq % bk == 0;
  long big = !strcmp(kernel, "attn_fwd") || !strcmp(kernel, "attn_bwd") ? 128 * 64 : 128 * 128;
  if (!divides || !(warps == 4 || bq * bk >= big)) return false;
  if (!strcmp(pipeline, "tma") || !strcmp(kernel, "attn_fwd")) return true;
  bool tile_64x64_w4 = bq == 64 && bk == 64 && warps == 4;
  if ((!strcmp(kernel, "attn_bwd_dkdv") || !strcmp(kernel, "attn_bwd_dq")) && !strcmp(pipeline, "tma_ws"))
    return tile_64x64_w4 && stages == 2;
  if (!strcmp(kernel, "attn_bwd_dkdv")) return !strcmp(pipeline, "tma_async") && bk == 64 && warps == 4;
  if (!strcmp(kernel, "attn_bwd") && !strcmp(pipeline, "tma_ws"))
    return stages == 2 && (d_head > 128 ? warps == 8
                                        : (bq == 64 && ((bk == 128 && warps == 8) || tile_64x64_w4)) ||
                                              (d_head <= 64 && bq == 128 && bk == 128 && warps == 8));
  if (!strcmp(kernel, "attn_bwd") && d_head > 64)
    return !strcmp(pipeline, "tma_async") && stages == 2 &&
           ((bq == 32 && bk == 64 && warps == 4) || (bq == 64 && bk == 128 && warps == 8));
  if (!strcmp(kernel, "attn_bwd"))
    return !strcmp(pipeline, "tma_async") && (tile_64x64_w4 || (bq == 64 && bk == 128 && warps == 8) ||
                                              (bq == 128 && bk == 128 && warps == 8 && stages == 2));
  bool fits = (2 * bq + 2 * stages * bk) * d_head * 2 <= 227 * 1024;
  bool tile_128x128_w8 = bq == 128 && bk == 128 && warps == 8;
  return fits && (tile_128x128_w8 || (tile_64x64_w4 && !strcmp(pipeline, "tma_async")));
}

/* attention.fa's prefer expressions on Hopper (arch 90, a dry run's default
 * target), at d_head <= 128: attn_bwd_dkdv's default is 64x64 on 4 warps
 * with 2 stages, with tma up to d_head 64 and tma_async above
 * (dkdv_hopper_default; at d_head 64 only for lengths that are multiples of
 * 8, as the problem's are); attn_bwd_dq's above d_head 64 is tma_ws_pp at
 * 128x128 on 8 warps with 2 stages (dq_hopper_default); attn_bwd's (the
 * fused pass) tma_ws with 2 stages at 64x128 on 8 warps above d_head 64,
 * tma_async at 128x128 on 8 up to 64 (bwd_hopper_default); attn_fwd's 128x128
 * with 2 stages, tma on 4 warps one thread block per program up to d_head
 * 64, tma_ws_pp on 8 in persistent blocks above (fwd_hopper_default). */
static bool attention_prefer(const char *kernel, const char *pipeline, const char *schedule, long bq, long bk,
                             long warps, long stages, long d_head) {
  if (!strcmp(kernel, "attn_fwd"))
    return bq == 128 && bk == 128 && stages == 2 &&
           (d_head > 64 ? warps == 8 && !strcmp(pipeline, "tma_ws_pp") && !strcmp(schedule, "persistent")
                        : warps == 4 && !strcmp(pipeline, "tma") && !strcmp(schedule, "grid"));
  if (!strcmp(kernel, "attn_bwd_dkdv"))
    return bq == 64 && bk == 64 && warps == 4 && stages == 2 && !strcmp(pipeline, d_head <= 64 ? "tma" : "tma_async");
  if (!strcmp(kernel, "attn_bwd_dq"))
    return d_head > 64 && bq == 128 && bk == 128 && warps == 8 && stages == 2 && !strcmp(pipeline, "tma_ws_pp");
  if (!strcmp(kernel, "attn_bwd"))
    return bk == 128 && warps == 8 && stages == 2 &&
           (d_head > 64 ? bq == 64 && !strcmp(pipeline, "tma_ws")
                        : bq == 128 && !strcmp(pipeline, "tma_async"));
  return false;
}

typedef struct Program {
  FaCompiler fc;
  FaProgram *prog;
} Program;

static void program_load(Program *p, const char *path) {
  fa_compiler_init(&p->fc, stderr);
  Source *src = fa_source_read(&p->fc, path);
  ck_assert_ptr_nonnull(src);
  Node *m = fa_parse(&p->fc, src);
  ck_assert_ptr_nonnull(m);
  p->prog = fa_program_check(&p->fc, m);
  ck_assert_ptr_nonnull(p->prog);
}

static int axis_index(const FaKernelInfo *k, const char *name) {
  for (int t = 0; t < k->ntune; t++)
    if (!strcmp(k->tune[t].name, name)) return t;
  ck_abort_msg("kernel %s has no axis %s", k->name, name);
  return -1;
}

/* The labels of the points that survive at d_head, in enumeration order
 * (last axis fastest), as "pipeline=tma BLOCK_Q=64 BLOCK_K=32 stages=2 warps=4";
 * *dflt: the index of the default, the first that attention_prefer takes,
 * else 0. */
static int expected_attention_space(const FaKernelInfo *k, long d_head, char labels[][96], int max, int *dflt) {
  int n = 0, total = 1;
  *dflt = -1;
  for (int t = 0; t < k->ntune; t++) total *= k->tune[t].nvalues;
  int iq = axis_index(k, "BLOCK_Q"), ik = axis_index(k, "BLOCK_K"), iw = axis_index(k, "warps");
  int is = axis_index(k, "stages"), ip = axis_index(k, "pipeline");
  for (int p = 0; p < total; p++) {
    int rest = p, idx[8];
    for (int t = k->ntune - 1; t >= 0; t--) {
      idx[t] = rest % k->tune[t].nvalues;
      rest /= k->tune[t].nvalues;
    }
    long bq = k->tune[iq].values[idx[iq]].i, bk = k->tune[ik].values[idx[ik]].i, w = k->tune[iw].values[idx[iw]].i;
    long stages = k->tune[is].values[idx[is]].i;
    const char *pipeline = fa_config_value_name(fa_config_axis("pipeline"), (int)k->tune[ip].values[idx[ip]].i);
    ck_assert_ptr_nonnull(pipeline);
    const char *schedule = NULL;
    for (int t = 0; t < k->ntune; t++)
      if (!strcmp(k->tune[t].name, "schedule"))
        schedule = fa_config_value_name(fa_config_axis("schedule"), (int)k->tune[t].values[idx[t]].i);
    if (!attention_prune(k->name, pipeline, schedule, bq, bk, w, stages, d_head)) continue;
    ck_assert_int_lt(n, max);
    if (*dflt < 0 && attention_prefer(k->name, pipeline, schedule, bq, bk, w, stages, d_head)) *dflt = n;
    labels[n][0] = '\0';
    for (int t = 0; t < k->ntune; t++) {
      char part[32];
      /* named launch settings by their names ("pipeline=tma") */
      const char *named = fa_config_value_name(fa_config_axis(k->tune[t].name), (int)k->tune[t].values[idx[t]].i);
      if (named)
        snprintf(part, sizeof part, "%s%s=%s", t ? " " : "", k->tune[t].name, named);
      else
        snprintf(part, sizeof part, "%s%s=%lld", t ? " " : "", k->tune[t].name, (long long)k->tune[t].values[idx[t]].i);
      strcat(labels[n], part);
    }
    n++;
  }
  if (*dflt < 0) *dflt = 0;
  return n;
}

static int64_t problem_size(const FaProgram *p, const char *name) {
  for (int i = 0; i < p->nproblems; i++)
    for (int s = 0; s < p->problems[i]->nsizes; s++)
      if (!strcmp(p->problems[i]->sizes[s].name, name)) return p->problems[i]->sizes[s].value.i;
  ck_abort_msg("no size %s", name);
  return 0;
}

static void check_space(json_t *res, const FaKernelInfo *k) {
  char labels[256][96];
  long d_head = (long)json_integer_value(json_object_get(json_object_get(res, "key"), "d_head"));
  ck_assert(d_head > 0 && d_head <= 128);
  int dflt;
  int n = expected_attention_space(k, d_head, labels, 256, &dflt);
  int total = 1;
  for (int t = 0; t < k->ntune; t++) total *= k->tune[t].nvalues;
  ck_assert_int_eq(json_integer_value(json_object_get(res, "space_size")), total);
  ck_assert_int_eq(json_integer_value(json_object_get(res, "survivors")), n);
  ck_assert_int_eq(json_integer_value(json_object_get(res, "pruned")), total - n);
  int seen = 0;
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(res, "candidates"), i, c) {
    const char *status = json_string_value(json_object_get(c, "status"));
    if (!strcmp(status, "pruned")) continue;
    ck_assert_str_eq(status, "candidate");   /* dry run: survived, not compiled */
    ck_assert_int_lt(seen, n);
    ck_assert_str_eq(json_string_value(json_object_get(c, "label")), labels[seen]);
    /* the first survivor, or the first that prefer takes */
    ck_assert_int_eq(json_is_true(json_object_get(c, "default")), seen == dflt);
    seen++;
  }
  ck_assert_int_eq(seen, n);
  ck_assert_str_eq(json_string_value(json_object_get(res, "default")), labels[dflt]);
}

START_TEST(dry_run_attention_space) {
  Result r = tune("--dry-run --json @TMP/dry.json " FADSL_TOP_SRCDIR "/examples/attention/attention.fa");
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  json_t *root = load_json("dry.json");
  ck_assert_str_eq(json_string_value(json_object_get(root, "mode")), "dry-run");
  Program p;
  program_load(&p, attention);
  /* the problem's default launches: the forward pass and the deterministic
     backward pass (the fused one with --size deterministic=False below) */
  static const char *const launched[] = {"attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"};
  int tunable = 0;
  for (size_t i = 0; i < sizeof launched / sizeof *launched; i++) {
    const FaKernelInfo *k = fa_program_kernel(p.prog, launched[i]);
    ck_assert_ptr_nonnull(k);
    ck_assert_int_gt(k->ntune, 0);
    tunable++;
    json_t *res = result_for(root, k->name);
    check_space(res, k);
    /* the key comes from the problem's launch: q_seq_len = N, d_head = D */
    json_t *key = json_object_get(res, "key");
    ck_assert_int_eq(json_integer_value(json_object_get(key, "q_seq_len")), problem_size(p.prog, "N"));
    ck_assert_int_eq(json_integer_value(json_object_get(key, "d_head")), problem_size(p.prog, "D"));
    ck_assert_int_eq(json_integer_value(json_object_get(key, "n_groups")),
                     problem_size(p.prog, "H") / problem_size(p.prog, "KVH"));
    /* and the text output names each surviving point */
    ck_assert_ptr_nonnull(strstr(r.out, k->name));
  }
  ck_assert_int_eq(tunable, 3);
  ck_assert_int_eq(json_array_size(json_object_get(root, "results")), 3);
  fa_compiler_free(&p.fc);
  json_decref(root);
  result_free(&r);
}
END_TEST

START_TEST(dry_run_fused_pass) {
  Result r = tune("--dry-run --size deterministic=False --json - " FADSL_TOP_SRCDIR "/examples/attention/attention.fa");
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  json_error_t je;
  json_t *root = json_loads(r.out, 0, &je);
  ck_assert_msg(root != NULL, "stdout is not JSON: %s", je.text);
  /* the forward pass and the fused pass's one tunable kernel */
  ck_assert_int_eq(json_array_size(json_object_get(root, "results")), 2);
  Program p;
  program_load(&p, attention);
  check_space(result_for(root, "attn_fwd"), fa_program_kernel(p.prog, "attn_fwd"));
  check_space(result_for(root, "attn_bwd"), fa_program_kernel(p.prog, "attn_bwd"));
  fa_compiler_free(&p.fc);
  json_decref(root);
  result_free(&r);
}
END_TEST

START_TEST(dry_run_size_override) {
  /* dK/dV, dQ and the fused kernel at d_head 128 (dQ's 128x128 blocks fit the shared memory with
     2 stages only; the fused kernel tries tma_async at its default tiles only) */
  static const char *const kernels[] = {"attn_bwd_dkdv", "attn_bwd_dq", "attn_bwd"};
  for (int i = 0; i < 3; i++) {
    char args[600];
    snprintf(args, sizeof args, "--dry-run --kernel %s --size N=2048 --size causal=True --size D=128 %s--json - %s",
             kernels[i], i == 2 ? "--size deterministic=False " : "", attention);
    Result r = tune(args);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    json_error_t je;
    json_t *root = json_loads(r.out, 0, &je);
    ck_assert_msg(root != NULL, "stdout is not JSON: %s", je.text);
    ck_assert_int_eq(json_array_size(json_object_get(root, "results")), 1);
    json_t *res = result_for(root, kernels[i]);
    json_t *key = json_object_get(res, "key");
    ck_assert_int_eq(json_integer_value(json_object_get(key, "q_seq_len")), 2048);
    ck_assert_int_eq(json_integer_value(json_object_get(key, "kv_seq_len")), 2048);
    ck_assert_int_eq(json_integer_value(json_object_get(key, "d_head")), 128);
    ck_assert(json_is_true(json_object_get(key, "is_causal")));
    Program p;
    program_load(&p, attention);
    check_space(res, fa_program_kernel(p.prog, kernels[i]));
    fa_compiler_free(&p.fc);
    json_decref(root);
    result_free(&r);
  }
}
END_TEST

/* d_head 256, where the prunes keep small tiles with bulk copies and add
 * each backward kernel's other pipelines at 2 stages, and attn_fwd's, whose
 * prune reads the target (`arch`), on Hopper 128-row blocks on 8 warps with
 * a producer warp (128x64 with 2 stages, 128x32 with 3 and 4; one thread
 * block per program or persistent).  attn_fwd's prefer takes those on
 * sm_90a (--arch, and a dry run's default), so its default is the first of
 * them, though the space lists its points with bulk copies alone first; on
 * sm_80 the default is 64x32 with bulk copies alone.  The key-block kernels
 * (attn_bwd_dkdv, attn_bwd) admit 32x64 and 64x64 on 8 warps on Hopper only
 * (bwd_wide_tiles_ok), and their prefers and attn_bwd_dq's take a producer
 * warpgroup there: dK/dV 64x64, the fused kernel 32x64, dQ 64x32 on 4 warps;
 * on sm_80 each keeps the prune's first point.  (`first`: the default.) */
START_TEST(dry_run_d256_spaces) {
  static const struct {
    const char *kernel, *sizes;
    int survivors, ws;
    const char *first, *last;
  } want[] = {
      {"attn_fwd", "--arch sm_80 ", 18, 0, "pipeline=tma schedule=grid BLOCK_Q=64 BLOCK_K=32 stages=2 warps=4",
       "pipeline=tma_ws_pp schedule=persistent BLOCK_Q=32 BLOCK_K=32 stages=4 warps=4"},
      {"attn_fwd", "--arch sm_90a ", 24, 6, "pipeline=tma_ws_pp schedule=grid BLOCK_Q=128 BLOCK_K=64 stages=2 warps=8",
       "pipeline=tma_ws_pp schedule=persistent BLOCK_Q=32 BLOCK_K=32 stages=4 warps=4"},
      {"attn_fwd", "", 24, 6, "pipeline=tma_ws_pp schedule=grid BLOCK_Q=128 BLOCK_K=64 stages=2 warps=8",
       "pipeline=tma_ws_pp schedule=persistent BLOCK_Q=32 BLOCK_K=32 stages=4 warps=4"},
      {"attn_bwd_dkdv", "--arch sm_80 ", 5, 0, "pipeline=tma BLOCK_Q=32 BLOCK_K=32 stages=2 warps=8",
       "pipeline=tma_ws BLOCK_Q=32 BLOCK_K=32 stages=2 warps=8"},
      {"attn_bwd_dkdv", "", 15, 0, "pipeline=tma_ws BLOCK_Q=64 BLOCK_K=64 stages=2 warps=8",
       "pipeline=tma_ws BLOCK_Q=64 BLOCK_K=64 stages=2 warps=8"},
      {"attn_bwd_dq", "--arch sm_80 ", 12, 0, "pipeline=tma BLOCK_Q=64 BLOCK_K=32 stages=2 warps=4",
       "pipeline=tma_ws BLOCK_Q=32 BLOCK_K=32 stages=2 warps=4"},
      {"attn_bwd_dq", "", 12, 0, "pipeline=tma_ws BLOCK_Q=64 BLOCK_K=32 stages=2 warps=4",
       "pipeline=tma_ws BLOCK_Q=32 BLOCK_K=32 stages=2 warps=4"},
      {"attn_bwd", "--arch sm_80 --size deterministic=False ", 5, 0,
       "pipeline=tma BLOCK_Q=32 BLOCK_K=32 stages=2 warps=8", "pipeline=tma_ws BLOCK_Q=32 BLOCK_K=32 stages=2 warps=8"},
      {"attn_bwd", "--size deterministic=False ", 15, 0, "pipeline=tma_ws BLOCK_Q=32 BLOCK_K=64 stages=2 warps=8",
       "pipeline=tma_ws BLOCK_Q=64 BLOCK_K=64 stages=2 warps=8"},
  };
  static const char *const fwd_ws[] = {
      "pipeline=tma_ws_pp schedule=grid BLOCK_Q=128 BLOCK_K=64 stages=2 warps=8",
      "pipeline=tma_ws_pp schedule=grid BLOCK_Q=128 BLOCK_K=32 stages=3 warps=8",
      "pipeline=tma_ws_pp schedule=grid BLOCK_Q=128 BLOCK_K=32 stages=4 warps=8",
      "pipeline=tma_ws_pp schedule=persistent BLOCK_Q=128 BLOCK_K=64 stages=2 warps=8",
      "pipeline=tma_ws_pp schedule=persistent BLOCK_Q=128 BLOCK_K=32 stages=3 warps=8",
      "pipeline=tma_ws_pp schedule=persistent BLOCK_Q=128 BLOCK_K=32 stages=4 warps=8"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    char args[600];
    snprintf(args, sizeof args, "--dry-run --kernel %s --size D=256 %s--json - %s", want[i].kernel, want[i].sizes,
             attention);
    Result r = tune(args);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    json_t *root = json_loads(r.out, 0, NULL);
    ck_assert_ptr_nonnull(root);
    json_t *res = result_for(root, want[i].kernel);
    ck_assert_int_eq(json_integer_value(json_object_get(res, "survivors")), want[i].survivors);
    ck_assert_str_eq(json_string_value(json_object_get(res, "default")), want[i].first);
    const char *last = NULL;
    int ws = 0;
    size_t j;
    json_t *c;
    json_array_foreach(json_object_get(res, "candidates"), j, c) {
      if (strcmp(json_string_value(json_object_get(c, "status")), "candidate")) continue;
      last = json_string_value(json_object_get(c, "label"));
      for (int w = 0; w < 6; w++) ws += !strcmp(last, fwd_ws[w]);
    }
    ck_assert_ptr_nonnull(last);
    ck_assert_str_eq(last, want[i].last);
    ck_assert_int_eq(ws, want[i].ws);
    const char *arch = json_string_value(json_object_get(root, "arch"));
    ck_assert_str_eq(arch ? arch : "(none)", strstr(want[i].sizes, "sm_80") ? "sm_80" : "sm_90a");
    json_decref(root);
    result_free(&r);
  }
}
END_TEST

/* A dry run of `kernel` in `file` with `args` has the default point `want`. */
static void check_dry_run_default(const char *file, const char *kernel, const char *args, const char *want) {
  char cmd[800];
  snprintf(cmd, sizeof cmd, "--dry-run --kernel %s %s --json - %s", kernel, args, file);
  Result r = tune(cmd);
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  json_t *root = json_loads(r.out, 0, NULL);
  ck_assert_ptr_nonnull(root);
  const char *got = json_string_value(json_object_get(result_for(root, kernel), "default"));
  ck_assert_msg(got && !strcmp(got, want), "%s: %s", args, got ? got : "(no default)");
  json_decref(root);
  result_free(&r);
}

/* examples/matmul/matmul.fa's prefer: on Hopper, where M, N and K are
 * multiples of 16 and C is at least 2048 x 2048, the producer warp's
 * 128x256x64 tiles; elsewhere (sm_80, odd sizes, small C) the first point
 * that passes the prune, 128x128x64 with bulk copies alone. */
START_TEST(dry_run_matmul_default) {
  static const char tma_ws[] = "BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 GROUP_M=8 stages=3 warps=8 pipeline=tma_ws_pp";
  static const char tma[] = "BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 GROUP_M=8 stages=3 warps=8 pipeline=tma";
  static const struct {
    const char *args, *want;
  } cases[] = {
      {"--arch sm_90a --size M=8192 --size N=8192 --size K=8192", tma_ws},
      {"--size M=4096 --size N=2048 --size K=64", tma_ws},   /* a dry run's target: sm_90a */
      {"--arch sm_80 --size M=8192 --size N=8192 --size K=8192", tma},
      {"--arch sm_90a --size M=4095 --size N=4096 --size K=4096", tma},
      {"--arch sm_90a --size M=4096 --size N=4096 --size K=4088", tma},
      {"--arch sm_90a --size M=8192 --size N=1024 --size K=8192", tma},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_dry_run_default(FADSL_TOP_SRCDIR "/examples/matmul/matmul.fa", "matmul", cases[i].args, cases[i].want);
}
END_TEST

/* attn_fwd's default (fwd_hopper_default): on Hopper, at every length, 128x128
 * on 4 warps with bulk copies up to d_head 64 and the producer warp's 128x128
 * with 2 stages in persistent blocks at 128; sm_80 keeps the prune's first
 * point (d_head 256 its own preferred point on Hopper). */
START_TEST(dry_run_attention_long_default) {
  static const char ws[] = "pipeline=tma_ws_pp schedule=persistent BLOCK_Q=128 BLOCK_K=128 stages=2 warps=8";
  static const char tma4[] = "pipeline=tma schedule=grid BLOCK_Q=128 BLOCK_K=128 stages=2 warps=4";
  static const char tma[] = "pipeline=tma schedule=grid BLOCK_Q=128 BLOCK_K=64 stages=2 warps=8";
  static const char ws256[] = "pipeline=tma_ws_pp schedule=grid BLOCK_Q=128 BLOCK_K=64 stages=2 warps=8";
  static const struct {
    const char *args, *want;
  } cases[] = {
      {"--arch sm_90a --size D=128 --size N=16384", ws},
      {"--size D=128 --size N=1024 --size causal=True", ws},
      {"--arch sm_90a --size D=128 --size N=8176", ws},
      {"--arch sm_80 --size D=128 --size N=16384", tma},
      {"--arch sm_80 --size D=64 --size N=1024", tma},
      {"--arch sm_90a --size D=64 --size N=16384", tma4},
      {"--arch sm_90a --size D=32 --size N=100 --size causal=True", tma4},
      {"--arch sm_90a --size D=256 --size N=16384", ws256},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_dry_run_default(attention, "attn_fwd", cases[i].args, cases[i].want);
}
END_TEST

/* attn_bwd's default (the fused pass, bwd_hopper_default): on Hopper a
 * producer warpgroup at 64x128 on 8 warps from d_head 65 to 128, products
 * waited for late at 128x128 on 8 up to 64, and at d_head 256 the producer warpgroup at
 * 32x64 on 8 warps; sm_80 keeps the prune's first point. */
START_TEST(dry_run_fused_hopper_default) {
  static const struct {
    const char *args, *want;
  } cases[] = {
      {"--arch sm_90a --size D=128 --size N=4096", "pipeline=tma_ws BLOCK_Q=64 BLOCK_K=128 stages=2 warps=8"},
      {"--size D=96 --size N=1000 --size causal=True", "pipeline=tma_ws BLOCK_Q=64 BLOCK_K=128 stages=2 warps=8"},
      {"--arch sm_90a --size D=64 --size N=4096", "pipeline=tma_async BLOCK_Q=128 BLOCK_K=128 stages=2 warps=8"},
      {"--size D=64 --size N=23400 --size causal=True", "pipeline=tma_async BLOCK_Q=128 BLOCK_K=128 stages=2 warps=8"},
      {"--arch sm_90a --size D=32 --size N=100", "pipeline=tma_async BLOCK_Q=128 BLOCK_K=128 stages=2 warps=8"},
      {"--arch sm_80 --size D=128 --size N=4096", "pipeline=tma BLOCK_Q=32 BLOCK_K=64 stages=2 warps=4"},
      {"--arch sm_90a --size D=256 --size N=4096", "pipeline=tma_ws BLOCK_Q=32 BLOCK_K=64 stages=2 warps=8"},
      {"--arch sm_80 --size D=256 --size N=4096", "pipeline=tma BLOCK_Q=32 BLOCK_K=32 stages=2 warps=8"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char args[300];
    snprintf(args, sizeof args, "--size deterministic=False %s", cases[i].args);
    check_dry_run_default(attention, "attn_bwd", args, cases[i].want);
  }
}
END_TEST

/* small.fa: prune=BLOCK >= 32 * warps and BLOCK <= n, with n = N from the problem */
static int small_expected(long n) {
  static const long blocks[] = {64, 128, 256, 512}, warps[] = {1, 2, 4};
  int count = 0;
  for (int b = 0; b < 4; b++)
    for (int w = 0; w < 3; w++) count += blocks[b] >= 32 * warps[w] && blocks[b] <= n;
  return count;
}

START_TEST(dry_run_prune_sees_runtime_arguments) {
  static const long sizes[] = {0, 100, 200, 300, 600, 100000};   /* 0: the problem's default */
  for (int i = 0; i < 6; i++) {
    char args[600];
    if (sizes[i])
      snprintf(args, sizeof args, "--dry-run --size N=%ld --json - %s", sizes[i], small);
    else
      snprintf(args, sizeof args, "--dry-run --json - %s", small);
    Result r = tune(args);
    long n = sizes[i] ? sizes[i] : 1000;
    int want = small_expected(n);
    if (want == 0) {   /* nothing survives: bad input */
      ck_assert_int_eq(r.status, 2);
      ck_assert_ptr_nonnull(strstr(r.err, "survives"));
      result_free(&r);
      continue;
    }
    ck_assert_msg(r.status == 0, "N=%ld: exit %d: %s", n, r.status, r.err);
    json_t *root = json_loads(r.out, 0, NULL);
    ck_assert_ptr_nonnull(root);
    json_t *res = result_for(root, "axpy");
    ck_assert_int_eq(json_integer_value(json_object_get(res, "survivors")), want);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(res, "key"), "n")), n);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "key"), "T")), "f32");
    json_decref(root);
    result_free(&r);
  }
  ck_assert_int_eq(small_expected(50), 0);
  Result r = tune("--dry-run --size N=50 " FADSL_TOP_SRCDIR "/tests/tune/small.fa");
  ck_assert_int_eq(r.status, 2);
  result_free(&r);
}
END_TEST

static bool nvrtc_missing(const Result *r) {
  return strstr(r->out, "NVRTC") && (strstr(r->out, "could not be loaded") || strstr(r->out, "not found"));
}

START_TEST(compile_only_small) {
  Result r = tune("--compile-only --arch sm_80 --jobs 2 --json @TMP/co.json " FADSL_TOP_SRCDIR
                  "/tests/tune/small.fa");
  if (nvrtc_missing(&r)) {
    fprintf(stderr, "compile_only_small: no NVRTC here, not checked\n");
    result_free(&r);
    return;
  }
  ck_assert_msg(r.status == 0, "exit %d: %s\n%s", r.status, r.out, r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "regs"));
  ck_assert_ptr_nonnull(strstr(r.out, "spills"));
  json_t *root = load_json("co.json");
  ck_assert_str_eq(json_string_value(json_object_get(root, "arch")), "sm_80");
  json_t *res = result_for(root, "axpy");
  ck_assert_int_eq(json_integer_value(json_object_get(res, "survivors")), small_expected(1000));
  ck_assert_int_ge(json_integer_value(json_object_get(res, "nvrtc_runs")), 1);
  size_t i;
  json_t *c;
  int ok = 0;
  json_array_foreach(json_object_get(res, "candidates"), i, c) {
    if (!strcmp(json_string_value(json_object_get(c, "status")), "pruned")) continue;
    ck_assert_str_eq(json_string_value(json_object_get(c, "status")), "ok");
    ck_assert_int_gt(json_integer_value(json_object_get(c, "registers")), 0);
    ck_assert_int_ge(json_integer_value(json_object_get(c, "spill_bytes")), 0);
    ck_assert(json_is_integer(json_object_get(c, "shared_bytes")));
    long warps = (long)json_integer_value(json_object_get(json_object_get(c, "config"), "warps"));
    ck_assert_int_eq(json_integer_value(json_object_get(c, "threads")), 32 * warps);
    ok++;
  }
  ck_assert_int_eq(ok, small_expected(1000));
  json_decref(root);
  result_free(&r);

  /* again: every kernel comes from the disk cache, no NVRTC run */
  r = tune("--compile-only --arch sm_80 --json @TMP/co2.json " FADSL_TOP_SRCDIR "/tests/tune/small.fa");
  ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
  root = load_json("co2.json");
  res = result_for(root, "axpy");
  ck_assert_int_eq(json_integer_value(json_object_get(res, "nvrtc_runs")), 0);
  json_decref(root);
  result_free(&r);
}
END_TEST

START_TEST(compile_only_attention_reduced) {
  Result r = tune("--compile-only --kernel attn_fwd --only BLOCK_Q=64 --only BLOCK_K=64 --only warps=4 --only stages=2,3 "
                  "--only pipeline=tma "
                  "--json @TMP/att.json " FADSL_TOP_SRCDIR "/examples/attention/attention.fa");
  if (nvrtc_missing(&r)) {
    fprintf(stderr, "compile_only_attention_reduced: no NVRTC here, not checked\n");
    result_free(&r);
    return;
  }
  ck_assert_msg(r.status == 0, "exit %d: %s\n%s", r.status, r.out, r.err);
  json_t *root = load_json("att.json");
  ck_assert_str_eq(json_string_value(json_object_get(root, "arch")), "sm_90a");   /* no GPU: the default */
  json_t *res = result_for(root, "attn_fwd");
  ck_assert_int_eq(json_integer_value(json_object_get(res, "survivors")), 2);
  long distinct = (long)json_integer_value(json_object_get(res, "distinct_sources"));
  ck_assert(distinct == 1 || distinct == 2);
  ck_assert_int_eq(json_integer_value(json_object_get(res, "nvrtc_runs")), distinct);
  size_t i;
  json_t *c;
  int ok = 0;
  json_array_foreach(json_object_get(res, "candidates"), i, c) {
    if (!strcmp(json_string_value(json_object_get(c, "status")), "pruned")) continue;
    ck_assert_msg(!strcmp(json_string_value(json_object_get(c, "status")), "ok"), "%s: %s",
                  json_string_value(json_object_get(c, "label")), json_string_value(json_object_get(c, "reason")));
    ck_assert_int_gt(json_integer_value(json_object_get(c, "registers")), 0);
    ck_assert_int_gt(json_integer_value(json_object_get(c, "shared_bytes")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "threads")), 128);
    ok++;
  }
  ck_assert_int_eq(ok, 2);
  /* the table: one line per candidate, with the resources (the axes in
     attn_fwd's order: BLOCK_Q first) */
  ck_assert_ptr_nonnull(strstr(r.out, "pipeline=tma schedule=grid BLOCK_Q=64 BLOCK_K=64 stages=2 warps=4"));
  ck_assert_ptr_nonnull(strstr(r.out, "pipeline=tma schedule=grid BLOCK_Q=64 BLOCK_K=64 stages=3 warps=4"));
  json_decref(root);
  result_free(&r);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------- */

static void expect_failure(const char *args, int status, const char *message) {
  Result r = tune(args);
  ck_assert_msg(r.status == status, "fadsl-tune %s: exit %d, wanted %d\nstderr: %s", args, r.status, status, r.err);
  ck_assert_msg(strstr(r.err, message) != NULL, "fadsl-tune %s: stderr lacks '%s':\n%s", args, message, r.err);
  result_free(&r);
}

START_TEST(bad_input_exits_2) {
  expect_failure("--dry-run --kernel nosuch " FADSL_TOP_SRCDIR "/examples/attention/attention.fa", 2,
                 "has no kernel 'nosuch' (kernels: attn_fwd, attn_bwd_d,");
  expect_failure("--dry-run --kernel attn_bwd_d " FADSL_TOP_SRCDIR "/examples/attention/attention.fa", 2,
                 "kernel 'attn_bwd_d' has no @autotune space");
  expect_failure("--dry-run --size Q=3 " FADSL_TOP_SRCDIR "/examples/attention/attention.fa", 2,
                 "unknown size 'Q' (problem 'attention': B, H, KVH, N, D, causal, T, deterministic, fuse_delta, heads)");
  expect_failure("--dry-run --size N " FADSL_TOP_SRCDIR "/examples/attention/attention.fa", 2, "--size wants NAME=VALUE");
  expect_failure("--dry-run --only BLOCK_X=1 " FADSL_TOP_SRCDIR "/examples/attention/attention.fa", 2,
                 "--only BLOCK_X: no kernel being tuned has an @autotune axis of that name");
  /* BLOCK_Q=64 with BLOCK_K=128 never passes attn_fwd's prune (64 % 128 != 0); the
   * size of the space is left out: it changes with the file's lists */
  expect_failure("--dry-run --kernel attn_fwd --only BLOCK_Q=64 --only BLOCK_K=128 " FADSL_TOP_SRCDIR
                 "/examples/attention/attention.fa",
                 2, "points) survives the prune and --only for q_seq_len=1024");
  expect_failure("--dry-run " FADSL_TOP_SRCDIR "/tests/tune/empty-space.fa", 2,
                 "empty-space.fa:13:5: error: no point of the @autotune space of kernel 'zero' (2 points) survives");
  expect_failure("--compile-only " FADSL_TOP_SRCDIR "/tests/tune/empty-space.fa", 2, "survives the prune for n=16");
  expect_failure("--dry-run " FADSL_TOP_SRCDIR "/tests/tune/no-problem.fa", 2,
                 "kernel 'zero' has no problem description");
  expect_failure("--dry-run --kernel zero " FADSL_TOP_SRCDIR "/tests/tune/no-problem.fa", 2,
                 "no @problem def in");
  expect_failure("--dry-run /nonexistent/x.fa", 2, "cannot read /nonexistent/x.fa");
  expect_failure("--frobnicate x.fa", 2, "unknown option '--frobnicate'");
  expect_failure("", 2, "no input file");
  expect_failure("--dry-run --compile-only x.fa", 2, "exclude each other");
  expect_failure("--jobs 0 x.fa", 2, "--jobs needs a number");
  expect_failure("--arch sm_80 " FADSL_TOP_SRCDIR "/tests/tune/small.fa", 2, "--arch is for --compile-only");
  expect_failure("--compile-only --arch sm_12 " FADSL_TOP_SRCDIR "/tests/tune/small.fa", 2,
                 "unknown GPU architecture 'sm_12'");
}
END_TEST

START_TEST(program_errors_exit_1) {
  char path[400];
  snprintf(path, sizeof path, "%s/broken.fa", tmpdir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("@kernel(grid=(1,))\n@autotune(B=[1, 2])\ndef k(x: *f32, B: constexpr):\n    i = program_id(0)\n\n"
        "@problem(N=4)\ndef p(N):\n    x = zeros((N,), f32)\n    k(x, nosuch=3)\n",
        f);
  fclose(f);
  char args[600];
  snprintf(args, sizeof args, "--dry-run %s", path);
  Result r = tune(args);
  ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
  ck_assert_ptr_nonnull(strstr(r.err, "broken.fa:9:"));
  ck_assert_ptr_nonnull(strstr(r.err, "error: kernel 'k' has no parameter 'nosuch'"));
  result_free(&r);
}
END_TEST

START_TEST(tuning_without_gpu_exits_3) {
  setenv("FADSL_NO_DRIVER", "1", 1);
  Result r = tune(FADSL_TOP_SRCDIR "/tests/tune/small.fa");
  ck_assert_msg(r.status == 3, "exit %d: %s", r.status, r.err);
  ck_assert_ptr_nonnull(strstr(r.err, "no GPU to tune on"));
  ck_assert_ptr_nonnull(strstr(r.err, "--dry-run and --compile-only work without one"));
  result_free(&r);
  unsetenv("FADSL_NO_DRIVER");
}
END_TEST

int main(void) {
  Suite *s = suite_create("tune_cli");
  TCase *tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, dry_run_attention_space);
  tcase_add_test(tc, dry_run_size_override);
  tcase_add_test(tc, dry_run_d256_spaces);
  tcase_add_test(tc, dry_run_matmul_default);
  tcase_add_test(tc, dry_run_attention_long_default);
  tcase_add_test(tc, dry_run_fused_hopper_default);
  tcase_add_test(tc, dry_run_fused_pass);
  tcase_add_test(tc, dry_run_prune_sees_runtime_arguments);
  tcase_add_test(tc, compile_only_small);
  tcase_add_test(tc, compile_only_attention_reduced);
  tcase_add_test(tc, bad_input_exits_2);
  tcase_add_test(tc, program_errors_exit_1);
  tcase_add_test(tc, tuning_without_gpu_exits_3);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
