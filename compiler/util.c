/* util.c - arenas, pointer vectors, string buffers, file reading, hashing. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ArenaChunk {
  ArenaChunk *next;
  size_t used;
  size_t size;
  _Alignas(16) unsigned char data[];
};

enum { ARENA_CHUNK_MIN = 64 * 1024 };

void fa_arena_init(Arena *a) {
  a->head = NULL;
  a->total = 0;
}

void fa_arena_free(Arena *a) {
  ArenaChunk *c = a->head;
  while (c) {
    ArenaChunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->total = 0;
}

void *fa_arena_alloc(Arena *a, size_t size) {
  size_t rounded = (size + 15) & ~(size_t)15;
  if (rounded < size)
    return NULL;
  ArenaChunk *c = a->head;
  if (!c || c->size - c->used < rounded) {
    size_t want = rounded > ARENA_CHUNK_MIN ? rounded : ARENA_CHUNK_MIN;
    c = malloc(sizeof(ArenaChunk) + want);
    if (!c)
      return NULL;
    c->size = want;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += rounded;
  a->total += rounded;
  memset(p, 0, size);
  return p;
}

char *fa_arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = fa_arena_alloc(a, n + 1);
  if (!p)
    return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *fa_arena_strdup(Arena *a, const char *s) {
  return fa_arena_strndup(a, s, strlen(s));
}

char *fa_arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return NULL;
  char *p = fa_arena_alloc(a, (size_t)n + 1);
  if (!p)
    return NULL;
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

void fa_ptrvec_push(PtrVec *v, void *item) {
  if (v->len == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    void **items = realloc(v->items, (size_t)cap * sizeof(void *));
    if (!items) {
      free(v->items);
      v->items = NULL;
      v->len = v->cap = 0;
      return;
    }
    v->items = items;
    v->cap = cap;
  }
  v->items[v->len++] = item;
}

void fa_ptrvec_free(PtrVec *v) {
  free(v->items);
  v->items = NULL;
  v->len = v->cap = 0;
}

void fa_sb_init(StrBuf *sb) {
  sb->data = NULL;
  sb->len = 0;
  sb->cap = 0;
}

void fa_sb_free(StrBuf *sb) {
  free(sb->data);
  fa_sb_init(sb);
}

static bool sb_reserve(StrBuf *sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap)
    return true;
  size_t cap = sb->cap ? sb->cap : 64;
  while (cap < sb->len + extra + 1)
    cap *= 2;
  char *data = realloc(sb->data, cap);
  if (!data)
    return false;
  sb->data = data;
  sb->cap = cap;
  return true;
}

void fa_sb_putn(StrBuf *sb, const char *s, size_t n) {
  if (!sb_reserve(sb, n))
    return;
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

void fa_sb_putc(StrBuf *sb, char c) { fa_sb_putn(sb, &c, 1); }
void fa_sb_puts(StrBuf *sb, const char *s) { fa_sb_putn(sb, s, strlen(s)); }

void fa_sb_vprintf(StrBuf *sb, const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0 || !sb_reserve(sb, (size_t)n))
    return;
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  sb->len += (size_t)n;
}

void fa_sb_printf(StrBuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fa_sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *fa_sb_take(StrBuf *sb) {
  char *data = sb->data;
  if (!data)
    data = calloc(1, 1);
  fa_sb_init(sb);
  return data;
}

char *fa_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  StrBuf sb;
  fa_sb_init(&sb);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    size_t before = sb.len;
    fa_sb_putn(&sb, buf, n);
    if (sb.len != before + n) {
      fclose(f);
      fa_sb_free(&sb);
      errno = ENOMEM;
      return NULL;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    fa_sb_free(&sb);
    errno = EIO;
    return NULL;
  }
  if (len)
    *len = sb.len;
  return fa_sb_take(&sb);
}

uint64_t fa_hash64(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
