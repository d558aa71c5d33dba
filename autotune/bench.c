/* bench.c - timing the compiled candidates of one launch, and checking
 * that they compute the same thing.
 *
 * Screening, per candidate, as soon as it is compiled (while later ones
 * still compile):
 *   1. the buffers an earlier candidate wrote are restored from a snapshot
 *      taken before the first, so every candidate starts from the same data
 *      (outputs poisoned with NaN where the problem allocated them `empty`);
 *   2. one launch, then every buffer of the launch is read back and compared
 *      with what the first valid candidate (the reference: the first one
 *      in the space's order) left: bytes equal, or elements within the dtype's relative
 *      error bound (f16 2e-3, bf16 1e-2, f32 1e-4, in the norm
 *      ||a - b|| / ||b||), with NaN and infinity in the same places.  A
 *      candidate that disagrees is rejected and reported as a compiler bug;
 *   3. two warm-up launches, then TUNE_SCREEN_RUNS timed runs.
 * Final round, once every candidate is screened: those whose screening
 * median is at most TUNE_SCREEN_FACTOR times the best one's, and the default
 * configuration (the speed-up is measured against it), get TUNE_WARMUP_MS of
 * warm-up runs and then at least opt->min_runs timed runs and opt->min_ms of
 * them (the number estimated from the screening median); their median and
 * minimum are of these runs only.  The others are dropped with their
 * screening statistics.  The duration matters on GPUs that hold their
 * highest clock only briefly under full load (an H200 timed 13% faster in
 * 20 runs after an idle spell than in 200 ms of runs): benchmarks, and the
 * peers they compare with, time sustained work.
 *
 * A timed run is: a memset of a buffer twice the size of the L2 cache (so
 * that no run finds its inputs in the cache the previous run left), an
 * event, the launch, an event.  The runs of a round are queued back to back
 * and read afterwards, so the GPU does not wait for the host between runs;
 * the memset before each launch also covers the host's time to issue it
 * (when one memset is shorter than that, more are queued).
 * The buffers are restored at the end, so that the problem continues from
 * the state it had. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tune.h"

enum {
  FLUSH_FALLBACK_BYTES = 256 << 20,
  FLUSH_MIN_BYTES = 8 << 20,
  SCREEN_WARMUP = 2,
  FINAL_WARMUP = 1,
  MAX_BATCH = 128,              /* timed runs queued before their times are read */
};

typedef struct BenchBuf {
  int buffer;                   /* index into run->bufs */
  void *snapshot;               /* the contents before the first candidate */
  void *reference;              /* after the reference candidate's launch */
  void *scratch;                /* after the current candidate's launch */
  bool dirty;                   /* some candidate changed it: restore before the next */
  const char *param;            /* the parameter it is passed as (first one) */
} BenchBuf;

struct TuneBench {
  TuneRun *run;
  TuneJob *job;
  fadsl_kernel *k;
  const TuneOptions *opt;
  TuneProgress *progress;
  BenchBuf *bufs;
  int nbufs;
  uint64_t flush;               /* 0: no flush buffer */
  size_t flush_bytes;
  int flush_reps;               /* memsets per timed run */
  unsigned char flush_byte;
  void **ev;                    /* two per timed run of a round */
  int nev;
  double *times;                /* one per timed run of a round */
  int ntimes;                   /* room in times */
  bool calibrated;
  bool broken;                  /* the context is unusable after a failure */
  double busy_s;                /* time spent here (the job's time_s) */
};
typedef struct TuneBench Bench;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static fadsl_context *ctx_of(Bench *b) { return b->run->ctx; }

static void fail_cand(Bench *b, TuneCand *c, const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_cand(Bench *b, TuneCand *c, const char *stage, const char *fmt, ...) {
  StrBuf sb;
  fa_sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  fa_sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  c->status = TUNE_REJECTED;
  c->stage = stage;
  c->reason = fa_arena_strdup(&b->run->fc->arena, sb.data ? sb.data : "");
  fa_sb_free(&sb);
}

static bool setup_buffers(Bench *b) {
  const TuneLaunch *l = &b->job->launch;
  const FaKernelInfo *k = l->kernel;
  b->bufs = calloc((size_t)k->nparams + 1, sizeof *b->bufs);
  if (!b->bufs) return false;
  for (int i = 0; i < k->nparams; i++) {
    if (k->params[i].kind != PARAM_POINTER || l->args[i].buffer < 0) continue;
    bool seen = false;
    for (int j = 0; j < b->nbufs; j++) seen |= b->bufs[j].buffer == l->args[i].buffer;
    if (seen) continue;
    BenchBuf *bb = &b->bufs[b->nbufs++];
    bb->buffer = l->args[i].buffer;
    bb->param = k->params[i].name;
    const TuneBuffer *tb = &b->run->bufs[bb->buffer];
    size_t n = tb->bytes ? tb->bytes : 1;
    bb->snapshot = malloc(n);
    bb->scratch = malloc(n);
    if (!bb->snapshot || !bb->scratch) return false;
    if (tb->bytes && fadsl_memcpy_dtoh(ctx_of(b), bb->snapshot, tb->dptr, tb->bytes) != FADSL_SUCCESS) return false;
  }
  return true;
}

static void free_buffers(Bench *b) {
  for (int i = 0; i < b->nbufs; i++) {
    free(b->bufs[i].snapshot);
    free(b->bufs[i].reference);
    free(b->bufs[i].scratch);
  }
  free(b->bufs);
}

static bool restore_dirty(Bench *b) {
  for (int i = 0; i < b->nbufs; i++) {
    BenchBuf *bb = &b->bufs[i];
    const TuneBuffer *tb = &b->run->bufs[bb->buffer];
    if (bb->dirty && tb->bytes &&
        fadsl_memcpy_htod(ctx_of(b), tb->dptr, bb->snapshot, tb->bytes) != FADSL_SUCCESS)
      return false;
  }
  return true;
}

/* After a failure: is the context still usable? */
static bool context_alive(Bench *b) {
  if (fadsl_synchronize(ctx_of(b), NULL) != FADSL_SUCCESS) return false;
  uint64_t p = 0;
  if (fadsl_malloc(ctx_of(b), 256, &p) != FADSL_SUCCESS) return false;
  bool ok = fadsl_memset(ctx_of(b), p, 0, 256) == FADSL_SUCCESS && fadsl_synchronize(ctx_of(b), NULL) == FADSL_SUCCESS;
  fadsl_free(ctx_of(b), p);
  return ok;
}

/* A candidate whose launch never ends: the GPU cannot be used again in
 * this process (every later call would wait behind it, the clean-up
 * included), so the tuner stops here, naming the candidate. */
static _Noreturn void hung(Bench *b, TuneCand *c) {
  fprintf(stderr,
          "fadsl-tune: error: kernel '%s', %s: %s; the GPU stays busy with it, so tuning stops here (a possible "
          "compiler bug: report it; --only leaves the configuration out)\n",
          b->job->kernel->name, c->label, fadsl_context_last_error(ctx_of(b)));
  fflush(NULL);
  _exit(TUNE_EXIT_FAILED);
}

static bool launch_once(Bench *b, TuneCand *c, bool sync) {
  fadsl_status st = fadsl_launch(b->k, c->args, NULL, NULL);
  if (st == FADSL_SUCCESS && sync)
    st = b->opt->timeout_s > 0 ? fadsl_synchronize_within(ctx_of(b), NULL, b->opt->timeout_s)
                               : fadsl_synchronize(ctx_of(b), NULL);
  if (st == FADSL_ERROR_TIMEOUT) hung(b, c);
  if (st != FADSL_SUCCESS) {
    fail_cand(b, c, "launch", "%s: %s", fadsl_status_string(st), fadsl_context_last_error(ctx_of(b)));
    if (!context_alive(b)) b->broken = true;
    return false;
  }
  return true;
}

/* Step 2: one launch, and its outputs against the reference's. */
static bool check_outputs(Bench *b, TuneCand *c) {
  if (!restore_dirty(b)) {
    fail_cand(b, c, "launch", "restoring the buffers failed: %s", fadsl_context_last_error(ctx_of(b)));
    return false;
  }
  if (!launch_once(b, c, true)) return false;
  bool is_reference = b->job->reference < 0;
  double worst = 0;
  for (int i = 0; i < b->nbufs; i++) {
    BenchBuf *bb = &b->bufs[i];
    const TuneBuffer *tb = &b->run->bufs[bb->buffer];
    if (!tb->bytes) continue;
    if (fadsl_memcpy_dtoh(ctx_of(b), bb->scratch, tb->dptr, tb->bytes) != FADSL_SUCCESS) {
      fail_cand(b, c, "launch", "reading buffer '%s' back failed: %s", tb->name, fadsl_context_last_error(ctx_of(b)));
      if (!context_alive(b)) b->broken = true;
      return false;
    }
    if (memcmp(bb->scratch, bb->snapshot, tb->bytes) != 0) bb->dirty = true;
    if (is_reference) {
      bb->reference = malloc(tb->bytes);
      if (!bb->reference) return false;
      memcpy(bb->reference, bb->scratch, tb->bytes);
      continue;
    }
    if (memcmp(bb->scratch, bb->reference, tb->bytes) == 0) continue;
    TuneCompare cmp;
    fa_tune_compare_threads(bb->scratch, bb->reference, tb->dtype, tb->count, b->opt->jobs, &cmp);
    double tol = fa_tune_tolerance(tb->dtype);
    if (cmp.rel_err > worst) worst = cmp.rel_err;
    if (cmp.nonfinite_mismatch > 0 || !(cmp.rel_err <= tol)) {
      b->job->compiler_bug = true;
      for (int j = 0; j < b->nbufs; j++) b->bufs[j].dirty = true;   /* it may have written anywhere */
      const TuneCand *ref = &b->job->cands[b->job->reference];
      if (cmp.nonfinite_mismatch > 0)
        fail_cand(b, c, "mismatch",
                  "possible compiler bug: buffer '%s' (argument '%s') has %zu NaN/infinite elements where %s has "
                  "finite ones or the reverse (first at element %zu: %g vs %g)",
                  tb->name, bb->param, cmp.nonfinite_mismatch, ref->label, cmp.first_bad,
                  fa_tune_load_element(bb->scratch, tb->dtype, cmp.first_bad),
                  fa_tune_load_element(bb->reference, tb->dtype, cmp.first_bad));
      else
        fail_cand(b, c, "mismatch",
                  "possible compiler bug: buffer '%s' (argument '%s') differs from %s's: relative error %.3g > %.3g "
                  "(%s; largest difference at element %zu: %g vs %g)",
                  tb->name, bb->param, ref->label, cmp.rel_err, tol, fa_dtype_name(tb->dtype), cmp.first_bad,
                  fa_tune_load_element(bb->scratch, tb->dtype, cmp.first_bad),
                  fa_tune_load_element(bb->reference, tb->dtype, cmp.first_bad));
      c->rel_err = cmp.rel_err;
      return false;
    }
  }
  if (is_reference) {
    b->job->reference = (int)(c - b->job->cands);
    bool wrote = false;
    for (int i = 0; i < b->nbufs; i++) wrote |= b->bufs[i].dirty;
    if (!wrote && b->nbufs > 0 && !b->run->opt->quiet)
      fprintf(stderr, "fadsl-tune: warning: kernel '%s' (%s) changed none of its buffers; outputs cannot be compared\n",
              b->job->kernel->name, c->label);
  }
  c->rel_err = worst;
  return true;
}

/* GPU time of one flush, and host time of one launch: enough memsets that
 * the GPU is still busy when the launch arrives. */
static void calibrate(Bench *b, TuneCand *c) {
  b->flush_reps = 1;
  b->job->flush_ms = -1;
  if (!b->flush) return;
  double host = 0;
  for (int i = 0; i < 2; i++) {
    double t0 = fa_tune_now();
    if (fadsl_launch(b->k, c->args, NULL, NULL) != FADSL_SUCCESS) return;
    host = fa_tune_now() - t0;   /* the second: the variant is found in memory */
  }
  float ms = 0;
  if (fadsl_synchronize(ctx_of(b), NULL) != FADSL_SUCCESS ||
      fadsl_event_record(ctx_of(b), b->ev[0], NULL) != FADSL_SUCCESS ||
      fadsl_memset(ctx_of(b), b->flush, 0, b->flush_bytes) != FADSL_SUCCESS ||
      fadsl_event_record(ctx_of(b), b->ev[1], NULL) != FADSL_SUCCESS ||
      fadsl_event_elapsed_ms(ctx_of(b), b->ev[0], b->ev[1], &ms) != FADSL_SUCCESS || ms <= 0)
    return;
  b->job->flush_ms = ms;
  double need = 2 * host * 1e3;   /* ms, with a margin */
  b->flush_reps = (int)ceil(need / ms);
  if (b->flush_reps < 1) b->flush_reps = 1;
  if (b->flush_reps > 64) b->flush_reps = 64;
  b->job->flush_reps = b->flush_reps;
}

/* A failure while timing: recorded on the candidate. */
static void timing_failed(Bench *b, TuneCand *c) {
  if (c->status == TUNE_OK) fail_cand(b, c, "launch", "timing failed: %s", fadsl_context_last_error(ctx_of(b)));
  if (!context_alive(b)) b->broken = true;
}

/* `runs` timed runs queued back to back (at most one event pair per run
 * of a batch), then read into b->times[first..first + runs). */
static bool timed_batch(Bench *b, TuneCand *c, int first, int runs) {
  fadsl_context *ctx = ctx_of(b);
  for (int r = 0; r < runs; r++) {
    for (int f = 0; b->flush && f < b->flush_reps; f++) {
      b->flush_byte++;
      if (fadsl_memset(ctx, b->flush, b->flush_byte, b->flush_bytes) != FADSL_SUCCESS) {
        timing_failed(b, c);
        return false;
      }
    }
    if (fadsl_event_record(ctx, b->ev[2 * r], NULL) != FADSL_SUCCESS) {
      timing_failed(b, c);
      return false;
    }
    fadsl_status st = fadsl_launch(b->k, c->args, NULL, NULL);
    if (st != FADSL_SUCCESS) {
      fail_cand(b, c, "launch", "%s: %s", fadsl_status_string(st), fadsl_context_last_error(ctx));
      if (!context_alive(b)) b->broken = true;
      return false;
    }
    if (fadsl_event_record(ctx, b->ev[2 * r + 1], NULL) != FADSL_SUCCESS) {
      timing_failed(b, c);
      return false;
    }
  }
  for (int r = 0; r < runs; r++) {
    float ms = 0;
    if (fadsl_event_elapsed_ms(ctx, b->ev[2 * r], b->ev[2 * r + 1], &ms) != FADSL_SUCCESS) {
      timing_failed(b, c);
      return false;
    }
    b->times[first + r] = ms;
  }
  return true;
}

/* `runs` timed runs into b->times[0..runs), in batches of the events there are. */
static bool timed_runs(Bench *b, TuneCand *c, int runs) {
  for (int done = 0; done < runs;) {
    int n = runs - done < b->nev / 2 ? runs - done : b->nev / 2;
    if (!timed_batch(b, c, done, n)) return false;
    done += n;
  }
  return true;
}

static bool warm_up(Bench *b, TuneCand *c, int n) {
  for (int i = 0; i < n; i++)
    if (!launch_once(b, c, false)) return false;
  return true;
}

/* Runs enough for `ms` at `each_ms` a run (a screening median), at least
 * `least` and at most TUNE_MAX_RUNS. */
static int final_runs(double ms, double each_ms, int least) {
  double n = each_ms > 0 ? ceil(ms / each_ms) : least;
  if (n > TUNE_MAX_RUNS) n = TUNE_MAX_RUNS;
  return n > least ? (int)n : least;
}

/* Room in b->times for `runs` run times. */
static bool reserve_times(Bench *b, int runs) {
  if (runs <= b->ntimes) return true;
  double *t = realloc(b->times, (size_t)runs * sizeof *t);
  if (!t) return false;
  b->times = t;
  b->ntimes = runs;
  return true;
}

/* The statistics of b->times[0..runs) as the candidate's. */
static void set_stats(Bench *b, TuneCand *c, int runs) {
  c->median_ms = fa_tune_median(b->times, runs);   /* sorts */
  c->min_ms = b->times[0];
  c->max_ms = b->times[runs - 1];
  c->runs = runs;
  c->tflops = b->job->has_flops && c->median_ms > 0 ? b->job->flops / (c->median_ms * 1e-3) / 1e12 : -1;
}

double fa_tune_median(double *t, int n) {
  if (n <= 0) return 0;
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

int fa_tune_screen(const double *screen_ms, int n, double factor, int always, bool *keep) {
  double best = -1;
  for (int i = 0; i < n; i++)
    if (screen_ms[i] > 0 && (best < 0 || screen_ms[i] < best)) best = screen_ms[i];
  int kept = 0;
  for (int i = 0; i < n; i++) {
    keep[i] = screen_ms[i] > 0 && (screen_ms[i] <= factor * best || i == always);
    kept += keep[i];
  }
  return kept;
}

TuneBench *fa_tune_bench_begin(TuneRun *run, TuneJob *job, fadsl_kernel *k, const TuneOptions *opt,
                               TuneProgress *progress) {
  double t0 = fa_tune_now();
  Bench *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->run = run;
  b->job = job;
  b->k = k;
  b->opt = opt;
  b->progress = progress;
  b->flush_reps = 1;
  job->flush_ms = -1;
  job->flush_reps = 1;
  fadsl_context *ctx = run->ctx;
  int maxruns = opt->min_runs > TUNE_SCREEN_RUNS ? opt->min_runs : TUNE_SCREEN_RUNS;
  b->nev = 2 * (maxruns < MAX_BATCH ? maxruns : MAX_BATCH);
  b->ev = calloc((size_t)b->nev, sizeof *b->ev);
  b->times = calloc((size_t)maxruns, sizeof *b->times);
  b->ntimes = maxruns;
  bool ok = b->ev && b->times && setup_buffers(b);
  for (int i = 0; ok && i < b->nev; i++) ok = fadsl_event_create(ctx, &b->ev[i]) == FADSL_SUCCESS;
  if (!ok) {
    fa_error(&run->fc->diag, job->launch.call->loc, "preparing to time kernel '%s' failed: %s", job->kernel->name,
             fadsl_context_last_error(ctx));
    for (int i = 0; b->ev && i < b->nev; i++)
      if (b->ev[i]) fadsl_event_destroy(ctx, b->ev[i]);
    free_buffers(b);
    free(b->ev);
    free(b->times);
    free(b);
    return NULL;
  }
  /* the L2 flush buffer: twice the L2 cache (a guess when the GPU does not say) */
  fadsl_device_info info;
  size_t want = FLUSH_FALLBACK_BYTES;
  if (fadsl_context_device_info(ctx, &info) == FADSL_SUCCESS && info.l2_bytes > 0) {
    want = 2 * info.l2_bytes;
    if (want < FLUSH_MIN_BYTES) want = FLUSH_MIN_BYTES;
    want = (want + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
  }
  size_t free_mem = 0, total = 0;
  fadsl_mem_info(ctx, &free_mem, &total);
  if (want < free_mem / 2 && fadsl_malloc(ctx, want, &b->flush) == FADSL_SUCCESS) b->flush_bytes = want;
  job->flush_bytes = b->flush_bytes;
  if (!b->flush && !opt->quiet)
    fprintf(stderr, "fadsl-tune: warning: no memory for an L2 flush buffer; timings may be flattered by the cache\n");
  b->busy_s = fa_tune_now() - t0;
  return b;
}

void fa_tune_bench_screen(void *bench, TuneCand *c) {
  Bench *b = bench;
  double t0 = fa_tune_now();
  c->screen_ms = -1;
  if (b->broken) {
    fail_cand(b, c, "launch", "not timed: the GPU context was lost after an earlier candidate failed");
  } else if (check_outputs(b, c)) {
    if (!b->calibrated) {
      calibrate(b, c);
      b->calibrated = true;
    }
    if (warm_up(b, c, SCREEN_WARMUP) && timed_runs(b, c, TUNE_SCREEN_RUNS)) {
      set_stats(b, c, TUNE_SCREEN_RUNS);
      c->screen_ms = c->median_ms;
    }
  }
  char line[600];
  if (c->status == TUNE_OK)
    snprintf(line, sizeof line, "%s: screened, %.4f ms (median of %d)", c->label, c->screen_ms, TUNE_SCREEN_RUNS);
  else
    snprintf(line, sizeof line, "%s: rejected (%s)", c->label, c->stage ? c->stage : "?");
  fa_tune_progress_note(b->progress, line);
  b->busy_s += fa_tune_now() - t0;
}

bool fa_tune_bench_finish(TuneBench *b) {
  double t0 = fa_tune_now();
  TuneRun *run = b->run;
  TuneJob *job = b->job;
  fadsl_context *ctx = run->ctx;
  /* the screening decision, over the candidates that run code of their own */
  double *screen = calloc((size_t)job->ncands + 1, sizeof *screen);
  bool *keep = calloc((size_t)job->ncands + 1, sizeof *keep);
  int always = job->default_cand;
  if (always >= 0 && job->cands[always].same_source_as >= 0) always = job->cands[always].same_source_as;
  int nkeep = 0;
  if (screen && keep) {
    for (int i = 0; i < job->ncands; i++) {
      const TuneCand *c = &job->cands[i];
      screen[i] = c->status == TUNE_OK && c->same_source_as < 0 && c->runs > 0 ? c->screen_ms : -1;
    }
    nkeep = fa_tune_screen(screen, job->ncands, TUNE_SCREEN_FACTOR, always, keep);
  }
  fa_tune_progress_begin(b->progress, "time", job->kernel->name, nkeep);
  for (int i = 0; keep && i < job->ncands; i++) {
    TuneCand *c = &job->cands[i];
    if (screen[i] <= 0) continue;
    if (!keep[i]) {
      c->dropped = true;   /* keeps its screening statistics */
      job->ndropped++;
      continue;
    }
    if (b->broken) {
      fail_cand(b, c, "launch", "not timed: the GPU context was lost after an earlier candidate failed");
    } else {
      int warm = final_runs(TUNE_WARMUP_MS, screen[i], FINAL_WARMUP);
      int runs = final_runs(b->opt->min_ms, screen[i], b->opt->min_runs);
      if (!reserve_times(b, runs))
        fail_cand(b, c, "launch", "not timed: out of memory for %d run times", runs);
      else if (warm_up(b, c, warm) && timed_runs(b, c, runs))
        set_stats(b, c, runs);
    }
    char line[600];
    if (c->status == TUNE_OK)
      snprintf(line, sizeof line, "%s: %.4f ms (median of %d)", c->label, c->median_ms, c->runs);
    else
      snprintf(line, sizeof line, "%s: rejected (%s)", c->label, c->stage ? c->stage : "?");
    fa_tune_progress_step(b->progress, line);
  }
  fa_tune_progress_end(b->progress);
  free(screen);
  free(keep);
  if (b->broken)
    fa_error(&run->fc->diag, job->launch.call->loc,
             "the GPU context is unusable after a candidate of kernel '%s' failed; exclude it with --only and run "
             "again",
             job->kernel->name);

  fa_tune_copy_from_same_code(run, job);
  /* the winner: the fastest of the final round; of candidates with the same code, the first */
  for (int i = 0; i < job->ncands; i++) {
    const TuneCand *c = &job->cands[i];
    if (c->status == TUNE_OK && !c->dropped && c->median_ms > 0 && c->same_source_as < 0 &&
        (job->winner < 0 || c->median_ms < job->cands[job->winner].median_ms))
      job->winner = i;
  }
  bool alive = !b->broken;
  if (alive) restore_dirty(b);
  if (b->flush) fadsl_free(ctx, b->flush);
  for (int i = 0; i < b->nev; i++) fadsl_event_destroy(ctx, b->ev[i]);
  free(b->ev);
  free(b->times);
  free_buffers(b);
  job->time_s = b->busy_s + (fa_tune_now() - t0);
  free(b);
  return alive;
}
