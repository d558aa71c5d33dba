/* compile.c - from the surviving points of a space to compiled kernels,
 * as fast as the machine allows.
 *
 * 1. Generate: threads take candidates from a shared counter; each thread
 *    parses the file into its own compiler context (the compiler has no
 *    global state, but a context is not shared between threads) and, per
 *    candidate, specialises and emits CUDA C++ in a fresh context.  This is
 *    cheap (milliseconds) and tells, before any NVRTC run: which candidates
 *    do not specialise (a static_assert, an unsupported shape), which need
 *    more shared memory than the GPU has, and which emit the same source as
 *    an earlier one (e.g. points that differ only in an axis the backend
 *    ignores) -- those need no compile of their own.
 * 2. Compile: `jobs` threads call fadsl_compile for one candidate per
 *    distinct source, so that libfadsl's kernel cache (memory and disk) is
 *    used and filled: a second fadsl-tune run, and the launches that follow,
 *    find the cubins there.  The first candidate (the reference of the output
 *    check) goes first, the others longest first: NVRTC's time grows with the
 *    per-thread size of the tiles (the unrolled code), and one large tile
 *    started last would leave every other thread idle at the end.  The
 *    calling thread takes the reference, then every other candidate as soon
 *    as it is done, checks its resources and hands it to the `ready`
 *    callback (the tuner times it there), so timing overlaps the remaining
 *    compiles.
 * 3. Failures are compiled again one at a time, after the others, to
 *    collect their messages (a context's last error is shared by its
 *    threads). */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../compiler/cuda_backend.h"
#include "tune.h"

typedef struct GenResult GenResult;

typedef struct GenShared {
  TuneJob *job;
  const char *text;
  size_t len;
  const char *file;
  FaCudaTarget target;
  size_t smem_limit;
  FaBinding *constexprs;        /* the launch's constexpr values (not the axes) */
  int nconstexprs;
  FaArgFact *facts;             /* what its runtime arguments give the specialisation */
  int nfacts;
  pthread_mutex_t lock;
  int next;
  struct GenResult *results;    /* one per candidate */
  char *setup_error;            /* a thread could not parse the file */
} GenShared;

static char *first_line(const char *text) {
  if (!text) return strdup("(no message)");
  while (*text == '\n') text++;
  size_t n = strcspn(text, "\n");
  char *s = malloc(n + 1);
  if (s) {
    memcpy(s, text, n);
    s[n] = '\0';
  }
  return s;
}

/* Reason strings live in the job's arena, but threads must not allocate
 * from it: they hand malloc'ed strings over and the main thread copies them. */
struct GenResult {
  char *reason;                 /* malloc'ed; NULL: generated fine */
  const char *stage;
};

/* What makes two candidates run the same machine code the same way: the
 * source without its comment lines (the emitter's header comment names the
 * config, stages included, even where the backend ignores stages), the
 * launch geometry, and the constexpr axes (which the grid may use). */
static void code_hash(const FaCudaKernel *cuda, const TuneConfig *cfg, uint64_t out[2]) {
  StrBuf sb;
  fa_sb_init(&sb);
  for (const char *line = cuda->source; *line;) {
    size_t n = strcspn(line, "\n");
    const char *t = line;
    while (t < line + n && (*t == ' ' || *t == '\t')) t++;
    if (!(t + 1 < line + n && t[0] == '/' && t[1] == '/')) {
      fa_sb_putn(&sb, line, n);
      fa_sb_putc(&sb, '\n');
    }
    line += n;
    if (*line) line++;
  }
  fa_sb_printf(&sb, "\n#launch threads=%d shared=%zu", cuda->threads, cuda->shared_bytes);
  fa_bindings_print(cfg->values, cfg->nvalues, &sb);
  out[0] = fa_hash64(sb.data, sb.len, 0x243f6a8885a308d3ull);
  out[1] = fa_hash64(sb.data, sb.len, 0x13198a2e03707344ull);
  fa_sb_free(&sb);
}

/* The elements each thread holds, summed over the values of a region and
 * the regions inside it, with a dot counted by its multiply-adds per thread
 * over 16 (one instruction does 16 per lane).  Only its order matters: it
 * ranks the candidates of one kernel by how long NVRTC will take. */
static double region_work(const IrRegion *r, int threads) {
  double w = 0;
  for (const IrOp *op = r ? r->first : NULL; op; op = op->next) {
    for (int i = 0; i < op->nresults; i++) {
      const IrType *t = &op->results[i]->type;
      double n = 1;
      for (int d = 0; d < t->rank; d++) n *= t->shape[d];
      w += n / threads;
    }
    if (op->kind == IR_DOT && op->noperands >= 2 && op->operands[0]->type.rank == 2 &&
        op->operands[1]->type.rank == 2) {
      const IrType *a = &op->operands[0]->type, *b = &op->operands[1]->type;
      w += (double)a->shape[0] * a->shape[1] * b->shape[1] / threads / 16;
    }
    for (int i = 0; i < op->nregions; i++) w += region_work(op->regions[i], threads);
  }
  return w;
}

static void generate_one(GenShared *sh, const FaProgram *p, const FaKernelInfo *k, TuneCand *c, GenResult *r) {
  FaCompiler cfc;
  fa_compiler_init(&cfc, NULL);
  int n = sh->nconstexprs;
  FaBinding *b = malloc(sizeof *b * (size_t)(n + c->cfg.nvalues + 1));
  if (!b) {
    r->stage = "specialise";
    r->reason = strdup("out of memory");
    fa_compiler_free(&cfc);
    return;
  }
  memcpy(b, sh->constexprs, sizeof *b * (size_t)n);
  memcpy(b + n, c->cfg.values, sizeof *b * (size_t)c->cfg.nvalues);
  /* the pipeline and schedule the launches will use: FADSL_PIPELINE and
     FADSL_SCHEDULE where the space does not choose them (the runtime reads
     them too, runtime/launch.c) */
  FaLaunchConfig config = c->cfg.config;
  fa_config_from_env(&config, &config, NULL, NULL, 0);
  FaCudaSpec spec = {p, k, b, n + c->cfg.nvalues, config, sh->target, sh->facts, sh->nfacts};
  IrKernel *ir = NULL;
  FaCudaKernel cuda;
  FaCudaStage stage = fa_cuda_compile(&cfc, &spec, &ir, &cuda, NULL);
  free(b);
  if (ir && ir->device) c->work = region_work(ir->device->body, 32 * ir->warps);
  if (stage == FA_CUDA_SPECIALISE_FAILED) {
    r->stage = "specialise";
    r->reason = first_line(cfc.diag.text.data);
  } else if (stage != FA_CUDA_DONE || !cuda.source) {
    r->stage = "generate";
    r->reason = first_line(cfc.diag.text.data);
  } else {
    code_hash(&cuda, &c->cfg, c->src_hash);
    c->shared_bytes = cuda.shared_bytes;
    c->threads = cuda.threads;
    if (sh->smem_limit && cuda.shared_bytes > sh->smem_limit) {
      r->stage = "shared memory";
      StrBuf sb;
      fa_sb_init(&sb);
      fa_sb_printf(&sb, "needs %zu bytes of shared memory; the GPU gives a block at most %zu", cuda.shared_bytes,
                   sh->smem_limit);
      r->reason = fa_sb_take(&sb);
    }
  }
  fa_compiler_free(&cfc);
}


static void *generate_worker(void *arg) {
  GenShared *sh = arg;
  TuneJob *job = sh->job;
  FaCompiler front;
  fa_compiler_init(&front, NULL);
  Source *src = fa_source_new(&front, sh->file, sh->text, sh->len);
  const Node *m = src ? fa_parse(&front, src) : NULL;
  const FaProgram *p = m ? fa_program_check(&front, m) : NULL;
  const FaKernelInfo *k = p ? fa_program_kernel(p, job->kernel->name) : NULL;
  if (!k) {
    pthread_mutex_lock(&sh->lock);
    if (!sh->setup_error) sh->setup_error = first_line(front.diag.text.data);
    pthread_mutex_unlock(&sh->lock);
    fa_compiler_free(&front);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&sh->lock);
    int i = sh->next;
    while (i < job->ncands && job->cands[i].status != TUNE_PENDING) i++;
    sh->next = i + 1;
    pthread_mutex_unlock(&sh->lock);
    if (i >= job->ncands) break;
    generate_one(sh, p, k, &job->cands[i], &sh->results[i]);
  }
  fa_compiler_free(&front);
  return NULL;
}

/* Runs `worker` in up to `jobs` threads (at least one: the caller's). */
static void run_threads(void *(*worker)(void *), void *arg, int jobs, int work) {
  if (jobs > work) jobs = work;
  if (jobs < 1) jobs = 1;
  pthread_t *t = calloc((size_t)jobs, sizeof *t);
  int started = 0;
  for (int i = 1; t && i < jobs; i++)
    if (pthread_create(&t[started], NULL, worker, arg) == 0) started++;
  worker(arg);
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  free(t);
}

static void reject(TuneRun *run, TuneCand *c, const char *stage, const char *reason) {
  c->status = TUNE_REJECTED;
  c->stage = stage;
  c->reason = fa_arena_strdup(&run->fc->arena, reason ? reason : "");
}

static bool generate_all(TuneRun *run, TuneJob *job, const char *text, size_t len, FaCudaTarget target,
                         size_t smem_limit, int jobs) {
  GenShared sh;
  memset(&sh, 0, sizeof sh);
  sh.job = job;
  sh.text = text;
  sh.len = len;
  sh.file = run->opt->file;
  sh.target = target;
  sh.smem_limit = smem_limit;
  sh.results = calloc((size_t)job->ncands + 1, sizeof *sh.results);
  sh.constexprs = fa_arena_alloc(&run->fc->arena, sizeof *sh.constexprs * (size_t)(job->nfixed + 1));
  if (!sh.results || !sh.constexprs) {
    free(sh.results);
    return false;
  }
  for (int i = 0; i < job->nfixed; i++)
    for (int j = 0; j < job->kernel->nparams; j++)
      if (job->kernel->params[j].kind == PARAM_CONSTEXPR && !strcmp(job->kernel->params[j].name, job->fixed[i].name))
        sh.constexprs[sh.nconstexprs++] = job->fixed[i];
  sh.nfacts = fa_tune_launch_facts(run, &job->launch, &sh.facts);
  if (sh.nfacts < 0) {
    free(sh.results);
    return false;
  }
  pthread_mutex_init(&sh.lock, NULL);
  run_threads(generate_worker, &sh, jobs, job->nsurvivors);
  pthread_mutex_destroy(&sh.lock);
  bool ok = !sh.setup_error;
  if (!ok) fa_error(&run->fc->diag, fa_noloc(), "fadsl-tune: re-reading %s failed: %s", sh.file, sh.setup_error);
  for (int i = 0; i < job->ncands; i++) {
    if (sh.results[i].reason) reject(run, &job->cands[i], sh.results[i].stage, sh.results[i].reason);
    free(sh.results[i].reason);
  }
  free(sh.results);
  free(sh.setup_error);
  /* group identical sources: the first candidate of each group compiles it */
  job->nunique_sources = 0;
  for (int i = 0; i < job->ncands; i++) {
    TuneCand *c = &job->cands[i];
    if (c->status != TUNE_PENDING) continue;
    for (int j = 0; j < i && c->same_source_as < 0; j++) {
      const TuneCand *d = &job->cands[j];
      if (d->status == TUNE_PENDING && d->same_source_as < 0 && d->src_hash[0] == c->src_hash[0] &&
          d->src_hash[1] == c->src_hash[1])
        c->same_source_as = j;
    }
    if (c->same_source_as < 0) job->nunique_sources++;
  }
  return ok;
}

/* ---- compiling through libfadsl -------------------------------------------------------- */

typedef struct CompileShared {
  TuneJob *job;
  fadsl_kernel *kernel;
  const char *arch;
  int *order;                   /* candidate indices to compile */
  int norder;
  pthread_mutex_t lock;
  int next;
  fadsl_status *status;         /* per candidate */
  fadsl_kernel_info *info;      /* per candidate */
  TuneProgress *progress;
  pthread_cond_t done_cond;     /* signalled when a compile is done */
  bool *done;                   /* per candidate */
  double last_done;             /* when the last one was done */
} CompileShared;

static void *compile_worker(void *arg) {
  CompileShared *sh = arg;
  for (;;) {
    pthread_mutex_lock(&sh->lock);
    int n = sh->next++;
    pthread_mutex_unlock(&sh->lock);
    if (n >= sh->norder) break;
    int i = sh->order[n];
    TuneCand *c = &sh->job->cands[i];
    double t0 = fa_tune_now();
    sh->status[i] = fadsl_compile(sh->kernel, c->args, sh->arch, &sh->info[i]);
    c->compile_s = fa_tune_now() - t0;
    char line[512];
    snprintf(line, sizeof line, "%s: %s (%.2f s%s)", c->label, sh->status[i] == FADSL_SUCCESS ? "compiled" : "failed",
             c->compile_s,
             sh->status[i] == FADSL_SUCCESS && sh->info[i].cache && strcmp(sh->info[i].cache, "miss")
                 ? ", cached"
                 : "");
    fa_tune_progress_step(sh->progress, line);
    pthread_mutex_lock(&sh->lock);
    sh->done[i] = true;
    sh->last_done = fa_tune_now();
    pthread_cond_signal(&sh->done_cond);
    pthread_mutex_unlock(&sh->lock);
  }
  return NULL;
}

static void take_info(TuneCand *c, const fadsl_kernel_info *info) {
  c->registers = info->registers;
  c->spill_bytes = info->spill_bytes;
  c->local_bytes = info->local_bytes;
  c->shared_bytes = info->shared_bytes;
  c->threads = info->threads;
  c->cache = info->cache;   /* a string constant of libfadsl */
}

void fa_tune_copy_from_same_code(TuneRun *run, TuneJob *job) {
  for (int i = 0; i < job->ncands; i++) {
    TuneCand *c = &job->cands[i];
    if (c->same_source_as < 0 || c->status == TUNE_PRUNED) continue;
    const TuneCand *r = &job->cands[c->same_source_as];
    c->status = r->status;
    c->stage = r->stage;
    c->reason = r->status == TUNE_REJECTED
                    ? fa_arena_printf(&run->fc->arena, "same code as %s: %s", r->label, r->reason ? r->reason : "")
                    : NULL;
    c->registers = r->registers;
    c->spill_bytes = r->spill_bytes;
    c->local_bytes = r->local_bytes;
    c->shared_bytes = r->shared_bytes;
    c->threads = r->threads;
    c->cache = r->cache;
    c->screen_ms = r->screen_ms;
    c->dropped = r->dropped;
    c->median_ms = r->median_ms;
    c->min_ms = r->min_ms;
    c->max_ms = r->max_ms;
    c->runs = r->runs;
    c->rel_err = r->rel_err;
    c->tflops = r->tflops;
  }
}

/* Compile order: the first candidate (the reference) first, the others by
 * decreasing work, ties in the space's order. */
static void order_by_work(const TuneJob *job, int *order, int n) {
  for (int a = 2; a < n; a++) {   /* insertion sort of order[1..n-1]: stable, n is small */
    int i = order[a], b = a;
    while (b > 1 && job->cands[order[b - 1]].work < job->cands[i].work) {
      order[b] = order[b - 1];
      b--;
    }
    order[b] = i;
  }
}

/* Waits for a compile to finish and returns its candidate: the first in the
 * compile order when `first`, else any done one not yet taken. */
static int next_done(CompileShared *sh, bool *taken, bool first) {
  pthread_mutex_lock(&sh->lock);
  int found = -1;
  for (;;) {
    for (int n = 0; n < sh->norder && found < 0; n++) {
      int i = sh->order[n];
      if (taken[i]) continue;
      if (sh->done[i]) found = i;
      if (first) break;   /* only the reference will do */
    }
    if (found >= 0) break;
    pthread_cond_wait(&sh->done_cond, &sh->lock);
  }
  pthread_mutex_unlock(&sh->lock);
  taken[found] = true;
  return found;
}

/* A compiled candidate: its resources, and whether they fit the GPU. */
static bool accept(TuneRun *run, TuneCand *c, const fadsl_kernel_info *info, TuneJob *job, size_t smem_limit) {
  take_info(c, info);
  if (c->cache && !strcmp(c->cache, "miss")) job->ncompiled++;
  if (c->registers > 0 && c->threads > 0 && (long)c->registers * c->threads > FA_REGISTERS_SM) {
    char why[160];
    snprintf(why, sizeof why, "%d registers x %d threads exceed the %d registers of a multiprocessor",
             c->registers, c->threads, FA_REGISTERS_SM);
    reject(run, c, "registers", why);
    return false;
  }
  if (smem_limit && c->shared_bytes > smem_limit) {
    char why[160];
    snprintf(why, sizeof why, "needs %zu bytes of shared memory; the GPU gives a block at most %zu",
             c->shared_bytes, smem_limit);
    reject(run, c, "shared memory", why);
    return false;
  }
  c->status = TUNE_OK;
  return true;
}

bool fa_tune_compile(TuneRun *run, TuneJob *job, fadsl_kernel *k, const char *source_text, size_t source_len,
                     const char *arch, size_t smem_limit, int jobs, TuneProgress *progress, TuneReadyFn ready,
                     void *ready_user) {
  FaCudaTarget target;
  if (!fa_cuda_target_parse(arch, &target)) {
    fa_error(&run->fc->diag, fa_noloc(), "unknown GPU architecture '%s' (expected e.g. sm_80 or sm_90a)", arch);
    return false;
  }
  double t0 = fa_tune_now();
  if (!generate_all(run, job, source_text, source_len, target, smem_limit, jobs)) return false;
  job->emit_s = fa_tune_now() - t0;

  /* arguments for every candidate that runs code of its own */
  StrBuf err;
  fa_sb_init(&err);
  for (int i = 0; i < job->ncands; i++) {
    TuneCand *c = &job->cands[i];
    if (c->status != TUNE_PENDING || c->same_source_as >= 0) continue;
    c->args = fa_tune_make_args(run, &job->launch, k, &c->cfg, &err);
    if (!c->args) {
      reject(run, c, "arguments", err.data);
      err.len = 0;
      if (err.data) err.data[0] = '\0';
    }
  }
  fa_sb_free(&err);

  CompileShared sh;
  memset(&sh, 0, sizeof sh);
  sh.job = job;
  sh.kernel = k;
  sh.arch = arch;
  sh.progress = progress;
  sh.order = calloc((size_t)job->ncands + 1, sizeof *sh.order);
  sh.status = calloc((size_t)job->ncands + 1, sizeof *sh.status);
  sh.info = calloc((size_t)job->ncands + 1, sizeof *sh.info);
  sh.done = calloc((size_t)job->ncands + 1, sizeof *sh.done);
  bool *taken = calloc((size_t)job->ncands + 1, sizeof *taken);
  int *failed = calloc((size_t)job->ncands + 1, sizeof *failed);
  if (!sh.order || !sh.status || !sh.info || !sh.done || !taken || !failed) {
    free(sh.order);
    free(sh.status);
    free(sh.info);
    free(sh.done);
    free(taken);
    free(failed);
    return false;
  }
  pthread_mutex_init(&sh.lock, NULL);
  pthread_cond_init(&sh.done_cond, NULL);
  t0 = fa_tune_now();
  for (int i = 0; i < job->ncands; i++)
    if (job->cands[i].status == TUNE_PENDING && job->cands[i].same_source_as < 0) sh.order[sh.norder++] = i;
  order_by_work(job, sh.order, sh.norder);
  fa_tune_progress_begin(progress, "compile", job->kernel->name, sh.norder);
  /* all `jobs` threads compile; this one waits for their results */
  int nthreads = jobs < sh.norder ? jobs : sh.norder;
  if (nthreads < 1) nthreads = 1;
  pthread_t *threads = calloc((size_t)nthreads, sizeof *threads);
  int started = 0;
  for (int t = 0; threads && t < nthreads; t++)
    if (pthread_create(&threads[started], NULL, compile_worker, &sh) == 0) started++;
  if (started == 0) compile_worker(&sh);   /* no threads: compile everything here first */
  nthreads = started;

  /* take the first candidate first (the reference for the output check,
   * when it compiles), then each other one as soon as it is done; failures
   * are looked at after the others */
  int nfailed = 0;
  for (int n = 0; n < sh.norder; n++) {
    int i = next_done(&sh, taken, n == 0);
    if (sh.status[i] != FADSL_SUCCESS) {
      failed[nfailed++] = i;
      continue;
    }
    if (accept(run, &job->cands[i], &sh.info[i], job, smem_limit) && ready) ready(ready_user, &job->cands[i]);
  }
  for (int t = 0; t < nthreads; t++) pthread_join(threads[t], NULL);
  free(threads);
  fa_tune_progress_end(progress);
  pthread_mutex_destroy(&sh.lock);
  pthread_cond_destroy(&sh.done_cond);
  double compiled_at = sh.last_done > 0 ? sh.last_done : fa_tune_now();

  for (int n = 0; n < nfailed; n++) {
    int i = failed[n];
    TuneCand *c = &job->cands[i];
    /* once more on its own, for a message that is surely this candidate's */
    fadsl_kernel_info info;
    fadsl_status st = fadsl_compile(k, c->args, arch, &info);
    if (st == FADSL_SUCCESS) {   /* it worked this time: keep it */
      if (accept(run, c, &info, job, smem_limit) && ready) ready(ready_user, c);
      continue;
    }
    char *msg = first_line(fadsl_context_last_error(run->ctx));
    StrBuf sb;
    fa_sb_init(&sb);
    fa_sb_printf(&sb, "%s: %s", fadsl_status_string(st), msg ? msg : "");
    reject(run, c, st == FADSL_ERROR_NVRTC ? "compile" : "specialise", sb.data);
    fa_sb_free(&sb);
    free(msg);
  }
  free(failed);
  free(taken);
  job->compile_s = compiled_at - t0;
  fa_tune_copy_from_same_code(run, job);
  free(sh.order);
  free(sh.status);
  free(sh.info);
  free(sh.done);
  return true;
}
