/* tune_db.h - the tuning database (tune_db.c): what fadsl-tune records and
 * what a launch asks it.
 *
 * fadsl-tune records, per program, kernel, @autotune key values, GPU, GPU
 * architecture and fadsl version, the best point of the kernel's @autotune
 * space with its timings.  A launch whose configuration is not fully
 * explicit asks fa_tune_lookup() for its key; the answer fills the axes the
 * caller left open.  The file format and the nearest-key rule are described
 * in docs/tuning.md (and, briefly, above fa_tune_lookup). */
#ifndef FADSL_RT_TUNE_DB_H
#define FADSL_RT_TUNE_DB_H

#include "sema.h"
#include "util.h"

/* ---- the launch side ------------------------------------------------------------ */

typedef enum FaTuneMatch {
  FA_TUNE_NOT_FOUND,            /* no usable entry: use the defaults */
  FA_TUNE_EXACT,                /* an entry for exactly these key values */
  FA_TUNE_NEAREST,              /* the nearest key's entry (see fa_tune_lookup) */
} FaTuneMatch;

typedef struct FaTuneQuery {
  const char *db_path;          /* the database file; NULL: none */
  const char *program;          /* program name as loaded (file name or string name);
                                   only its base name is compared */
  const char *kernel;           /* kernel name */
  const FaBinding *key;         /* the launch's values of @autotune(key=...), in key order;
                                   CK_NONE for a value the launch does not know */
  int nkey;
  const char *gpu_name;         /* "NVIDIA H200"; "" (compile-only context): any GPU */
  const char *arch;             /* "sm_90a" */
  const char *fadsl_version;    /* PACKAGE_VERSION */
} FaTuneQuery;

typedef struct FaTuneChoice {
  FaTuneMatch match;
  FaBinding *values;            /* values of the constexpr axes, allocated in `arena` */
  int nvalues;
  FaLaunchConfig config;        /* 0 for warps/stages the entry does not give */
  const char *detail;           /* for logs: the entry's key and, for a nearest
                                   match, its distance (arena; NULL when not found) */
} FaTuneChoice;

/* Looks the query up.  Never fails loudly: a missing, unreadable or corrupt
 * database is FA_TUNE_NOT_FOUND (fadsl-tune reports database problems,
 * launches do not).
 *
 * An entry is usable when its program base name, kernel, architecture and
 * fadsl version equal the query's, its GPU name equals the query's (unless
 * the query's is ""), and its key names are the query's.  It is the EXACT
 * match when every key value is equal.  Otherwise the NEAREST usable entry
 * is taken, among those whose non-numeric key values (bools, dtypes,
 * strings) and compile-time key values (those the entry lists under
 * "exact_keys": constexpr parameters, which change the generated code) are
 * equal and whose numeric key values are both positive where they differ:
 * the one with the smallest distance sum over the differing numeric keys of
 * |log2(a / b)|; ties go to the entry that comes first in the file.  A key
 * value the launch does not know (CK_NONE) matches any value, and then the
 * match is at best NEAREST. */
FaTuneMatch fa_tune_lookup(const FaTuneQuery *q, Arena *arena, FaTuneChoice *out);

/* The same, keeping the parsed database in `cache` between calls (re-read
 * when the file's size, modification time or inode change), so that a
 * launch does not parse the file each time.  A cache may be shared by
 * threads (it locks itself).  cache NULL: fa_tune_lookup. */
typedef struct FaTuneCache FaTuneCache;
FaTuneCache *fa_tune_cache_new(void);   /* NULL on OOM */
void fa_tune_cache_free(FaTuneCache *cache);
FaTuneMatch fa_tune_lookup_cached(FaTuneCache *cache, const FaTuneQuery *q, Arena *arena,
                                  FaTuneChoice *out);

/* ---- the tuner side --------------------------------------------------------------- */

/* One measured point of a space. */
typedef struct FaTuneTiming {
  const FaBinding *values;      /* the constexpr axes */
  int nvalues;
  FaLaunchConfig config;        /* warps, stages */
  double median_ms;             /* < 0: not timed */
} FaTuneTiming;

/* One database entry, as fadsl-tune stores it. */
typedef struct FaTuneEntry {
  const char *program;          /* base name of the .fa file (a path is cut to its base name) */
  const char *kernel;
  const FaBinding *key;         /* @autotune key values, in key order */
  int nkey;
  const char *const *exact_keys;/* key names that are compile-time values (must match exactly) */
  int nexact_keys;
  const char *gpu_name;
  const char *arch;
  const char *fadsl_version;
  FaTuneTiming best;
  FaTuneTiming dflt;            /* the default configuration (median_ms < 0: not timed) */
  const FaTuneTiming *runners_up;
  int nrunners_up;
  double tflops;                /* of the best; <= 0: the kernel declares no flops */
  int candidates;               /* points timed */
  const char *tuned_at;         /* "2026-11-30T12:00:00Z"; NULL: now */
} FaTuneEntry;

/* Adds entries to the database at `path`, replacing those with the same
 * program, kernel, key, GPU, architecture and version.  Concurrent writers
 * (threads or processes) are serialised by an exclusive lock on PATH.lock;
 * the database is re-read under the lock, merged, written to a temporary
 * file in the same directory and renamed over PATH, so a reader sees the old
 * or the new file, never a partial one.  Missing directories are created.
 * A corrupt database is kept as PATH.corrupt and replaced (said in *note).
 * Returns false with a message in *err; *note (may be NULL) gets remarks. */
bool fa_tune_db_store(const char *path, const FaTuneEntry *entries, int n, StrBuf *err,
                      StrBuf *note);

/* The default database: $FADSL_TUNE_DB, else the cache root's tune.json
 * ($FADSL_CACHE_DIR, else $XDG_CACHE_HOME/fadsl, else ~/.cache/fadsl) -- the
 * file libfadsl consults.  malloc'ed; NULL when no path can be formed. */
char *fa_tune_db_default_path(void);

/* Checks that `path` is a readable database (a missing file is fine).
 * Returns false with the reason in *err. */
bool fa_tune_db_check(const char *path, StrBuf *err);

/* A compile-time value as JSON (an integer, a real, a boolean or a string),
 * as the database and fadsl-tune --json write it; a new reference. */
struct json_t;
struct json_t *fa_tune_const_to_json(FaConst c);

#endif
