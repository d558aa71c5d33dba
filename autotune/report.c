/* report.c - what fadsl-tune shows: a progress bar while it works (plain
 * lines when stderr is not a terminal), the tables at the end, and the
 * --json document. */
#include "config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tune.h"

double fa_tune_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- progress ------------------------------------------------------------------------ */

struct TuneProgress {
  FILE *out;
  bool tty, quiet;
  pthread_mutex_t lock;
  char what[32];
  char job[128];
  int total, done;
  double t0;
};

TuneProgress *fa_tune_progress_new(FILE *out, bool tty, bool quiet) {
  TuneProgress *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->out = out;
  p->tty = tty;
  p->quiet = quiet;
  pthread_mutex_init(&p->lock, NULL);
  return p;
}

void fa_tune_progress_free(TuneProgress *p) {
  if (!p) return;
  pthread_mutex_destroy(&p->lock);
  free(p);
}

static void draw(TuneProgress *p) {
  enum { WIDTH = 30 };
  int filled = p->total > 0 ? p->done * WIDTH / p->total : WIDTH;
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
  bar[WIDTH] = '\0';
  fprintf(p->out, "\r\033[K%-8s %-24.24s [%s] %d/%d  %.1f s", p->what, p->job, bar, p->done, p->total,
          fa_tune_now() - p->t0);
  fflush(p->out);
}

void fa_tune_progress_begin(TuneProgress *p, const char *what, const char *job, int total) {
  if (!p || p->quiet) return;
  pthread_mutex_lock(&p->lock);
  snprintf(p->what, sizeof p->what, "%s", what);
  snprintf(p->job, sizeof p->job, "%s", job);
  p->total = total;
  p->done = 0;
  p->t0 = fa_tune_now();
  if (p->tty)
    draw(p);
  else
    fprintf(p->out, "%s %s: %d candidate%s\n", what, job, total, total == 1 ? "" : "s");
  pthread_mutex_unlock(&p->lock);
}

void fa_tune_progress_step(TuneProgress *p, const char *line) {
  if (!p || p->quiet) return;
  pthread_mutex_lock(&p->lock);
  p->done++;
  if (p->tty)
    draw(p);
  else if (line)
    fprintf(p->out, "  [%d/%d] %s\n", p->done, p->total, line);
  fflush(p->out);
  pthread_mutex_unlock(&p->lock);
}

void fa_tune_progress_note(TuneProgress *p, const char *line) {
  if (!p || p->quiet || p->tty || !line) return;
  pthread_mutex_lock(&p->lock);
  fprintf(p->out, "        %s\n", line);
  fflush(p->out);
  pthread_mutex_unlock(&p->lock);
}

void fa_tune_progress_end(TuneProgress *p) {
  if (!p || p->quiet) return;
  pthread_mutex_lock(&p->lock);
  if (p->tty) {
    draw(p);
    fputc('\n', p->out);
  }
  fflush(p->out);
  pthread_mutex_unlock(&p->lock);
}

/* ---- tables ---------------------------------------------------------------------------- */

static void print_header(FILE *out, const TuneJob *job) {
  fprintf(out, "%s  [problem %s]  %s\n", job->kernel->name, job->problem->name, job->key_label);
}

static void print_axes(FILE *out, const TuneJob *job) {
  const FaKernelInfo *k = job->kernel;
  for (int t = 0; t < k->ntune; t++) fprintf(out, "%s%s[%d]", t ? " x " : "", k->tune[t].name, k->tune[t].nvalues);
}

void fa_tune_print_dry_run(FILE *out, const TuneJob *job) {
  print_header(out, job);
  fprintf(out, "  space: %d points (", job->space_size);
  print_axes(out, job);
  fprintf(out, "); %d pruned; %d to try\n", job->npruned, job->nsurvivors);
  for (int i = 0; i < job->ncands; i++) {
    const TuneCand *c = &job->cands[i];
    if (c->status == TUNE_PRUNED) continue;
    fprintf(out, "    %s%s\n", c->label, c->is_default ? "   (default)" : "");
  }
  if (job->default_cand >= 0 && job->cands[job->default_cand].status == TUNE_PRUNED)
    fprintf(out, "  default: %s (excluded by --only)\n", job->cands[job->default_cand].label);
}

static const char *status_word(const TuneCand *c) {
  switch (c->status) {
    case TUNE_OK: return "ok";
    case TUNE_PRUNED: return "pruned";
    case TUNE_PENDING: return "candidate";   /* --dry-run: survived the prune, not compiled */
    default: return "rejected";
  }
}

static int label_width(const TuneJob *job) {
  int w = 6;
  for (int i = 0; i < job->ncands; i++)
    if (job->cands[i].status != TUNE_PRUNED && (int)strlen(job->cands[i].label) > w) w = (int)strlen(job->cands[i].label);
  return w;
}

static void print_rejected(FILE *out, const TuneJob *job) {
  bool any = false;
  for (int i = 0; i < job->ncands; i++) {
    const TuneCand *c = &job->cands[i];
    if (c->status != TUNE_REJECTED) continue;
    if (!any) fprintf(out, "  rejected:\n");
    any = true;
    fprintf(out, "    %s  [%s] %s\n", c->label, c->stage ? c->stage : "?", c->reason ? c->reason : "");
  }
}

void fa_tune_print_compile_only(FILE *out, const TuneJob *job) {
  print_header(out, job);
  fprintf(out, "  space %d, pruned %d; %d distinct kernel%s for %d candidates (%d NVRTC run%s); %.2f s\n",
          job->space_size, job->npruned, job->nunique_sources, job->nunique_sources == 1 ? "" : "s", job->nsurvivors,
          job->ncompiled, job->ncompiled == 1 ? "" : "s", job->emit_s + job->compile_s);
  int w = label_width(job);
  fprintf(out, "  %-*s  %5s  %6s  %8s  %7s  %-8s\n", w, "config", "regs", "spills", "smem", "threads", "status");
  for (int i = 0; i < job->ncands; i++) {
    const TuneCand *c = &job->cands[i];
    if (c->status == TUNE_PRUNED) continue;
    char regs[16] = "-", spills[16] = "-", smem[24] = "-", threads[16] = "-";
    if (c->registers >= 0) snprintf(regs, sizeof regs, "%d", c->registers);
    if (c->spill_bytes >= 0) snprintf(spills, sizeof spills, "%d", c->spill_bytes);
    if (c->threads > 0) {
      snprintf(smem, sizeof smem, "%zu", c->shared_bytes);
      snprintf(threads, sizeof threads, "%d", c->threads);
    }
    if (c->status == TUNE_OK && c->same_source_as >= 0)
      fprintf(out, "  %-*s  %5s  %6s  %8s  %7s  ok (same code as %s)\n", w, c->label, regs, spills, smem, threads,
              job->cands[c->same_source_as].label);
    else
      fprintf(out, "  %-*s  %5s  %6s  %8s  %7s  %s%s\n", w, c->label, regs, spills, smem, threads, status_word(c),
              c->is_default ? " (default)" : "");
  }
  print_rejected(out, job);
}

static int by_time(const void *a, const void *b) {
  const TuneCand *x = *(const TuneCand *const *)a, *y = *(const TuneCand *const *)b;
  return x->median_ms < y->median_ms ? -1 : x->median_ms > y->median_ms;
}

static double speedup(const TuneJob *job, const TuneCand *c) {
  if (job->default_cand < 0) return -1;
  const TuneCand *d = &job->cands[job->default_cand];
  if (d->status != TUNE_OK || d->median_ms <= 0 || c->median_ms <= 0) return -1;
  return d->median_ms / c->median_ms;
}

void fa_tune_print_summary(FILE *out, const TuneJob *job, const TuneOptions *opt) {
  int top = opt->top;
  print_header(out, job);
  if (job->cached) {
    fprintf(out, "  already tuned: %s (use --force to tune again)\n", job->cached_label);
    if (job->verify_source)
      fprintf(out, "  libfadsl launches it with %s (%s)\n", job->verify_config, job->verify_source);
    return;
  }
  int nok = 0, nrej = 0;
  for (int i = 0; i < job->ncands; i++) {
    nok += job->cands[i].status == TUNE_OK && job->cands[i].same_source_as < 0;
    nrej += job->cands[i].status == TUNE_REJECTED;
  }
  fprintf(out,
          "  space %d, pruned %d, rejected %d; %d distinct kernel%s, %d NVRTC run%s, %d timed; setup %.2f s, "
          "search %.1f s (generate %.2f s, compile %.1f s, time %.1f s, overlapping)\n",
          job->space_size, job->npruned, nrej, job->nunique_sources, job->nunique_sources == 1 ? "" : "s",
          job->ncompiled, job->ncompiled == 1 ? "" : "s", nok, job->setup_s, job->wall_s, job->emit_s, job->compile_s,
          job->time_s);
  int nfinal = 0;
  for (int i = 0; i < job->ncands; i++) {
    const TuneCand *c = &job->cands[i];
    nfinal += c->status == TUNE_OK && c->same_source_as < 0 && !c->dropped;
  }
  char flush[96] = "no L2 flush";
  if (job->flush_bytes)
    snprintf(flush, sizeof flush, "L2 flushed by %d memset%s of %zu MiB (%.3f ms of GPU time each)", job->flush_reps,
             job->flush_reps == 1 ? "" : "s", job->flush_bytes >> 20, job->flush_ms);
  fprintf(out,
          "  timing: %d runs each, then %.0f ms of warm-up and at least %d runs and %.0f ms of them for the %d within "
          "%.1fx of the best (%d dropped); %s\n",
          TUNE_SCREEN_RUNS, TUNE_WARMUP_MS, opt->min_runs, opt->min_ms, nfinal, TUNE_SCREEN_FACTOR, job->ndropped, flush);
  const TuneCand **ok = calloc((size_t)job->ncands + 1, sizeof *ok);
  if (!ok) return;
  int n = 0;
  for (int i = 0; i < job->ncands; i++)
    if (job->cands[i].status == TUNE_OK && job->cands[i].median_ms > 0 && job->cands[i].same_source_as < 0)
      ok[n++] = &job->cands[i];
  qsort(ok, (size_t)n, sizeof *ok, by_time);
  int w = label_width(job);
  fprintf(out, "  %4s  %-*s  %10s  %10s  %8s  %10s\n", "rank", w, "config", "median ms", "min ms", "TFLOP/s",
          "vs default");
  bool default_shown = false;
  for (int r = 0; r < n; r++) {
    const TuneCand *c = ok[r];
    bool is_default = c->is_default;
    if (r >= top && !is_default) continue;
    char tf[24] = "-", sp[24] = "-";
    if (c->tflops > 0) snprintf(tf, sizeof tf, c->tflops >= 10 ? "%.1f" : "%.3g", c->tflops);
    double s = speedup(job, c);
    if (s > 0) snprintf(sp, sizeof sp, "%.2fx", s);
    if (r >= top && is_default && top > 0) fprintf(out, "  %4s\n", "...");
    int same = 0;
    for (int i = 0; i < job->ncands; i++) same += job->cands[i].same_source_as == (int)(c - job->cands);
    char note[96] = "";
    if (same) snprintf(note, sizeof note, "  (+%d with the same code)", same);
    if (c->dropped)
      snprintf(note + strlen(note), sizeof note - strlen(note), "  (dropped after %d runs)", c->runs);
    fprintf(out, "  %4d  %-*s  %10.4f  %10.4f  %8s  %10s%s%s\n", r + 1, w, c->label, c->median_ms, c->min_ms, tf, sp,
            is_default ? "  (default)" : "", note);
    default_shown |= is_default;
  }
  if (!default_shown && job->default_cand >= 0) {
    const TuneCand *d = &job->cands[job->default_cand];
    fprintf(out, "  default %s: %s\n", d->label,
            d->status == TUNE_PRUNED ? "not timed (excluded by --only)" : d->reason ? d->reason : status_word(d));
  }
  if (n == 0) fprintf(out, "  no candidate could be timed\n");
  free(ok);
  print_rejected(out, job);
  if (job->verify_source)
    fprintf(out, "  libfadsl now launches it with %s (%s)\n", job->verify_config, job->verify_source);
  if (job->compiler_bug)
    fprintf(out, "  NOTE: candidates disagreed with the reference output: a compiler bug (see 'mismatch' above)\n");
}

/* ---- --json ------------------------------------------------------------------------------ */

static json_t *config_json(const FaKernelInfo *k, const TuneCand *c) {
  json_t *o = json_object();
  for (int t = 0; t < k->ntune; t++) json_object_set_new(o, k->tune[t].name, fa_tune_const_to_json(c->values[t]));
  return o;
}

static void set_num(json_t *o, const char *name, double v, bool present) {
  json_object_set_new(o, name, present && isfinite(v) ? json_real(v) : json_null());
}

static json_t *cand_json(const TuneJob *job, const TuneCand *c) {
  json_t *o = json_object();
  json_object_set_new(o, "index", json_integer(c->index));
  json_object_set_new(o, "config", config_json(job->kernel, c));
  json_object_set_new(o, "label", json_string(c->label));
  json_object_set_new(o, "status", json_string(status_word(c)));
  json_object_set_new(o, "default", json_boolean(c->is_default));
  if (c->status == TUNE_PRUNED) {
    json_object_set_new(o, "pruned_by", json_string(c->reason ? c->reason : ""));
    return o;
  }
  if (c->status == TUNE_REJECTED) {
    json_object_set_new(o, "stage", json_string(c->stage ? c->stage : ""));
    json_object_set_new(o, "reason", json_string(c->reason ? c->reason : ""));
  }
  if (c->same_source_as >= 0) json_object_set_new(o, "same_source_as", json_integer(job->cands[c->same_source_as].index));
  if (c->threads > 0) {
    json_object_set_new(o, "threads", json_integer(c->threads));
    json_object_set_new(o, "shared_bytes", json_integer((json_int_t)c->shared_bytes));
  }
  if (c->registers >= 0) json_object_set_new(o, "registers", json_integer(c->registers));
  if (c->spill_bytes >= 0) json_object_set_new(o, "spill_bytes", json_integer(c->spill_bytes));
  if (c->local_bytes >= 0) json_object_set_new(o, "local_bytes", json_integer(c->local_bytes));
  if (c->cache) json_object_set_new(o, "cache", json_string(c->cache));
  if (c->compile_s > 0) json_object_set_new(o, "compile_s", json_real(c->compile_s));
  if (c->median_ms > 0) {
    json_object_set_new(o, "median_ms", json_real(c->median_ms));
    json_object_set_new(o, "min_ms", json_real(c->min_ms));
    json_object_set_new(o, "max_ms", json_real(c->max_ms));
    json_object_set_new(o, "runs", json_integer(c->runs));
    set_num(o, "tflops", c->tflops, c->tflops > 0);
    set_num(o, "screen_ms", c->screen_ms, c->screen_ms > 0);
    json_object_set_new(o, "dropped", json_boolean(c->dropped));
    double s = speedup(job, c);
    set_num(o, "speedup_vs_default", s, s > 0);
  }
  if (c->rel_err >= 0) json_object_set_new(o, "rel_err_vs_reference", json_real(c->rel_err));
  return o;
}

static json_t *job_json(const TuneJob *job, const TuneOptions *opt) {
  json_t *o = json_object();
  json_object_set_new(o, "kernel", json_string(job->kernel->name));
  json_object_set_new(o, "problem", json_string(job->problem->name));
  json_t *key = json_object();
  for (int i = 0; i < job->nkey; i++) json_object_set_new(key, job->key[i].name, fa_tune_const_to_json(job->key[i].value));
  json_object_set_new(o, "key", key);
  json_t *axes = json_array();
  for (int t = 0; t < job->kernel->ntune; t++) {
    json_t *ax = json_object();
    json_object_set_new(ax, "name", json_string(job->kernel->tune[t].name));
    json_t *vals = json_array();
    for (int v = 0; v < job->kernel->tune[t].nvalues; v++)
      json_array_append_new(vals, fa_tune_const_to_json(job->kernel->tune[t].values[v]));
    json_object_set_new(ax, "values", vals);
    json_array_append_new(axes, ax);
  }
  json_object_set_new(o, "axes", axes);
  json_object_set_new(o, "space_size", json_integer(job->space_size));
  json_object_set_new(o, "pruned", json_integer(job->npruned));
  json_object_set_new(o, "survivors", json_integer(job->nsurvivors));
  json_object_set_new(o, "distinct_sources", json_integer(job->nunique_sources));
  json_object_set_new(o, "nvrtc_runs", json_integer(job->ncompiled));
  if (job->has_flops) json_object_set_new(o, "flops", json_real(job->flops));
  json_object_set_new(o, "cached", json_boolean(job->cached));
  if (job->cached) json_object_set_new(o, "cached_config", json_string(job->cached_label));
  json_object_set_new(o, "default",
                      job->default_cand >= 0 ? json_string(job->cands[job->default_cand].label) : json_null());
  json_object_set_new(o, "winner", job->winner >= 0 ? cand_json(job, &job->cands[job->winner]) : json_null());
  json_object_set_new(o, "compiler_bug_suspected", json_boolean(job->compiler_bug));
  if (job->verify_source) {
    json_t *v = json_object();
    json_object_set_new(v, "config_source", json_string(job->verify_source));
    json_object_set_new(v, "config", json_string(job->verify_config ? job->verify_config : ""));
    json_object_set_new(o, "launch_after_tuning", v);
  }
  json_t *times = json_object();
  json_object_set_new(times, "setup", json_real(job->setup_s));
  json_object_set_new(times, "generate", json_real(job->emit_s));
  json_object_set_new(times, "compile", json_real(job->compile_s));
  json_object_set_new(times, "time", json_real(job->time_s));
  json_object_set_new(times, "total", json_real(job->wall_s));
  json_object_set_new(o, "seconds", times);
  json_t *timing = json_object();
  json_object_set_new(timing, "screen_runs", json_integer(TUNE_SCREEN_RUNS));
  json_object_set_new(timing, "screen_factor", json_real(TUNE_SCREEN_FACTOR));
  json_object_set_new(timing, "warmup_ms", json_real(TUNE_WARMUP_MS));
  json_object_set_new(timing, "min_runs", json_integer(opt->min_runs));
  json_object_set_new(timing, "min_ms", json_real(opt->min_ms));
  json_object_set_new(timing, "dropped", json_integer(job->ndropped));
  json_object_set_new(timing, "flush_bytes", json_integer((json_int_t)job->flush_bytes));
  set_num(timing, "flush_ms", job->flush_ms, job->flush_ms > 0);
  json_object_set_new(timing, "flush_reps", json_integer(job->flush_reps));
  json_object_set_new(o, "timing", timing);
  json_t *cands = json_array();
  for (int i = 0; i < job->ncands; i++) json_array_append_new(cands, cand_json(job, &job->cands[i]));
  json_object_set_new(o, "candidates", cands);
  return o;
}

bool fa_tune_write_json(const char *path, const TuneOptions *opt, const TuneEnv *env, TuneJob **jobs, int njobs,
                        double wall_s) {
  json_t *root = json_object();
  json_object_set_new(root, "tool", json_string("fadsl-tune"));
  json_object_set_new(root, "fadsl_version", json_string(env->version ? env->version : ""));
  json_object_set_new(root, "file", json_string(opt->file));
  static const char *const modes[] = {"tune", "dry-run", "compile-only"};
  json_object_set_new(root, "mode", json_string(modes[opt->mode]));
  json_object_set_new(root, "gpu", env->gpu ? json_string(env->gpu) : json_null());
  json_object_set_new(root, "arch", env->arch ? json_string(env->arch) : json_null());
  json_object_set_new(root, "database", env->db_path ? json_string(env->db_path) : json_null());
  json_object_set_new(root, "jobs", json_integer(opt->jobs));
  json_t *sizes = json_object();
  for (int i = 0; i < opt->nsizes; i++) json_object_set_new(sizes, opt->sizes[i].name, fa_tune_const_to_json(opt->sizes[i].value));
  json_object_set_new(root, "size_overrides", sizes);
  json_t *list = json_array();
  for (int i = 0; i < njobs; i++) json_array_append_new(list, job_json(jobs[i], opt));
  json_object_set_new(root, "results", list);
  json_object_set_new(root, "wall_s", json_real(wall_s));
  bool ok;
  if (!strcmp(path, "-")) {
    ok = json_dumpf(root, stdout, JSON_INDENT(2)) == 0;
    fputc('\n', stdout);
  } else {
    ok = json_dump_file(root, path, JSON_INDENT(2)) == 0;
  }
  if (!ok) fprintf(stderr, "fadsl-tune: cannot write %s\n", path);
  json_decref(root);
  return ok;
}
