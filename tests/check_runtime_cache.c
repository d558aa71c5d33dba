/* check_runtime_cache.c - the compiled-kernel cache: memory and disk hits,
 * entries that are corrupt (flipped byte, truncated, extended, wrong key)
 * detected and rebuilt, concurrent writer processes, directories that
 * cannot be written, and the whole compile path through the cache. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cubin.h"
#include "rt.h"

/* LeakSanitizer (sanitizer builds): NVRTC and the CUDA driver keep allocations
 * for the life of the process (their caches, the C++ runtime NVRTC brings),
 * which are not leaks of fadsl's.  Only reports whose allocation stack passes
 * through those two libraries are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\nleak:libcuda\n"; }

static char tmpdir[256];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/fadsl-cache-test-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  unsetenv("FADSL_LOG");
}

static void remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char sub[1024];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      remove_tree(sub);
    }
    closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

static void teardown(void) { remove_tree(tmpdir); }

static void key_of(const char *s, unsigned char key[FA_SHA256_BYTES]) { fa_sha256(s, strlen(s), key); }

static unsigned char *payload(size_t n, unsigned seed) {
  unsigned char *p = malloc(n);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u + seed) >> 7);
  return p;
}

/* Reads a whole (small) stream back. */
static char *stream_text(FILE *f) {
  fflush(f);
  long n = ftell(f);
  char *s = calloc((size_t)n + 1, 1);
  rewind(f);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  return s;
}

static FaLogSink sink(FILE *f, int level) {
  FaLogSink s = {f, level};
  return s;
}

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : -1;
}

START_TEST(test_memory_then_disk) {
  FaKernelCache c;
  fa_cache_init(&c, tmpdir, sink(stderr, FA_LOG_QUIET));
  unsigned char key[FA_SHA256_BYTES];
  key_of("kernel A", key);
  unsigned char *data;
  size_t size;
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_MISS);
  ck_assert_ptr_null(data);
  unsigned char *p = payload(5000, 1);
  ck_assert(fa_cache_put(&c, key, p, 5000));
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_HIT_MEMORY);
  ck_assert_uint_eq(size, 5000);
  ck_assert_mem_eq(data, p, 5000);
  free(data);

  /* the entry file: hex name, header + payload */
  char *path = fa_cache_entry_path(&c, key);
  char hex[FA_SHA256_HEX];
  fa_sha256_hex(key, hex);
  ck_assert_ptr_nonnull(strstr(path, hex));
  ck_assert_int_eq(file_size(path), FA_CACHE_HEADER_SIZE + 5000);

  fa_cache_clear_memory(&c);
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_HIT_DISK);
  ck_assert_mem_eq(data, p, 5000);
  free(data);
  /* a disk hit is kept in memory */
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_HIT_MEMORY);
  free(data);
  fa_cache_free(&c);

  /* another cache (another process, later) finds it on disk */
  FaKernelCache c2;
  fa_cache_init(&c2, tmpdir, sink(stderr, FA_LOG_QUIET));
  ck_assert_int_eq(fa_cache_get(&c2, key, &data, &size), FA_CACHE_HIT_DISK);
  ck_assert_mem_eq(data, p, 5000);
  free(data);
  unsigned char other[FA_SHA256_BYTES];
  key_of("kernel B", other);
  ck_assert_int_eq(fa_cache_get(&c2, other, &data, &size), FA_CACHE_MISS);
  /* an empty payload is a valid entry too: a header alone */
  unsigned char empty_key[FA_SHA256_BYTES];
  key_of("empty", empty_key);
  ck_assert(fa_cache_put(&c2, empty_key, (const unsigned char *)"", 0));
  char *empty_path = fa_cache_entry_path(&c2, empty_key);
  ck_assert_int_eq(file_size(empty_path), FA_CACHE_HEADER_SIZE);
  free(empty_path);
  fa_cache_clear_memory(&c2);
  ck_assert_int_eq(fa_cache_get(&c2, empty_key, &data, &size), FA_CACHE_HIT_DISK);
  ck_assert_uint_eq(size, 0);
  ck_assert_ptr_nonnull(data);
  free(data);
  /* no memory-only cache has a directory */
  FaKernelCache c3;
  fa_cache_init(&c3, NULL, sink(stderr, FA_LOG_QUIET));
  ck_assert_int_eq(fa_cache_get(&c3, key, &data, &size), FA_CACHE_MISS);
  ck_assert_ptr_null(fa_cache_dir(&c3));
  ck_assert_ptr_null(fa_cache_entry_path(&c3, key));
  fa_cache_free(&c3);
  fa_cache_free(&c2);
  free(path);
  free(p);
}
END_TEST

/* Damages the entry with `damage`, then expects a miss with `why` in the
 * warning, a rebuild (put) and a valid disk hit again. */
typedef void (*Damage)(const char *path, const char *other_path);

static void flip_payload(const char *path, const char *o) {
  (void)o;
  int fd = open(path, O_RDWR);
  unsigned char b;
  ck_assert_int_eq(pread(fd, &b, 1, FA_CACHE_HEADER_SIZE + 1234), 1);
  b ^= 0x20;
  ck_assert_int_eq(pwrite(fd, &b, 1, FA_CACHE_HEADER_SIZE + 1234), 1);
  close(fd);
}
static void flip_magic(const char *path, const char *o) {
  (void)o;
  int fd = open(path, O_RDWR);
  ck_assert_int_eq(pwrite(fd, "X", 1, 2), 1);
  close(fd);
}
static void flip_checksum(const char *path, const char *o) {
  (void)o;
  int fd = open(path, O_RDWR);
  unsigned char b;
  ck_assert_int_eq(pread(fd, &b, 1, 60), 1);
  b ^= 1;
  ck_assert_int_eq(pwrite(fd, &b, 1, 60), 1);
  close(fd);
}
static void truncate_payload(const char *path, const char *o) {
  (void)o;
  ck_assert_int_eq(truncate(path, FA_CACHE_HEADER_SIZE + 4000), 0);
}
static void truncate_header(const char *path, const char *o) {
  (void)o;
  ck_assert_int_eq(truncate(path, 40), 0);
}
static void empty_file(const char *path, const char *o) {
  (void)o;
  ck_assert_int_eq(truncate(path, 0), 0);
}
static void extend(const char *path, const char *o) {
  (void)o;
  FILE *f = fopen(path, "ab");
  fputs("trailing garbage", f);
  fclose(f);
}
static void other_keys_entry(const char *path, const char *other) {
  ck_assert_int_eq(rename(other, path), 0);
}

static void check_damage(Damage damage, const char *why) {
  FaKernelCache c;
  FILE *log = tmpfile();
  fa_cache_init(&c, tmpdir, sink(log, FA_LOG_WARN));
  unsigned char key[FA_SHA256_BYTES], key2[FA_SHA256_BYTES];
  key_of("damaged kernel", key);
  key_of("another kernel", key2);
  unsigned char *p = payload(8192, 7), *q = payload(8192, 9);
  fa_cache_put(&c, key, p, 8192);
  fa_cache_put(&c, key2, q, 8192);
  fa_cache_clear_memory(&c);
  char *path = fa_cache_entry_path(&c, key), *path2 = fa_cache_entry_path(&c, key2);
  damage(path, path2);

  unsigned char *data = NULL;
  size_t size = 0;
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_MISS);
  ck_assert_ptr_null(data);
  char *text = stream_text(log);
  ck_assert_msg(strstr(text, "warning: kernel cache entry") && strstr(text, why) &&
                    strstr(text, "rebuilding it"),
                "warning for '%s': %s", why, text);
  free(text);
  /* rebuilt and rewritten: valid again, in this cache and the next */
  ck_assert(fa_cache_put(&c, key, p, 8192));
  fa_cache_clear_memory(&c);
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_HIT_DISK);
  ck_assert_uint_eq(size, 8192);
  ck_assert_mem_eq(data, p, 8192);
  free(data);
  ck_assert_int_eq(file_size(path), FA_CACHE_HEADER_SIZE + 8192);
  fa_cache_free(&c);
  fclose(log);
  free(path);
  free(path2);
  free(p);
  free(q);
}

START_TEST(test_corrupt_entries) {
  check_damage(flip_payload, "fails its checksum");
  check_damage(flip_checksum, "fails its checksum");
  check_damage(flip_magic, "bad magic");
  check_damage(truncate_payload, "wrong length");
  check_damage(truncate_header, "truncated");
  check_damage(empty_file, "truncated");
  check_damage(extend, "wrong length");
  check_damage(other_keys_entry, "another key");
}
END_TEST

/* Without FADSL_LOG the corrupt entry is still a miss, silently. */
START_TEST(test_corrupt_quiet) {
  FaKernelCache c;
  FILE *log = tmpfile();
  fa_cache_init(&c, tmpdir, sink(log, FA_LOG_QUIET));
  unsigned char key[FA_SHA256_BYTES];
  key_of("quiet", key);
  unsigned char *p = payload(4096, 3);
  fa_cache_put(&c, key, p, 4096);
  fa_cache_clear_memory(&c);
  char *path = fa_cache_entry_path(&c, key);
  truncate_payload(path, NULL);
  unsigned char *data;
  size_t size;
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_MISS);
  char *text = stream_text(log);
  ck_assert_str_eq(text, "");
  free(text);
  fa_cache_free(&c);
  fclose(log);
  free(path);
  free(p);
}
END_TEST

enum { WRITERS = 8, ROUNDS = 30, BIG = 300 * 1024 };

/* One writer process: puts and reads back the shared key (and a key of its
 * own) many times; every read must be whole and right. */
static int writer(int id) {
  char logname[512];
  snprintf(logname, sizeof logname, "%s/log.%d", tmpdir, id);
  FILE *log = fopen(logname, "w");
  if (!log) return 2;
  unsigned char shared[FA_SHA256_BYTES], own[FA_SHA256_BYTES];
  key_of("shared key", shared);
  char name[32];
  snprintf(name, sizeof name, "own key %d", id);
  key_of(name, own);
  unsigned char *p = payload(BIG, 42), *mine = payload(BIG / 3, (unsigned)id);
  int bad = 0;
  for (int r = 0; r < ROUNDS && !bad; r++) {
    FaKernelCache c;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/kernels", tmpdir);
    fa_cache_init(&c, dir, sink(log, FA_LOG_WARN));
    unsigned char *data;
    size_t size;
    FaCacheHit h = fa_cache_get(&c, shared, &data, &size);
    if (h != FA_CACHE_MISS && (size != BIG || memcmp(data, p, BIG) != 0)) bad = 3;
    if (h != FA_CACHE_MISS) free(data);
    if (!fa_cache_put(&c, shared, p, BIG)) bad = 4;
    if (!fa_cache_put(&c, own, mine, BIG / 3)) bad = 4;
    fa_cache_clear_memory(&c);
    if (fa_cache_get(&c, shared, &data, &size) != FA_CACHE_HIT_DISK) bad = 5;
    else {
      if (size != BIG || memcmp(data, p, BIG) != 0) bad = 6;
      free(data);
    }
    if (fa_cache_get(&c, own, &data, &size) != FA_CACHE_HIT_DISK) bad = 7;
    else {
      if (size != BIG / 3 || memcmp(data, mine, BIG / 3) != 0) bad = 8;
      free(data);
    }
    fa_cache_free(&c);
  }
  free(p);
  free(mine);
  long pos = ftell(log);
  fclose(log);
  if (!bad && pos != 0) bad = 9;   /* a warning means a torn or corrupt read */
  return bad;
}

START_TEST(test_concurrent_writers) {
  pid_t pids[WRITERS];
  for (int i = 0; i < WRITERS; i++) {
    pids[i] = fork();
    ck_assert_int_ge(pids[i], 0);
    if (pids[i] == 0) _exit(writer(i));
  }
  for (int i = 0; i < WRITERS; i++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "writer %d failed (status %d; see %s/log.%d)", i, WEXITSTATUS(status), tmpdir, i);
  }
  /* exactly the entries, no temporary files left behind */
  char dir[300];
  snprintf(dir, sizeof dir, "%s/kernels", tmpdir);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int entries = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    ck_assert_msg(strlen(e->d_name) == 64 + 6 && strstr(e->d_name, ".cubin"), "stray file %s",
                  e->d_name);
    entries++;
  }
  closedir(d);
  ck_assert_int_eq(entries, WRITERS + 1);
}
END_TEST

START_TEST(test_unwritable_dir) {
  /* a directory below a regular file can never be created, even by root */
  char file[300], dir[400];
  snprintf(file, sizeof file, "%s/a-file", tmpdir);
  FILE *f = fopen(file, "w");
  fclose(f);
  snprintf(dir, sizeof dir, "%s/kernels", file);
  FILE *log = tmpfile();
  FaKernelCache c;
  fa_cache_init(&c, dir, sink(log, FA_LOG_QUIET));
  unsigned char key[FA_SHA256_BYTES], key2[FA_SHA256_BYTES];
  key_of("k1", key);
  key_of("k2", key2);
  unsigned char *p = payload(1000, 5);
  ck_assert(fa_cache_put(&c, key, p, 1000));   /* memory still works */
  ck_assert(fa_cache_put(&c, key2, p, 1000));
  unsigned char *data;
  size_t size;
  ck_assert_int_eq(fa_cache_get(&c, key, &data, &size), FA_CACHE_HIT_MEMORY);
  ck_assert_mem_eq(data, p, 1000);
  free(data);
  ck_assert_ptr_null(fa_cache_dir(&c));
  char *text = stream_text(log);
  ck_assert_msg(strstr(text, "warning: kernel cache directory") &&
                    strstr(text, "continuing without the disk cache"),
                "%s", text);
  ck_assert_msg(strstr(text, "\n") == text + strlen(text) - 1, "warned more than once: %s", text);
  free(text);
  fa_cache_free(&c);
  fclose(log);

  /* FADSL_LOG=off silences even that */
  log = tmpfile();
  fa_cache_init(&c, dir, sink(log, FA_LOG_OFF));
  ck_assert(fa_cache_put(&c, key, p, 1000));
  text = stream_text(log);
  ck_assert_str_eq(text, "");
  free(text);
  fa_cache_free(&c);
  fclose(log);
  free(p);
}
END_TEST

START_TEST(test_mkdir_p_and_default_root) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/x/y/z/kernels", tmpdir);
  FaKernelCache c;
  fa_cache_init(&c, dir, sink(stderr, FA_LOG_QUIET));
  ck_assert_str_eq(fa_cache_dir(&c), dir);
  struct stat st;
  ck_assert(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
  fa_cache_free(&c);

  setenv("FADSL_CACHE_DIR", "/some/where", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  char *r = fa_cache_default_root();
  ck_assert_str_eq(r, "/some/where");
  free(r);
  unsetenv("FADSL_CACHE_DIR");
  r = fa_cache_default_root();
  ck_assert_str_eq(r, "/xdg/fadsl");
  free(r);
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);   /* the XDG spec: absolute only */
  r = fa_cache_default_root();
  ck_assert_str_eq(r, "/home/u/.cache/fadsl");
  free(r);
  unsetenv("XDG_CACHE_HOME");
  r = fa_cache_default_root();
  ck_assert_str_eq(r, "/home/u/.cache/fadsl");
  free(r);

  /* a context puts its kernels under ROOT/kernels */
  setenv("FADSL_CACHE_DIR", tmpdir, 1);
  fadsl_context *ctx;
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  snprintf(dir, sizeof dir, "%s/kernels", tmpdir);
  ck_assert_str_eq(fadsl_context_cache_dir(ctx), dir);
  ck_assert_int_eq(fadsl_context_set_cache_dir(ctx, NULL), FADSL_SUCCESS);
  ck_assert_ptr_null(fadsl_context_cache_dir(ctx));
  ck_assert_int_eq(fadsl_context_set_cache_dir(ctx, ""), FADSL_ERROR_INVALID_ARGUMENT);
  fadsl_context_destroy(ctx);
  unsetenv("FADSL_CACHE_DIR");
}
END_TEST

/* ---- the compile path through the cache --------------------------------------- */

static const char *kernel_src =
    "extern \"C\" __global__ void scale(float *y, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] *= a;\n"
    "}\n";

/* Compilations that produced a non-empty NVRTC log (each is stored as a
 * second entry beside its cubin; an empty log is not). */
static int logs_stored;

static FaCacheHit build(fadsl_context *ctx, const char *src, const char *arch, FaRtBinary *b) {
  fadsl_status st = fa_rt_build_cubin(ctx, src, "scale.cu", NULL, NULL, 0, arch, b);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_uint_gt(b->size, 64);
  ck_assert(b->cubin[0] == 0x7f && b->cubin[1] == 'E');
  ck_assert_ptr_nonnull(b->log);
  if (b->hit == FA_CACHE_MISS && b->log[0]) logs_stored++;
  return b->hit;
}

/* The disk entries of a directory by payload: cubins (ELF) and reports. */
static void count_entries(const char *dir, int *cubins, int *reports) {
  *cubins = *reports = 0;
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strstr(e->d_name, ".cubin")) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unsigned char head[4] = {0};
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = pread(fd, head, 4, FA_CACHE_HEADER_SIZE);
    close(fd);
    if (n == 4 && !memcmp(head, "\x7f" "ELF", 4))
      ++*cubins;
    else
      ++*reports;
  }
  closedir(d);
}

static fadsl_context *context_in(const char *dir, FILE *log, int level) {
  fadsl_context *ctx;
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_context_set_cache_dir(ctx, dir), FADSL_SUCCESS);
  ctx->cache.log = sink(log, level);
  return ctx;
}

START_TEST(test_build_through_cache) {
  FILE *log = tmpfile();
  fadsl_context *ctx = context_in(tmpdir, log, FA_LOG_WARN);
  FaRtBinary b1, b2;
  logs_stored = 0;
  ck_assert_int_eq(build(ctx, kernel_src, "sm_80", &b1), FA_CACHE_MISS);
  FaKernelResources r;
  ck_assert(fa_kernel_resources(b1.cubin, b1.size, b1.log, "scale", &r, NULL));
  ck_assert_int_gt(r.registers, 0);
  ck_assert_int_eq(build(ctx, kernel_src, "sm_80", &b2), FA_CACHE_HIT_MEMORY);
  ck_assert_uint_eq(b1.size, b2.size);
  ck_assert_mem_eq(b1.cubin, b2.cubin, b1.size);
  fa_rt_binary_free(&b2);
  /* another arch, another source: other keys */
  ck_assert_int_eq(build(ctx, kernel_src, "sm_90a", &b2), FA_CACHE_MISS);
  fa_rt_binary_free(&b2);
  char *changed = malloc(strlen(kernel_src) + 8);
  sprintf(changed, "%s\n// x\n", kernel_src);
  ck_assert_int_eq(build(ctx, changed, "sm_80", &b2), FA_CACHE_MISS);
  fa_rt_binary_free(&b2);
  free(changed);
  fadsl_context_destroy(ctx);

  /* a new context (a later process): from disk, with the ptxas report
   * where there was one */
  ctx = context_in(tmpdir, log, FA_LOG_WARN);
  ck_assert_int_eq(build(ctx, kernel_src, "sm_80", &b2), FA_CACHE_HIT_DISK);
  ck_assert_mem_eq(b1.cubin, b2.cubin, b1.size);
  ck_assert_str_eq(b2.log, b1.log);
  FaKernelResources r2;
  ck_assert(fa_kernel_resources(b2.cubin, b2.size, b2.log, "scale", &r2, NULL));
  ck_assert_mem_eq(&r2, &r, sizeof r);
  fa_rt_binary_free(&b2);
  int cubins, reports;
  count_entries(tmpdir, &cubins, &reports);
  ck_assert_int_eq(cubins, 3);
  ck_assert_int_eq(reports, logs_stored);

  /* flip a byte of every entry file: the next context recompiles */
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  int flipped = 0;
  while ((e = readdir(d))) {
    if (!strstr(e->d_name, ".cubin")) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
    int fd = open(path, O_RDWR);
    unsigned char byte;   /* every entry has a payload: empty reports are not stored */
    ck_assert_int_eq(pread(fd, &byte, 1, FA_CACHE_HEADER_SIZE), 1);
    byte ^= 0x80;
    ck_assert_int_eq(pwrite(fd, &byte, 1, FA_CACHE_HEADER_SIZE), 1);
    close(fd);
    flipped++;
  }
  closedir(d);
  ck_assert_int_eq(flipped, cubins + reports);
  fadsl_context_destroy(ctx);
  ctx = context_in(tmpdir, log, FA_LOG_WARN);
  ck_assert_int_eq(build(ctx, kernel_src, "sm_80", &b2), FA_CACHE_MISS);
  ck_assert_mem_eq(b1.cubin, b2.cubin, b1.size);
  fa_rt_binary_free(&b2);
  char *text = stream_text(log);
  ck_assert_msg(strstr(text, "fails its checksum; rebuilding it"), "%s", text);
  free(text);
  fadsl_context_destroy(ctx);
  /* ... and the rewritten entry is good again */
  ctx = context_in(tmpdir, log, FA_LOG_WARN);
  ck_assert_int_eq(build(ctx, kernel_src, "sm_80", &b2), FA_CACHE_HIT_DISK);
  fa_rt_binary_free(&b2);
  fadsl_context_destroy(ctx);

  /* an unusable directory (below a regular file): compiling still works */
  char parent[400], bad[420];
  snprintf(parent, sizeof parent, "%s/not-a-dir", tmpdir);
  FILE *f = fopen(parent, "w");
  fclose(f);
  snprintf(bad, sizeof bad, "%s/kernels", parent);
  ctx = context_in(bad, log, FA_LOG_OFF);
  ck_assert_int_eq(build(ctx, kernel_src, "sm_80", &b2), FA_CACHE_MISS);
  fa_rt_binary_free(&b2);
  ck_assert_ptr_null(fadsl_context_cache_dir(ctx));
  ck_assert_int_eq(build(ctx, kernel_src, "sm_80", &b2), FA_CACHE_HIT_MEMORY);
  fa_rt_binary_free(&b2);
  fadsl_context_destroy(ctx);

  fa_rt_binary_free(&b1);
  fclose(log);
}
END_TEST

START_TEST(test_build_errors) {
  fadsl_context *ctx = context_in(tmpdir, stderr, FA_LOG_QUIET);
  FaRtBinary b;
  ck_assert_int_eq(fa_rt_build_cubin(ctx, "this is not C++", "bad.cu", NULL, NULL, 0, "sm_80", &b),
                   FADSL_ERROR_NVRTC);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "bad.cu"));
  ck_assert_ptr_null(b.cubin);
  ck_assert_int_eq(fa_rt_build_cubin(ctx, kernel_src, "k.cu", NULL, NULL, 0, "sm80", &b),
                   FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "sm80"));
  /* a failed compilation leaves nothing in the cache */
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  while ((e = readdir(d))) ck_assert_msg(!strstr(e->d_name, ".cubin"), "%s", e->d_name);
  closedir(d);
  fadsl_context_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_cache");
  TCase *tc = tcase_create("cache");
  tcase_set_timeout(tc, 180);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_memory_then_disk);
  tcase_add_test(tc, test_corrupt_entries);
  tcase_add_test(tc, test_corrupt_quiet);
  tcase_add_test(tc, test_concurrent_writers);
  tcase_add_test(tc, test_unwritable_dir);
  tcase_add_test(tc, test_mkdir_p_and_default_root);
  tcase_add_test(tc, test_build_through_cache);
  tcase_add_test(tc, test_build_errors);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
