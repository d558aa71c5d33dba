/* cache.c - compiled-kernel cache: memory list plus verified disk entries
 * written atomically (see cache.h for the entry format). */
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "util.h"

static const unsigned char cache_magic[8] = {'F', 'A', 'D', 'S', 'L', 'K', 'C', 0};

struct FaCacheEntry {
  FaCacheEntry *next;
  unsigned char key[FA_SHA256_BYTES];
  unsigned char *data;
  size_t size;
};

int fa_log_level_from_env(void) {
  const char *v = getenv("FADSL_LOG");
  if (!v || !*v) return FA_LOG_QUIET;
  if (!strcmp(v, "off") || !strcmp(v, "none")) return FA_LOG_OFF;
  if (!strcmp(v, "0")) return FA_LOG_QUIET;
  if (!strcmp(v, "warn") || !strcmp(v, "warning") || !strcmp(v, "1")) return FA_LOG_WARN;
  if (!strcmp(v, "debug") || !strcmp(v, "3")) return FA_LOG_DEBUG;
  return FA_LOG_INFO;   /* "info", "2", or anything else that asks for logging */
}

void fa_cache_init(FaKernelCache *c, const char *dir, FaLogSink log) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
  c->log = log;
  if (!c->log.stream) c->log.stream = stderr;
  c->dir = dir ? strdup(dir) : NULL;
}

void fa_cache_clear_memory(FaKernelCache *c) {
  pthread_mutex_lock(&c->lock);
  for (FaCacheEntry *e = c->entries, *next; e; e = next) {
    next = e->next;
    free(e->data);
    free(e);
  }
  c->entries = NULL;
  c->nentries = 0;
  pthread_mutex_unlock(&c->lock);
}

void fa_cache_free(FaKernelCache *c) {
  fa_cache_clear_memory(c);
  free(c->dir);
  c->dir = NULL;
  pthread_mutex_destroy(&c->lock);
}

bool fa_cache_set_dir(FaKernelCache *c, const char *dir) {
  char *copy = NULL;
  if (dir && !(copy = strdup(dir))) return false;
  pthread_mutex_lock(&c->lock);
  free(c->dir);
  c->dir = copy;
  c->dir_ready = false;
  c->disk_off_warned = false;
  pthread_mutex_unlock(&c->lock);
  return true;
}

char *fa_cache_default_root(void) {
  StrBuf sb;
  fa_sb_init(&sb);
  const char *v = getenv("FADSL_CACHE_DIR");
  if (v && *v) {
    fa_sb_puts(&sb, v);
  } else if ((v = getenv("XDG_CACHE_HOME")) && *v == '/') {
    fa_sb_printf(&sb, "%s/fadsl", v);
  } else if ((v = getenv("HOME")) && *v) {
    fa_sb_printf(&sb, "%s/.cache/fadsl", v);
  } else {
    fa_sb_free(&sb);
    return NULL;
  }
  return fa_sb_take(&sb);
}

/* mkdir -p: creates every missing component.  Returns 0 or an errno. */
static int make_dirs(const char *path) {
  char *p = strdup(path);
  if (!p) return ENOMEM;
  int err = 0;
  for (char *s = p + 1;; s++) {
    if (*s == '/' || *s == '\0') {
      char saved = *s;
      *s = '\0';
      if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        err = errno;
        break;
      }
      *s = saved;
      if (!saved) break;
    }
  }
  if (!err) {
    struct stat st;
    if (stat(path, &st) != 0)
      err = errno;
    else if (!S_ISDIR(st.st_mode))
      err = ENOTDIR;
  }
  free(p);
  return err;
}

/* Warns once that the disk cache is off; called with the lock held. */
static void disk_off(FaKernelCache *c, const char *what, int err) {
  if (!c->disk_off_warned && c->log.level >= FA_LOG_QUIET)
    fprintf(c->log.stream,
            "fadsl: warning: kernel cache directory %s %s (%s); continuing without the disk cache\n",
            c->dir, what, strerror(err));
  c->disk_off_warned = true;
}

/* Makes sure the directory exists and is writable, once.  Returns the
 * directory (a copy, malloc'ed) when the disk cache is usable for `writing`
 * (reading needs only that a directory is set), or NULL. */
static char *usable_dir(FaKernelCache *c, bool writing) {
  pthread_mutex_lock(&c->lock);
  char *dir = NULL;
  if (c->dir && !c->dir_ready && !c->disk_off_warned) {
    int err = make_dirs(c->dir);
    if (err)
      disk_off(c, "cannot be created", err);
    else if (access(c->dir, W_OK | X_OK) != 0)
      disk_off(c, "is not writable", errno);
    else
      c->dir_ready = true;
  }
  if (c->dir && (c->dir_ready || !writing)) dir = strdup(c->dir);
  pthread_mutex_unlock(&c->lock);
  return dir;
}

const char *fa_cache_dir(FaKernelCache *c) {
  free(usable_dir(c, true));
  return c->dir_ready ? c->dir : NULL;
}

static char *entry_path(const char *dir, const unsigned char key[FA_SHA256_BYTES]) {
  char hex[FA_SHA256_HEX];
  fa_sha256_hex(key, hex);
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_printf(&sb, "%s/%s.cubin", dir, hex);
  return fa_sb_take(&sb);
}

char *fa_cache_entry_path(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES]) {
  pthread_mutex_lock(&c->lock);
  char *p = c->dir ? entry_path(c->dir, key) : NULL;
  pthread_mutex_unlock(&c->lock);
  return p;
}

/* ---- the memory list --------------------------------------------------------- */

static FaCacheEntry *memory_find(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES]) {
  for (FaCacheEntry *e = c->entries; e; e = e->next)
    if (memcmp(e->key, key, FA_SHA256_BYTES) == 0) return e;
  return NULL;
}

static bool memory_put(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES],
                       const unsigned char *data, size_t size) {
  FaCacheEntry *e = calloc(1, sizeof *e);
  unsigned char *copy = malloc(size ? size : 1);
  if (!e || !copy) {
    free(e);
    free(copy);
    return false;
  }
  memcpy(copy, data, size);
  memcpy(e->key, key, FA_SHA256_BYTES);
  e->data = copy;
  e->size = size;
  pthread_mutex_lock(&c->lock);
  FaCacheEntry *old = memory_find(c, key);
  if (old) {   /* another thread got there first; entries are immutable, keep the old */
    pthread_mutex_unlock(&c->lock);
    free(copy);
    free(e);
    return true;
  }
  e->next = c->entries;
  c->entries = e;
  c->nentries++;
  pthread_mutex_unlock(&c->lock);
  return true;
}

/* ---- disk entries -------------------------------------------------------------- */

static void put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_le32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static bool read_all(int fd, void *buf, size_t n) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static bool write_all(int fd, const void *buf, size_t n) {
  const unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

/* Reads and verifies one entry.  Returns true with the payload; false with
 * *why NULL when there is no entry, or a reason when it is corrupt. */
static bool disk_read(const char *path, const unsigned char key[FA_SHA256_BYTES],
                      unsigned char **data, size_t *size, const char **why) {
  *why = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) *why = "cannot be opened";
    return false;
  }
  struct stat st;
  unsigned char header[FA_CACHE_HEADER_SIZE];
  unsigned char *payload = NULL;
  bool ok = false;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = "is not a regular file";
  } else if ((uint64_t)st.st_size < FA_CACHE_HEADER_SIZE ||
             !read_all(fd, header, FA_CACHE_HEADER_SIZE)) {
    *why = "is truncated (no complete header)";
  } else if (memcmp(header, cache_magic, 8) != 0) {
    *why = "has a bad magic number";
  } else if (get_le32(header + 8) != FA_CACHE_FORMAT ||
             get_le32(header + 12) != FA_CACHE_HEADER_SIZE) {
    *why = "has another format version";
  } else if (get_le64(header + 16) != (uint64_t)st.st_size - FA_CACHE_HEADER_SIZE) {
    *why = "has the wrong length (truncated or extended)";
  } else if (memcmp(header + 24, key, FA_SHA256_BYTES) != 0) {
    *why = "belongs to another key";
  } else {
    size_t n = (size_t)get_le64(header + 16);
    unsigned char digest[FA_SHA256_BYTES];
    payload = malloc(n ? n : 1);
    if (!payload) {
      *why = "does not fit in memory";
    } else if (!read_all(fd, payload, n)) {
      *why = "could not be read completely";
    } else if (fa_sha256(payload, n, digest), memcmp(digest, header + 56, FA_SHA256_BYTES) != 0) {
      *why = "fails its checksum";
    } else {
      *data = payload;
      *size = n;
      payload = NULL;
      ok = true;
    }
  }
  free(payload);
  close(fd);
  return ok;
}

/* Writes an entry to a temporary file beside its final name and renames it
 * into place.  Returns 0 or an errno. */
static int disk_write(FaKernelCache *c, const char *dir, const unsigned char key[FA_SHA256_BYTES],
                      const unsigned char *data, size_t size) {
  char hex[FA_SHA256_HEX];
  fa_sha256_hex(key, hex);
  pthread_mutex_lock(&c->lock);
  unsigned n = ++c->tmp_counter;
  pthread_mutex_unlock(&c->lock);
  StrBuf tmp;
  fa_sb_init(&tmp);
  fa_sb_printf(&tmp, "%s/.%.16s.tmp.%ld.%u", dir, hex, (long)getpid(), n);
  char *final_path = entry_path(dir, key);
  if (!tmp.data || !final_path) {
    fa_sb_free(&tmp);
    free(final_path);
    return ENOMEM;
  }
  unsigned char header[FA_CACHE_HEADER_SIZE];
  memcpy(header, cache_magic, 8);
  put_le32(header + 8, FA_CACHE_FORMAT);
  put_le32(header + 12, FA_CACHE_HEADER_SIZE);
  put_le64(header + 16, size);
  memcpy(header + 24, key, FA_SHA256_BYTES);
  fa_sha256(data, size, header + 56);

  int err = 0;
  int fd = open(tmp.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    err = errno;
  } else {
    if (!write_all(fd, header, sizeof header) || !write_all(fd, data, size)) err = errno ? errno : EIO;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp.data, final_path) != 0) err = errno;
    if (err) unlink(tmp.data);
  }
  fa_sb_free(&tmp);
  free(final_path);
  return err;
}

FaCacheHit fa_cache_get(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES],
                        unsigned char **data, size_t *size) {
  *data = NULL;
  *size = 0;
  pthread_mutex_lock(&c->lock);
  FaCacheEntry *e = memory_find(c, key);
  if (e) {
    unsigned char *copy = malloc(e->size ? e->size : 1);
    if (copy) {
      memcpy(copy, e->data, e->size);
      *data = copy;
      *size = e->size;
    }
    pthread_mutex_unlock(&c->lock);
    return copy ? FA_CACHE_HIT_MEMORY : FA_CACHE_MISS;
  }
  pthread_mutex_unlock(&c->lock);

  char *dir = usable_dir(c, false);
  if (!dir) return FA_CACHE_MISS;
  char *path = entry_path(dir, key);
  free(dir);
  if (!path) return FA_CACHE_MISS;
  const char *why = NULL;
  bool ok = disk_read(path, key, data, size, &why);
  if (!ok && why && c->log.level >= FA_LOG_WARN)
    fprintf(c->log.stream, "fadsl: warning: kernel cache entry %s %s; rebuilding it\n", path, why);
  free(path);
  if (!ok) return FA_CACHE_MISS;
  memory_put(c, key, *data, *size);
  return FA_CACHE_HIT_DISK;
}

bool fa_cache_put(FaKernelCache *c, const unsigned char key[FA_SHA256_BYTES],
                  const unsigned char *data, size_t size) {
  bool ok = memory_put(c, key, data, size);
  char *dir = usable_dir(c, true);
  if (dir) {
    int err = disk_write(c, dir, key, data, size);
    if (err) {
      pthread_mutex_lock(&c->lock);
      disk_off(c, "cannot be written", err);
      c->dir_ready = false;
      pthread_mutex_unlock(&c->lock);
    }
    free(dir);
  }
  return ok;
}

void fa_cache_key_field(FaSha256 *h, const void *data, size_t len) {
  unsigned char n[8];
  put_le64(n, len);
  fa_sha256_update(h, n, sizeof n);
  fa_sha256_update(h, data, len);
}

void fa_cache_key_str(FaSha256 *h, const char *s) {
  if (!s) {
    unsigned char none = 0xff;   /* a length prefix never starts a field like this alone */
    fa_sha256_update(h, &none, 1);
    return;
  }
  fa_cache_key_field(h, s, strlen(s));
}
