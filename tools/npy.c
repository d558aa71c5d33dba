/* npy.c - reading and writing NumPy .npy files (see npy.h).
 *
 * The format: the magic "\x93NUMPY", a major and minor version byte, the
 * header length (2 bytes little-endian in version 1, 4 bytes in 2 and 3),
 * then a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and ended by '\n' so that the data starts at a multiple
 * of 64 bytes, then the raw elements.
 */
#include "npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool npy_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool npy_fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return false;
}

static const struct {
  DType dtype;
  const char *descr;   /* without the byte-order character */
  const char *name;
} npy_types[] = {
    {DT_F16, "f2", "float16"}, {DT_F32, "f4", "float32"}, {DT_F64, "f8", "float64"},
    {DT_I32, "i4", "int32"},   {DT_I64, "i8", "int64"},   {DT_I1, "b1", "bool"},
};

const char *fa_npy_dtype_name(DType dt) {
  for (int i = 0; i < FA_ARRAY_LEN(npy_types); i++)
    if (npy_types[i].dtype == dt)
      return npy_types[i].name;
  return NULL;
}

static const char *npy_descr(DType dt) {
  for (int i = 0; i < FA_ARRAY_LEN(npy_types); i++)
    if (npy_types[i].dtype == dt)
      return npy_types[i].descr;
  return NULL;
}

/* Finds the value of 'key' in the header dict; returns a pointer just past
 * the colon (spaces skipped) or NULL. */
static const char *dict_value(const char *hdr, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(hdr, pat);
  if (!p) {
    snprintf(pat, sizeof pat, "\"%s\"", key);
    p = strstr(hdr, pat);
  }
  if (!p)
    return NULL;
  p += strlen(pat);
  while (*p == ' ')
    p++;
  if (*p != ':')
    return NULL;
  p++;
  while (*p == ' ')
    p++;
  return p;
}

static bool parse_header(const char *path, const char *hdr, FaNpy *out, char *err, size_t errlen) {
  const char *d = dict_value(hdr, "descr");
  if (!d || (*d != '\'' && *d != '"'))
    return npy_fail(err, errlen, "%s: malformed .npy header (no 'descr')", path);
  char q = *d++;
  const char *end = strchr(d, q);
  if (!end || end - d > 15)
    return npy_fail(err, errlen, "%s: malformed .npy header ('descr')", path);
  char descr[16];
  memcpy(descr, d, (size_t)(end - d));
  descr[end - d] = 0;
  char order = descr[0];
  const char *code = descr + 1;
  if (order != '<' && order != '|' && order != '=')
    return npy_fail(err, errlen, "%s: dtype '%s' is big-endian; only little-endian arrays are supported", path, descr);
  out->dtype = DT_VOID;
  for (int i = 0; i < FA_ARRAY_LEN(npy_types); i++)
    if (!strcmp(code, npy_types[i].descr))
      out->dtype = npy_types[i].dtype;
  if (out->dtype == DT_VOID)
    return npy_fail(err, errlen,
                    "%s: dtype '%s' is not supported (use float16, float32, float64, int32, int64 or bool; "
                    "bf16 data is stored as float32)",
                    path, descr);

  const char *f = dict_value(hdr, "fortran_order");
  if (!f)
    return npy_fail(err, errlen, "%s: malformed .npy header (no 'fortran_order')", path);
  if (!strncmp(f, "True", 4))
    return npy_fail(err, errlen, "%s: array is in Fortran order; save it in C order (numpy.ascontiguousarray)", path);
  if (strncmp(f, "False", 5))
    return npy_fail(err, errlen, "%s: malformed .npy header ('fortran_order')", path);

  const char *s = dict_value(hdr, "shape");
  if (!s || *s != '(')
    return npy_fail(err, errlen, "%s: malformed .npy header (no 'shape')", path);
  s++;
  out->ndim = 0;
  out->count = 1;
  for (;;) {
    while (*s == ' ' || *s == ',')
      s++;
    if (*s == ')')
      break;
    if (!isdigit((unsigned char)*s))
      return npy_fail(err, errlen, "%s: malformed .npy header ('shape')", path);
    if (out->ndim == FA_NPY_MAX_DIMS)
      return npy_fail(err, errlen, "%s: more than %d dimensions", path, FA_NPY_MAX_DIMS);
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (errno || v < 0 || (v > 0 && out->count > INT64_MAX / 16 / v))
      return npy_fail(err, errlen, "%s: shape too large", path);
    out->shape[out->ndim++] = v;
    out->count *= v;
    s = e;
    while (*s == 'L')   /* Python 2 longs */
      s++;
  }
  return true;
}

bool fa_npy_read(const char *path, FaNpy *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t len = 0;
  char *bytes = fa_read_file(path, &len);
  if (!bytes)
    return npy_fail(err, errlen, "%s: %s", path, strerror(errno));
  bool ok = false;
  const unsigned char *u = (const unsigned char *)bytes;
  size_t hlen, start;
  if (len == 0) {
    npy_fail(err, errlen, "%s: not a .npy file (the file is empty)", path);
    goto done;
  }
  if (len < 10 && memcmp(bytes, "\x93NUMPY", len < 6 ? len : 6) == 0) {
    npy_fail(err, errlen, "%s: truncated .npy file (%zu bytes, shorter than the header)", path, len);
    goto done;
  }
  if (len < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0) {
    npy_fail(err, errlen, "%s: not a .npy file (it does not start with the \\x93NUMPY magic string)", path);
    goto done;
  }
  if (u[6] == 1) {
    hlen = (size_t)u[8] | (size_t)u[9] << 8;
    start = 10;
  } else if (u[6] == 2 || u[6] == 3) {
    if (len < 12) {
      npy_fail(err, errlen, "%s: truncated .npy header", path);
      goto done;
    }
    hlen = (size_t)u[8] | (size_t)u[9] << 8 | (size_t)u[10] << 16 | (size_t)u[11] << 24;
    start = 12;
  } else {
    npy_fail(err, errlen, "%s: .npy format version %d.%d is not supported", path, u[6], u[7]);
    goto done;
  }
  if (hlen > len - start) {
    npy_fail(err, errlen, "%s: truncated .npy file (%zu bytes; its header alone says it needs %zu)", path, len,
             start + hlen);
    goto done;
  }
  char *hdr = malloc(hlen + 1);
  if (!hdr) {
    npy_fail(err, errlen, "%s: out of memory", path);
    goto done;
  }
  memcpy(hdr, bytes + start, hlen);
  hdr[hlen] = 0;
  ok = parse_header(path, hdr, out, err, errlen);
  free(hdr);
  if (!ok)
    goto done;
  ok = false;
  size_t esize = (size_t)fa_dtype_size(out->dtype);
  size_t data_off = start + hlen, need = (size_t)out->count * esize;
  if (len - data_off != need) {
    npy_fail(err, errlen, "%s: %s .npy file: holds %zu bytes of data, but its shape and dtype (%lld elements of %s) "
             "need %zu", path, len - data_off < need ? "truncated" : "malformed", len - data_off,
             (long long)out->count, fa_npy_dtype_name(out->dtype), need);
    goto done;
  }
  out->data = malloc(need ? need : 1);
  if (!out->data) {
    npy_fail(err, errlen, "%s: out of memory", path);
    goto done;
  }
  memcpy(out->data, bytes + data_off, need);
  if (out->dtype == DT_I1)   /* normalise bools to 0/1 */
    for (int64_t i = 0; i < out->count; i++)
      ((unsigned char *)out->data)[i] = ((unsigned char *)out->data)[i] != 0;
  ok = true;
done:
  free(bytes);
  if (!ok) {
    free(out->data);
    out->data = NULL;
  }
  return ok;
}

bool fa_npy_write(const char *path, DType dtype, int ndim, const int64_t *shape, const void *data, char *err,
                  size_t errlen) {
  const char *descr = npy_descr(dtype);
  if (!descr)
    return npy_fail(err, errlen, "%s: cannot write %s data to .npy", path, fa_dtype_name(dtype));
  if (ndim < 0 || ndim > FA_NPY_MAX_DIMS)
    return npy_fail(err, errlen, "%s: %d dimensions", path, ndim);
  StrBuf h;
  fa_sb_init(&h);
  fa_sb_printf(&h, "{'descr': '%c%s', 'fortran_order': False, 'shape': (", dtype == DT_I1 ? '|' : '<', descr);
  int64_t count = 1;
  for (int i = 0; i < ndim; i++) {
    fa_sb_printf(&h, "%lld%s", (long long)shape[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
    count *= shape[i];
  }
  fa_sb_puts(&h, "), }");
  /* version 1 when the header fits 16 bits, else 2; pad to 64 with '\n' last */
  int version = h.len + 1 + 10 + 64 <= 65535 ? 1 : 2;
  size_t pre = version == 1 ? 10 : 12;
  while ((pre + h.len + 1) % 64)
    fa_sb_putc(&h, ' ');
  fa_sb_putc(&h, '\n');
  if (!h.data) {
    fa_sb_free(&h);
    return npy_fail(err, errlen, "%s: out of memory", path);
  }
  unsigned char head[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0};
  size_t hl = h.len;
  if (version == 1) {
    head[8] = (unsigned char)(hl & 0xff);
    head[9] = (unsigned char)(hl >> 8);
  } else {
    for (int i = 0; i < 4; i++)
      head[8 + i] = (unsigned char)(hl >> (8 * i));
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    fa_sb_free(&h);
    return npy_fail(err, errlen, "%s: %s", path, strerror(errno));
  }
  size_t nbytes = (size_t)count * (size_t)fa_dtype_size(dtype);
  bool ok = fwrite(head, 1, pre, f) == pre && fwrite(h.data, 1, hl, f) == hl &&
            (nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes);
  if (fclose(f) != 0)
    ok = false;
  fa_sb_free(&h);
  if (!ok)
    return npy_fail(err, errlen, "%s: write failed: %s", path, strerror(errno));
  return true;
}

void fa_npy_free(FaNpy *a) {
  if (a) {
    free(a->data);
    a->data = NULL;
  }
}
