/* tune_db.c - the tuning database: a JSON file (jansson) that fadsl-tune
 * writes and launches read.
 *
 *     {
 *       "format": "fadsl-tune-db",
 *       "version": 1,
 *       "entries": [
 *         { "program": "attention.fa", "kernel": "attn_fwd",
 *           "key": {"q_seq_len": 1024, "d_head": 64, "is_causal": false, "T": "f16"},
 *           "exact_keys": ["d_head", "T"],
 *           "gpu": "NVIDIA H200", "arch": "sm_90a", "fadsl_version": "0.1.0",
 *           "config": {"BLOCK_Q": 128, "BLOCK_K": 64, "warps": 8, "stages": 3},
 *           "median_ms": 0.0412, "default_ms": 0.0577, "tflops": 212.5,
 *           "candidates": 22, "tuned_at": "2026-11-30T12:00:00Z",
 *           "runners_up": [ {"config": {...}, "median_ms": 0.0419}, ... ] }
 *       ]
 *     }
 *
 * Values: integers are JSON integers, floats JSON reals, bools true/false,
 * dtypes their names ("f16"), other strings strings.  Readers ignore members
 * they do not know, so later versions may add some. */
#include "config.h"

#include "tune_db.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"

enum { FA_TUNE_DB_VERSION = 1 };
static const char db_format[] = "fadsl-tune-db";

/* ---- values --------------------------------------------------------------------- */

json_t *fa_tune_const_to_json(FaConst c) {
  switch (c.kind) {
    case CK_INT: return json_integer((json_int_t)c.i);
    case CK_BOOL: return json_boolean(c.i != 0);
    case CK_FLOAT: return json_real(c.f);
    case CK_DTYPE: return json_string(fa_dtype_name(c.dtype));
    case CK_STR: return json_string(c.s ? c.s : "");
    default: return json_null();
  }
}

static bool json_to_const(const json_t *j, Arena *arena, FaConst *out) {
  memset(out, 0, sizeof *out);
  if (json_is_integer(j)) {
    out->kind = CK_INT;
    out->i = (int64_t)json_integer_value(j);
  } else if (json_is_real(j)) {
    out->kind = CK_FLOAT;
    out->f = json_real_value(j);
  } else if (json_is_boolean(j)) {
    out->kind = CK_BOOL;
    out->i = json_is_true(j);
  } else if (json_is_string(j)) {
    const char *s = json_string_value(j);
    DType dt = fa_dtype_from_name(s);
    if (dt != DT_VOID) {
      out->kind = CK_DTYPE;
      out->dtype = dt;
    } else {
      out->kind = CK_STR;
      out->s = arena ? fa_arena_strdup(arena, s) : s;
      if (!out->s) return false;
    }
  } else {
    return false;
  }
  return true;
}

static bool is_numeric(const FaConst *c) { return c->kind == CK_INT || c->kind == CK_FLOAT; }
static double numeric(const FaConst *c) { return c->kind == CK_INT ? (double)c->i : c->f; }

static bool const_equal(const FaConst *a, const FaConst *b) {
  if (is_numeric(a) && is_numeric(b)) return numeric(a) == numeric(b);
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case CK_BOOL: return (a->i != 0) == (b->i != 0);
    case CK_DTYPE: return a->dtype == b->dtype;
    case CK_STR: return strcmp(a->s ? a->s : "", b->s ? b->s : "") == 0;
    default: return false;
  }
}

static const char *base_name(const char *path) {
  const char *slash = path ? strrchr(path, '/') : NULL;
  return slash ? slash + 1 : path ? path : "";
}

static const char *str_member(const json_t *obj, const char *name) {
  const char *s = json_string_value(json_object_get(obj, name));
  return s ? s : "";
}

/* ---- loading ---------------------------------------------------------------------- */

/* Reads and checks the file.  Returns the "entries" array's owner (the
 * root), or NULL with *missing set when there is no file, or NULL with a
 * reason in *err when it is not a database. */
static json_t *db_load(const char *path, bool *missing, StrBuf *err) {
  *missing = false;
  struct stat st;
  if (stat(path, &st) != 0) {
    if (errno == ENOENT) {
      *missing = true;
    } else if (err) {
      fa_sb_printf(err, "%s: %s", path, strerror(errno));
    }
    return NULL;
  }
  json_error_t je;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    if (err) fa_sb_printf(err, "%s:%d:%d: not valid JSON: %s", path, je.line, je.column, je.text);
    return NULL;
  }
  const json_t *entries = json_object_get(root, "entries");
  const char *format = json_string_value(json_object_get(root, "format"));
  const json_t *version = json_object_get(root, "version");
  const char *why = !json_is_object(root)                              ? "the top level is not an object"
                    : !format || strcmp(format, db_format) != 0        ? "no \"format\": \"fadsl-tune-db\""
                    : !json_is_integer(version)                        ? "no integer \"version\""
                    : json_integer_value(version) > FA_TUNE_DB_VERSION ? "written by a newer fadsl"
                    : !json_is_array(entries)                          ? "no \"entries\" array"
                                                                       : NULL;
  if (why) {
    if (err) fa_sb_printf(err, "%s: not a tuning database: %s", path, why);
    json_decref(root);
    return NULL;
  }
  return root;
}

bool fa_tune_db_check(const char *path, StrBuf *err) {
  bool missing;
  json_t *root = db_load(path, &missing, err);
  if (!root) return missing;
  json_decref(root);
  return true;
}

char *fa_tune_db_default_path(void) {
  const char *env = getenv("FADSL_TUNE_DB");
  if (env && *env) return strdup(env);
  char *root = fa_cache_default_root();
  if (!root) return NULL;
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_printf(&sb, "%s/tune.json", root);
  free(root);
  return fa_sb_take(&sb);
}

/* ---- lookup ---------------------------------------------------------------------- */

static bool in_string_array(const json_t *arr, const char *name) {
  size_t i;
  const json_t *v;
  json_array_foreach(arr, i, v) {
    const char *s = json_string_value(v);
    if (s && strcmp(s, name) == 0) return true;
  }
  return false;
}

/* How far an entry's key is from the query's: 0 for equal keys, +inf when
 * the entry is not usable.  *exact says whether every value was known and
 * equal. */
static double key_distance(const FaTuneQuery *q, const json_t *entry, bool *exact) {
  *exact = true;
  const json_t *key = json_object_get(entry, "key");
  if (!json_is_object(key) || (int)json_object_size(key) != q->nkey) return INFINITY;
  const json_t *exact_keys = json_object_get(entry, "exact_keys");
  double dist = 0;
  for (int i = 0; i < q->nkey; i++) {
    const json_t *jv = json_object_get(key, q->key[i].name);
    FaConst ev;
    if (!jv || !json_to_const(jv, NULL, &ev)) return INFINITY;
    const FaConst *qv = &q->key[i].value;
    if (qv->kind == CK_NONE) {   /* unknown to the launch: anything goes, but not exactly */
      *exact = false;
      continue;
    }
    if (const_equal(qv, &ev)) continue;
    *exact = false;
    if (in_string_array(exact_keys, q->key[i].name)) return INFINITY;
    if (!is_numeric(qv) || !is_numeric(&ev)) return INFINITY;
    double a = numeric(qv), b = numeric(&ev);
    if (!(a > 0) || !(b > 0)) return INFINITY;
    dist += fabs(log2(a / b));
  }
  return dist;
}

static bool entry_matches_identity(const FaTuneQuery *q, const json_t *e) {
  if (!json_is_object(e)) return false;
  if (strcmp(str_member(e, "program"), base_name(q->program)) != 0) return false;
  if (strcmp(str_member(e, "kernel"), q->kernel ? q->kernel : "") != 0) return false;
  if (strcmp(str_member(e, "arch"), q->arch ? q->arch : "") != 0) return false;
  if (strcmp(str_member(e, "fadsl_version"), q->fadsl_version ? q->fadsl_version : "") != 0)
    return false;
  if (q->gpu_name && *q->gpu_name && strcmp(str_member(e, "gpu"), q->gpu_name) != 0) return false;
  return true;
}

/* Copies an entry's config into the choice.  False when it is malformed. */
static bool take_config(const json_t *e, Arena *arena, FaTuneChoice *out) {
  const json_t *cfg = json_object_get(e, "config");
  if (!json_is_object(cfg)) return false;
  size_t n = json_object_size(cfg);
  out->values = fa_arena_alloc(arena, sizeof *out->values * (n + 1));
  if (!out->values) return false;
  out->nvalues = 0;
  memset(&out->config, 0, sizeof out->config);
  const char *name;
  const json_t *v;
  json_object_foreach((json_t *)cfg, name, v) {
    FaConst c;
    if (!json_to_const(v, arena, &c)) return false;
    const FaConfigAxis *ax = fa_config_axis(name);
    if (ax) {
      if (c.kind != CK_INT || c.i <= 0 || c.i > 1024) return false;
      fa_config_set(&out->config, ax, (int)c.i);
      continue;
    }
    FaBinding *b = &out->values[out->nvalues++];
    b->name = fa_arena_strdup(arena, name);
    b->value = c;
    if (!b->name) return false;
  }
  return true;
}

static void describe(const json_t *e, FaTuneMatch m, double dist, Arena *arena, FaTuneChoice *out) {
  StrBuf sb;
  fa_sb_init(&sb);
  const char *name;
  const json_t *v;
  int i = 0;
  json_object_foreach((json_t *)json_object_get(e, "key"), name, v) {
    FaConst c;
    fa_sb_printf(&sb, "%s%s=", i++ ? " " : "", name);
    if (json_to_const(v, NULL, &c))
      fa_const_print(c, &sb);
    else
      fa_sb_puts(&sb, "?");
  }
  if (m == FA_TUNE_NEAREST) fa_sb_printf(&sb, " (nearest, distance %.2f)", dist);
  out->detail = fa_arena_strdup(arena, sb.data ? sb.data : "");
  fa_sb_free(&sb);
}

static FaTuneMatch lookup_in(const json_t *root, const FaTuneQuery *q, Arena *arena,
                             FaTuneChoice *out) {
  const json_t *entries = json_object_get(root, "entries");
  const json_t *best = NULL;
  double best_dist = INFINITY;
  bool best_exact = false;
  size_t i;
  const json_t *e;
  json_array_foreach(entries, i, e) {
    if (!entry_matches_identity(q, e)) continue;
    bool exact;
    double d = key_distance(q, e, &exact);
    if (!isfinite(d)) continue;
    /* an exact match wins outright; otherwise the smallest distance, first in the file */
    if (exact && !best_exact) {
      best = e, best_dist = d, best_exact = true;
    } else if (!best_exact && d < best_dist) {
      best = e, best_dist = d;
    }
  }
  if (!best) return FA_TUNE_NOT_FOUND;
  FaTuneChoice c;
  memset(&c, 0, sizeof c);
  if (!take_config(best, arena, &c)) return FA_TUNE_NOT_FOUND;
  c.match = best_exact ? FA_TUNE_EXACT : FA_TUNE_NEAREST;
  describe(best, c.match, best_dist, arena, &c);
  *out = c;
  return c.match;
}

FaTuneMatch fa_tune_lookup(const FaTuneQuery *q, Arena *arena, FaTuneChoice *out) {
  return fa_tune_lookup_cached(NULL, q, arena, out);
}

struct FaTuneCache {
  pthread_mutex_t lock;
  char *path;
  struct stat st;               /* of the file when it was read */
  json_t *root;                 /* NULL: missing or unreadable */
  bool valid;
};

FaTuneCache *fa_tune_cache_new(void) {
  FaTuneCache *c = calloc(1, sizeof *c);
  if (c) pthread_mutex_init(&c->lock, NULL);
  return c;
}

void fa_tune_cache_free(FaTuneCache *c) {
  if (!c) return;
  json_decref(c->root);
  free(c->path);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

static bool same_file_state(const struct stat *a, const struct stat *b) {
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

FaTuneMatch fa_tune_lookup_cached(FaTuneCache *cache, const FaTuneQuery *q, Arena *arena,
                                  FaTuneChoice *out) {
  memset(out, 0, sizeof *out);
  out->match = FA_TUNE_NOT_FOUND;
  if (!q || !arena || !q->db_path || !*q->db_path || !q->kernel || (q->nkey > 0 && !q->key))
    return out->match;
  struct stat st;
  if (stat(q->db_path, &st) != 0) return out->match;   /* no database: the common case */
  if (!cache) {
    bool missing;
    json_t *root = db_load(q->db_path, &missing, NULL);
    if (!root) return out->match;
    lookup_in(root, q, arena, out);
    json_decref(root);
    return out->match;
  }
  pthread_mutex_lock(&cache->lock);
  if (!cache->valid || !cache->path || strcmp(cache->path, q->db_path) != 0 ||
      !same_file_state(&cache->st, &st)) {
    json_decref(cache->root);
    free(cache->path);
    bool missing;
    cache->root = db_load(q->db_path, &missing, NULL);
    cache->path = strdup(q->db_path);
    cache->st = st;
    cache->valid = cache->path != NULL;
  }
  if (cache->root) lookup_in(cache->root, q, arena, out);
  pthread_mutex_unlock(&cache->lock);
  return out->match;
}

/* ---- storing ---------------------------------------------------------------------- */

static json_t *config_json(const FaTuneTiming *t) {
  json_t *cfg = json_object();
  for (int i = 0; i < t->nvalues; i++) json_object_set_new(cfg, t->values[i].name, fa_tune_const_to_json(t->values[i].value));
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int x = 0; x < naxes; x++) {
    int v = fa_config_get(&t->config, &axes[x]);
    if (v > 0) json_object_set_new(cfg, axes[x].name, json_integer(v));
  }
  return cfg;
}

static void now_iso8601(char *buf, size_t size) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *entry_json(const FaTuneEntry *e) {
  json_t *j = json_object();
  json_object_set_new(j, "program", json_string(base_name(e->program)));
  json_object_set_new(j, "kernel", json_string(e->kernel ? e->kernel : ""));
  json_t *key = json_object();
  for (int i = 0; i < e->nkey; i++) json_object_set_new(key, e->key[i].name, fa_tune_const_to_json(e->key[i].value));
  json_object_set_new(j, "key", key);
  json_t *exact = json_array();
  for (int i = 0; i < e->nexact_keys; i++) json_array_append_new(exact, json_string(e->exact_keys[i]));
  json_object_set_new(j, "exact_keys", exact);
  json_object_set_new(j, "gpu", json_string(e->gpu_name ? e->gpu_name : ""));
  json_object_set_new(j, "arch", json_string(e->arch ? e->arch : ""));
  json_object_set_new(j, "fadsl_version", json_string(e->fadsl_version ? e->fadsl_version : ""));
  json_object_set_new(j, "config", config_json(&e->best));
  if (e->best.median_ms >= 0) json_object_set_new(j, "median_ms", json_real(e->best.median_ms));
  if (e->dflt.median_ms >= 0) {
    json_object_set_new(j, "default_config", config_json(&e->dflt));
    json_object_set_new(j, "default_ms", json_real(e->dflt.median_ms));
  }
  if (e->tflops > 0) json_object_set_new(j, "tflops", json_real(e->tflops));
  json_object_set_new(j, "candidates", json_integer(e->candidates));
  char when[32];
  if (!e->tuned_at) now_iso8601(when, sizeof when);
  json_object_set_new(j, "tuned_at", json_string(e->tuned_at ? e->tuned_at : when));
  json_t *ru = json_array();
  for (int i = 0; i < e->nrunners_up; i++) {
    json_t *r = json_object();
    json_object_set_new(r, "config", config_json(&e->runners_up[i]));
    json_object_set_new(r, "median_ms", json_real(e->runners_up[i].median_ms));
    json_array_append_new(ru, r);
  }
  json_object_set_new(j, "runners_up", ru);
  return j;
}

/* Same program, kernel, key, GPU, arch and version: the new entry replaces the old. */
static bool same_identity(const json_t *a, const json_t *b) {
  static const char *const fields[] = {"program", "kernel", "gpu", "arch", "fadsl_version"};
  for (int i = 0; i < FA_ARRAY_LEN(fields); i++)
    if (strcmp(str_member(a, fields[i]), str_member(b, fields[i])) != 0) return false;
  return json_equal(json_object_get(a, "key"), json_object_get(b, "key"));
}

/* mkdir -p of the directory part of `path`. */
static bool make_parent_dirs(const char *path, StrBuf *err) {
  char *p = strdup(path);
  if (!p) return false;
  char *slash = strrchr(p, '/');
  bool ok = true;
  if (slash && slash != p) {
    *slash = '\0';
    for (char *s = p + 1;; s++) {
      if (*s != '/' && *s != '\0') continue;
      char saved = *s;
      *s = '\0';
      if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        fa_sb_printf(err, "cannot create directory %s: %s", p, strerror(errno));
        ok = false;
        break;
      }
      *s = saved;
      if (!saved) break;
    }
  }
  free(p);
  return ok;
}

/* Writes `root` to a temporary file beside `path` and renames it over. */
static bool write_atomically(const char *path, json_t *root, StrBuf *err) {
  StrBuf tmp;
  fa_sb_init(&tmp);
  fa_sb_printf(&tmp, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp.data);
  if (fd < 0) {
    fa_sb_printf(err, "cannot create a temporary file beside %s: %s", path, strerror(errno));
    fa_sb_free(&tmp);
    return false;
  }
  fchmod(fd, 0644);
  FILE *f = fdopen(fd, "w");
  bool ok = f && json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) == 0 &&
            fputc('\n', f) != EOF && fflush(f) == 0 && fsync(fd) == 0;
  int saved = errno;
  if (f ? fclose(f) != 0 : close(fd) != 0) ok = false;
  if (ok && rename(tmp.data, path) != 0) {
    saved = errno;
    ok = false;
  }
  if (!ok) {
    fa_sb_printf(err, "cannot write %s: %s", path, strerror(saved ? saved : EIO));
    unlink(tmp.data);
  }
  fa_sb_free(&tmp);
  return ok;
}

bool fa_tune_db_store(const char *path, const FaTuneEntry *entries, int n, StrBuf *err, StrBuf *note) {
  if (!path || !*path) {
    fa_sb_puts(err, "no tuning database path");
    return false;
  }
  if (!make_parent_dirs(path, err)) return false;
  StrBuf lock_path;
  fa_sb_init(&lock_path);
  fa_sb_printf(&lock_path, "%s.lock", path);
  int lock = open(lock_path.data, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    fa_sb_printf(err, "cannot lock %s: %s", lock_path.data, strerror(errno));
    if (lock >= 0) close(lock);
    fa_sb_free(&lock_path);
    return false;
  }
  fa_sb_free(&lock_path);

  /* re-read under the lock, so that what other writers stored is kept */
  bool missing;
  StrBuf why;
  fa_sb_init(&why);
  json_t *root = db_load(path, &missing, &why);
  if (!root && !missing) {
    StrBuf kept;
    fa_sb_init(&kept);
    fa_sb_printf(&kept, "%s.corrupt", path);
    if (rename(path, kept.data) == 0) {
      if (note) fa_sb_printf(note, "%s; kept it as %s and started a new database\n", why.data, kept.data);
    } else if (note) {
      fa_sb_printf(note, "%s; replacing it\n", why.data);
    }
    fa_sb_free(&kept);
  }
  fa_sb_free(&why);
  if (!root) {
    root = json_object();
    json_object_set_new(root, "format", json_string(db_format));
    json_object_set_new(root, "version", json_integer(FA_TUNE_DB_VERSION));
    json_object_set_new(root, "entries", json_array());
  }
  json_object_set_new(root, "version", json_integer(FA_TUNE_DB_VERSION));
  json_t *list = json_object_get(root, "entries");
  for (int i = 0; i < n; i++) {
    json_t *e = entry_json(&entries[i]);
    size_t at = json_array_size(list);
    for (size_t j = 0; j < json_array_size(list); j++)
      if (same_identity(json_array_get(list, j), e)) {
        at = j;
        break;
      }
    if (at < json_array_size(list))
      json_array_set_new(list, at, e);
    else
      json_array_append_new(list, e);
  }
  bool ok = write_atomically(path, root, err);
  json_decref(root);
  flock(lock, LOCK_UN);
  close(lock);
  return ok;
}
