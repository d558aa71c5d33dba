/* fadsl-run - run one kernel of a .fa program on inputs from .npy files, on
 * the CPU interpreter or on the GPU.
 *
 *   fadsl-run FILE KERNEL --interpret|--gpu [-D NAME=VALUE]... [--arg NAME=FILE.npy|NUMBER]...
 *             [--out NAME=FILE.npy]... [--warps N] [--stages N] [--grid X[,Y[,Z]]]
 *             [--threads N] [--poison] [--device N]
 *
 * The program is parsed, checked and specialised on the -D values; each
 * runtime parameter gets its --arg (pointer parameters a .npy file whose data
 * is converted to the parameter's element type, scalars a number); the grid
 * comes from the kernel's @kernel(grid=...); after the run every --out
 * buffer is written (f16 and bf16 as float32 .npy, other dtypes as they are).
 * A pointer parameter named by --out but not by --arg gets a fresh buffer of
 * its declared extent, zero-filled on both paths (float buffers NaN-filled
 * with --poison, all bytes 0xff, so that elements a kernel does not write
 * stand out), so the interpreter and the GPU start from the same contents.
 * A .npy must hold the declared extent in row-major order: its shape, or
 * that shape with adjacent axes merged or split (a transposed array, which
 * has the right number of elements, is refused).
 *
 * Constexprs that belong to the kernel's @autotune space and are not given,
 * and the configuration axes (--warps, --stages: compiler/config_axes.c)
 * unless given, take the space's default point on the interpreter
 * (compiler/autotune_point.h), as a launch without a tuning database
 * chooses it.  With --gpu the same
 * program is loaded through libfadsl: every buffer is copied to device
 * memory (fadsl_malloc / fadsl_memcpy_htod), the kernel is launched with the
 * constexprs given (the others come from the tuning database or that same
 * default, as for any launch), and the --out buffers are copied back.  The
 * configuration that ran and where it came from are printed on stderr.
 * --grid is for the interpreter only.
 *
 * Exit status: 0 success, 1 errors (in the program, the arguments or the
 * run), 2 bad usage.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "autotune_point.h"
#include "fadsl.h"
#include "interp.h"
#include "npy.h"
#include "sema.h"

enum { EXIT_ERRORS = 1, EXIT_USAGE = 2 };

typedef struct NamedArg {
  char *name;
  const char *value;
  bool used;
} NamedArg;

typedef struct Options {
  const char *file, *kernel;
  bool interpret, gpu, poison;
  NamedArg *defines, *args, *outs;
  int ndefines, nargs, nouts;
  FaLaunchConfig config;        /* --warps, --stages, ... (config_axes.c); 0: not given */
  int threads;
  int device;
  bool has_grid;
  int64_t grid[3];
} Options;

static void usage(FILE *f) {
  fputs("usage: fadsl-run FILE KERNEL --interpret|--gpu [options]\n"
        "Runs one kernel of a fadsl program on .npy inputs and writes chosen buffers as .npy.\n"
        "  --interpret            run on the CPU interpreter\n"
        "  --gpu                  run on the GPU (through libfadsl)\n"
        "  -D NAME=VALUE          value of a constexpr parameter (64, 1.5, True, f16, ...)\n"
        "  --arg NAME=FILE.npy    data of a pointer parameter, converted to its element type\n"
        "  --arg NAME=NUMBER      value of a scalar parameter (or of a constexpr, like -D)\n"
        "  --out NAME=FILE.npy    write that pointer parameter's buffer after the run\n"
        "                         (f16/bf16 as float32; other dtypes as they are)\n",
        f);
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int i = 0; i < naxes; i++) {
    char opt[32], dflt[32];
    const char *named = fa_config_value_name(&axes[i], axes[i].default_value);
    snprintf(opt, sizeof opt, "--%s %s", axes[i].name, named ? "NAME" : "N");
    if (named)
      snprintf(dflt, sizeof dflt, "%s", named);
    else
      snprintf(dflt, sizeof dflt, "%d", axes[i].default_value);
    fprintf(f, "  %-22s %s (default: the kernel's @autotune default, else %s;\n"
            "                         on the GPU the tuning database's when it has one)\n",
            opt, axes[i].help, dflt);
  }
  fputs("  --grid X[,Y[,Z]]       (--interpret) use this grid instead of the kernel's\n"
        "  --threads N            (--interpret) run programs on N threads (default 1)\n"
        "  --poison               fill float buffers created for --out with NaN instead of zeros\n"
        "  --device N             (--gpu) CUDA device (default 0)\n"
        "A buffer created for --out (no --arg) has the parameter's declared extent and starts\n"
        "zero-filled, on the interpreter and the GPU alike (NaN with --poison).  @autotune\n"
        "constexprs (tile sizes) and configuration axes not given take the kernel's default: the\n"
        "first point of the space that its prune accepts (on the GPU the tuning database's first).\n"
        "A .npy must have the declared extent's shape (or it with adjacent axes merged or split).\n"
        "bf16 data is stored in .npy files as float32.\n",
        f);
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "fadsl-run: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(try fadsl-run --help)\n");
  return EXIT_USAGE;
}

/* "--arg x is given twice" for the second of two NAME=... with one name. */
static int duplicate_error(const char *option, const char *text) {
  int n = (int)(strchr(text, '=') - text);
  fprintf(stderr, "fadsl-run: %s %.*s is given twice (the second time as %s %s)\n(try fadsl-run --help)\n", option,
          n, text, option, text);
  return EXIT_USAGE;
}

static NamedArg *find_named(NamedArg *v, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i].name, name))
      return &v[i];
  return NULL;
}

/* Appends NAME=VALUE; false when it is not of that form.  *dup is set when
 * the name is in the list already. */
static bool push_named(NamedArg **v, int *n, const char *text, bool *dup) {
  const char *eq = strchr(text, '=');
  *dup = false;
  if (!eq || eq == text)
    return false;
  for (int i = 0; i < *n; i++)
    if (strlen((*v)[i].name) == (size_t)(eq - text) && !strncmp((*v)[i].name, text, (size_t)(eq - text))) {
      *dup = true;
      return false;
    }
  NamedArg *nv = realloc(*v, (size_t)(*n + 1) * sizeof **v);
  if (!nv)
    return false;
  *v = nv;
  nv[*n].name = strndup(text, (size_t)(eq - text));
  nv[*n].value = eq + 1;
  nv[*n].used = false;
  (*n)++;
  return nv[*n - 1].name != NULL;
}

static bool parse_int(const char *s, int *out) {
  char *e;
  errno = 0;
  long v = strtol(s, &e, 10);
  if (errno || *e || e == s || v <= 0 || v > 1 << 20)
    return false;
  *out = (int)v;
  return true;
}

static int parse_options(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->threads = 1;
  int positional = 0;
  bool dup;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                          \
  do {                                                        \
    if (!val)                                                 \
      return usage_error("%s needs a value", a);              \
    i++;                                                      \
  } while (0)
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--interpret")) {
      o->interpret = true;
    } else if (!strcmp(a, "--gpu")) {
      o->gpu = true;
    } else if (!strcmp(a, "--poison")) {
      o->poison = true;
    } else if (!strncmp(a, "-D", 2)) {
      const char *def = a[2] ? a + 2 : val;
      if (!a[2])
        NEED_VALUE();
      if (!push_named(&o->defines, &o->ndefines, def, &dup))
        return dup ? duplicate_error("-D", def) : usage_error("-D wants NAME=VALUE, not '%s'", def);
    } else if (!strcmp(a, "--arg")) {
      NEED_VALUE();
      if (!push_named(&o->args, &o->nargs, val, &dup))
        return dup ? duplicate_error("--arg", val)
                   : usage_error("--arg wants NAME=FILE.npy or NAME=NUMBER, not '%s'", val);
    } else if (!strcmp(a, "--out")) {
      NEED_VALUE();
      if (!push_named(&o->outs, &o->nouts, val, &dup))
        return dup ? duplicate_error("--out", val) : usage_error("--out wants NAME=FILE.npy, not '%s'", val);
    } else if (!strncmp(a, "--", 2) && fa_config_axis(a + 2)) {
      NEED_VALUE();
      const FaConfigAxis *ax = fa_config_axis(a + 2);
      int v;
      if (!fa_config_parse(ax, val, &v)) {
        fprintf(stderr, "fadsl-run: %s must be %s, not '%s'\n(try fadsl-run --help)\n", a, ax->allowed, val);
        return EXIT_USAGE;
      }
      fa_config_set(&o->config, ax, v);
    } else if (!strcmp(a, "--threads")) {
      NEED_VALUE();
      if (!parse_int(val, &o->threads))
        return usage_error("bad number '%s'", val);
    } else if (!strcmp(a, "--device")) {
      NEED_VALUE();
      char *e;
      long d = strtol(val, &e, 10);
      if (*e || e == val || d < 0 || d > 1024)
        return usage_error("--device wants a device number, not '%s'", val);
      o->device = (int)d;
    } else if (!strcmp(a, "--grid")) {
      NEED_VALUE();
      long long g[3] = {1, 1, 1};
      int n = sscanf(val, "%lld,%lld,%lld", &g[0], &g[1], &g[2]);
      if (n < 1 || g[0] < 0 || g[1] < 0 || g[2] < 0)
        return usage_error("--grid wants X[,Y[,Z]], not '%s'", val);
      o->has_grid = true;
      for (int d = 0; d < 3; d++)
        o->grid[d] = g[d];
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option '%s'", a);
    } else if (positional == 0) {
      o->file = a;
      positional++;
    } else if (positional == 1) {
      o->kernel = a;
      positional++;
    } else {
      return usage_error("unexpected argument '%s'", a);
    }
#undef NEED_VALUE
  }
  if (!o->file || !o->kernel)
    return usage_error("%s", "needs a FILE and a KERNEL name");
  if (o->interpret == o->gpu)
    return usage_error("%s", "choose one of --interpret and --gpu");
  if (o->gpu && o->has_grid)
    return usage_error("%s", "--grid is for --interpret: on the GPU the grid is the kernel's");
  return 0;
}

static bool looks_like_number(const char *s) {
  char *e;
  if (!*s)
    return false;
  (void)strtod(s, &e);
  return *e == 0;
}

/* Everything one run holds, freed at the end. */
typedef struct Run {
  FaCompiler fc;
  const FaProgram *prog;
  const FaKernelInfo *kinfo;
  IrKernel *kernel;
  FaInterp *in;
  void **data;          /* per runtime parameter: the buffer bound, or NULL */
  int64_t *count;
  FaNpy *inputs;        /* per runtime parameter: the .npy it came from (shape for --out) */
  bool *fresh;          /* per runtime parameter: a buffer made for --out (no --arg) */
  FaHostValue *scalar;  /* per runtime parameter: the scalar's value */
} Run;

static void print_shape(FILE *f, const int64_t *shape, int ndim) {
  fputc('[', f);
  for (int i = 0; i < ndim; i++)
    fprintf(f, "%s%lld", i ? ", " : "", (long long)shape[i]);
  fputc(']', f);
}

static const FaParamInfo *find_param(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (!strcmp(k->params[i].name, name))
      return &k->params[i];
  return NULL;
}

static void list_params(const FaKernelInfo *k) {
  fprintf(stderr, "fadsl-run: kernel '%s' takes:", k->name);
  for (int i = 0; i < k->nparams; i++)
    fprintf(stderr, " %s%s", k->params[i].name, k->params[i].kind == PARAM_CONSTEXPR ? " (constexpr)" : "");
  fputc('\n', stderr);
}

/* Constexpr bindings from -D and from --arg NAME=NUMBER on constexprs; a
 * dtype constexpr with no value is inferred from a .npy given for a pointer
 * parameter of that element type. */
static bool collect_bindings(Run *r, Options *o, FaBinding **out, int *nout) {
  const FaKernelInfo *k = r->kinfo;
  /* room for fill_tunables too */
  FaBinding *b = calloc((size_t)(o->ndefines + o->nargs + k->nparams + k->ntune + 1), sizeof *b);
  int n = 0;
  if (!b)
    return false;
  for (int i = 0; i < o->ndefines; i++) {
    FaConst c;
    if (!fa_const_parse(o->defines[i].value, &c)) {
      fprintf(stderr, "fadsl-run: -D %s=%s: cannot read the value\n", o->defines[i].name, o->defines[i].value);
      free(b);
      return false;
    }
    b[n].name = o->defines[i].name;
    b[n++].value = c;
    o->defines[i].used = true;
  }
  for (int i = 0; i < o->nargs; i++) {
    const FaParamInfo *p = find_param(k, o->args[i].name);
    if (!p || p->kind != PARAM_CONSTEXPR)
      continue;
    FaConst c;
    if (find_named(o->defines, o->ndefines, o->args[i].name)) {
      fprintf(stderr, "fadsl-run: the constexpr '%s' is given twice (-D %s and --arg %s)\n", o->args[i].name,
              o->args[i].name, o->args[i].name);
      free(b);
      return false;
    }
    if (!fa_const_parse(o->args[i].value, &c)) {
      fprintf(stderr, "fadsl-run: --arg %s=%s: cannot read the value\n", o->args[i].name, o->args[i].value);
      free(b);
      return false;
    }
    b[n].name = o->args[i].name;
    b[n++].value = c;
    o->args[i].used = true;
  }
  /* infer unbound dtype constexprs from the .npy of a pointer parameter */
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    if (p->kind != PARAM_POINTER || !p->dtype_param)
      continue;
    bool bound = false;
    for (int j = 0; j < n; j++)
      if (!strcmp(b[j].name, p->dtype_param))
        bound = true;
    const FaParamInfo *tp = find_param(k, p->dtype_param);
    if (bound || !tp || tp->has_default)
      continue;
    NamedArg *a = find_named(o->args, o->nargs, p->name);
    if (!a || looks_like_number(a->value))
      continue;
    FaNpy arr;
    char err[600];
    if (!fa_npy_read(a->value, &arr, err, sizeof err)) {
      /* the file was to say what T is: what is wrong with it is the error */
      fprintf(stderr, "fadsl-run: --arg %s: %s\n", p->name, err);
      free(b);
      return false;
    }
    fa_npy_free(&arr);
    if (arr.dtype == DT_I1)
      continue;
    b[n].name = p->dtype_param;
    b[n].value.kind = CK_DTYPE;
    b[n++].value.dtype = arr.dtype;
    fprintf(stderr, "fadsl-run: note: %s = %s, from %s (give -D %s=bf16 for bf16 data)\n", p->dtype_param,
            fa_dtype_name(arr.dtype), a->value, p->dtype_param);
  }
  *out = b;
  *nout = n;
  return true;
}

/* ---- the default configuration (interpreter) ----------------------------------------- */

/* A scalar --arg as a compile-time value for the prune (CK_NONE when it is
 * not a number). */
static FaConst scalar_const(const char *text) {
  FaConst c;
  memset(&c, 0, sizeof c);
  char *e;
  errno = 0;
  long long iv = strtoll(text, &e, 0);
  if (*e == 0 && e != text && !errno) {
    c.kind = CK_INT;
    c.i = iv;
  } else if (!strcmp(text, "True") || !strcmp(text, "False")) {
    c.kind = CK_BOOL;
    c.i = text[0] == 'T';
  } else {
    double dv = strtod(text, &e);
    if (*e == 0 && e != text) {
      c.kind = CK_FLOAT;
      c.f = dv;
    }
  }
  return c;
}

/* The @autotune axes the user left open (constexprs not given by -D or
 * --arg, configuration axes without --NAME), chosen as a launch without a
 * tuning database chooses them: the default point (autotune_point.h), the
 * prune seeing the constexprs given, the scalar --arg values and no GPU
 * target (`arch` 0, as fadsl_interpret has it).  When no
 * point passes, the first values, as a launch takes them, with a warning.
 * Appends the chosen constexprs to b (room for k->ntune more), sets *cfg and
 * returns the new count; *source says where the configuration came from, as
 * the GPU's launch line does ("default", "explicit", "explicit+default"). */
static int default_point(Run *r, const Options *o, FaBinding *b, int n, FaLaunchConfig *cfg, const char **source) {
  const FaKernelInfo *k = r->kinfo;
  FaBinding *known = fa_arena_alloc(&r->fc.arena, sizeof *known * (size_t)(n + k->nparams + 1));
  FaAutotunePoint pt;
  *cfg = o->config;
  fa_config_fill_defaults(cfg);
  *source = "default";
  if (!known)
    return n;
  memcpy(known, b, sizeof *b * (size_t)n);
  int nknown = n;
  for (int i = 0; i < k->nparams; i++) {
    NamedArg *a = k->params[i].kind == PARAM_SCALAR ? find_named(o->args, o->nargs, k->params[i].name) : NULL;
    FaConst c = a ? scalar_const(a->value) : (FaConst){CK_NONE, 0, 0, DT_VOID, NULL};
    if (c.kind != CK_NONE)
      known[nknown++] = (FaBinding){k->params[i].name, c};
  }
  if (!fa_autotune_default_point(&r->fc.arena, r->prog, k, known, nknown, &o->config, FA_ARCH_NONE, &pt))
    return n;
  if (pt.none_passes) {
    StrBuf sb;
    fa_sb_init(&sb);
    fa_autotune_none_passes_message(k, &pt, &sb);
    fa_warning(&r->fc.diag, k->prune->loc, "%s; running the first values", sb.data ? sb.data : "");
    fa_sb_free(&sb);
  }
  *cfg = pt.config;
  *source = pt.source;
  return n + fa_autotune_point_bindings(k, &pt, b + n);
}

/* "fadsl-run: add on the interpreter [T=f16 BLOCK=16] warps=4 stages=2
 * (default), grid (3, 1, 1)": what ran, as the GPU path's line says it. */
static void print_interp_config(Run *r, const Options *o, const FaBinding *b, int n, FaLaunchConfig cfg,
                                const char *source) {
  const FaKernelInfo *k = r->kinfo;
  StrBuf sb;
  fa_sb_init(&sb);
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *pa = &k->params[i];
    int j = pa->kind == PARAM_CONSTEXPR ? fa_binding_index(b, n, pa->name) : -1;
    if (j < 0 && !(pa->kind == PARAM_CONSTEXPR && pa->has_default))
      continue;
    fa_sb_printf(&sb, "%s%s=", sb.len ? " " : "", pa->name);
    fa_const_print(j >= 0 ? b[j].value : pa->default_value, &sb);
  }
  int64_t g[3] = {1, 1, 1};
  bool grid = o->has_grid || fa_interp_grid(r->in, g);
  if (o->has_grid)
    memcpy(g, o->grid, sizeof g);
  StrBuf label;
  fa_sb_init(&label);
  fa_config_print(&cfg, &label);
  fprintf(stderr, "fadsl-run: %s on the interpreter [%s] %s (%s)", k->name, sb.data ? sb.data : "",
          label.data ? label.data : "", source);
  fa_sb_free(&label);
  if (grid)
    fprintf(stderr, ", grid (%lld, %lld, %lld)%s", (long long)g[0], (long long)g[1], (long long)g[2],
            o->has_grid ? " (--grid)" : "");
  fputc('\n', stderr);
  fa_sb_free(&sb);
}

/* Binds every scalar parameter; pointer parameters come after, once the
 * scalars that size them are known. */
static bool bind_scalars(Run *r, Options *o) {
  const IrFunction *fn = r->kernel->device;
  bool ok = true;
  for (int p = 0; p < fn->nparams; p++) {
    const IrParam *pa = &fn->params[p];
    if (pa->value->type.dtype == DT_PTR)
      continue;
    NamedArg *a = find_named(o->args, o->nargs, pa->name);
    if (!a) {
      fprintf(stderr, "fadsl-run: missing --arg %s=NUMBER for the %s scalar parameter '%s'\n", pa->name,
              fa_dtype_name(pa->value->type.dtype), pa->name);
      ok = false;
      continue;
    }
    a->used = true;
    char *e;
    FaHostValue v;
    errno = 0;
    long long iv = strtoll(a->value, &e, 0);
    if (*e == 0 && e != a->value && !errno) {
      v = fa_host_int(DT_I64, iv);
    } else if (!strcmp(a->value, "True") || !strcmp(a->value, "False")) {
      v = fa_host_int(DT_I1, a->value[0] == 'T');
    } else {
      double dv = strtod(a->value, &e);
      if (*e || e == a->value) {
        fprintf(stderr, "fadsl-run: --arg %s=%s: '%s' is a scalar parameter and wants a number\n", pa->name,
                a->value, pa->name);
        ok = false;
        continue;
      }
      v = fa_host_float(DT_F64, dv);
    }
    r->scalar[p] = v;
    if (!fa_interp_bind_scalar(r->in, p, v))
      ok = false;
  }
  return ok;
}

/* Whether a .npy of shape s[0..n) holds the extent e[0..rank) in the order
 * the kernel reads it: the same shape, or one with adjacent axes merged or
 * split ([B, H, N, D] for an extent [B*H, N, D]; a flat array), i.e. one
 * shape's boundaries between leading axes (the products of the leading
 * dimensions) are all boundaries of the other's.  A transposed array has
 * the right number of elements but not this. */
static bool shape_fits_extent(const int64_t *s, int n, const int64_t *e, int rank) {
  int64_t ps[FA_NPY_MAX_DIMS], pe[FA_MAX_RANK], count = 1;
  for (int i = 0; i < n; i++)
    count *= s[i];
  if (count == 0)
    return true;
  int64_t acc = 1;
  for (int i = 0; i < n; i++)
    ps[i] = acc *= s[i];
  acc = 1;
  for (int i = 0; i < rank; i++)
    pe[i] = acc *= e[i];
  bool s_in_e = true, e_in_s = true;
  for (int i = 0; i < n; i++) {
    bool found = false;
    for (int j = 0; j < rank && !found; j++)
      found = ps[i] == pe[j];
    s_in_e = s_in_e && found;
  }
  for (int j = 0; j < rank; j++) {
    bool found = false;
    for (int i = 0; i < n && !found; i++)
      found = ps[i] == pe[j];
    e_in_s = e_in_s && found;
  }
  return s_in_e || e_in_s;
}

static bool bind_pointers(Run *r, Options *o) {
  const IrFunction *fn = r->kernel->device;
  bool ok = true;
  for (int p = 0; p < fn->nparams && ok; p++) {
    const IrParam *pa = &fn->params[p];
    if (pa->value->type.dtype != DT_PTR)
      continue;
    DType et = pa->value->type.pointee;
    int64_t dims[FA_MAX_RANK];
    int rank = fa_interp_extent(r->in, p, dims);
    if (rank < 0)
      return false;
    int64_t need = 1;
    for (int d = 0; d < rank; d++)
      need *= dims[d];
    NamedArg *a = find_named(o->args, o->nargs, pa->name);
    NamedArg *out = find_named(o->outs, o->nouts, pa->name);
    if (!a) {
      if (!out) {
        fprintf(stderr, "fadsl-run: missing --arg %s=FILE.npy for the pointer parameter '%s' (*%s)\n", pa->name,
                pa->name, fa_dtype_name(et));
        ok = false;
        continue;
      }
      if (rank == 0) {
        fprintf(stderr,
                "fadsl-run: --out %s needs --arg %s=FILE.npy too: '%s' declares no extent, so its size is unknown\n",
                pa->name, pa->name, pa->name);
        ok = false;
        continue;
      }
      /* an output only: a fresh buffer of the declared extent */
      int64_t esize = fa_dtype_size(et);
      r->data[p] = calloc((size_t)(need > 0 ? need : 1), (size_t)esize);
      if (!r->data[p]) {
        fprintf(stderr, "fadsl-run: out of memory for '%s' (%lld elements)\n", pa->name, (long long)need);
        return false;
      }
      if (o->poison && fa_dtype_is_float(et))   /* the bytes the GPU path writes: NaN in every float dtype */
        memset(r->data[p], 0xff, (size_t)(need > 0 ? need : 1) * (size_t)esize);
      r->count[p] = need;
      r->fresh[p] = true;
      r->inputs[p].ndim = rank;
      for (int d = 0; d < rank; d++)
        r->inputs[p].shape[d] = dims[d];
    } else {
      a->used = true;
      char err[600];
      FaNpy arr;
      if (looks_like_number(a->value)) {
        fprintf(stderr, "fadsl-run: --arg %s=%s: '%s' is a pointer parameter and wants a .npy file\n", pa->name,
                a->value, pa->name);
        ok = false;
        continue;
      }
      if (!fa_npy_read(a->value, &arr, err, sizeof err)) {
        fprintf(stderr, "fadsl-run: --arg %s: %s\n", pa->name, err);
        ok = false;
        continue;
      }
      if (rank > 0 && arr.count != need) {
        fprintf(stderr, "fadsl-run: --arg %s=%s: the file holds %lld elements (shape ", pa->name, a->value,
                (long long)arr.count);
        print_shape(stderr, arr.shape, arr.ndim);
        fprintf(stderr, "), but '%s' declares the extent ", pa->name);
        print_shape(stderr, dims, rank);
        fprintf(stderr, " = %lld elements\n", (long long)need);
        fa_npy_free(&arr);
        ok = false;
        continue;
      }
      if (rank > 0 && !shape_fits_extent(arr.shape, arr.ndim, dims, rank)) {
        fprintf(stderr, "fadsl-run: --arg %s=%s: the file's shape ", pa->name, a->value);
        print_shape(stderr, arr.shape, arr.ndim);
        fprintf(stderr, " is not the extent ");
        print_shape(stderr, dims, rank);
        fprintf(stderr, " that '%s' declares: the same %lld elements, in another order (a transposed array?); "
                "save it in the declared shape (adjacent axes may be merged or split)\n", pa->name, (long long)need);
        fa_npy_free(&arr);
        ok = false;
        continue;
      }
      if (fa_dtype_is_float(et) != fa_dtype_is_float(arr.dtype) && arr.dtype != DT_I1)
        fprintf(stderr, "fadsl-run: note: --arg %s: converting %s data to %s\n", pa->name,
                fa_npy_dtype_name(arr.dtype), fa_dtype_name(et));
      r->data[p] = malloc((size_t)(arr.count > 0 ? arr.count : 1) * (size_t)fa_dtype_size(et));
      if (!r->data[p]) {
        fa_npy_free(&arr);
        fprintf(stderr, "fadsl-run: out of memory for '%s'\n", pa->name);
        return false;
      }
      fa_host_convert(arr.dtype, arr.data, et, r->data[p], arr.count);
      r->count[p] = arr.count;
      fa_npy_free(&arr);
      r->inputs[p] = arr;   /* keeps the shape; data is freed */
    }
    if (!fa_interp_bind_buffer(r->in, p, et, r->data[p], r->count[p]))
      ok = false;
  }
  return ok;
}

static bool write_outputs(Run *r, Options *o) {
  const IrFunction *fn = r->kernel->device;
  bool ok = true;
  for (int i = 0; i < o->nouts; i++) {
    int p = fa_interp_param_index(r->in, o->outs[i].name);
    DType et = fn->params[p].value->type.pointee;
    DType ft;
    switch (et) {
    case DT_F16: case DT_BF16: case DT_F32: ft = DT_F32; break;
    case DT_F64: ft = DT_F64; break;
    case DT_I1: ft = DT_I1; break;
    case DT_I64: case DT_U32: ft = DT_I64; break;
    default: ft = DT_I32; break;
    }
    void *conv = malloc((size_t)(r->count[p] > 0 ? r->count[p] : 1) * (size_t)fa_dtype_size(ft));
    if (!conv) {
      fprintf(stderr, "fadsl-run: out of memory writing %s\n", o->outs[i].value);
      return false;
    }
    fa_host_convert(et, r->data[p], ft, conv, r->count[p]);
    const FaNpy *shape = &r->inputs[p];
    int64_t flat[1] = {r->count[p]};
    char err[600];
    bool w = shape->ndim > 0 ? fa_npy_write(o->outs[i].value, ft, shape->ndim, shape->shape, conv, err, sizeof err)
                             : fa_npy_write(o->outs[i].value, ft, 1, flat, conv, err, sizeof err);
    if (!w) {
      fprintf(stderr, "fadsl-run: %s\n", err);
      ok = false;
    }
    free(conv);
  }
  return ok;
}

/* ---- the GPU ----------------------------------------------------------------------- */

/* For the host-side specialisation (extents, parameter types) on the GPU
 * path: a value for every tunable constexpr the user left open, the first
 * point of the @autotune space that specialises (the runtime makes its own
 * choice for the launch; extents do not depend on tile sizes, and the
 * runtime checks every buffer against the extents of what it launches). */
static int fill_tunables(Run *r, FaBinding *b, int n) {
  const FaKernelInfo *k = r->kinfo;
  int open[16], nopen = 0, idx[16] = {0};
  for (int t = 0; t < k->ntune && nopen < 16; t++) {
    const FaParamInfo *p = find_param(k, k->tune[t].name);
    bool bound = false;
    for (int j = 0; j < n; j++)
      bound |= !strcmp(b[j].name, k->tune[t].name);
    if (!p || p->kind != PARAM_CONSTEXPR || bound || k->tune[t].nvalues == 0)
      continue;
    open[nopen++] = t;
  }
  for (int tries = 0; tries < 4096; tries++) {
    for (int i = 0; i < nopen; i++) {
      b[n + i].name = k->tune[open[i]].name;
      b[n + i].value = k->tune[open[i]].values[idx[i]];
    }
    FaCompiler scratch;
    fa_compiler_init(&scratch, NULL);
    FaLaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    fa_config_fill_defaults(&cfg);
    bool ok = fa_specialize(&scratch, r->prog, k, b, n + nopen, cfg) != NULL;
    fa_compiler_free(&scratch);
    if (ok)
      break;
    int i = nopen - 1;   /* next point: an odometer over the open axes */
    for (; i >= 0; i--) {
      if (++idx[i] < k->tune[open[i]].nvalues)
        break;
      idx[i] = 0;
    }
    if (i < 0)
      break;   /* nothing specialises: the real attempt reports why */
  }
  return n + nopen;
}

static bool rt_ok(fadsl_context *ctx, fadsl_status st, const char *what, const char *name) {
  if (st == FADSL_SUCCESS)
    return true;
  fprintf(stderr, "fadsl-run: %s%s%s failed: %s\n%s\n", what, name ? " " : "", name ? name : "",
          fadsl_status_string(st), ctx ? fadsl_context_last_error(ctx) : "");
  return false;
}

/* A scalar parameter's value as the runtime wants it: the ARG kind of the
 * parameter's dtype. */
static bool scalar_value(const IrParam *pa, FaHostValue v, fadsl_value *out) {
  DType dt = pa->value->type.dtype;
  bool is_int = v.dtype != DT_F64 && v.dtype != DT_F32;
  if (fa_dtype_is_float(dt)) {
    double x = is_int ? (double)v.i : v.f;
    *out = dt == DT_F64 ? fadsl_f64(x) : fadsl_f32((float)x);
    return true;
  }
  int64_t i = v.i;
  if (!is_int) {
    if (v.f != floor(v.f) || !(fabs(v.f) < 9.2e18)) {
      fprintf(stderr, "fadsl-run: --arg %s: %g is not an integer, and '%s' is %s\n", pa->name, v.f, pa->name,
              fa_dtype_name(dt));
      return false;
    }
    i = (int64_t)v.f;
  }
  if (dt == DT_I64) {
    *out = fadsl_i64(i);
    return true;
  }
  if (i < INT32_MIN || i > INT32_MAX) {
    fprintf(stderr, "fadsl-run: --arg %s: the value does not fit the %s parameter '%s'\n", pa->name,
            fa_dtype_name(dt), pa->name);
    return false;
  }
  *out = fadsl_i32((int32_t)i);
  return true;
}

static bool bind_constexprs(fadsl_context *ctx, fadsl_args *args, const FaBinding *b, int n) {
  for (int i = 0; i < n; i++) {
    fadsl_value v;
    switch (b[i].value.kind) {
    case CK_INT: v = fadsl_int(b[i].value.i); break;
    case CK_BOOL: v = fadsl_bool((int)b[i].value.i); break;
    case CK_FLOAT: v = fadsl_float(b[i].value.f); break;
    case CK_DTYPE: v = fadsl_dtype(fa_dtype_name(b[i].value.dtype)); break;
    default:
      fprintf(stderr, "fadsl-run: -D %s: this kind of value cannot be given to a GPU launch\n", b[i].name);
      return false;
    }
    if (!rt_ok(ctx, fadsl_args_set(args, b[i].name, v), "binding", b[i].name))
      return false;
  }
  return true;
}

/* The configuration axes given (--warps, ...) on the launch's arguments. */
static bool set_config(fadsl_context *ctx, fadsl_args *args, const FaLaunchConfig *config) {
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int x = 0; x < naxes; x++) {
    int v = fa_config_get(config, &axes[x]);
    if (v > 0 && !rt_ok(ctx, fadsl_args_set_config_axis(args, axes[x].name, v), "setting", axes[x].name))
      return false;
  }
  return true;
}

/* Copies the buffers to the device, launches, copies the --out buffers back
 * into r->data.  binds[0..nuser) are the constexprs the user gave. */
static bool run_gpu(Run *r, Options *o, const FaBinding *binds, int nuser) {
  const IrFunction *fn = r->kernel->device;
  int np = fn->nparams;
  fadsl_context *ctx = NULL;
  fadsl_program *prog = NULL;
  fadsl_kernel *kern = NULL;
  fadsl_args *args = NULL;
  uint64_t *dev = calloc((size_t)(np > 0 ? np : 1), sizeof *dev);
  bool ok = false;
  if (!dev)
    goto done;
  fadsl_status st = fadsl_context_create(o->device, &ctx);
  if (st != FADSL_SUCCESS) {
    fprintf(stderr, "fadsl-run: no GPU: %s\n", ctx ? fadsl_context_last_error(ctx) : fadsl_status_string(st));
    goto done;
  }
  if (!rt_ok(ctx, fadsl_program_load_file(ctx, o->file, &prog), "loading", o->file) ||
      !rt_ok(ctx, fadsl_program_kernel(prog, o->kernel, &kern), "finding the kernel", o->kernel) ||
      !rt_ok(ctx, fadsl_args_create(kern, &args), "preparing the arguments of", o->kernel) ||
      !bind_constexprs(ctx, args, binds, nuser))
    goto done;
  if (!set_config(ctx, args, &o->config))
    goto done;
  for (int p = 0; p < np; p++) {
    const IrParam *pa = &fn->params[p];
    if (pa->value->type.dtype != DT_PTR) {
      fadsl_value v;
      if (!scalar_value(pa, r->scalar[p], &v) || !rt_ok(ctx, fadsl_args_set(args, pa->name, v), "binding", pa->name))
        goto done;
      continue;
    }
    DType et = pa->value->type.pointee;
    size_t bytes = (size_t)r->count[p] * (size_t)fa_dtype_size(et);
    if (!rt_ok(ctx, fadsl_malloc(ctx, bytes ? bytes : 16, &dev[p]), "allocating device memory for", pa->name))
      goto done;
    if (r->fresh[p])   /* as on the interpreter: zeros, or with --poison NaN bytes for floats (all ones) */
      st = fadsl_memset(ctx, dev[p], o->poison && fa_dtype_is_float(et) ? 0xff : 0, bytes);
    else
      st = fadsl_memcpy_htod(ctx, dev[p], r->data[p], bytes);
    if (!rt_ok(ctx, st, "filling the device buffer of", pa->name) ||
        !rt_ok(ctx, fadsl_args_set_ptr(args, pa->name, dev[p]), "binding", pa->name))
      goto done;
  }
  fadsl_kernel_info info;
  if (!rt_ok(ctx, fadsl_launch(kern, args, NULL, &info), "launching", o->kernel) ||
      !rt_ok(ctx, fadsl_synchronize(ctx, NULL), "running", o->kernel))
    goto done;
  fprintf(stderr, "fadsl-run: %s on %s [%s] warps=%d stages=%d (%s), grid (%u, %u, %u), %d threads, cache %s\n",
          info.kernel, info.arch, info.constexprs, info.warps, info.stages, info.config_source, info.grid[0],
          info.grid[1], info.grid[2], info.threads, info.cache);
  for (int i = 0; i < o->nouts; i++) {
    int p = fa_interp_param_index(r->in, o->outs[i].name);
    size_t bytes = (size_t)r->count[p] * (size_t)fa_dtype_size(fn->params[p].value->type.pointee);
    if (!rt_ok(ctx, fadsl_memcpy_dtoh(ctx, r->data[p], dev[p], bytes), "copying back", o->outs[i].name))
      goto done;
  }
  ok = true;
done:
  for (int p = 0; dev && ctx && p < np; p++)
    if (dev[p])
      fadsl_free(ctx, dev[p]);
  free(dev);
  fadsl_args_destroy(args);
  fadsl_program_destroy(prog);
  fadsl_context_destroy(ctx);
  return ok;
}

/* ---- one run ------------------------------------------------------------------------- */

static int run(Options *o) {
  Run r;
  memset(&r, 0, sizeof r);
  fa_compiler_init(&r.fc, stderr);
  int status = EXIT_ERRORS;
  FaBinding *binds = NULL;
  int nbinds = 0;
  Source *src = fa_source_read(&r.fc, o->file);
  Node *mod = src ? fa_parse(&r.fc, src) : NULL;
  r.prog = mod ? fa_program_check(&r.fc, mod) : NULL;
  if (!r.prog)
    goto done;
  r.kinfo = fa_program_kernel(r.prog, o->kernel);
  if (!r.kinfo) {
    fprintf(stderr, "fadsl-run: %s has no kernel '%s'; its kernels:", o->file, o->kernel);
    for (int i = 0; i < r.prog->nkernels; i++)
      fprintf(stderr, " %s", r.prog->kernels[i]->name);
    fputc('\n', stderr);
    goto done;
  }
  /* every --arg / --out must name a parameter */
  bool names_ok = true;
  for (int i = 0; i < o->nargs + o->nouts; i++) {
    NamedArg *a = i < o->nargs ? &o->args[i] : &o->outs[i - o->nargs];
    const FaParamInfo *p = find_param(r.kinfo, a->name);
    if (!p) {
      fprintf(stderr, "fadsl-run: %s %s: kernel '%s' has no parameter '%s'\n", i < o->nargs ? "--arg" : "--out",
              a->name, r.kinfo->name, a->name);
      names_ok = false;
    } else if (i >= o->nargs && p->kind != PARAM_POINTER) {
      fprintf(stderr, "fadsl-run: --out %s: '%s' is not a pointer parameter\n", a->name, a->name);
      names_ok = false;
    }
  }
  if (!names_ok) {
    list_params(r.kinfo);
    goto done;
  }
  if (!collect_bindings(&r, o, &binds, &nbinds))
    goto done;
  /* the GPU path specialises on the host only to size and type the buffers
     (the runtime chooses the launch's configuration); the interpreter runs
     the kernel's default configuration for what is not given */
  FaLaunchConfig cfg = o->config;
  fa_config_fill_defaults(&cfg);
  const char *source = "default";
  int nhost = o->gpu ? fill_tunables(&r, binds, nbinds) : default_point(&r, o, binds, nbinds, &cfg, &source);
  r.kernel = fa_specialize(&r.fc, r.prog, r.kinfo, binds, nhost, cfg);
  if (!r.kernel)
    goto done;
  r.in = fa_interp_new(&r.fc, r.kernel);
  int np = r.kernel->device->nparams;
  size_t n1 = (size_t)(np > 0 ? np : 1);
  r.data = calloc(n1, sizeof *r.data);
  r.count = calloc(n1, sizeof *r.count);
  r.inputs = calloc(n1, sizeof *r.inputs);
  r.fresh = calloc(n1, sizeof *r.fresh);
  r.scalar = calloc(n1, sizeof *r.scalar);
  if (!r.in || !r.data || !r.count || !r.inputs || !r.fresh || !r.scalar)
    goto done;
  if (!bind_scalars(&r, o) || !bind_pointers(&r, o))
    goto done;
  if (o->gpu) {
    if (!run_gpu(&r, o, binds, nbinds))
      goto done;
  } else {
    print_interp_config(&r, o, binds, nhost, cfg, source);
    FaInterpOptions io = {o->threads, o->has_grid ? o->grid : NULL};
    if (!fa_interp_run(r.in, &io))
      goto done;
  }
  if (!write_outputs(&r, o))
    goto done;
  status = 0;
done:
  if (r.data)
    for (int i = 0; r.kernel && i < r.kernel->device->nparams; i++)
      free(r.data[i]);
  free(r.data);
  free(r.count);
  free(r.inputs);
  free(r.fresh);
  free(r.scalar);
  free(binds);
  fa_interp_free(r.in);
  fa_compiler_free(&r.fc);
  return status;
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc == 0)
    rc = run(&o);
  for (int i = 0; i < o.ndefines; i++)
    free(o.defines[i].name);
  for (int i = 0; i < o.nargs; i++)
    free(o.args[i].name);
  for (int i = 0; i < o.nouts; i++)
    free(o.outs[i].name);
  free(o.defines);
  free(o.args);
  free(o.outs);
  return rc;
}
