/* bench.c - timing the compiled candidates of one launch, and checking
 * that they compute the same thing.
 *
 * Per candidate:
 *   1. the buffers an earlier candidate wrote are restored from a snapshot
 *      taken before the first, so every candidate starts from the same data
 *      (outputs poisoned with NaN where the problem allocated them `empty`);
 *   2. one launch, then every buffer of the launch is read back and compared
 *      with what the first valid candidate (the reference) left: bytes equal,
 *      or elements within the dtype's relative error bound (f16 2e-3, bf16
 *      1e-2, f32 1e-4, in the norm ||a - b|| / ||b||), with NaN and infinity
 *      in the same places.  A candidate that disagrees is rejected and
 *      reported as a compiler bug;
 *   3. warm-up launches, then at least opt->min_runs timed launches, each
 *      between two CUDA events, each after a memset of a buffer much larger
 *      than the L2 cache, so that no run finds its inputs in the cache left
 *      by the previous one.  The memset also keeps the GPU busy while the
 *      host prepares the launch, so the host's time is not measured; when
 *      one memset is shorter than the host's launch time, more are queued.
 *      The median is the candidate's time.
 * The buffers are restored at the end, so that the problem continues from
 * the state it had. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

enum { FLUSH_BYTES = 256 << 20, WARMUP_RUNS = 3, MAX_RUNS = 200 };
static const double TIME_BUDGET_S = 0.3;   /* per candidate, for choosing the number of runs */

typedef struct BenchBuf {
  int buffer;                   /* index into run->bufs */
  void *snapshot;               /* the contents before the first candidate */
  void *reference;              /* after the reference candidate's launch */
  void *scratch;                /* after the current candidate's launch */
  bool dirty;                   /* some candidate changed it: restore before the next */
  const char *param;            /* the parameter it is passed as (first one) */
} BenchBuf;

typedef struct Bench {
  TuneRun *run;
  TuneJob *job;
  fadsl_kernel *k;
  BenchBuf *bufs;
  int nbufs;
  uint64_t flush;               /* 0: no flush buffer */
  size_t flush_bytes;
  int flush_reps;               /* memsets per timed run */
  unsigned char flush_byte;
  void *ev_start, *ev_end;
  bool broken;                  /* the context is unusable after a failure */
} Bench;

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

static bool launch_once(Bench *b, TuneCand *c, bool sync) {
  fadsl_status st = fadsl_launch(b->k, c->args, NULL, NULL);
  if (st == FADSL_SUCCESS && sync) st = fadsl_synchronize(ctx_of(b), NULL);
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
    fa_tune_compare(bb->scratch, bb->reference, tb->dtype, tb->count, &cmp);
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
  if (!b->flush) return;
  double host = 0;
  for (int i = 0; i < 2; i++) {
    double t0 = fa_tune_now();
    if (fadsl_launch(b->k, c->args, NULL, NULL) != FADSL_SUCCESS) return;
    host = fa_tune_now() - t0;   /* the second: the variant is found in memory */
  }
  float ms = 0;
  if (fadsl_synchronize(ctx_of(b), NULL) != FADSL_SUCCESS ||
      fadsl_event_record(ctx_of(b), b->ev_start, NULL) != FADSL_SUCCESS ||
      fadsl_memset(ctx_of(b), b->flush, 0, b->flush_bytes) != FADSL_SUCCESS ||
      fadsl_event_record(ctx_of(b), b->ev_end, NULL) != FADSL_SUCCESS ||
      fadsl_event_elapsed_ms(ctx_of(b), b->ev_start, b->ev_end, &ms) != FADSL_SUCCESS || ms <= 0)
    return;
  double need = 3 * host * 1e3;   /* ms, with a margin */
  b->flush_reps = (int)ceil(need / ms);
  if (b->flush_reps < 1) b->flush_reps = 1;
  if (b->flush_reps > 64) b->flush_reps = 64;
}

/* One timed run: flush, event, launch, event.  Milliseconds, or < 0. */
static double timed_run(Bench *b, TuneCand *c) {
  fadsl_context *ctx = ctx_of(b);
  for (int r = 0; b->flush && r < b->flush_reps; r++) {
    b->flush_byte++;
    if (fadsl_memset(ctx, b->flush, b->flush_byte, b->flush_bytes) != FADSL_SUCCESS) return -1;
  }
  if (fadsl_event_record(ctx, b->ev_start, NULL) != FADSL_SUCCESS) return -1;
  fadsl_status st = fadsl_launch(b->k, c->args, NULL, NULL);
  if (st != FADSL_SUCCESS) {
    fail_cand(b, c, "launch", "%s: %s", fadsl_status_string(st), fadsl_context_last_error(ctx));
    return -2;
  }
  float ms = 0;
  if (fadsl_event_record(ctx, b->ev_end, NULL) != FADSL_SUCCESS ||
      fadsl_event_elapsed_ms(ctx, b->ev_start, b->ev_end, &ms) != FADSL_SUCCESS)
    return -1;
  return ms;
}

static void time_candidate(Bench *b, TuneCand *c, int min_runs) {
  for (int i = 0; i < WARMUP_RUNS; i++)
    if (!launch_once(b, c, false)) return;
  double first = timed_run(b, c);
  if (first < 0) {
    if (first == -1) fail_cand(b, c, "launch", "timing failed: %s", fadsl_context_last_error(ctx_of(b)));
    if (!context_alive(b)) b->broken = true;
    return;
  }
  int runs = min_runs;
  double per_run_s = first * 1e-3 + 1e-5 * (b->flush_reps + 1);
  if (runs * per_run_s < TIME_BUDGET_S) runs = (int)(TIME_BUDGET_S / per_run_s);
  if (runs > MAX_RUNS) runs = MAX_RUNS;
  if (runs < min_runs) runs = min_runs;
  double *t = malloc(sizeof *t * (size_t)runs);
  if (!t) return;
  for (int r = 0; r < runs; r++) {
    t[r] = timed_run(b, c);
    if (t[r] < 0) {
      if (t[r] == -1) fail_cand(b, c, "launch", "timing failed: %s", fadsl_context_last_error(ctx_of(b)));
      if (!context_alive(b)) b->broken = true;
      free(t);
      return;
    }
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_double);
  c->runs = runs;
  c->min_ms = t[0];
  c->max_ms = t[runs - 1];
  c->median_ms = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
  if (b->job->has_flops && c->median_ms > 0) c->tflops = b->job->flops / (c->median_ms * 1e-3) / 1e12;
  free(t);
}

bool fa_tune_bench(TuneRun *run, TuneJob *job, fadsl_kernel *k, const TuneOptions *opt, TuneProgress *progress) {
  Bench b;
  memset(&b, 0, sizeof b);
  b.run = run;
  b.job = job;
  b.k = k;
  fadsl_context *ctx = run->ctx;
  double t0 = fa_tune_now();
  bool ok = setup_buffers(&b) && fadsl_event_create(ctx, &b.ev_start) == FADSL_SUCCESS &&
            fadsl_event_create(ctx, &b.ev_end) == FADSL_SUCCESS;
  if (!ok) {
    fa_error(&run->fc->diag, job->launch.call->loc, "preparing to time kernel '%s' failed: %s", job->kernel->name,
             fadsl_context_last_error(ctx));
    free_buffers(&b);
    fadsl_event_destroy(ctx, b.ev_start);
    fadsl_event_destroy(ctx, b.ev_end);
    return false;
  }
  /* the L2 flush buffer: as large as memory allows, up to FLUSH_BYTES */
  size_t free_mem = 0, total = 0;
  fadsl_mem_info(ctx, &free_mem, &total);
  for (size_t bytes = FLUSH_BYTES; bytes >= (16u << 20) && !b.flush; bytes /= 2)
    if (bytes < free_mem / 4 && fadsl_malloc(ctx, bytes, &b.flush) == FADSL_SUCCESS) b.flush_bytes = bytes;
  if (!b.flush && !opt->quiet)
    fprintf(stderr, "fadsl-tune: warning: no memory for an L2 flush buffer; timings may be flattered by the cache\n");

  int ntime = 0;
  for (int i = 0; i < job->ncands; i++) ntime += job->cands[i].status == TUNE_OK && job->cands[i].same_source_as < 0;
  fa_tune_progress_begin(progress, "time", job->kernel->name, ntime);
  bool calibrated = false;
  for (int i = 0; i < job->ncands; i++) {
    TuneCand *c = &job->cands[i];
    if (c->status != TUNE_OK || c->same_source_as >= 0) continue;
    if (b.broken) {
      fail_cand(&b, c, "launch", "not timed: the GPU context was lost after an earlier candidate failed");
      fa_tune_progress_step(progress, NULL);
      continue;
    }
    if (check_outputs(&b, c)) {
      if (!calibrated) {
        calibrate(&b, c);
        calibrated = true;
      }
      time_candidate(&b, c, opt->min_runs);
    }
    char line[600];
    if (c->status == TUNE_OK)
      snprintf(line, sizeof line, "%s: %.4f ms (median of %d)", c->label, c->median_ms, c->runs);
    else
      snprintf(line, sizeof line, "%s: rejected (%s)", c->label, c->stage ? c->stage : "?");
    fa_tune_progress_step(progress, line);
  }
  fa_tune_progress_end(progress);
  if (b.broken)
    fa_error(&run->fc->diag, job->launch.call->loc,
             "the GPU context is unusable after a candidate of kernel '%s' failed; exclude it with --only and run "
             "again",
             job->kernel->name);

  fa_tune_copy_from_same_code(run, job);
  /* the winner: the fastest; of candidates with the same code, the first */
  for (int i = 0; i < job->ncands; i++) {
    const TuneCand *c = &job->cands[i];
    if (c->status == TUNE_OK && c->median_ms > 0 && c->same_source_as < 0 &&
        (job->winner < 0 || c->median_ms < job->cands[job->winner].median_ms))
      job->winner = i;
  }
  if (!b.broken) restore_dirty(&b);
  if (b.flush) fadsl_free(ctx, b.flush);
  fadsl_event_destroy(ctx, b.ev_start);
  fadsl_event_destroy(ctx, b.ev_end);
  free_buffers(&b);
  job->time_s = fa_tune_now() - t0;
  return !b.broken;
}
