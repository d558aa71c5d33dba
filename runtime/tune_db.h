/* tune_db.h - what a launch asks the tuning database (tune_db.c).
 *
 * fadsl-tune records, per kernel, @autotune key values, GPU and fadsl
 * version, the best point of the kernel's @autotune space.  A launch whose
 * configuration is not fully explicit asks fa_tune_lookup() for its key; the
 * answer fills the axes the caller left open. */
#ifndef FADSL_RT_TUNE_DB_H
#define FADSL_RT_TUNE_DB_H

#include "sema.h"
#include "util.h"

typedef enum FaTuneMatch {
  FA_TUNE_NOT_FOUND,            /* no usable entry: use the defaults */
  FA_TUNE_EXACT,                /* an entry for exactly these key values */
  FA_TUNE_NEAREST,              /* the nearest key's entry (tune_db.c documents the rule) */
} FaTuneMatch;

typedef struct FaTuneQuery {
  const char *db_path;          /* the database file; NULL: none */
  const char *program;          /* program name as loaded (file name or string name) */
  const char *kernel;           /* kernel name */
  const FaBinding *key;         /* the launch's values of @autotune(key=...), in key order */
  int nkey;
  const char *gpu_name;         /* "NVIDIA H200" ("" for a compile-only context) */
  const char *arch;             /* "sm_90a" */
  const char *fadsl_version;    /* PACKAGE_VERSION */
} FaTuneQuery;

typedef struct FaTuneChoice {
  FaTuneMatch match;
  FaBinding *values;            /* values of the constexpr axes, allocated in `arena` */
  int nvalues;
  FaLaunchConfig config;        /* 0 for warps/stages the entry does not give */
} FaTuneChoice;

/* Looks the query up.  Never fails loudly: a missing or unreadable database
 * is FA_TUNE_NOT_FOUND (fadsl-tune reports database problems, launches do
 * not). */
FaTuneMatch fa_tune_lookup(const FaTuneQuery *q, Arena *arena, FaTuneChoice *out);

#endif
