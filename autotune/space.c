/* space.c - the @autotune space of one launch.
 *
 * The space is the cartesian product of the axes' lists, enumerated in
 * declaration order with the last axis varying fastest (the order libfadsl
 * uses to pick its default).  A point survives when
 *   - every axis the launch itself binds has that value (the problem fixed it),
 *   - every axis named by --only has one of the listed values, and
 *   - @autotune(prune=...) is true, evaluated with the point's values, the
 *     launch-configuration axes (their defaults when they are not axes of the
 *     space, see config_axes.c), the target's compute capability as `arch`
 *     (run->arch), and the launch's constexpr and scalar arguments in scope.
 * The default configuration is the kernel's default point with the launch's
 * own fixed values (compiler/autotune_point.h) -- what libfadsl launches
 * when the database has nothing. */
#include "config.h"

#include <string.h>

#include "autotune_point.h"
#include "tune.h"

static int param_index(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (!strcmp(k->params[i].name, name)) return i;
  return -1;
}

static bool const_equal(FaConst a, FaConst b) {
  if ((a.kind == CK_INT || a.kind == CK_BOOL) && (b.kind == CK_INT || b.kind == CK_BOOL)) return a.i == b.i;
  if (a.kind == CK_FLOAT || b.kind == CK_FLOAT) {
    double x = a.kind == CK_FLOAT ? a.f : (double)a.i, y = b.kind == CK_FLOAT ? b.f : (double)b.i;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  if (a.kind == CK_DTYPE) return a.dtype == b.dtype;
  if (a.kind == CK_STR) return strcmp(a.s, b.s) == 0;
  return false;
}

char *fa_tune_config_label(Arena *a, const TuneConfig *cfg) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_bindings_print(cfg->values, cfg->nvalues, &sb);
  fa_config_print(&cfg->config, &sb);
  char *s = fa_arena_strdup(a, sb.data ? sb.data : "");
  fa_sb_free(&sb);
  return s;
}

/* "BLOCK_Q=64 BLOCK_K=32 stages=2 warps=4": the axes in declaration order. */
static char *point_label(Arena *a, const FaKernelInfo *k, const FaConst *values) {
  StrBuf sb;
  fa_sb_init(&sb);
  for (int t = 0; t < k->ntune; t++) {
    fa_sb_printf(&sb, "%s%s=", t ? " " : "", k->tune[t].name);
    fa_config_print_value(k->tune[t].name, values[t], &sb);
  }
  char *s = fa_arena_strdup(a, sb.data ? sb.data : "");
  fa_sb_free(&sb);
  return s;
}

static bool eval_prune(TuneRun *run, const TuneJob *job, const FaConst *values, bool *keep) {
  const FaKernelInfo *k = job->kernel;
  *keep = true;
  if (!k->prune) return true;
  int naxes;
  fa_config_axes(&naxes);
  int cap = job->nfixed + k->ntune + naxes + 1;   /* + `arch` */
  FaBinding *b = fa_arena_alloc(&run->fc->arena, sizeof *b * (size_t)cap);
  if (!b) return false;
  int n = 0;
  for (int i = 0; i < job->nfixed; i++) b[n++] = job->fixed[i];
  for (int t = 0; t < k->ntune; t++) {
    b[n].name = k->tune[t].name;
    b[n++].value = fa_config_prune_value(k->tune[t].name, values[t]);
  }
  n += fa_config_prune_bindings(k, NULL, run->arch, b + n);
  FaConst r;
  memset(&r, 0, sizeof r);
  if (!fa_eval_const(run->fc, run->prog, k->prune, b, n, &r)) return false;
  *keep = r.kind == CK_FLOAT ? r.f != 0 : r.i != 0;
  return true;
}

static void set_key(TuneRun *run, TuneJob *job) {
  const FaKernelInfo *k = job->kernel;
  Arena *a = &run->fc->arena;
  job->nkey = k->nkey;
  job->key = fa_arena_alloc(a, sizeof *job->key * (size_t)(k->nkey + 1));
  job->exact_keys = fa_arena_alloc(a, sizeof *job->exact_keys * (size_t)(k->nkey + 1));
  StrBuf sb;
  fa_sb_init(&sb);
  for (int j = 0; j < k->nkey; j++) {
    FaBinding *b = &job->key[j];
    b->name = k->key[j];
    int i = param_index(k, k->key[j]);
    if (i >= 0 && job->launch.args[i].given)
      b->value = job->launch.args[i].value;
    else if (i >= 0 && k->params[i].has_default)
      b->value = k->params[i].default_value;
    if (i >= 0 && k->params[i].kind == PARAM_CONSTEXPR) job->exact_keys[job->nexact++] = k->key[j];
    fa_sb_printf(&sb, "%s%s=", j ? " " : "", b->name);
    if (b->value.kind == CK_NONE)
      fa_sb_puts(&sb, "?");
    else
      fa_const_print(b->value, &sb);
  }
  job->key_label = fa_arena_strdup(a, sb.data ? sb.data : "");
  fa_sb_free(&sb);
}

/* The FLOP count the kernel declares, with the launch's values. */
static void set_flops(TuneRun *run, TuneJob *job) {
  const FaKernelInfo *k = job->kernel;
  if (!k->flops) return;
  int n = job->nfixed;
  FaBinding *b = fa_arena_alloc(&run->fc->arena, sizeof *b * (size_t)(n + k->ntune + 1));
  if (!b) return;
  memcpy(b, job->fixed, sizeof *b * (size_t)n);
  if (job->default_cand >= 0)
    for (int t = 0; t < k->ntune; t++) {
      b[n].name = k->tune[t].name;
      b[n++].value = job->cands[job->default_cand].values[t];
    }
  FaConst r;
  if (fa_eval_const(run->fc, run->prog, k->flops, b, n, &r) && (r.kind == CK_INT || r.kind == CK_FLOAT)) {
    job->has_flops = true;
    job->flops = r.kind == CK_INT ? (double)r.i : r.f;
  }
}

/* Marks the default configuration: the default point (autotune_point.h)
 * with the launch's values, the one libfadsl launches when the database has
 * nothing for it; none when no point passes the prune. */
static bool mark_default(TuneRun *run, TuneJob *job, const FaConst **given) {
  const FaKernelInfo *k = job->kernel;
  FaBinding *known = fa_arena_alloc(&run->fc->arena, sizeof *known * (size_t)(job->nfixed + k->ntune + 1));
  if (!known) return false;
  memcpy(known, job->fixed, sizeof *known * (size_t)job->nfixed);
  int n = job->nfixed;
  for (int t = 0; t < k->ntune; t++)
    if (given[t]) known[n++] = (FaBinding){k->tune[t].name, *given[t]};
  FaAutotunePoint pt;
  if (!fa_autotune_default_point(&run->fc->arena, run->prog, k, known, n, NULL, run->arch, &pt)) return false;
  if (pt.none_passes || job->ncands == 0) return true;
  int p = 0;   /* its index in the enumeration: the last axis fastest */
  for (int t = 0; t < k->ntune; t++) {
    int j = 0;
    while (j < k->tune[t].nvalues && !const_equal(k->tune[t].values[j], pt.values[t])) j++;
    if (j == k->tune[t].nvalues) return true;   /* a value the problem fixes outside the list */
    p = p * k->tune[t].nvalues + j;
  }
  job->default_cand = p;
  job->cands[p].is_default = true;
  return true;
}

bool fa_tune_space_build(TuneRun *run, TuneJob *job, const TuneOptions *opt) {
  const FaKernelInfo *k = job->kernel;
  Arena *a = &run->fc->arena;
  int nt = k->ntune;
  job->naxes = nt;

  /* the launch's values, without the axes */
  const char **axes = fa_arena_alloc(a, sizeof *axes * (size_t)(nt + 1));
  job->only = fa_arena_alloc(a, sizeof *job->only * (size_t)(nt + 1));
  if (!axes || !job->only) return false;
  for (int t = 0; t < nt; t++) {
    axes[t] = k->tune[t].name;
    for (int o = 0; o < opt->nonly; o++)
      if (!strcmp(opt->only[o].name, axes[t])) job->only[t] = &opt->only[o];
  }
  job->nfixed = fa_tune_launch_bindings(run, &job->launch, axes, nt, &job->fixed);
  if (job->nfixed < 0) return false;
  set_key(run, job);

  /* a value the launch gives an axis fixes it */
  const FaConst **given = fa_arena_alloc(a, sizeof *given * (size_t)(nt + 1));
  if (!given) return false;
  for (int t = 0; t < nt; t++) {
    int i = fa_config_axis(axes[t]) ? -1 : param_index(k, axes[t]);
    if (i >= 0 && job->launch.args[i].given) given[t] = &job->launch.args[i].value;
  }

  long long size = 1;
  for (int t = 0; t < nt; t++) {
    size *= k->tune[t].nvalues;
    if (size > 100000) {
      fa_error(&run->fc->diag, k->fn->loc, "the @autotune space of kernel '%s' has more than 100000 points", k->name);
      return false;
    }
  }
  job->space_size = nt > 0 ? (int)size : 0;
  job->cands = fa_arena_alloc(a, sizeof *job->cands * (size_t)(job->space_size + 1));
  if (!job->cands) return false;
  job->default_cand = job->winner = job->reference = -1;

  int idx[64] = {0};
  if (nt > 64) return false;
  for (int p = 0; p < job->space_size; p++) {
    TuneCand *c = &job->cands[job->ncands++];
    c->index = p;
    c->same_source_as = -1;
    c->registers = c->spill_bytes = c->local_bytes = -1;
    c->median_ms = c->min_ms = c->max_ms = c->rel_err = c->tflops = -1;
    c->values = fa_arena_alloc(a, sizeof *c->values * (size_t)(nt + 1));
    c->cfg.values = fa_arena_alloc(a, sizeof *c->cfg.values * (size_t)(nt + 1));
    if (!c->values || !c->cfg.values) return false;
    bool fixed_ok = true, only_ok = true;
    for (int t = 0; t < nt; t++) {
      FaConst v = k->tune[t].values[idx[t]];
      c->values[t] = v;
      if (given[t] && !const_equal(*given[t], v)) fixed_ok = false;
      if (job->only[t]) {
        bool listed = false;
        for (int o = 0; o < job->only[t]->nvalues; o++) listed |= const_equal(job->only[t]->values[o], v);
        only_ok &= listed;
      }
      const FaConfigAxis *cfg_axis = fa_config_axis(axes[t]);
      if (cfg_axis)
        fa_config_set(&c->cfg.config, cfg_axis, (int)v.i);
      else {
        c->cfg.values[c->cfg.nvalues].name = axes[t];
        c->cfg.values[c->cfg.nvalues++].value = v;
      }
    }
    c->label = point_label(a, k, c->values);
    bool keep = false;
    if (fixed_ok && !eval_prune(run, job, c->values, &keep)) return false;
    if (!fixed_ok || !keep || !only_ok) {
      c->status = TUNE_PRUNED;
      c->reason = !fixed_ok ? "fixed by the problem" : !keep ? "prune" : "--only";
      job->npruned++;
    } else {
      c->status = TUNE_PENDING;
      job->nsurvivors++;
    }
    for (int t = nt - 1; t >= 0; t--) {   /* the next point: last axis fastest */
      if (++idx[t] < k->tune[t].nvalues) break;
      idx[t] = 0;
    }
  }
  if (!mark_default(run, job, given)) return false;
  set_flops(run, job);
  return true;
}
