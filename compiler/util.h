/* util.h - memory arenas, growable arrays and string buffers shared by every
 * compiler stage.
 *
 * The compiler allocates nearly everything from an Arena that lives as long
 * as one compilation (an FaCompiler context); nothing is freed piecemeal, so
 * stages can share pointers freely.  Nothing here keeps global state.
 */
#ifndef FADSL_UTIL_H
#define FADSL_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ----------------------------------------------------------- */

typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
  ArenaChunk *head;     /* newest chunk first */
  size_t total;         /* bytes handed out, for statistics */
} Arena;

void fa_arena_init(Arena *a);
void fa_arena_free(Arena *a);                   /* frees every chunk */
void *fa_arena_alloc(Arena *a, size_t size);    /* zeroed, 16-byte aligned; NULL only on OOM */
char *fa_arena_strdup(Arena *a, const char *s);
char *fa_arena_strndup(Arena *a, const char *s, size_t n);
char *fa_arena_printf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- growable array of pointers ---------------------------------------
 * A PtrVec grows with realloc (not the arena) so it can be appended to in
 * loops; fa_ptrvec_freeze copies it into the arena and releases the heap
 * storage when it is final.
 */
typedef struct PtrVec {
  void **items;
  int len;
  int cap;
} PtrVec;

void fa_ptrvec_push(PtrVec *v, void *item);     /* aborts nothing: sets items NULL on OOM */
void fa_ptrvec_free(PtrVec *v);

/* ---- string buffer ----------------------------------------------------- */

typedef struct StrBuf {
  char *data;           /* always NUL-terminated when len > 0 or after init */
  size_t len;
  size_t cap;
} StrBuf;

void fa_sb_init(StrBuf *sb);
void fa_sb_free(StrBuf *sb);
void fa_sb_putc(StrBuf *sb, char c);
void fa_sb_puts(StrBuf *sb, const char *s);
void fa_sb_putn(StrBuf *sb, const char *s, size_t n);
void fa_sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fa_sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
char *fa_sb_take(StrBuf *sb);                   /* caller frees with free(); sb is reset */

/* ---- files and hashing ------------------------------------------------- */

/* Reads a whole file.  Returns malloc'ed bytes (NUL-terminated, *len excludes
 * the NUL) or NULL with errno set. */
char *fa_read_file(const char *path, size_t *len);

/* 64-bit FNV-1a, for hash tables and cache keys that need no cryptography. */
uint64_t fa_hash64(const void *data, size_t len, uint64_t seed);

#define FA_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

#endif
