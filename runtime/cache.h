/* cache.h - the compiled-kernel cache (cache.c): in memory per context, and
 * on disk so that later processes skip NVRTC.
 *
 * Entries are addressed by a SHA-256 key over everything that determines the
 * compiled code (fa_cache_key_*).  A disk entry is one file named by the key
 * in hex:
 *
 *   offset  size  field
 *   0       8     magic "FADSLKC\0"
 *   8       4     format version (little endian), FA_CACHE_FORMAT
 *   12      4     header size (little endian), 88
 *   16      8     payload length (little endian)
 *   24      32    the key
 *   56      32    SHA-256 of the payload
 *   88      ...   payload (a cubin)
 *
 * written to a temporary file in the same directory and renamed into place,
 * so a reader sees either no entry or a whole one.  Anything that does not
 * verify (magic, version, sizes, key, checksum) is a miss; the caller
 * rebuilds and the new entry replaces the bad one.  A directory that cannot
 * be created or written turns the disk cache off with a warning; it is never
 * an error. */
#ifndef FADSL_RT_CACHE_H
#define FADSL_RT_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "sha256.h"

enum { FA_CACHE_FORMAT = 1, FA_CACHE_HEADER_SIZE = 88 };

typedef struct FaCacheEntry FaCacheEntry;

typedef enum FaCacheHit { FA_CACHE_MISS, FA_CACHE_HIT_MEMORY, FA_CACHE_HIT_DISK } FaCacheHit;

/* Where warnings go, and whether to print them. */
typedef struct FaLogSink {
  FILE *stream;                 /* stderr */
  int level;                    /* FA_LOG_* */
} FaLogSink;

enum { FA_LOG_OFF = -1, FA_LOG_QUIET = 0, FA_LOG_WARN = 1, FA_LOG_INFO = 2, FA_LOG_DEBUG = 3 };

/* Reads FADSL_LOG: off, warn, info, debug (or 0..3); unset = quiet. */
int fa_log_level_from_env(void);

typedef struct FaKernelCache {
  pthread_mutex_t lock;
  FaCacheEntry *entries;        /* memory cache: a list, newest first */
  int nentries;
  char *dir;                    /* disk cache directory; NULL = none */
  bool dir_ready;               /* created and found writable */
  bool disk_off_warned;
  FaLogSink log;
  unsigned tmp_counter;         /* distinguishes temporary files of one process */
} FaKernelCache;

/* dir: the disk cache directory, or NULL for none (see fa_cache_default_dir). */
void fa_cache_init(FaKernelCache *c, const char *dir, FaLogSink log);
void fa_cache_free(FaKernelCache *c);
/* Changes the directory (NULL: memory only).  Returns false on OOM. */
bool fa_cache_set_dir(FaKernelCache *c, const char *dir);
/* The directory in use, or NULL when the disk cache is off (also after it
 * was found unusable). */
const char *fa_cache_dir(FaKernelCache *c);

/* The cache root: $FADSL_CACHE_DIR, else $XDG_CACHE_HOME/fadsl, else
 * $HOME/.cache/fadsl; NULL when none can be formed.  malloc'ed. */
char *fa_cache_default_root(void);

/* Looks a key up in memory, then on disk (a disk hit is also kept in
 * memory).  On a hit *data is a malloc'ed copy. */
FaCacheHit fa_cache_get(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES],
                        unsigned char **data, size_t *size);

/* Stores an entry in memory and, when the disk cache is on, on disk.
 * Returns false only when even the memory copy could not be made. */
bool fa_cache_put(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES],
                  const unsigned char *data, size_t size);

/* Path of the disk entry for a key (for tests and messages): malloc'ed, or
 * NULL when there is no disk cache. */
char *fa_cache_entry_path(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES]);

/* Drops the memory copies (tests use it to exercise the disk path). */
void fa_cache_clear_memory(FaKernelCache *c);

/* Key building: fields are hashed with their lengths, so ("ab","c") and
 * ("a","bc") differ. */
void fa_cache_key_field(FaSha256 *h, const void *data, size_t len);
void fa_cache_key_str(FaSha256 *h, const char *s);   /* NULL hashes differently from "" */

#endif
