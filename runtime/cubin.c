/* cubin.c - resource usage of an entry function read from the cubin's ELF
 * sections (see cubin.h), and combined with ptxas' report.
 *
 * The reader trusts nothing in the file: every header, table and string is
 * checked to lie inside the buffer before it is read, with sizes compared by
 * subtraction so that no sum can wrap. */
#include "cubin.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum {
  ELF64_HEADER_SIZE = 64,
  ELF64_SECTION_SIZE = 64,      /* a section header */
  ELF64_SYMBOL_SIZE = 24,
  EM_CUDA = 190,
  SHT_SYMTAB = 2,
  SHT_NOBITS = 8,
  STT_FUNC = 2,
  SHN_XINDEX = 0xffff,
  /* .nv.info entry formats: a 4-byte head (format, attribute, 2 bytes), and
   * for EIFMT_SVAL as many bytes as the head's u16 says */
  EIFMT_NVAL = 1,
  EIFMT_BVAL = 2,
  EIFMT_HVAL = 3,
  EIFMT_SVAL = 4,
  /* attributes used here */
  EIATTR_MAX_THREADS = 0x05,
  EIATTR_FRAME_SIZE = 0x11,
  EIATTR_MIN_STACK_SIZE = 0x12,
  EIATTR_MAX_STACK_SIZE = 0x23,
  EIATTR_REGCOUNT = 0x2f,
  EIATTR_NUM_BARRIERS = 0x4c,
};

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* [off, off + len) lies inside a buffer of `size` bytes. */
static bool in_bounds(uint64_t off, uint64_t len, size_t size) {
  return off <= size && len <= size - off;
}

typedef struct Section {
  uint32_t name, type, link, info;
  uint64_t flags, offset, size, entsize;
} Section;

typedef struct Elf {
  const unsigned char *data;
  size_t size;
  uint64_t shoff;
  uint32_t shnum, shentsize;
  Section names;                /* the section-name string table */
  const char *why;
} Elf;

static bool read_section(const Elf *e, uint32_t index, Section *s) {
  if (index >= e->shnum) return false;
  const unsigned char *p = e->data + e->shoff + (uint64_t)index * e->shentsize;
  s->name = le32(p);
  s->type = le32(p + 4);
  s->flags = le64(p + 8);
  s->offset = le64(p + 24);
  s->size = le64(p + 32);
  s->link = le32(p + 40);
  s->info = le32(p + 44);
  s->entsize = le64(p + 56);
  /* a section with contents must lie in the file; NOBITS has none */
  return s->type == SHT_NOBITS || in_bounds(s->offset, s->size, e->size);
}

/* The NUL-terminated string at `off` of string table `t`, or NULL. */
static const char *string_at(const Elf *e, const Section *t, uint64_t off) {
  if (t->type == SHT_NOBITS || off >= t->size) return NULL;
  const char *s = (const char *)e->data + t->offset + off;
  return memchr(s, '\0', t->size - off) ? s : NULL;
}

static bool open_elf(Elf *e, const unsigned char *data, size_t size) {
  memset(e, 0, sizeof *e);
  e->data = data;
  e->size = size;
  if (!data || size < ELF64_HEADER_SIZE || memcmp(data, "\x7f" "ELF", 4) != 0) {
    e->why = "not an ELF file";
    return false;
  }
  if (data[4] != 2 || data[5] != 1 || le16(data + 18) != EM_CUDA) {
    e->why = "not a 64-bit little-endian CUDA ELF";
    return false;
  }
  e->shoff = le64(data + 0x28);
  e->shentsize = le16(data + 0x3a);
  e->shnum = le16(data + 0x3c);
  uint32_t shstrndx = le16(data + 0x3e);
  if (e->shentsize < ELF64_SECTION_SIZE || !in_bounds(e->shoff, ELF64_SECTION_SIZE, size)) {
    e->why = "no readable section header table";
    return false;
  }
  /* more than 0xff00 sections: the counts live in section 0 */
  const unsigned char *s0 = data + e->shoff;
  if (e->shnum == 0) e->shnum = le64(s0 + 32) > 0xffffffu ? 0 : (uint32_t)le64(s0 + 32);
  if (shstrndx == SHN_XINDEX) shstrndx = le32(s0 + 40);
  if (e->shnum == 0 || (uint64_t)e->shnum > (size - e->shoff) / e->shentsize) {
    e->why = "the section header table runs past the end of the file";
    return false;
  }
  if (!read_section(e, shstrndx, &e->names) || e->names.type == SHT_NOBITS) {
    e->why = "no readable section-name table";
    return false;
  }
  return true;
}

/* Finds the section called `prefix` + `suffix` (suffix may be NULL). */
static bool find_section(const Elf *e, const char *prefix, const char *suffix, Section *out,
                         uint32_t *index) {
  size_t plen = strlen(prefix);
  for (uint32_t i = 1; i < e->shnum; i++) {
    Section s;
    if (!read_section(e, i, &s)) continue;
    const char *name = string_at(e, &e->names, s.name);
    if (!name || strncmp(name, prefix, plen) != 0) continue;
    if (strcmp(name + plen, suffix ? suffix : "") != 0) continue;
    *out = s;
    if (index) *index = i;
    return true;
  }
  return false;
}

/* The symbol-table index of function `entry`, or -1. */
static int64_t function_symbol(const Elf *e, const char *entry) {
  for (uint32_t i = 1; i < e->shnum; i++) {
    Section tab, strings;
    if (!read_section(e, i, &tab) || tab.type != SHT_SYMTAB || tab.entsize < ELF64_SYMBOL_SIZE)
      continue;
    if (!read_section(e, tab.link, &strings)) continue;
    uint64_t n = tab.size / tab.entsize;
    for (uint64_t k = 1; k < n; k++) {
      const unsigned char *sym = e->data + tab.offset + k * tab.entsize;
      if ((sym[4] & 0xf) != STT_FUNC) continue;
      const char *name = string_at(e, &strings, le32(sym));
      if (name && strcmp(name, entry) == 0) return k > INT32_MAX ? -1 : (int64_t)k;
    }
  }
  return -1;
}

/* The name of the first function with a .text.NAME section, into buf. */
static bool first_function(const Elf *e, char *buf, size_t size) {
  for (uint32_t i = 1; i < e->shnum; i++) {
    Section s;
    if (!read_section(e, i, &s)) continue;
    const char *name = string_at(e, &e->names, s.name);
    if (!name || strncmp(name, ".text.", 6) != 0 || !name[6] || strlen(name + 6) >= size) continue;
    snprintf(buf, size, "%s", name + 6);
    return true;
  }
  return false;
}

static int clamp_int(uint64_t v) { return v > INT32_MAX ? INT32_MAX : (int)v; }

/* Walks the attributes of an .nv.info section, calling `fn` for each with
 * its value bytes.  Stops (quietly) at an entry that does not fit. */
typedef void (*AttrFn)(void *user, unsigned attr, unsigned format, const unsigned char *value,
                       uint32_t len);

static void each_attribute(const Elf *e, const Section *s, AttrFn fn, void *user) {
  if (s->type == SHT_NOBITS) return;
  const unsigned char *p = e->data + s->offset;
  uint64_t at = 0, end = s->size;
  while (end - at >= 4) {
    unsigned format = p[at], attr = p[at + 1];
    uint32_t len = 2;   /* NVAL, BVAL and HVAL: the two bytes after the head's first two */
    const unsigned char *value = p + at + 2;
    if (format == EIFMT_SVAL) {
      len = le16(p + at + 2);
      value = p + at + 4;
      if (len > end - at - 4) return;
    } else if (format != EIFMT_NVAL && format != EIFMT_BVAL && format != EIFMT_HVAL) {
      return;   /* unknown format: its length cannot be known */
    }
    fn(user, attr, format, value, len);
    at += format == EIFMT_SVAL ? 4 + (uint64_t)len : 4;
  }
}

/* Module-wide attributes: (symbol index, value) pairs for our function. */
typedef struct ModuleAttrs {
  uint32_t symbol;
  int registers, frame, min_stack, max_stack;
} ModuleAttrs;

static void module_attr(void *user, unsigned attr, unsigned format, const unsigned char *value,
                        uint32_t len) {
  ModuleAttrs *m = user;
  if (format != EIFMT_SVAL || len < 8 || le32(value) != m->symbol) return;
  int v = clamp_int(le32(value + 4));
  switch (attr) {
    case EIATTR_REGCOUNT: m->registers = v; break;
    case EIATTR_FRAME_SIZE: m->frame = v; break;
    case EIATTR_MIN_STACK_SIZE: m->min_stack = v; break;
    case EIATTR_MAX_STACK_SIZE: m->max_stack = v; break;
    default: break;
  }
}

typedef struct FunctionAttrs {
  int max_threads, barriers;
} FunctionAttrs;

static void function_attr(void *user, unsigned attr, unsigned format, const unsigned char *value,
                          uint32_t len) {
  FunctionAttrs *f = user;
  if (attr == EIATTR_MAX_THREADS && format == EIFMT_SVAL && len >= 12) {
    uint64_t n = (uint64_t)le32(value) * le32(value + 4) * le32(value + 8);
    f->max_threads = clamp_int(n);
  } else if (attr == EIATTR_NUM_BARRIERS && format == EIFMT_BVAL) {
    f->barriers = value[0];
  } else if (attr == EIATTR_NUM_BARRIERS && format == EIFMT_HVAL) {
    f->barriers = le16(value);
  }
}

static bool fail(char *why, size_t why_size, const char *fmt, const char *a, const char *b) {
  if (why && why_size) snprintf(why, why_size, fmt, a, b);
  return false;
}

bool fa_cubin_resources(const unsigned char *cubin, size_t size, const char *entry,
                        FaKernelResources *out, char *why, size_t why_size) {
  fa_kernel_resources_unknown(out);
  if (why && why_size) why[0] = '\0';
  Elf e;
  if (!open_elf(&e, cubin, size)) return fail(why, why_size, "%s%s", e.why, "");
  char first[256];
  if (!entry) {
    if (!first_function(&e, first, sizeof first))
      return fail(why, why_size, "%s%s", "the cubin has no function", "");
    entry = first;
  }
  Section text;
  uint32_t text_index = 0;
  bool has_text = find_section(&e, ".text.", entry, &text, &text_index);
  int64_t symbol = function_symbol(&e, entry);
  if (!has_text && symbol < 0)
    return fail(why, why_size, "the cubin has no function %s%s", entry, "");

  /* registers, stack: keyed by the function's symbol in .nv.info */
  ModuleAttrs m = {0, -1, -1, -1, -1};
  Section info;
  if (symbol >= 0 && find_section(&e, ".nv.info", NULL, &info, NULL)) {
    m.symbol = (uint32_t)symbol;
    each_attribute(&e, &info, module_attr, &m);
  }
  out->registers = m.registers;
  if (out->registers < 0 && has_text && text.info >> 24) out->registers = (int)(text.info >> 24);
  out->stack_frame = m.frame;
  if (out->stack_frame == 0) out->spill_stores = out->spill_loads = 0;

  /* launch bounds and barriers: the function's own .nv.info.F */
  FunctionAttrs f = {-1, -1};
  if (find_section(&e, ".nv.info.", entry, &info, NULL)) {
    f.barriers = 0;   /* absent from a function that has its section: none used */
    each_attribute(&e, &info, function_attr, &f);
  }
  out->max_threads = f.max_threads;
  out->barriers = f.barriers;

  /* static shared memory: the size of .nv.shared.F (none: 0) */
  Section shared, reserved;
  if (find_section(&e, ".nv.shared.", entry, &shared, NULL)) {
    uint64_t n = shared.size;
    if (find_section(&e, ".nv.shared.reserved.", "0", &reserved, NULL))
      n = n > FA_CUBIN_RESERVED_SHARED ? n - FA_CUBIN_RESERVED_SHARED : 0;
    out->static_shared = clamp_int(n);
  } else {
    out->static_shared = 0;
  }
  return true;
}

static void merge_field(const char *entry, const char *what, int *mine, int theirs, StrBuf *notes) {
  if (*mine < 0) {
    *mine = theirs;
  } else if (theirs >= 0 && theirs != *mine && notes) {
    fa_sb_printf(notes, "%s: the cubin says %d %s, ptxas' report %d\n", entry ? entry : "(first)",
                 *mine, what, theirs);
  }
}

bool fa_kernel_resources(const unsigned char *cubin, size_t size, const char *log,
                         const char *entry, FaKernelResources *out, StrBuf *notes) {
  char why[160];
  bool from_cubin = fa_cubin_resources(cubin, size, entry, out, why, sizeof why);
  if (!from_cubin && notes && cubin)
    fa_sb_printf(notes, "%s: resource usage not readable from the cubin (%s)\n",
                 entry ? entry : "(first)", why);
  FaKernelResources r;
  bool from_log = log && *log && fa_parse_resource_usage(log, entry, &r);
  if (from_log) {
    /* ptxas' spill counts are the only ones; the rest must agree */
    if (r.spill_stores >= 0) out->spill_stores = r.spill_stores;
    if (r.spill_loads >= 0) out->spill_loads = r.spill_loads;
    merge_field(entry, "registers", &out->registers, r.registers, notes);
    merge_field(entry, "bytes of stack frame", &out->stack_frame, r.stack_frame, notes);
    merge_field(entry, "bytes of static shared memory", &out->static_shared, r.static_shared, notes);
    merge_field(entry, "barriers", &out->barriers, r.barriers, notes);
  }
  return from_cubin || from_log;
}
