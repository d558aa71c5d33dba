/* diag.h - source files, source locations and diagnostics.
 *
 * Every stage reports problems through a Diag: one message per problem, in
 * the form
 *
 *     FILE:LINE:COL: error: MESSAGE
 *         the source line
 *                 ^
 *
 * Messages accumulate in Diag.text (so libfadsl can hand them back in a
 * status) and, when Diag.stream is set, are also written there as they come
 * (the command-line tools pass stderr).  Nothing here exits or aborts.
 */
#ifndef FADSL_DIAG_H
#define FADSL_DIAG_H

#include <stdio.h>

#include "util.h"

typedef struct Source {
  const char *name;     /* file name as the user gave it, or "<string>" */
  const char *text;     /* the whole text, NUL-terminated (embedded NULs are errors) */
  size_t len;
} Source;

/* A position in a source: 1-based line and column (columns count bytes).
 * src == NULL means "no position" (e.g. a command-line -D value). */
typedef struct SrcLoc {
  const Source *src;
  int line;
  int col;
} SrcLoc;

typedef enum DiagLevel { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

typedef struct Diag {
  StrBuf text;          /* every message so far */
  FILE *stream;         /* echo messages here too; NULL for none */
  int errors;
  int warnings;
  int max_errors;       /* further errors are counted but not printed; 0 = 50 */
} Diag;

void fa_diag_init(Diag *d, FILE *stream);
void fa_diag_free(Diag *d);

void fa_diag_report(Diag *d, SrcLoc loc, DiagLevel level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void fa_diag_vreport(Diag *d, SrcLoc loc, DiagLevel level, const char *fmt, va_list ap);

#define fa_error(d, loc, ...) fa_diag_report((d), (loc), DIAG_ERROR, __VA_ARGS__)
#define fa_warning(d, loc, ...) fa_diag_report((d), (loc), DIAG_WARNING, __VA_ARGS__)
#define fa_note(d, loc, ...) fa_diag_report((d), (loc), DIAG_NOTE, __VA_ARGS__)

static inline SrcLoc fa_loc(const Source *src, int line, int col) {
  SrcLoc l = {src, line, col};
  return l;
}
/* The file of a position without its directories ("<string>" for a
 * source without a name): what generated code and plans cite. */
const char *fa_loc_file_base(SrcLoc loc);

static inline SrcLoc fa_noloc(void) {
  SrcLoc l = {0, 0, 0};
  return l;
}

#endif
