/* fadslc.c - the fadsl compiler driver.
 *
 *   fadslc [--check] FILE [-D NAME=VALUE]...   check a program and specialise every kernel
 *   fadslc --emit=WHAT FILE          print one stage's output
 *   fadslc --list FILE               one line per function: kernel / problem / helper NAME
 *
 * What each mode does is one entry of the `modes` table below; a new stage
 * adds its function there.  Options that later stages need (--kernel, -D,
 * --arch, -o) are parsed and stored in Options for every mode.
 *
 * Output is collected in memory and written (to stdout or -o) only when the
 * run succeeds, so a failing run prints nothing but its diagnostics.  Exit
 * status: 0 success, 1 errors in the program, 2 bad usage.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "cuda_backend.h"
#include "fadslc_cuda.h"
#include "modules.h"
#include "problem_binds.h"
#include "sema.h"

enum { EXIT_ERRORS = 1, EXIT_USAGE = 2 };

typedef struct Define {
  char *name;
  const char *value;
} Define;

typedef struct Options {
  const char *input;
  const char *mode;       /* a name from `modes` */
  const char *output;     /* -o FILE, NULL for stdout */
  const char *kernel;     /* --kernel NAME */
  const char *arch;       /* --arch ARCH (e.g. sm_90a) */
  Define *defines;        /* -D NAME=VALUE, in order */
  int ndefines;
  FaLaunchConfig config;  /* --warps N, --stages N, ...: the launch-configuration axes (0: the default) */
  const char **assume;    /* --assume NAME%K[,...], in order */
  int nassume;
} Options;

/* What a mode works on.  Output goes to `out`, a memory buffer. */
typedef struct Job {
  const Options *opt;
  FaCompiler *fc;
  const Source *src;
  Node *module;           /* the parsed program, for modes with .parse set */
  FILE *out;
} Job;

/* Returns true on success; errors are reported through job->fc->diag. */
typedef bool (*ModeFn)(Job *job);

typedef struct Mode {
  const char *name;
  const char *option;     /* how it is asked for */
  bool parse;             /* parse the input before calling run */
  ModeFn run;             /* NULL: the stage does not exist yet */
  const char *help;       /* NULL: not listed in --help */
} Mode;

/* ---- modes ---- */

static bool run_tokens(Job *job) { return fa_dump_tokens(job->fc, job->src, job->out) == 0; }

static bool run_ast(Job *job) {
  fa_ast_dump(job->module, job->out);
  return true;
}

static bool run_source(Job *job) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_ast_print_source(job->module, &sb);
  if (sb.data)
    fwrite(sb.data, 1, sb.len, job->out);
  fa_sb_free(&sb);
  return true;
}

static bool run_list(Job *job) {
  /* with what it imports (imported helpers by their linked names, MODULE.NAME) */
  const Node *module = fa_modules_link(job->fc, job->module);
  if (!module)
    return false;
  for (int i = 0; i < module->body.len; i++) {
    const Node *fn = module->body.items[i];
    if (fn->kind != N_FUNC)
      continue;
    const char *what = fa_func_is_kernel(fn) ? "kernel"
                       : fa_func_decorator(fn, "problem") ? "problem"
                                                          : "helper";
    fprintf(job->out, "%s %s\n", what, fn->name);
  }
  return true;
}

/* ---- --check ---- */

/* Whether a launch of k among a problem's statements (in either branch of
 * an `if`) passes parameter `index` (by position or by name). */
static bool launch_passes(const NodeList *body, const FaKernelInfo *k, int index) {
  for (int j = 0; j < body->len; j++) {
    const Node *s = body->items[j];
    if (s->kind == N_IF && (launch_passes(&s->body, k, index) || launch_passes(&s->orelse, k, index)))
      return true;
    const Node *call = s->kind == N_EXPR_STMT ? s->lhs : NULL;
    if (!call || call->kind != N_CALL || call->lhs->kind != N_NAME || strcmp(call->lhs->name, k->name))
      continue;
    if (index < call->args.len)
      return true;
    for (int a = 0; a < call->kwargs.len; a++)
      if (!strcmp(call->kwargs.items[a]->name, k->params[index].name))
        return true;
  }
  return false;
}

static bool problem_passes(const FaProgram *p, const FaKernelInfo *k, int index) {
  for (int i = 0; i < p->nproblems; i++)
    if (launch_passes(&p->problems[i]->fn->body, k, index))
      return true;
  return false;
}

/* The constexprs of k that nothing gives a value: not -D, not an @autotune
 * axis, no default, not passed by a @problem.  Writes them, space-separated,
 * into *names (arena) and returns how many. */
static int constexprs_without_value(Job *job, const FaProgram *p, const FaKernelInfo *k, const FaBinding *given,
                                    int ngiven, const char **names) {
  StrBuf sb;
  fa_sb_init(&sb);
  int n = 0;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *pa = &k->params[i];
    if (pa->kind != PARAM_CONSTEXPR || pa->has_default || problem_passes(p, k, i))
      continue;
    bool has = false;
    for (int j = 0; j < ngiven && !has; j++)
      has = !strcmp(given[j].name, pa->name);
    for (int t = 0; t < k->ntune && !has; t++)
      has = !strcmp(k->tune[t].name, pa->name) && k->tune[t].nvalues > 0;
    if (!has)
      fa_sb_printf(&sb, "%s%s", n++ ? ", " : "", pa->name);
  }
  *names = fa_arena_printf(&job->fc->arena, "%s", sb.data ? sb.data : "");
  fa_sb_free(&sb);
  return n;
}

/* The -D values; NULL after reporting one that is not a value.  (A name
 * given twice is left to specialisation, which locates the error at the
 * kernel; --check refuses it here, since it specialises every kernel.) */
static FaBinding *parse_defines(Job *job) {
  const Options *opt = job->opt;
  FaBinding *binds = fa_arena_alloc(&job->fc->arena, (size_t)(opt->ndefines + 1) * sizeof *binds);
  if (!binds)
    fa_error(&job->fc->diag, fa_noloc(), "out of memory");
  for (int i = 0; binds && i < opt->ndefines; i++) {
    binds[i].name = opt->defines[i].name;
    if (!fa_const_parse(opt->defines[i].value, &binds[i].value)) {
      fa_error(&job->fc->diag, fa_noloc(), "-D %s=%s: not a value (an integer, a float, True, False or a dtype)",
               opt->defines[i].name, opt->defines[i].value);
      return NULL;
    }
  }
  return binds;
}

/* The -D values for --check: NULL also after reporting a name given twice. */
static FaBinding *check_defines(Job *job) {
  FaBinding *binds = parse_defines(job);
  for (int i = 0; binds && i < job->opt->ndefines; i++)
    if (fa_binding_index(binds, i, binds[i].name) >= 0) {
      fa_error(&job->fc->diag, fa_noloc(), "-D %s is given twice", binds[i].name);
      return NULL;
    }
  return binds;
}

/* Specialises kernel k as --emit=cuda would compile it: the -D values that
 * are its constexprs or problem sizes, then its default configuration (the
 * first point of @autotune that passes the prune, warps and stages included,
 * the prune reading `arch`), its constexpr defaults and what a @problem
 * passes when it launches it.  A
 * kernel with a constexpr that none of these gives is not specialised; a note
 * says which values are missing. */
static bool check_kernel(Job *job, const FaProgram *p, const FaKernelInfo *k, const FaBinding *defines, int arch) {
  const Options *opt = job->opt;
  FaBinding *given = fa_arena_alloc(&job->fc->arena, (size_t)(opt->ndefines + 1) * sizeof *given);
  if (!given)
    return false;
  int ngiven = 0;
  for (int i = 0; i < opt->ndefines; i++)
    if (fa_kernel_constexpr(k, defines[i].name) || fa_program_has_size(p, defines[i].name))
      given[ngiven++] = defines[i];
  const char *missing;
  if (constexprs_without_value(job, p, k, given, ngiven, &missing) > 0) {
    fa_note(&job->fc->diag, k->fn->loc,
            "kernel '%s' was not specialised, so only its names and calls were checked: no value for %s "
            "(give -D NAME=VALUE, a default, or an @autotune axis)", k->name, missing);
    return true;
  }
  FaLaunchConfig cfg = opt->config;
  FaBinding *b = NULL;
  int n = fa_kernel_bindings_for_compile(job->fc, p, k, given, ngiven, arch, &b, &cfg);
  return n >= 0 && fa_specialize(job->fc, p, k, b, n, cfg) != NULL;
}

/* The compute capability a prune reads as `arch` (sema.h): that of --arch
 * when given; else none, since --check compiles for no GPU. */
static bool check_arch(Job *job, int *arch) {
  *arch = FA_ARCH_NONE;
  if (!job->opt->arch)
    return true;
  FaCudaTarget target;
  if (!fa_cuda_target_parse(job->opt->arch, &target)) {
    fa_error(&job->fc->diag, fa_noloc(), "--arch %s: not a supported GPU architecture (sm_80 or newer, e.g. "
             "sm_80, sm_90a)", job->opt->arch);
    return false;
  }
  *arch = target.sm;
  return true;
}

/* Semantic analysis (with the arguments of every call, whatever the
 * constexprs), then every kernel specialised (check_kernel). */
static bool run_check(Job *job) {
  FaProgram *p = fa_program_check(job->fc, job->module);
  FaBinding *defines = p ? check_defines(job) : NULL;
  int arch;
  if (!defines || !check_arch(job, &arch))
    return false;
  bool ok = true;
  for (int i = 0; i < job->opt->ndefines; i++) {
    bool known = fa_program_has_size(p, defines[i].name);
    for (int k = 0; k < p->nkernels && !known; k++)
      known = fa_kernel_constexpr(p->kernels[k], defines[i].name) != NULL;
    if (!known) {
      fa_error(&job->fc->diag, fa_noloc(), "-D %s: no kernel of %s has a constexpr parameter '%s' (and no problem "
               "size has that name)", defines[i].name, job->src->name, defines[i].name);
      ok = false;
    }
  }
  if (!ok)
    return false;
  for (int k = 0; k < p->nkernels; k++)
    ok = check_kernel(job, p, p->kernels[k], defines, arch) && ok;
  return ok;
}

/* The tile IR of one kernel specialised with the -D values. */
static bool run_ir(Job *job) {
  const Options *opt = job->opt;
  FaProgram *p = fa_program_check(job->fc, job->module);
  if (!p)
    return false;
  if (!opt->kernel) {
    fa_error(&job->fc->diag, fa_noloc(), "--emit=ir needs --kernel NAME");
    return false;
  }
  FaKernelInfo *k = fa_program_kernel(p, opt->kernel);
  if (!k) {
    fa_error(&job->fc->diag, fa_noloc(), "there is no kernel '%s' in %s", opt->kernel, job->src->name);
    return false;
  }
  FaBinding *binds = parse_defines(job);
  if (!binds)
    return false;
  FaLaunchConfig cfg = opt->config;
  fa_config_fill_defaults(&cfg);
  IrKernel *ir = fa_specialize(job->fc, p, k, binds, opt->ndefines, cfg);
  if (!ir)
    return false;
  StrBuf sb;
  fa_sb_init(&sb);
  fa_ir_print_kernel(ir, &sb);
  if (sb.data)
    fwrite(sb.data, 1, sb.len, job->out);
  fa_sb_free(&sb);
  return true;
}

/* --emit=cuda|ptx|cubin: the CUDA backend (fadslc_cuda.c). */
static bool run_cuda_stage(Job *job, const char *what) {
  const Options *opt = job->opt;
  FaBinding *binds = parse_defines(job);
  if (!binds)
    return false;
  FaCompileRequest req = {opt->kernel, binds, opt->ndefines, opt->config, opt->arch, what, opt->assume, opt->nassume};
  return fa_fadslc_compile(job->fc, job->module, &req, job->out);
}
static bool run_plan(Job *job) { return run_cuda_stage(job, "plan"); }
static bool run_cuda(Job *job) { return run_cuda_stage(job, "cuda"); }
static bool run_ptx(Job *job) { return run_cuda_stage(job, "ptx"); }
static bool run_cubin(Job *job) { return run_cuda_stage(job, "cubin"); }

/* Prints the tree as source, parses that again and compares: the printer and
 * the parser must agree (the test suite runs this over every .fa file). */
static bool run_roundtrip(Job *job) {
  StrBuf first, second;
  fa_sb_init(&first);
  fa_sb_init(&second);
  fa_ast_print_source(job->module, &first);
  const char *name = fa_arena_printf(&job->fc->arena, "%s (printed)", job->src->name);
  Source *printed = fa_source_new(job->fc, name, first.data ? first.data : "", first.len);
  bool ok = false;
  if (!printed) {
    fa_error(&job->fc->diag, fa_noloc(), "out of memory");
  } else {
    Node *again = fa_parse(job->fc, printed);
    if (!again) {
      fa_error(&job->fc->diag, fa_loc(job->src, 0, 0), "the printed source does not parse");
    } else if (!fa_ast_equal(job->module, again)) {
      fa_error(&job->fc->diag, fa_loc(job->src, 0, 0),
               "the printed source parses to a different tree");
    } else {
      fa_ast_print_source(again, &second);
      ok = first.len == second.len && (first.len == 0 || memcmp(first.data, second.data, first.len) == 0);
      if (!ok)
        fa_error(&job->fc->diag, fa_loc(job->src, 0, 0), "printing is not stable: the second print differs");
    }
  }
  if (!ok && first.data)
    fprintf(stderr, "--- printed source ---\n%s--- end ---\n", first.data);
  fa_sb_free(&first);
  fa_sb_free(&second);
  return ok;
}

static const Mode modes[] = {
  {"check", "--check", true, run_check,
   "check the program and specialise every kernel at its default configuration (the default)"},
  {"list", "--list", true, run_list, "one line per function: 'kernel NAME', 'problem NAME' or 'helper NAME'"},
  {"tokens", "--emit=tokens", false, run_tokens, "the tokens, one per line: LINE:COL KIND TEXT"},
  {"ast", "--emit=ast", true, run_ast, "the syntax tree"},
  {"source", "--emit=source", true, run_source, "the syntax tree printed back as source"},
  {"ir", "--emit=ir", true, run_ir, "the tile IR of a kernel"},
  {"plan", "--emit=plan", true, run_plan, "the CUDA backend's decisions about a kernel, one per line"},
  {"cuda", "--emit=cuda", true, run_cuda, "the CUDA C++ of a kernel"},
  {"ptx", "--emit=ptx", true, run_ptx, "the PTX of a kernel (compiled by NVRTC)"},
  {"cubin", "--emit=cubin", true, run_cubin, "the cubin of a kernel (compiled by NVRTC)"},
  {"roundtrip", "--roundtrip", true, run_roundtrip, NULL},
};

static const Mode *find_mode(const char *name) {
  for (int i = 0; i < FA_ARRAY_LEN(modes); i++)
    if (strcmp(modes[i].name, name) == 0)
      return &modes[i];
  return NULL;
}

/* ---- command line ---- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: fadslc [OPTIONS] FILE.fa\n"
          "\n"
          "What to do (one of):\n");
  for (int i = 0; i < FA_ARRAY_LEN(modes); i++) {
    if (!modes[i].help)
      continue;
    fprintf(f, "  %-16s %s%s\n", modes[i].option, modes[i].help,
            modes[i].run ? "" : " (not available yet)");
  }
  fprintf(f,
          "\n"
          "Options:\n"
          "  --kernel NAME    the kernel to compile (for --emit=ir|plan|cuda|ptx|cubin)\n"
          "  -D NAME=VALUE    set a constexpr parameter (--check: of every kernel that has it)\n");
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int i = 0; i < naxes; i++) {
    char opt[32];
    snprintf(opt, sizeof opt, "--%s %s", axes[i].name, axes[i].names ? "NAME" : "N");
    const char *dflt = fa_config_value_name(&axes[i], axes[i].default_value);
    if (dflt)
      fprintf(f, "  %-16s %s (default %s)\n", opt, axes[i].help, dflt);
    else
      fprintf(f, "  %-16s %s (default %d)\n", opt, axes[i].help, axes[i].default_value);
  }
  fprintf(f, "                   FADSL_PIPELINE=NAME and FADSL_SCHEDULE=NAME set the defaults of\n"
             "                   --pipeline and --schedule, as for launches\n");
  fprintf(f,
          "  --assume N%%16    compile for runtime argument values with this property: an integer\n"
          "                   parameter a multiple of 16, a pointer aligned to 16 bytes (any power\n"
          "                   of two; comma-separated or repeated; for --emit=plan|cuda|ptx|cubin).\n"
          "                   Without it integers have no known divisor and pointers are taken to be\n"
          "                   16-byte aligned, as launches are specialised (see docs/performance.md)\n"
          "  --arch ARCH      the GPU architecture to compile for (e.g. sm_90a; --emit=plan|cuda|ptx|\n"
          "                   cubin default sm_80); @autotune prunes read its compute capability as\n"
          "                   `arch` (90 for sm_90a; 0 for --check without --arch)\n"
          "  -o FILE          write the output to FILE instead of standard output\n"
          "  --help           show this help\n"
          "  --version        show the version\n"
          "\n"
          "Exit status: 0 on success, 1 when the program has errors, 2 on bad usage.\n");
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("fadslc: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nTry 'fadslc --help'.\n", stderr);
  return EXIT_USAGE;
}

/* Matches "--name VALUE" and "--name=VALUE"; advances *i past what it used. */
static bool option_value(int argc, char **argv, int *i, const char *name, const char **value,
                         bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0)
    return false;
  if (a[n] == '=') {
    *value = a + n + 1;
    return true;
  }
  if (a[n] != '\0')
    return false;
  if (*i + 1 >= argc) {
    *missing = true;
    return true;
  }
  *value = argv[++*i];
  return true;
}

static bool valid_name(const char *s, size_t n) {
  if (n == 0 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
      return false;
  return true;
}

/* --NAME N for a launch-configuration axis (config_axes.c): true when
 * argv[*i] is one; *status is set on a bad value. */
static bool config_option(int argc, char **argv, int *i, Options *opt, int *status) {
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int x = 0; x < naxes; x++) {
    char name[40];
    snprintf(name, sizeof name, "--%s", axes[x].name);
    const char *value = NULL;
    bool missing = false;
    if (!option_value(argc, argv, i, name, &value, &missing))
      continue;
    if (axes[x].names) { /* a named value (or its number) */
      int v;
      if (missing || !fa_config_parse(&axes[x], value, &v)) {
        char why[160];
        snprintf(why, sizeof why, "%s needs %s", name, axes[x].allowed);
        *status = usage_error("%s", why);
      } else {
        fa_config_set(&opt->config, &axes[x], v);
      }
      return true;
    }
    char *end = NULL;
    long n = missing ? 0 : strtol(value, &end, 10);
    if (missing || !end || *end || n < 1 || n > 64) {
      char why[96];
      snprintf(why, sizeof why, "%s needs a number from 1 to 64", name);
      *status = usage_error("%s", why);
    } else {
      fa_config_set(&opt->config, &axes[x], (int)n);
    }
    return true;
  }
  return false;
}

static bool set_mode(Options *opt, const char *mode, int *status) {
  if (opt->mode && strcmp(opt->mode, mode) != 0) {
    *status = usage_error("choose one of --check, --list, --emit=... (got also '%s')", mode);
    return false;
  }
  opt->mode = mode;
  return true;
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, Options *opt) {
  int status = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *value = NULL;
    bool missing = false;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(a, "--version") == 0) {
      printf("fadslc (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
      return 0;
    }
    if (strcmp(a, "--check") == 0 || strcmp(a, "--list") == 0 || strcmp(a, "--roundtrip") == 0) {
      if (!set_mode(opt, a + 2, &status))
        return status;
    } else if (strncmp(a, "--emit=", 7) == 0) {
      const Mode *m = find_mode(a + 7);
      if (!m || strncmp(m->option, "--emit=", 7) != 0)
        return usage_error("unknown output '%s' (try tokens, ast, source, ir, plan, cuda, ptx, cubin)", a + 7);
      if (!set_mode(opt, m->name, &status))
        return status;
    } else if (option_value(argc, argv, &i, "--kernel", &value, &missing)) {
      if (missing)
        return usage_error("%s needs a kernel name", "--kernel");
      opt->kernel = value;
    } else if (config_option(argc, argv, &i, opt, &status)) {
      if (status)
        return status;
    } else if (option_value(argc, argv, &i, "--assume", &value, &missing)) {
      if (missing)
        return usage_error("%s needs NAME%%K, e.g. N%%16", "--assume");
      const char **grown = realloc(opt->assume, (size_t)(opt->nassume + 1) * sizeof *grown);
      if (!grown)
        return usage_error("%s", "out of memory");
      opt->assume = grown;
      opt->assume[opt->nassume++] = value;
    } else if (option_value(argc, argv, &i, "--arch", &value, &missing)) {
      if (missing)
        return usage_error("%s needs an architecture", "--arch");
      opt->arch = value;
    } else if (strncmp(a, "-D", 2) == 0) {
      const char *def = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
      if (!def)
        return usage_error("%s needs NAME=VALUE", "-D");
      const char *eq = strchr(def, '=');
      if (!eq || !valid_name(def, (size_t)(eq - def)) || eq[1] == '\0')
        return usage_error("-D wants NAME=VALUE, not '%s'", def);
      Define *d = realloc(opt->defines, (size_t)(opt->ndefines + 1) * sizeof *d);
      if (!d)
        return usage_error("%s", "out of memory");
      opt->defines = d;
      d[opt->ndefines].name = strndup(def, (size_t)(eq - def));
      d[opt->ndefines].value = eq + 1;
      if (!d[opt->ndefines].name)
        return usage_error("%s", "out of memory");
      opt->ndefines++;
    } else if (strcmp(a, "-o") == 0) {
      if (i + 1 >= argc)
        return usage_error("%s needs a file name", "-o");
      opt->output = argv[++i];
    } else if (a[0] == '-' && a[1] != '\0') {
      return usage_error("unknown option '%s'", a);
    } else {
      if (opt->input)
        return usage_error("only one input file, please (got also '%s')", a);
      opt->input = a;
    }
  }
  if (!opt->input)
    return usage_error("%s", "no input file");
  if (!opt->mode)
    opt->mode = "check";
  return -1;
}

static bool write_output(const Options *opt, const char *data, size_t len) {
  FILE *f = stdout;
  if (opt->output) {
    f = fopen(opt->output, "wb");
    if (!f) {
      fprintf(stderr, "fadslc: cannot write '%s': %s\n", opt->output, strerror(errno));
      return false;
    }
  }
  bool ok = fwrite(data, 1, len, f) == len;
  ok = (f == stdout ? fflush(f) == 0 : fclose(f) == 0) && ok;
  if (!ok)
    fprintf(stderr, "fadslc: error writing %s\n", opt->output ? opt->output : "the output");
  return ok;
}

static int run(const Options *opt) {
  const Mode *mode = find_mode(opt->mode);
  if (!mode->run) {
    fprintf(stderr, "fadslc: %s is not available yet\n", mode->option);
    return EXIT_USAGE;
  }
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  int status = EXIT_ERRORS;
  Job job = {opt, &fc, NULL, NULL, out};
  if (!out) {
    fprintf(stderr, "fadslc: out of memory\n");
    goto done;
  }
  job.src = fa_source_read(&fc, opt->input);
  if (!job.src)
    goto done;
  if (mode->parse) {
    job.module = fa_parse(&fc, job.src);
    if (!job.module)
      goto done;
  }
  bool ok = mode->run(&job) && fc.diag.errors == 0;
  if (fclose(out) != 0)
    ok = false;
  out = NULL;
  if (ok && write_output(opt, buf ? buf : "", len))
    status = 0;
done:
  if (out)
    fclose(out);
  free(buf);
  fa_compiler_free(&fc);
  return status;
}

int main(int argc, char **argv) {
  Options opt;
  memset(&opt, 0, sizeof opt);
  /* the pipeline and schedule launches would take (runtime/launch.c), unless
     --pipeline / --schedule say otherwise */
  const FaConfigAxis *bad = NULL;
  char var[48];
  if (!fa_config_from_env(&opt.config, &opt.config, &bad, var, sizeof var)) {
    char what[160];
    snprintf(what, sizeof what, "%s must be %s", var, bad->allowed);
    return usage_error("%s", what);
  }
  int status = parse_args(argc, argv, &opt);
  if (status < 0)
    status = run(&opt);
  for (int i = 0; i < opt.ndefines; i++)
    free(opt.defines[i].name);
  free(opt.defines);
  free(opt.assume);
  return status;
}
