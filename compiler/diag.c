/* diag.c - formatting of located diagnostics with the source line and a caret. */
#include "diag.h"

#include <string.h>

void fa_diag_init(Diag *d, FILE *stream) {
  fa_sb_init(&d->text);
  d->stream = stream;
  d->errors = 0;
  d->warnings = 0;
  d->max_errors = 0;
}

void fa_diag_free(Diag *d) { fa_sb_free(&d->text); }

static const char *level_name(DiagLevel level) {
  switch (level) {
  case DIAG_ERROR: return "error";
  case DIAG_WARNING: return "warning";
  case DIAG_NOTE: return "note";
  }
  return "error";
}

/* Finds the start and length of 1-based line `line` in src, or returns false. */
static bool find_line(const Source *src, int line, const char **start, size_t *len) {
  const char *p = src->text, *end = src->text + src->len;
  for (int l = 1; l < line; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
      return false;
    p = nl + 1;
  }
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
  if (n > 0 && p[n - 1] == '\r')
    n--;
  *start = p;
  *len = n;
  return true;
}

/* Writes the source line (non-printable bytes shown as '?', very long lines
 * cut around the column) and a caret under the column; tabs before the column
 * are copied so the caret lines up in a terminal. */
static void put_source_line(StrBuf *sb, const Source *src, int line, int col) {
  const char *start;
  size_t len;
  if (!src->text || !find_line(src, line, &start, &len))
    return;
  size_t c = col > 0 ? (size_t)col - 1 : 0;
  if (c > len)
    c = len;
  size_t from = 0, to = len;
  enum { WINDOW = 100 };
  if (len > 2 * WINDOW) {
    from = c > WINDOW ? c - WINDOW : 0;
    to = from + 2 * WINDOW < len ? from + 2 * WINDOW : len;
  }
  fa_sb_puts(sb, "    ");
  for (size_t i = from; i < to; i++) {
    unsigned char ch = (unsigned char)start[i];
    fa_sb_putc(sb, (ch == '\t' || (ch >= 0x20 && ch < 0x7f) || ch >= 0x80) ? (char)ch : '?');
  }
  fa_sb_puts(sb, "\n    ");
  for (size_t i = from; i < c; i++)
    fa_sb_putc(sb, start[i] == '\t' ? '\t' : ' ');
  fa_sb_puts(sb, "^\n");
}

void fa_diag_vreport(Diag *d, SrcLoc loc, DiagLevel level, const char *fmt, va_list ap) {
  if (level == DIAG_ERROR)
    d->errors++;
  else if (level == DIAG_WARNING)
    d->warnings++;
  int limit = d->max_errors > 0 ? d->max_errors : 50;
  if (level == DIAG_ERROR && d->errors > limit) {
    if (d->errors == limit + 1) {
      const char *msg = "fadsl: too many errors; stopping the report here\n";
      fa_sb_puts(&d->text, msg);
      if (d->stream)
        fputs(msg, d->stream);
    }
    return;
  }
  StrBuf sb;
  fa_sb_init(&sb);
  if (loc.src && loc.line > 0)
    fa_sb_printf(&sb, "%s:%d:%d: %s: ", loc.src->name, loc.line, loc.col, level_name(level));
  else if (loc.src)
    fa_sb_printf(&sb, "%s: %s: ", loc.src->name, level_name(level));
  else
    fa_sb_printf(&sb, "fadsl: %s: ", level_name(level));
  fa_sb_vprintf(&sb, fmt, ap);
  fa_sb_putc(&sb, '\n');
  if (loc.src && loc.line > 0)
    put_source_line(&sb, loc.src, loc.line, loc.col);
  if (sb.data) {
    fa_sb_putn(&d->text, sb.data, sb.len);
    if (d->stream) {
      fputs(sb.data, d->stream);
      fflush(d->stream);
    }
  }
  fa_sb_free(&sb);
}

void fa_diag_report(Diag *d, SrcLoc loc, DiagLevel level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fa_diag_vreport(d, loc, level, fmt, ap);
  va_end(ap);
}

const char *fa_loc_file_base(SrcLoc loc) {
  const char *name = loc.src && loc.src->name ? loc.src->name : "<string>";
  const char *slash = strrchr(name, '/');
  return slash ? slash + 1 : name;
}
