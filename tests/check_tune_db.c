/* check_tune_db.c - the tuning database (runtime/tune_db.c): entries stored
 * and read back, the exact and the nearest key (the documented rule:
 * compile-time and non-numeric keys equal, smallest sum of |log2(a/b)| over
 * the numeric ones, first in the file on ties), what must match (program
 * base name, kernel, GPU, arch, version), replacing an entry, corrupt and
 * foreign files, the cached lookup seeing a rewritten file, and concurrent
 * writer processes that must not lose each other's entries. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tune_db.h"

static char tmpdir[256];
static char db[300];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/fadsl-tune-db-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  snprintf(db, sizeof db, "%s/sub/dir/tune.json", tmpdir);
}

static void teardown(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

static FaConst ci(int64_t v) { FaConst c = {CK_INT, v, 0, DT_VOID, NULL}; return c; }
static FaConst cb(bool v) { FaConst c = {CK_BOOL, v, 0, DT_VOID, NULL}; return c; }
static FaConst cd(DType d) { FaConst c = {CK_DTYPE, 0, 0, d, NULL}; return c; }

/* An attention-like entry: key (q_seq_len, d_head, is_causal, T), config
 * BLOCK_Q=bq, warps=w, stages=2. */
typedef struct Ent {
  FaBinding key[4];
  FaBinding vals[1];
  const char *exact[2];
  FaTuneEntry e;
} Ent;

static void make_entry(Ent *x, const char *program, const char *gpu, int64_t n, int64_t d, bool causal, int bq, int w) {
  memset(x, 0, sizeof *x);
  x->key[0] = (FaBinding){"q_seq_len", ci(n)};
  x->key[1] = (FaBinding){"d_head", ci(d)};
  x->key[2] = (FaBinding){"is_causal", cb(causal)};
  x->key[3] = (FaBinding){"T", cd(DT_F16)};
  x->vals[0] = (FaBinding){"BLOCK_Q", ci(bq)};
  x->exact[0] = "d_head";
  x->exact[1] = "T";
  FaTuneEntry *e = &x->e;
  e->program = program;
  e->kernel = "attn_fwd";
  e->key = x->key;
  e->nkey = 4;
  e->exact_keys = x->exact;
  e->nexact_keys = 2;
  e->gpu_name = gpu;
  e->arch = "sm_90a";
  e->fadsl_version = "0.1.0";
  e->best = (FaTuneTiming){x->vals, 1, {.warps = w, .stages = 2}, 0.5};
  e->dflt = (FaTuneTiming){x->vals, 1, {.warps = 4, .stages = 2}, 0.75};
  e->tflops = 123.0;
  e->candidates = 7;
}

static void store(Ent *x) {
  StrBuf err, note;
  fa_sb_init(&err);
  fa_sb_init(&note);
  bool ok = fa_tune_db_store(db, &x->e, 1, &err, &note);
  ck_assert_msg(ok, "store failed: %s", err.data ? err.data : "");
  fa_sb_free(&err);
  fa_sb_free(&note);
}

typedef struct Q {
  FaBinding key[4];
  FaTuneQuery q;
} Q;

static void make_query(Q *x, const char *program, const char *gpu, int64_t n, int64_t d, bool causal) {
  x->key[0] = (FaBinding){"q_seq_len", ci(n)};
  x->key[1] = (FaBinding){"d_head", ci(d)};
  x->key[2] = (FaBinding){"is_causal", cb(causal)};
  x->key[3] = (FaBinding){"T", cd(DT_F16)};
  x->q = (FaTuneQuery){db, program, "attn_fwd", x->key, 4, gpu, "sm_90a", "0.1.0"};
}

/* Looks up and returns BLOCK_Q of the answer (-1 when not found); *match set. */
static int lookup(Q *x, FaTuneMatch *match, int *warps) {
  Arena a;
  fa_arena_init(&a);
  FaTuneChoice c;
  *match = fa_tune_lookup(&x->q, &a, &c);
  ck_assert_int_eq(*match, c.match);
  int bq = -1;
  if (c.match != FA_TUNE_NOT_FOUND) {
    ck_assert_int_eq(c.nvalues, 1);
    ck_assert_str_eq(c.values[0].name, "BLOCK_Q");
    ck_assert_int_eq(c.values[0].value.kind, CK_INT);
    bq = (int)c.values[0].value.i;
    ck_assert_int_eq(c.config.stages, 2);
    ck_assert_ptr_nonnull(c.detail);
    if (warps) *warps = c.config.warps;
  }
  fa_arena_free(&a);
  return bq;
}

START_TEST(missing_database_is_not_found) {
  Q q;
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
  FaTuneMatch m;
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
  ck_assert_int_eq(m, FA_TUNE_NOT_FOUND);
  StrBuf err;
  fa_sb_init(&err);
  ck_assert(fa_tune_db_check(db, &err));   /* missing is fine */
  fa_sb_free(&err);
}
END_TEST

START_TEST(round_trip_exact) {
  Ent e;
  make_entry(&e, "/some/where/attention.fa", "NVIDIA H200", 1024, 64, false, 128, 8);
  store(&e);
  struct stat st;
  ck_assert_int_eq(stat(db, &st), 0);   /* directories created */
  Q q;
  make_query(&q, "examples/attention/attention.fa", "NVIDIA H200", 1024, 64, false);
  FaTuneMatch m;
  int w = 0;
  ck_assert_int_eq(lookup(&q, &m, &w), 128);
  ck_assert_int_eq(m, FA_TUNE_EXACT);
  ck_assert_int_eq(w, 8);
  /* the file is the documented JSON */
  json_error_t je;
  json_t *root = json_load_file(db, 0, &je);
  ck_assert_ptr_nonnull(root);
  ck_assert_str_eq(json_string_value(json_object_get(root, "format")), "fadsl-tune-db");
  json_t *ent = json_array_get(json_object_get(root, "entries"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(ent, "program")), "attention.fa");
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(ent, "key"), "q_seq_len")), 1024);
  ck_assert(json_is_false(json_object_get(json_object_get(ent, "key"), "is_causal")));
  ck_assert_str_eq(json_string_value(json_object_get(json_object_get(ent, "key"), "T")), "f16");
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(ent, "config"), "warps")), 8);
  ck_assert(fabs(json_real_value(json_object_get(ent, "median_ms")) - 0.5) < 1e-9);
  ck_assert(fabs(json_real_value(json_object_get(ent, "default_ms")) - 0.75) < 1e-9);
  ck_assert_ptr_nonnull(json_string_value(json_object_get(ent, "tuned_at")));
  json_decref(root);
}
END_TEST

START_TEST(identity_must_match) {
  Ent e;
  make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 128, 8);
  store(&e);
  Q q;
  FaTuneMatch m;
  make_query(&q, "other.fa", "NVIDIA H200", 1024, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
  make_query(&q, "attention.fa", "NVIDIA A100", 1024, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
  q.q.arch = "sm_80";
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
  q.q.fadsl_version = "0.2.0";
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
  q.q.kernel = "attn_bwd_dq";
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
  /* a compile-only context ("" GPU) takes any GPU's entry of the arch */
  make_query(&q, "attention.fa", "", 1024, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), 128);
  ck_assert_int_eq(m, FA_TUNE_EXACT);
  /* key names must be the same */
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
  q.q.nkey = 3;
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
}
END_TEST

START_TEST(nearest_key_rule) {
  Ent e;
  make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 64, 4);
  store(&e);
  make_entry(&e, "attention.fa", "NVIDIA H200", 16384, 64, false, 128, 8);
  store(&e);
  make_entry(&e, "attention.fa", "NVIDIA H200", 4096, 128, false, 32, 4);
  store(&e);
  make_entry(&e, "attention.fa", "NVIDIA H200", 4096, 64, true, 16, 4);
  store(&e);
  Q q;
  FaTuneMatch m;
  /* 2048: |log2(2048/1024)| = 1 < |log2(2048/16384)| = 3 */
  make_query(&q, "attention.fa", "NVIDIA H200", 2048, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), 64);
  ck_assert_int_eq(m, FA_TUNE_NEAREST);
  /* 8192: 3 vs 1 */
  make_query(&q, "attention.fa", "NVIDIA H200", 8192, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), 128);
  ck_assert_int_eq(m, FA_TUNE_NEAREST);
  /* 4096: a tie (2 and 2): the first in the file */
  make_query(&q, "attention.fa", "NVIDIA H200", 4096, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), 64);
  /* d_head is compile-time: the d=128 entry serves only d=128 */
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 128, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), 32);
  ck_assert_int_eq(m, FA_TUNE_NEAREST);
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 256, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
  /* is_causal (a bool) must be equal */
  make_query(&q, "attention.fa", "NVIDIA H200", 65536, 64, true);
  ck_assert_int_eq(lookup(&q, &m, NULL), 16);
  ck_assert_int_eq(m, FA_TUNE_NEAREST);
  /* the exact one wins over any nearer-looking one */
  make_query(&q, "attention.fa", "NVIDIA H200", 16384, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), 128);
  ck_assert_int_eq(m, FA_TUNE_EXACT);
  /* an unknown key value matches anything, but never exactly */
  make_query(&q, "attention.fa", "NVIDIA H200", 16384, 64, false);
  q.key[0].value.kind = CK_NONE;
  ck_assert_int_ne(lookup(&q, &m, NULL), -1);
  ck_assert_int_eq(m, FA_TUNE_NEAREST);
  /* a non-positive value differs only from itself */
  make_query(&q, "attention.fa", "NVIDIA H200", 0, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), -1);
}
END_TEST

START_TEST(store_replaces_same_identity) {
  Ent e;
  make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 64, 4);
  store(&e);
  make_entry(&e, "attention.fa", "NVIDIA H200", 2048, 64, false, 64, 4);
  store(&e);
  make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 128, 8);   /* retuned */
  store(&e);
  json_t *root = json_load_file(db, 0, NULL);
  ck_assert_ptr_nonnull(root);
  ck_assert_int_eq(json_array_size(json_object_get(root, "entries")), 2);
  json_decref(root);
  Q q;
  FaTuneMatch m;
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
  ck_assert_int_eq(lookup(&q, &m, NULL), 128);
}
END_TEST

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

START_TEST(corrupt_database) {
  Ent e;
  make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 64, 4);
  store(&e);   /* creates the directories */
  static const char *const bad[] = {
      "{\"format\": \"fadsl-tune-db\", \"version\": 1, \"entries\": [",   /* truncated */
      "\x01\x02 not json",
      "[1, 2, 3]",
      "{\"format\": \"something-else\", \"version\": 1, \"entries\": []}",
      "{\"format\": \"fadsl-tune-db\", \"version\": 99, \"entries\": []}",
      "{\"format\": \"fadsl-tune-db\", \"version\": 1, \"entries\": 5}",
      /* entries that are malformed are skipped, the file is still readable */
      "{\"format\": \"fadsl-tune-db\", \"version\": 1, \"entries\": [7, {\"kernel\": 3}, "
      "{\"program\": \"attention.fa\", \"kernel\": \"attn_fwd\", \"gpu\": \"NVIDIA H200\", \"arch\": \"sm_90a\", "
      "\"fadsl_version\": \"0.1.0\", \"key\": {\"q_seq_len\": 1024, \"d_head\": 64, \"is_causal\": false, "
      "\"T\": \"f16\"}, \"config\": {\"BLOCK_Q\": 64, \"warps\": -3}}]}",
  };
  for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
    write_file(db, bad[i]);
    Q q;
    FaTuneMatch m;
    make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
    ck_assert_int_eq(lookup(&q, &m, NULL), -1);
    StrBuf err, note;
    fa_sb_init(&err);
    fa_sb_init(&note);
    bool readable = fa_tune_db_check(db, &err);
    ck_assert_int_eq(readable, i == 6);
    if (!readable) ck_assert_ptr_nonnull(strstr(err.data, db));
    /* storing recovers: the bad file is kept aside, the new one works */
    make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 128, 8);
    ck_assert(fa_tune_db_store(db, &e.e, 1, &err, &note));
    if (!readable) {
      char kept[400];
      snprintf(kept, sizeof kept, "%s.corrupt", db);
      struct stat st;
      ck_assert_int_eq(stat(kept, &st), 0);
      ck_assert_ptr_nonnull(strstr(note.data, ".corrupt"));
    }
    ck_assert_int_eq(lookup(&q, &m, NULL), 128);
    fa_sb_free(&err);
    fa_sb_free(&note);
  }
}
END_TEST

START_TEST(cached_lookup_sees_rewrites) {
  FaTuneCache *cache = fa_tune_cache_new();
  ck_assert_ptr_nonnull(cache);
  Q q;
  make_query(&q, "attention.fa", "NVIDIA H200", 1024, 64, false);
  Arena a;
  fa_arena_init(&a);
  FaTuneChoice c;
  ck_assert_int_eq(fa_tune_lookup_cached(cache, &q.q, &a, &c), FA_TUNE_NOT_FOUND);
  Ent e;
  make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 64, 4);
  store(&e);
  ck_assert_int_eq(fa_tune_lookup_cached(cache, &q.q, &a, &c), FA_TUNE_EXACT);
  ck_assert_int_eq(c.values[0].value.i, 64);
  static const int blocks[] = {100, 1000, 10000};   /* each rewrite changes the size too */
  for (int i = 0; i < 3; i++) {
    make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, blocks[i], 8);
    store(&e);
    ck_assert_int_eq(fa_tune_lookup_cached(cache, &q.q, &a, &c), FA_TUNE_EXACT);
    ck_assert_int_eq(c.values[0].value.i, blocks[i]);
  }
  unlink(db);
  ck_assert_int_eq(fa_tune_lookup_cached(cache, &q.q, &a, &c), FA_TUNE_NOT_FOUND);
  fa_arena_free(&a);
  fa_tune_cache_free(cache);
}
END_TEST

START_TEST(concurrent_writers_lose_nothing) {
  enum { WRITERS = 6, EACH = 12 };
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pids[w] = fork();
    ck_assert_int_ge(pids[w], 0);
    if (pids[w] == 0) {
      for (int i = 0; i < EACH; i++) {
        Ent e;
        make_entry(&e, "attention.fa", "NVIDIA H200", 1000 * (w + 1) + i, 64, false, w, i + 1);
        StrBuf err;
        fa_sb_init(&err);
        if (!fa_tune_db_store(db, &e.e, 1, &err, NULL)) _exit(1);
      }
      _exit(0);
    }
  }
  for (int w = 0; w < WRITERS; w++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  json_t *root = json_load_file(db, 0, NULL);
  ck_assert_ptr_nonnull(root);
  ck_assert_int_eq(json_array_size(json_object_get(root, "entries")), WRITERS * EACH);
  json_decref(root);
  for (int w = 0; w < WRITERS; w++)
    for (int i = 0; i < EACH; i++) {
      Q q;
      FaTuneMatch m;
      int warps = 0;
      make_query(&q, "attention.fa", "NVIDIA H200", 1000 * (w + 1) + i, 64, false);
      ck_assert_int_eq(lookup(&q, &m, &warps), w);
      ck_assert_int_eq(m, FA_TUNE_EXACT);
      ck_assert_int_eq(warps, i + 1);
    }
  /* no temporary files are left behind */
  char cmd[700];
  snprintf(cmd, sizeof cmd, "ls '%s/sub/dir' | grep -q tmp", tmpdir);
  ck_assert_int_ne(system(cmd), 0);
}
END_TEST

START_TEST(default_path) {
  setenv("FADSL_TUNE_DB", "/x/y.json", 1);
  char *p = fa_tune_db_default_path();
  ck_assert_str_eq(p, "/x/y.json");
  free(p);
  unsetenv("FADSL_TUNE_DB");
  unsetenv("FADSL_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  p = fa_tune_db_default_path();
  ck_assert_str_eq(p, "/xdg/fadsl/tune.json");
  free(p);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  p = fa_tune_db_default_path();
  ck_assert_str_eq(p, "/home/u/.cache/fadsl/tune.json");
  free(p);
}
END_TEST

START_TEST(unwritable_directory) {
  if (geteuid() == 0) return;   /* root writes anywhere */
  char dir[400];
  snprintf(dir, sizeof dir, "%s/ro", tmpdir);
  ck_assert_int_eq(mkdir(dir, 0555), 0);
  snprintf(db, sizeof db, "%s/ro/tune.json", tmpdir);
  Ent e;
  make_entry(&e, "attention.fa", "NVIDIA H200", 1024, 64, false, 64, 4);
  StrBuf err;
  fa_sb_init(&err);
  ck_assert(!fa_tune_db_store(db, &e.e, 1, &err, NULL));
  ck_assert_ptr_nonnull(err.data);
  fa_sb_free(&err);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tune_db");
  TCase *tc = tcase_create("db");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, missing_database_is_not_found);
  tcase_add_test(tc, round_trip_exact);
  tcase_add_test(tc, identity_must_match);
  tcase_add_test(tc, nearest_key_rule);
  tcase_add_test(tc, store_replaces_same_identity);
  tcase_add_test(tc, corrupt_database);
  tcase_add_test(tc, cached_lookup_sees_rewrites);
  tcase_add_test(tc, concurrent_writers_lose_nothing);
  tcase_add_test(tc, default_path);
  tcase_add_test(tc, unwritable_directory);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
