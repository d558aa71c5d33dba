/* fadsl-tune - finds the fastest configuration of a program's tunable
 * kernels on the GPU at hand and records it in the tuning database, which
 * libfadsl consults at every launch.
 *
 *     fadsl-tune FILE.fa [--kernel NAME] [--size NAME=VALUE ...] [--jobs N]
 *                [--db PATH] [--json PATH] [--dry-run] [--compile-only]
 *                [--force] [--arch sm_XX] ...
 *
 * It runs the file's @problem descriptions; each launch of a tunable kernel
 * (one with @autotune) is where that kernel is tuned, with the arguments the
 * problem gives it.  See docs/tuning.md. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../compiler/cuda_backend.h"
#include "tune.h"

/* ---- the command line -------------------------------------------------------------------- */

static void usage(FILE *out) {
  fprintf(out,
          "usage: fadsl-tune FILE.fa [OPTIONS]\n"
          "\n"
          "Tunes every kernel of FILE that has an @autotune space, at the point where the\n"
          "file's @problem launches it, and records the fastest configuration per kernel,\n"
          "key, GPU and fadsl version in the tuning database used by libfadsl.\n"
          "\n"
          "Options:\n"
          "  --kernel NAME       tune only this kernel\n"
          "  --size NAME=VALUE   override a problem size (repeatable), e.g. --size N=16384\n"
          "  --only AXIS=V1,V2   try only these values of an @autotune axis (repeatable)\n"
          "  --jobs N            compile in N threads (default: the number of cores)\n"
          "  --db PATH           the tuning database to read and update (default:\n"
          "                      $FADSL_TUNE_DB, else $XDG_CACHE_HOME/fadsl/tune.json,\n"
          "                      else ~/.cache/fadsl/tune.json)\n"
          "  --json PATH         also write the results as JSON ('-': standard output)\n"
          "  --dry-run           print the pruned search space; no GPU, no compiling\n"
          "  --compile-only      compile every candidate and report registers, shared memory\n"
          "                      and spills; no GPU needed\n"
          "  --arch ARCH         target of --compile-only (default: the GPU's, else sm_90a) and\n"
          "                      of --dry-run (default sm_90a); prunes read its compute\n"
          "                      capability as `arch` (90 for sm_90a)\n"
          "  --force             tune again keys the database already has\n"
          "  --runs N            timed runs of each candidate that survives the 5-run\n"
          "                      screening (default and minimum 20)\n"
          "  --min-ms MS         and at least MS milliseconds of timed runs, after 25 ms of\n"
          "                      warm-up, so that they are compared at sustained clocks\n"
          "                      (default 100; 0: --runs alone)\n"
          "  --timeout S         a candidate's first launch that has not finished within S\n"
          "                      seconds stops the tuner, naming it (a kernel that never\n"
          "                      ends leaves the GPU unusable; default 60, 0: no limit)\n"
          "  --top N             runners-up shown per key (default 5)\n"
          "  --device N          the CUDA device to tune on (default 0)\n"
          "  --seed N            seed of the generated input data (default 1)\n"
          "  --quiet             no progress display\n"
          "  --help, --version\n"
          "\n"
          "Exit status: 0 success; 1 errors in the program or nothing could be tuned;\n"
          "2 bad usage or input (unknown kernel or size, empty space, kernel without a\n"
          "problem); 3 no GPU to tune on.\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fadsl-tune: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(fadsl-tune --help shows the options)\n");
  va_end(ap);
  return TUNE_EXIT_USAGE;
}

static bool valid_name(const char *s, size_t n) {
  if (n == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (size_t i = 1; i < n; i++)
    if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
      return false;
  return true;
}

/* NAME=VALUE -> binding (strings in the arena). */
static bool parse_assignment(Arena *a, const char *text, const char **name, const char **value) {
  const char *eq = strchr(text, '=');
  if (!eq || !valid_name(text, (size_t)(eq - text)) || !eq[1]) return false;
  *name = fa_arena_strndup(a, text, (size_t)(eq - text));
  *value = eq + 1;
  return *name != NULL;
}

static bool parse_int(const char *s, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || !end || *end || end == s || v < lo || v > hi) return false;
  *out = (int)v;
  return true;
}

/* Takes the value of an option given as --opt VALUE or --opt=VALUE. */
static bool option(int argc, char **argv, int *i, const char *name, const char **value, int *status) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, n) != 0) return false;
  if (a[n] == '=') {
    *value = a + n + 1;
    return true;
  }
  if (a[n] != '\0') return false;
  if (*i + 1 >= argc) {
    *status = usage_error("%s needs a value", name);
    *value = NULL;
    return true;
  }
  *value = argv[++*i];
  return true;
}

static int parse_args(int argc, char **argv, Arena *arena, TuneOptions *opt) {
  int maxdefs = argc + 1;
  opt->sizes = fa_arena_alloc(arena, sizeof *opt->sizes * (size_t)maxdefs);
  opt->only = fa_arena_alloc(arena, sizeof *opt->only * (size_t)maxdefs);
  if (!opt->sizes || !opt->only) return usage_error("out of memory");
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  opt->jobs = ncpu > 0 ? (int)ncpu : 1;
  opt->top = 5;
  opt->min_runs = 20;
  opt->min_ms = 100;
  opt->timeout_s = 60;
  opt->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    int status = -1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return TUNE_EXIT_OK;
    } else if (!strcmp(a, "--version")) {
      printf("fadsl-tune (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
      return TUNE_EXIT_OK;
    } else if (!strcmp(a, "--dry-run")) {
      if (opt->mode == TUNE_MODE_COMPILE_ONLY) return usage_error("--dry-run and --compile-only exclude each other");
      opt->mode = TUNE_MODE_DRY_RUN;
    } else if (!strcmp(a, "--compile-only")) {
      if (opt->mode == TUNE_MODE_DRY_RUN) return usage_error("--dry-run and --compile-only exclude each other");
      opt->mode = TUNE_MODE_COMPILE_ONLY;
    } else if (!strcmp(a, "--force")) {
      opt->force = true;
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      opt->quiet = true;
    } else if (option(argc, argv, &i, "--kernel", &v, &status)) {
      if (!v) return status;
      opt->kernel = v;
    } else if (option(argc, argv, &i, "--size", &v, &status)) {
      if (!v) return status;
      const char *name, *value;
      FaConst c;
      if (!parse_assignment(arena, v, &name, &value) || !fa_const_parse(value, &c))
        return usage_error("--size wants NAME=VALUE (e.g. N=16384), not '%s'", v);
      int at = opt->nsizes;
      for (int j = 0; j < opt->nsizes; j++)
        if (!strcmp(opt->sizes[j].name, name)) at = j;
      opt->sizes[at].name = name;
      opt->sizes[at].value = c;
      if (at == opt->nsizes) opt->nsizes++;
    } else if (option(argc, argv, &i, "--only", &v, &status)) {
      if (!v) return status;
      const char *name, *list;
      if (!parse_assignment(arena, v, &name, &list))
        return usage_error("--only wants AXIS=V1,V2,... (e.g. BLOCK_Q=64,128), not '%s'", v);
      TuneOnly *o = &opt->only[opt->nonly++];
      o->name = name;
      o->values = fa_arena_alloc(arena, sizeof *o->values * (strlen(list) + 1));
      char *copy = fa_arena_strdup(arena, list);
      if (!o->values || !copy) return usage_error("out of memory");
      const FaConfigAxis *named = fa_config_axis(name);
      for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int iv;
        if (named && named->names && fa_config_parse(named, tok, &iv)) /* pipeline=tma_ws_pp */
          o->values[o->nvalues++] = (FaConst){.kind = CK_INT, .i = iv};
        else if (!fa_const_parse(tok, &o->values[o->nvalues++]))
          return usage_error("--only %s: '%s' is not a value", name, tok);
      }
      if (o->nvalues == 0) return usage_error("--only %s: no values", name);
    } else if (option(argc, argv, &i, "--jobs", &v, &status) || option(argc, argv, &i, "-j", &v, &status)) {
      if (!v) return status;
      if (!parse_int(v, 1, 1024, &opt->jobs)) return usage_error("--jobs needs a number from 1 to 1024");
    } else if (option(argc, argv, &i, "--db", &v, &status)) {
      if (!v) return status;
      if (!*v) return usage_error("--db needs a file name");
      opt->db_path = v;
    } else if (option(argc, argv, &i, "--json", &v, &status)) {
      if (!v) return status;
      if (!*v) return usage_error("--json needs a file name");
      opt->json_path = v;
    } else if (option(argc, argv, &i, "--arch", &v, &status)) {
      if (!v) return status;
      opt->arch = v;
    } else if (option(argc, argv, &i, "--runs", &v, &status)) {
      if (!v) return status;
      if (!parse_int(v, 20, 100000, &opt->min_runs)) return usage_error("--runs needs a number of at least 20");
    } else if (option(argc, argv, &i, "--min-ms", &v, &status)) {
      if (!v) return status;
      int ms;
      if (!parse_int(v, 0, 100000, &ms)) return usage_error("--min-ms needs a number of milliseconds from 0 to 100000");
      opt->min_ms = ms;
    } else if (option(argc, argv, &i, "--timeout", &v, &status)) {
      if (!v) return status;
      int s;
      if (!parse_int(v, 0, 86400, &s)) return usage_error("--timeout needs a number of seconds from 0 to 86400");
      opt->timeout_s = s;
    } else if (option(argc, argv, &i, "--top", &v, &status)) {
      if (!v) return status;
      if (!parse_int(v, 0, 100000, &opt->top)) return usage_error("--top needs a number");
    } else if (option(argc, argv, &i, "--device", &v, &status)) {
      if (!v) return status;
      if (!parse_int(v, 0, 1024, &opt->device)) return usage_error("--device needs a device number");
    } else if (option(argc, argv, &i, "--seed", &v, &status)) {
      if (!v) return status;
      int seed;
      if (!parse_int(v, 0, 2147483647, &seed)) return usage_error("--seed needs a non-negative number");
      opt->seed = (uint64_t)seed;
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option '%s'", a);
    } else {
      if (opt->file) return usage_error("one input file, please (got '%s' and '%s')", opt->file, a);
      opt->file = a;
    }
  }
  if (!opt->file) return usage_error("no input file");
  if (opt->arch && opt->mode == TUNE_MODE_TUNE)
    return usage_error("--arch is for --compile-only; tuning compiles for the GPU it runs on");
  return -1;
}

/* ---- the driver ----------------------------------------------------------------------------- */

typedef struct Driver {
  TuneOptions *opt;
  FaCompiler *fc;
  const FaProgram *prog;
  const char *text;             /* the file, for the compile threads */
  size_t len;
  const FaKernelInfo **selected;
  int nselected;
  fadsl_context *ctx;
  fadsl_program *rprog;
  const char *arch;
  int arch_sm;                  /* arch's compute capability: what prunes read as `arch` */
  char gpu[256];
  size_t smem_limit;
  char *db_path;
  TuneProgress *progress;
  TuneJob **jobs;
  int njobs, capjobs;
  int remaining;                /* launches of selected kernels left in the current problem */
  bool store_failed;
  /* where the time outside the search went (seconds) */
  double context_s;             /* context, device, program loaded */
  double fill_s, copy_s, launch_s;   /* over all problems run (TuneRun's) */
  double setup_seen;            /* fill + copy + launch of the current run at the last job */
  int nbufs, nmade;             /* buffers the problems allocate, and those made on the device */
  size_t bytes_made;
} Driver;

static bool is_selected(const Driver *d, const FaKernelInfo *k) {
  for (int i = 0; i < d->nselected; i++)
    if (d->selected[i] == k) return true;
  return false;
}

static int count_launches(const Driver *d, const NodeList *body) {
  int n = 0;
  for (int i = 0; i < body->len; i++) {
    const Node *s = body->items[i];
    if (s->kind == N_EXPR_STMT && s->lhs && s->lhs->kind == N_CALL && s->lhs->lhs && s->lhs->lhs->kind == N_NAME) {
      const FaKernelInfo *k = fa_program_kernel(d->prog, s->lhs->lhs->name);
      n += k && is_selected(d, k);
    } else if (s->kind == N_IF) {
      n += count_launches(d, &s->body) + count_launches(d, &s->orelse);
    }
  }
  return n;
}

static bool same_key(const TuneJob *a, const TuneJob *b) {
  if (a->kernel != b->kernel || a->nkey != b->nkey || a->nfixed != b->nfixed) return false;
  StrBuf x, y;
  fa_sb_init(&x);
  fa_sb_init(&y);
  fa_bindings_print(a->fixed, a->nfixed, &x);
  fa_bindings_print(b->fixed, b->nfixed, &y);
  bool same = !strcmp(a->key_label, b->key_label) && !strcmp(x.data ? x.data : "", y.data ? y.data : "");
  fa_sb_free(&x);
  fa_sb_free(&y);
  return same;
}

static bool add_job(Driver *d, TuneJob *job) {
  if (d->njobs == d->capjobs) {
    int cap = d->capjobs ? 2 * d->capjobs : 8;
    TuneJob **j = realloc(d->jobs, sizeof *j * (size_t)cap);
    if (!j) return false;
    d->jobs = j;
    d->capjobs = cap;
  }
  d->jobs[d->njobs++] = job;
  return true;
}

static FaTuneTiming timing_of(const TuneCand *c) {
  FaTuneTiming t = {c->cfg.values, c->cfg.nvalues, c->cfg.config, c->median_ms};
  return t;
}

static bool store_job(Driver *d, const TuneJob *job) {
  const TuneCand *w = &job->cands[job->winner];
  FaTuneEntry e;
  memset(&e, 0, sizeof e);
  e.program = d->opt->file;
  e.kernel = job->kernel->name;
  e.key = job->key;
  e.nkey = job->nkey;
  e.exact_keys = job->exact_keys;
  e.nexact_keys = job->nexact;
  e.gpu_name = d->gpu;
  e.arch = d->arch;
  e.fadsl_version = PACKAGE_VERSION;
  e.best = timing_of(w);
  e.dflt.median_ms = -1;
  if (job->default_cand >= 0 && job->cands[job->default_cand].status == TUNE_OK)
    e.dflt = timing_of(&job->cands[job->default_cand]);
  e.tflops = w->tflops;
  /* the runners-up, fastest first */
  FaTuneTiming ru[5];
  int nru = 0;
  double last = w->median_ms;
  for (int r = 0; r < 5; r++) {
    const TuneCand *next = NULL;
    for (int i = 0; i < job->ncands; i++) {
      const TuneCand *c = &job->cands[i];
      if (c == w || c->status != TUNE_OK || c->dropped || c->median_ms < last) continue;
      bool taken = false;
      for (int j = 0; j < nru; j++) taken |= ru[j].values == c->cfg.values;
      if (!taken && (!next || c->median_ms < next->median_ms)) next = c;
    }
    if (!next) break;
    ru[nru++] = timing_of(next);
    last = next->median_ms;
  }
  e.runners_up = ru;
  e.nrunners_up = nru;
  for (int i = 0; i < job->ncands; i++) e.candidates += job->cands[i].status == TUNE_OK;
  StrBuf err, note;
  fa_sb_init(&err);
  fa_sb_init(&note);
  bool ok = fa_tune_db_store(d->db_path, &e, 1, &err, &note);
  if (note.data && *note.data) fprintf(stderr, "fadsl-tune: warning: %s", note.data);
  if (!ok) fprintf(stderr, "fadsl-tune: error: %s\n", err.data ? err.data : "cannot store the result");
  fa_sb_free(&err);
  fa_sb_free(&note);
  return ok;
}

/* An exact entry in the database, when not forced: its config label. */
static bool already_tuned(Driver *d, TuneJob *job) {
  if (d->opt->force) return false;
  FaTuneQuery q = {d->db_path, d->opt->file, job->kernel->name, job->key, job->nkey, d->gpu, d->arch, PACKAGE_VERSION};
  FaTuneChoice choice;
  if (fa_tune_lookup(&q, &d->fc->arena, &choice) != FA_TUNE_EXACT) return false;
  TuneConfig cfg = {choice.values, choice.nvalues, choice.config};
  job->cached = true;
  job->cached_label = fa_tune_config_label(&d->fc->arena, &cfg);
  return true;
}

/* Launches the kernel as any libfadsl program would (config left open) and
 * records where libfadsl took the config from: after tuning, "tuned" shows
 * that the database entry is found and used. */
static void verify_launch(Driver *d, TuneRun *run, TuneJob *job, fadsl_kernel *k) {
  StrBuf err;
  fa_sb_init(&err);
  fadsl_args *a = fa_tune_make_args(run, &job->launch, k, NULL, &err);
  fadsl_kernel_info info;
  fadsl_status st = a ? fadsl_launch(k, a, NULL, &info) : FADSL_ERROR_BINDING;
  if (st == FADSL_SUCCESS) st = fadsl_synchronize(d->ctx, NULL);
  if (st == FADSL_SUCCESS) {
    job->verify_source = fa_arena_strdup(&d->fc->arena, info.config_source);
    job->verify_config = fa_arena_printf(&d->fc->arena, "%s warps=%d stages=%d", info.constexprs, info.warps, info.stages);
  } else {
    job->verify_source = "failed";
    job->verify_config = fa_arena_strdup(&d->fc->arena, a ? fadsl_context_last_error(d->ctx) : err.data);
  }
  fadsl_args_destroy(a);
  fa_sb_free(&err);
}

static TuneAction on_launch(void *user, TuneRun *run, const TuneLaunch *l, TuneConfig *cfg) {
  Driver *d = user;
  (void)cfg;
  if (d->remaining <= 0) return TUNE_STOP;   /* no launch of a kernel being tuned follows */
  if (!is_selected(d, l->kernel)) return run->on_device ? TUNE_LAUNCH_DEFAULT : TUNE_SKIP;
  d->remaining--;
  double t0 = fa_tune_now();
  TuneJob *job = fa_arena_alloc(&d->fc->arena, sizeof *job);
  if (!job) return TUNE_ABORT;
  job->kernel = l->kernel;
  job->problem = l->problem;
  job->launch = *l;
  if (!fa_tune_space_build(run, job, d->opt)) return TUNE_ABORT;

  /* the same kernel and key again (a problem may launch it twice): once is enough */
  for (int i = 0; i < d->njobs; i++)
    if (same_key(d->jobs[i], job)) return run->on_device ? TUNE_LAUNCH_DEFAULT : TUNE_SKIP;
  if (!add_job(d, job)) return TUNE_ABORT;

  if (job->nsurvivors == 0) {
    fa_error(&d->fc->diag, l->call->loc,
             "no point of the @autotune space of kernel '%s' (%d points) survives %s for %s", l->kernel->name,
             job->space_size, d->opt->nonly ? "the prune and --only" : "the prune", job->key_label);
    run->exit_status = TUNE_EXIT_USAGE;
    return TUNE_ABORT;
  }
  if (d->opt->mode == TUNE_MODE_DRY_RUN) return TUNE_SKIP;

  fadsl_kernel *k = NULL;
  if (fadsl_program_kernel(d->rprog, l->kernel->name, &k) != FADSL_SUCCESS) return TUNE_ABORT;
  /* its buffers, made now if no earlier launch needed them */
  if (!fa_tune_materialise(run, l)) return TUNE_ABORT;
  double setup_now = run->fill_s + run->copy_s + run->launch_s;
  job->setup_s = setup_now - d->setup_seen;
  d->setup_seen = setup_now;
  t0 = fa_tune_now();   /* the search starts here */
  if (d->opt->mode == TUNE_MODE_TUNE && already_tuned(d, job)) {
    verify_launch(d, run, job, k);
    job->wall_s = fa_tune_now() - t0;
    return TUNE_SKIP;   /* the verifying launch produced the outputs */
  }
  /* tuning: each candidate is screened as soon as it is compiled */
  TuneBench *bench = NULL;
  if (d->opt->mode == TUNE_MODE_TUNE && !(bench = fa_tune_bench_begin(run, job, k, d->opt, d->progress)))
    return TUNE_ABORT;
  if (!fa_tune_compile(run, job, k, d->text, d->len, d->arch, d->smem_limit, d->opt->jobs, d->progress,
                       bench ? fa_tune_bench_screen : NULL, bench)) {
    if (bench) fa_tune_bench_finish(bench);
    return TUNE_ABORT;
  }
  if (d->opt->mode == TUNE_MODE_COMPILE_ONLY) {
    job->wall_s = fa_tune_now() - t0;
    return TUNE_SKIP;
  }
  bool ok = fa_tune_bench_finish(bench);
  job->wall_s = fa_tune_now() - t0;
  if (!ok) return TUNE_ABORT;
  if (job->winner >= 0 && !store_job(d, job)) d->store_failed = true;
  /* the following kernels get this one's outputs from a launch that takes
   * its config from the database, as a user's would */
  verify_launch(d, run, job, k);
  return TUNE_SKIP;
}

/* ---- checks of the input ------------------------------------------------------------------- */

static void list_names(StrBuf *sb, const char *const *names, int n) {
  for (int i = 0; i < n; i++) fa_sb_printf(sb, "%s%s", i ? ", " : "", names[i]);
  if (n == 0) fa_sb_puts(sb, "none");
}

static int select_kernels(Driver *d) {
  const FaProgram *p = d->prog;
  d->selected = fa_arena_alloc(&d->fc->arena, sizeof *d->selected * (size_t)(p->nkernels + 1));
  const char **names = fa_arena_alloc(&d->fc->arena, sizeof *names * (size_t)(p->nkernels + 1));
  if (!d->selected || !names) return TUNE_EXIT_FAILED;
  int ntunable = 0;
  for (int i = 0; i < p->nkernels; i++)
    if (p->kernels[i]->ntune > 0) names[ntunable++] = p->kernels[i]->name;
  if (d->opt->kernel) {
    const FaKernelInfo *k = fa_program_kernel(p, d->opt->kernel);
    if (!k) {
      StrBuf sb;
      fa_sb_init(&sb);
      const char **all = fa_arena_alloc(&d->fc->arena, sizeof *all * (size_t)(p->nkernels + 1));
      for (int i = 0; all && i < p->nkernels; i++) all[i] = p->kernels[i]->name;
      list_names(&sb, all, all ? p->nkernels : 0);
      fprintf(stderr, "fadsl-tune: %s has no kernel '%s' (kernels: %s)\n", d->opt->file, d->opt->kernel, sb.data);
      fa_sb_free(&sb);
      return TUNE_EXIT_USAGE;
    }
    if (k->ntune == 0) {
      StrBuf sb;
      fa_sb_init(&sb);
      list_names(&sb, names, ntunable);
      fprintf(stderr, "fadsl-tune: kernel '%s' has no @autotune space, so there is nothing to tune (tunable: %s)\n",
              k->name, sb.data);
      fa_sb_free(&sb);
      return TUNE_EXIT_USAGE;
    }
    d->selected[d->nselected++] = k;
  } else {
    for (int i = 0; i < p->nkernels; i++)
      if (p->kernels[i]->ntune > 0) d->selected[d->nselected++] = p->kernels[i];
    if (d->nselected == 0) {
      fprintf(stderr, "fadsl-tune: %s has no kernel with an @autotune space: nothing to tune\n", d->opt->file);
      return TUNE_EXIT_USAGE;
    }
  }
  /* each one needs a problem that launches it */
  for (int i = 0; i < d->nselected; i++) {
    bool launched = false;
    for (int j = 0; j < p->nproblems; j++) launched |= fa_tune_problem_launches(p->problems[j], d->selected[i]->name);
    if (!launched) {
      fprintf(stderr,
              "fadsl-tune: kernel '%s' has no problem description: no @problem def in %s launches it, so "
              "fadsl-tune cannot run it (add one, e.g.\n"
              "    @problem(N=1024)\n"
              "    def my_problem(N):\n"
              "        x = randn((N,), f32)\n"
              "        %s(x, ...)\n"
              "or choose another kernel with --kernel)\n",
              d->selected[i]->name, d->opt->file, d->selected[i]->name);
      return TUNE_EXIT_USAGE;
    }
  }
  return TUNE_EXIT_OK;
}

static int check_sizes_and_axes(Driver *d) {
  const FaProgram *p = d->prog;
  for (int i = 0; i < d->opt->nsizes; i++) {
    bool known = false;
    for (int j = 0; j < p->nproblems; j++)
      for (int s = 0; s < p->problems[j]->nsizes; s++) known |= !strcmp(p->problems[j]->sizes[s].name, d->opt->sizes[i].name);
    if (!known) {
      StrBuf sb;
      fa_sb_init(&sb);
      for (int j = 0; j < p->nproblems; j++) {
        fa_sb_printf(&sb, "%sproblem '%s': ", j ? "; " : "", p->problems[j]->name);
        for (int s = 0; s < p->problems[j]->nsizes; s++)
          fa_sb_printf(&sb, "%s%s", s ? ", " : "", p->problems[j]->sizes[s].name);
      }
      fprintf(stderr, "fadsl-tune: unknown size '%s' (%s)\n", d->opt->sizes[i].name,
              sb.data ? sb.data : "the file has no @problem");
      fa_sb_free(&sb);
      return TUNE_EXIT_USAGE;
    }
  }
  for (int i = 0; i < d->opt->nonly; i++) {
    bool known = false;
    for (int k = 0; k < d->nselected; k++)
      for (int t = 0; t < d->selected[k]->ntune; t++) known |= !strcmp(d->selected[k]->tune[t].name, d->opt->only[i].name);
    if (!known) {
      fprintf(stderr, "fadsl-tune: --only %s: no kernel being tuned has an @autotune axis of that name\n",
              d->opt->only[i].name);
      return TUNE_EXIT_USAGE;
    }
  }
  return TUNE_EXIT_OK;
}

/* The shared memory a block may use on an architecture, for --compile-only
 * without that GPU (bytes; 0: unknown, no check). */
static size_t arch_smem_limit(const char *arch) {
  int sm = 0;
  if (sscanf(arch, "sm_%d", &sm) != 1) return 0;
  switch (sm) {
    case 70: case 72: return 96 * 1024;
    case 75: return 64 * 1024;
    case 80: case 87: return 163 * 1024;
    case 86: case 89: return 99 * 1024;
    case 90: case 100: case 103: return 227 * 1024;
    case 120: return 99 * 1024;
    default: return 0;
  }
}

/* Sets d->arch and the compute capability prunes read (d->arch_sm). */
static int set_arch(Driver *d, const char *arch) {
  FaCudaTarget target;
  if (!fa_cuda_target_parse(arch, &target)) {
    fprintf(stderr, "fadsl-tune: unknown GPU architecture '%s' (expected e.g. sm_80 or sm_90a)\n", arch);
    return TUNE_EXIT_USAGE;
  }
  d->arch = fa_arena_strdup(&d->fc->arena, arch);
  d->arch_sm = target.sm;
  return TUNE_EXIT_OK;
}

static int setup_device(Driver *d) {
  TuneOptions *opt = d->opt;
  /* a dry run touches no GPU: its space is --arch's, else sm_90a's, as
     --compile-only's without a GPU */
  if (opt->mode == TUNE_MODE_DRY_RUN) return set_arch(d, opt->arch ? opt->arch : "sm_90a");
  double t0 = fa_tune_now();
  fadsl_status st = fadsl_context_create(opt->device, &d->ctx);
  if (!d->ctx) {
    fprintf(stderr, "fadsl-tune: cannot create a context: %s\n", fadsl_status_string(st));
    return TUNE_EXIT_FAILED;
  }
  fadsl_device_info info;
  bool have_gpu = st == FADSL_SUCCESS && fadsl_context_device_info(d->ctx, &info) == FADSL_SUCCESS;
  if (opt->mode == TUNE_MODE_TUNE) {
    if (!have_gpu) {
      fprintf(stderr, "fadsl-tune: no GPU to tune on: %s\n(--dry-run and --compile-only work without one)\n",
              fadsl_context_last_error(d->ctx));
      return TUNE_EXIT_NO_GPU;
    }
    snprintf(d->gpu, sizeof d->gpu, "%s", info.name);
    int status = set_arch(d, info.arch);
    if (status != TUNE_EXIT_OK) return status;
    d->smem_limit = info.shared_per_block_optin;
    d->db_path = opt->db_path ? strdup(opt->db_path) : fa_tune_db_default_path();
    if (!d->db_path) {
      fprintf(stderr, "fadsl-tune: no place for the tuning database (set HOME or XDG_CACHE_HOME, or use --db)\n");
      return TUNE_EXIT_USAGE;
    }
    StrBuf why;
    fa_sb_init(&why);
    if (!fa_tune_db_check(d->db_path, &why))
      fprintf(stderr, "fadsl-tune: warning: %s; it will be kept aside and replaced when results are stored\n", why.data);
    fa_sb_free(&why);
    fadsl_context_set_tune_db(d->ctx, d->db_path);
  } else {
    /* --compile-only: the GPU's architecture when there is one, else --arch or sm_90a */
    const char *arch = opt->arch ? opt->arch : have_gpu ? info.arch : "sm_90a";
    int status = set_arch(d, arch);
    if (status != TUNE_EXIT_OK) return status;
    d->smem_limit = have_gpu && !strcmp(arch, info.arch) ? info.shared_per_block_optin : arch_smem_limit(arch);
    if (have_gpu) snprintf(d->gpu, sizeof d->gpu, "%s", info.name);
    /* compile without the device: a context that only compiles */
    fadsl_context_destroy(d->ctx);
    d->ctx = NULL;
    st = fadsl_context_create(-1, &d->ctx);
    if (st != FADSL_SUCCESS) {
      fprintf(stderr, "fadsl-tune: cannot create a context: %s\n", fadsl_status_string(st));
      return TUNE_EXIT_FAILED;
    }
  }
  st = fadsl_program_load_file(d->ctx, opt->file, &d->rprog);
  if (st != FADSL_SUCCESS) {
    fprintf(stderr, "fadsl-tune: loading %s failed: %s\n", opt->file, fadsl_context_last_error(d->ctx));
    return TUNE_EXIT_FAILED;
  }
  d->context_s = fa_tune_now() - t0;
  return TUNE_EXIT_OK;
}

static int run_problems(Driver *d) {
  const FaProgram *p = d->prog;
  for (int j = 0; j < p->nproblems; j++) {
    const FaProblemInfo *pr = p->problems[j];
    d->remaining = count_launches(d, &pr->fn->body);
    if (d->remaining == 0) continue;
    TuneRun run;
    memset(&run, 0, sizeof run);
    run.fc = d->fc;
    run.prog = p;
    run.opt = d->opt;
    run.ctx = d->ctx;
    run.rprog = d->rprog;
    run.on_device = d->opt->mode == TUNE_MODE_TUNE;
    run.arch = d->arch_sm;
    run.hook = on_launch;
    run.user = d;
    d->setup_seen = 0;
    int status = fa_tune_run_problem(&run, pr);
    d->fill_s += run.fill_s;
    d->copy_s += run.copy_s;
    d->launch_s += run.launch_s;
    d->nbufs += run.nbufs;
    d->nmade += run.nmade;
    d->bytes_made += run.bytes_made;
    fa_tune_run_release(&run);
    if (status != TUNE_EXIT_OK) return status;
  }
  return TUNE_EXIT_OK;
}

static int report(Driver *d, double wall_s) {
  TuneOptions *opt = d->opt;
  int status = TUNE_EXIT_OK;
  /* with --json -, standard output is the JSON document's */
  FILE *out = opt->json_path && !strcmp(opt->json_path, "-") ? stderr : stdout;
  for (int i = 0; i < d->njobs; i++) {
    TuneJob *job = d->jobs[i];
    if (i) fputc('\n', out);
    if (opt->mode == TUNE_MODE_DRY_RUN) {
      fa_tune_print_dry_run(out, job);
      continue;
    }
    if (opt->mode == TUNE_MODE_COMPILE_ONLY) {
      fa_tune_print_compile_only(out, job);
      bool any = false;
      for (int c = 0; c < job->ncands; c++) any |= job->cands[c].status == TUNE_OK;
      if (!any) status = TUNE_EXIT_FAILED;
      continue;
    }
    fa_tune_print_summary(out, job, opt);
    if (!job->cached && job->winner < 0) status = TUNE_EXIT_FAILED;
  }
  if (opt->mode == TUNE_MODE_TUNE) {
    int stored = 0;
    for (int i = 0; i < d->njobs; i++) stored += !d->jobs[i]->cached && d->jobs[i]->winner >= 0;
    double search = 0;
    for (int i = 0; i < d->njobs; i++) search += d->jobs[i]->wall_s;
    double setup = d->context_s + d->fill_s + d->copy_s + d->launch_s;
    fprintf(out, "\n%d result%s stored in %s; %.1f s in all\n", stored, stored == 1 ? "" : "s", d->db_path, wall_s);
    fprintf(out,
            "  setup %.2f s (context and program %.2f s; %d of %d buffers made, %.1f MiB: generate %.2f s, "
            "allocate/copy/memset %.2f s; earlier kernels %.2f s), search %.2f s, other %.2f s\n",
            setup, d->context_s, d->nmade, d->nbufs, d->bytes_made / 1048576.0, d->fill_s, d->copy_s, d->launch_s,
            search, wall_s - setup - search);
    if (d->store_failed) status = TUNE_EXIT_FAILED;
  } else if (opt->mode == TUNE_MODE_COMPILE_ONLY) {
    fprintf(out, "\ncompiled for %s with %d thread%s; %.1f s in all\n", d->arch, opt->jobs, opt->jobs == 1 ? "" : "s", wall_s);
  } else if (d->njobs > 0) {
    fprintf(out, "\npruned for %s (prunes read arch = %d; --arch to choose another)\n", d->arch, d->arch_sm);
  }
  fflush(out);
  if (opt->json_path) {
    TuneEnv env = {d->gpu[0] ? d->gpu : NULL, d->arch, PACKAGE_VERSION, d->db_path};
    if (!fa_tune_write_json(opt->json_path, opt, &env, d->jobs, d->njobs, wall_s)) status = TUNE_EXIT_FAILED;
  }
  return status;
}

static int tune_file(TuneOptions *opt, FaCompiler *fc) {
  double t0 = fa_tune_now();
  Driver d;
  memset(&d, 0, sizeof d);
  d.opt = opt;
  d.fc = fc;
  size_t len = 0;
  char *text = fa_read_file(opt->file, &len);
  if (!text) {
    fprintf(stderr, "fadsl-tune: cannot read %s: %s\n", opt->file, strerror(errno));
    return TUNE_EXIT_USAGE;
  }
  d.text = text;
  d.len = len;
  int status = TUNE_EXIT_FAILED;
  Source *src = fa_source_new(fc, opt->file, text, len);
  const Node *m = src ? fa_parse(fc, src) : NULL;
  d.prog = m ? fa_program_check(fc, m) : NULL;
  if (!d.prog || fc->diag.errors) goto done;
  if ((status = select_kernels(&d)) != TUNE_EXIT_OK) goto done;
  if ((status = check_sizes_and_axes(&d)) != TUNE_EXIT_OK) goto done;
  if ((status = setup_device(&d)) != TUNE_EXIT_OK) goto done;
  d.progress = fa_tune_progress_new(stderr, opt->tty, opt->quiet || opt->mode == TUNE_MODE_DRY_RUN);
  if (opt->mode != TUNE_MODE_DRY_RUN && !opt->quiet)
    fprintf(stderr, "fadsl-tune: %s on %s (%s), %d compile thread%s%s%s\n", opt->file, d.gpu[0] ? d.gpu : "no GPU",
            d.arch, opt->jobs, opt->jobs == 1 ? "" : "s", d.db_path ? ", database " : "", d.db_path ? d.db_path : "");
  status = run_problems(&d);
  if (status == TUNE_EXIT_OK && fc->diag.errors) status = TUNE_EXIT_FAILED;
  if (status == TUNE_EXIT_OK || (status == TUNE_EXIT_FAILED && d.njobs > 0)) {
    int st = report(&d, fa_tune_now() - t0);
    if (status == TUNE_EXIT_OK) status = st;
  }
done:
  for (int i = 0; i < d.njobs; i++)
    for (int c = 0; c < d.jobs[i]->ncands; c++) fadsl_args_destroy(d.jobs[i]->cands[c].args);
  fa_tune_progress_free(d.progress);
  if (d.rprog) fadsl_program_destroy(d.rprog);
  if (d.ctx) fadsl_context_destroy(d.ctx);
  free(d.jobs);
  free(d.db_path);
  free(text);
  return status;
}

int main(int argc, char **argv) {
  TuneOptions opt;
  memset(&opt, 0, sizeof opt);
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  int status = parse_args(argc, argv, &fc.arena, &opt);
  if (status < 0) {
    opt.tty = isatty(STDERR_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb") != 0;
    status = tune_file(&opt, &fc);
  }
  fa_compiler_free(&fc);
  return status;
}
