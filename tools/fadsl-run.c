/* fadsl-run - run one kernel of a .fa program on inputs from .npy files.
 *
 *   fadsl-run FILE KERNEL --interpret [-D NAME=VALUE]... [--arg NAME=FILE.npy|NUMBER]...
 *             [--out NAME=FILE.npy]... [--warps N] [--stages N] [--grid X[,Y[,Z]]]
 *             [--threads N] [--poison]
 *
 * The program is parsed, checked and specialised on the -D values; each
 * runtime parameter gets its --arg (pointer parameters a .npy file whose data
 * is converted to the parameter's element type, scalars a number); the grid
 * comes from the kernel's @kernel(grid=...); after the run every --out
 * buffer is written (f16 and bf16 as float32 .npy, other dtypes as they are).
 * A pointer parameter named by --out but not by --arg gets a fresh buffer of
 * its declared extent, zero-filled (NaN-filled with --poison).
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
  int warps, stages, threads;
  bool has_grid;
  int64_t grid[3];
} Options;

static void usage(FILE *f) {
  fputs("usage: fadsl-run FILE KERNEL --interpret [options]\n"
        "Runs one kernel of a fadsl program on .npy inputs and writes chosen buffers as .npy.\n"
        "  --interpret            run on the CPU interpreter\n"
        "  --gpu                  run on the GPU (not available yet)\n"
        "  -D NAME=VALUE          value of a constexpr parameter (64, 1.5, True, f16, ...)\n"
        "  --arg NAME=FILE.npy    data of a pointer parameter, converted to its element type\n"
        "  --arg NAME=NUMBER      value of a scalar parameter (or of a constexpr, like -D)\n"
        "  --out NAME=FILE.npy    write that pointer parameter's buffer after the run\n"
        "                         (f16/bf16 as float32; other dtypes as they are)\n"
        "  --warps N, --stages N  launch configuration (default 4 and 2)\n"
        "  --grid X[,Y[,Z]]       use this grid instead of the kernel's\n"
        "  --threads N            interpret programs on N threads (default 1)\n"
        "  --poison               fill buffers created for --out with NaN instead of zeros\n"
        "bf16 data is stored in .npy files as float32.\n",
        f);
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "fadsl-run: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(try fadsl-run --help)\n");
  return EXIT_USAGE;
}

static bool push_named(NamedArg **v, int *n, const char *text) {
  const char *eq = strchr(text, '=');
  if (!eq || eq == text)
    return false;
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
  o->warps = 4;
  o->stages = 2;
  o->threads = 1;
  int positional = 0;
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
      if (!push_named(&o->defines, &o->ndefines, def))
        return usage_error("-D wants NAME=VALUE, not '%s'", def);
    } else if (!strcmp(a, "--arg")) {
      NEED_VALUE();
      if (!push_named(&o->args, &o->nargs, val))
        return usage_error("--arg wants NAME=FILE.npy or NAME=NUMBER, not '%s'", val);
    } else if (!strcmp(a, "--out")) {
      NEED_VALUE();
      if (!push_named(&o->outs, &o->nouts, val))
        return usage_error("--out wants NAME=FILE.npy, not '%s'", val);
    } else if (!strcmp(a, "--warps") || !strcmp(a, "--stages") || !strcmp(a, "--threads")) {
      NEED_VALUE();
      int *dst = a[2] == 'w' ? &o->warps : a[2] == 's' ? &o->stages : &o->threads;
      if (!parse_int(val, dst))
        return usage_error("bad number '%s'", val);
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
  return 0;
}

static NamedArg *find_named(NamedArg *v, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i].name, name))
      return &v[i];
  return NULL;
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
  FaBinding *b = calloc((size_t)(o->ndefines + o->nargs + k->nparams + 1), sizeof *b);
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
    char err[512];
    if (!fa_npy_read(a->value, &arr, err, sizeof err))
      continue;   /* reported when the argument is bound */
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
    if (!fa_interp_bind_scalar(r->in, p, v))
      ok = false;
  }
  return ok;
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
      if (o->poison && fa_dtype_is_float(et))
        for (int64_t i = 0; i < need; i++)
          fa_host_set(et, r->data[p], i, NAN);
      r->count[p] = need;
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

static int run(Options *o) {
  if (o->gpu) {
    fprintf(stderr, "fadsl-run: --gpu is not available yet; use --interpret\n");
    return EXIT_USAGE;
  }
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
  FaLaunchConfig cfg = {o->warps, o->stages};
  r.kernel = fa_specialize(&r.fc, r.prog, r.kinfo, binds, nbinds, cfg);
  if (!r.kernel)
    goto done;
  r.in = fa_interp_new(&r.fc, r.kernel);
  int np = r.kernel->device->nparams;
  r.data = calloc((size_t)(np > 0 ? np : 1), sizeof *r.data);
  r.count = calloc((size_t)(np > 0 ? np : 1), sizeof *r.count);
  r.inputs = calloc((size_t)(np > 0 ? np : 1), sizeof *r.inputs);
  if (!r.in || !r.data || !r.count || !r.inputs)
    goto done;
  if (!bind_scalars(&r, o) || !bind_pointers(&r, o))
    goto done;
  FaInterpOptions io = {o->threads, o->has_grid ? o->grid : NULL};
  if (!fa_interp_run(r.in, &io))
    goto done;
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
