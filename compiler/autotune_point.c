/* autotune_point.c - a kernel's default configuration (see autotune_point.h). */
#include "autotune_point.h"

#include <string.h>

static bool is_axis(const FaKernelInfo *k, const char *name) {
  for (int t = 0; t < k->ntune; t++)
    if (!strcmp(k->tune[t].name, name))
      return true;
  return false;
}

/* The value the caller fixed axis t to: in `given` for a configuration
 * axis, in `known` for a constexpr. */
static bool fixed_value(const FaKernelInfo *k, int t, const FaBinding *known, int nknown, const FaLaunchConfig *given,
                        FaConst *out) {
  const FaConfigAxis *cfg = fa_config_axis(k->tune[t].name);
  if (cfg) {
    int v = given ? fa_config_get(given, cfg) : 0;
    if (v > 0)
      *out = (FaConst){CK_INT, v, 0, DT_VOID, NULL};
    return v > 0;
  }
  int j = fa_binding_index(known, nknown, k->tune[t].name);
  if (j >= 0)
    *out = known[j].value;
  return j >= 0;
}

bool fa_autotune_axis_fixed(const FaKernelInfo *k, int t, const FaBinding *known, int nknown,
                            const FaLaunchConfig *given) {
  FaConst ignored;
  return fixed_value(k, t, known, nknown, given, &ignored);
}

/* What the prune sees besides the axes (rule 2), written after them. */
static int prune_scope(const FaKernelInfo *k, const FaBinding *known, int nknown, const FaLaunchConfig *given,
                       int arch, FaBinding *out) {
  int n = 0;
  for (int i = 0; i < nknown; i++)
    if (known[i].name && !is_axis(k, known[i].name) && known[i].value.kind != CK_NONE)
      out[n++] = known[i];
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *pa = &k->params[i];
    if (pa->kind == PARAM_CONSTEXPR && pa->has_default && !is_axis(k, pa->name) &&
        fa_binding_index(known, nknown, pa->name) < 0)
      out[n++] = (FaBinding){pa->name, pa->default_value};
  }
  return n + fa_config_prune_bindings(k, given, arch, out + n);
}

/* The value of expression e (a prune or a prefer expression) at the point
 * in env[0..n): true or false, or, where it cannot be evaluated (it reads a
 * value not known there), `on_error` (rule 3).  The messages of a failed
 * evaluation are not the caller's. */
static bool judge(const FaProgram *p, const Node *e, const FaBinding *env, int n, bool on_error) {
  FaCompiler scratch;
  fa_compiler_init(&scratch, NULL);
  FaConst r;
  memset(&r, 0, sizeof r);
  bool evaluated = fa_eval_const(&scratch, p, e, env, n, &r) && scratch.diag.errors == 0;
  fa_compiler_free(&scratch);
  if (!evaluated)
    return on_error;
  return r.kind == CK_FLOAT ? r.f != 0 : r.i != 0;
}

/* Whether the prune admits the point in env[0..n) (rule 3: an error admits). */
static bool prune_admits(const FaProgram *p, const FaKernelInfo *k, const FaBinding *env, int n) {
  return !k->prune || judge(p, k->prune, env, n, true);
}

/* Whether the prefer expression prefers the point (rule 3: an error does
 * not); no prefer expression prefers every point. */
static bool prefer_takes(const FaProgram *p, const FaKernelInfo *k, const FaBinding *env, int n) {
  return !k->prefer || judge(p, k->prefer, env, n, false);
}

/* Whether expression e names `name` (function bodies are not entered: a
 * call passes what they read). */
static bool names(const Node *e, const char *name) {
  if (!e)
    return false;
  if (e->kind == N_NAME)
    return !strcmp(e->name, name);
  if (e->kind == N_FUNC)
    return false;
  const Node *kids[] = {e->lhs, e->rhs, e->cond, e->then, e->els, e->lo, e->hi, e->step};
  for (size_t i = 0; i < sizeof kids / sizeof *kids; i++)
    if (names(kids[i], name))
      return true;
  const NodeList *lists[] = {&e->args, &e->kwargs, &e->body, &e->orelse};
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
    for (int j = 0; j < lists[i]->len; j++)
      if (names(lists[i]->items[j], name))
        return true;
  return false;
}

bool fa_autotune_point_reads(const FaKernelInfo *k, const char *name) {
  return is_axis(k, name) || names(k->prune, name) || names(k->prefer, name);
}

/* The next point: an odometer over the open axes, the last fastest.  False
 * after the last point. */
static bool next_point(const FaKernelInfo *k, const FaAutotunePoint *pt, int *idx) {
  for (int t = k->ntune - 1; t >= 0; t--) {
    if (!pt->chosen[t])
      continue;
    if (++idx[t] < k->tune[t].nvalues)
      return true;
    idx[t] = 0;
  }
  return false;
}

static void set_open_values(const FaKernelInfo *k, FaAutotunePoint *pt, const int *idx, FaBinding *env) {
  for (int t = 0; t < k->ntune; t++) {
    if (pt->chosen[t])
      pt->values[t] = k->tune[t].values[idx[t]];
    env[t] = (FaBinding){k->tune[t].name, fa_config_prune_value(k->tune[t].name, pt->values[t])};
  }
}

/* The configuration: given, then the point's configuration axes, then the
 * table's defaults. */
static void point_config(const FaKernelInfo *k, const FaLaunchConfig *given, FaAutotunePoint *pt) {
  memset(&pt->config, 0, sizeof pt->config);
  if (given)
    pt->config = *given;
  for (int t = 0; t < k->ntune; t++) {
    const FaConfigAxis *cfg = fa_config_axis(k->tune[t].name);
    if (cfg && pt->values[t].kind == CK_INT)
      fa_config_set(&pt->config, cfg, (int)pt->values[t].i);
  }
  fa_config_fill_defaults(&pt->config);
}

bool fa_autotune_any_fixed(const FaKernelInfo *k, const FaBinding *known, int nknown, const FaLaunchConfig *given) {
  for (int t = 0; t < k->ntune; t++)
    if (fa_autotune_axis_fixed(k, t, known, nknown, given))
      return true;
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int x = 0; given && x < naxes; x++)
    if (fa_config_get(given, &axes[x]) > 0)
      return true;
  return false;
}

static const char *point_source(const FaKernelInfo *k, const FaBinding *known, int nknown,
                                const FaLaunchConfig *given, const FaAutotunePoint *pt) {
  if (!fa_autotune_any_fixed(k, known, nknown, given))
    return "default";
  return pt->nchosen ? "explicit+default" : "explicit";
}

bool fa_autotune_default_point(Arena *arena, const FaProgram *p, const FaKernelInfo *k, const FaBinding *known,
                               int nknown, const FaLaunchConfig *given, int arch, FaAutotunePoint *out) {
  memset(out, 0, sizeof *out);
  int nt = k->ntune, naxes;
  fa_config_axes(&naxes);
  out->values = fa_arena_alloc(arena, sizeof *out->values * (size_t)(nt + 1));
  out->chosen = fa_arena_alloc(arena, sizeof *out->chosen * (size_t)(nt + 1));
  int *idx = fa_arena_alloc(arena, sizeof *idx * (size_t)(nt + 1));
  /* the point, the scope, the configuration axes and `arch` */
  FaBinding *env = fa_arena_alloc(arena, sizeof *env * (size_t)(nt + nknown + k->nparams + naxes + 2));
  if (!out->values || !out->chosen || !idx || !env)
    return false;
  for (int t = 0; t < nt; t++) {
    bool fixed = fixed_value(k, t, known, nknown, given, &out->values[t]);
    out->chosen[t] = !fixed && k->tune[t].nvalues > 0;
    out->nchosen += out->chosen[t];
  }
  int n = nt + prune_scope(k, known, nknown, given, arch, env + nt);
  if (out->nchosen > 0) {
    /* rule 2: the first point that passes prune and prefer, else the first
       that passes prune (first[], kept from the walk) */
    int *first = fa_arena_alloc(arena, sizeof *first * (size_t)(nt + 1));
    if (!first)
      return false;
    bool found = false, admitted = false;
    do {
      set_open_values(k, out, idx, env);
      if (!prune_admits(p, k, env, n))
        continue;
      if (!admitted)
        memcpy(first, idx, sizeof *idx * (size_t)nt);
      admitted = true;
      found = prefer_takes(p, k, env, n);
    } while (!found && next_point(k, out, idx));
    out->preferred = found && k->prefer;
    if (!found) {   /* nothing preferred: prune's first; rule 4: the first values */
      if (admitted)
        memcpy(idx, first, sizeof *idx * (size_t)nt);
      else
        memset(idx, 0, sizeof *idx * (size_t)nt);
      set_open_values(k, out, idx, env);
      out->none_passes = !admitted;
    }
  }
  point_config(k, given, out);
  out->source = point_source(k, known, nknown, given, out);
  return true;
}

int fa_autotune_point_bindings(const FaKernelInfo *k, const FaAutotunePoint *pt, FaBinding *out) {
  int n = 0;
  for (int t = 0; t < k->ntune; t++)
    if (pt->chosen[t] && !fa_config_axis(k->tune[t].name))
      out[n++] = (FaBinding){k->tune[t].name, pt->values[t]};
  return n;
}

void fa_autotune_none_passes_message(const FaKernelInfo *k, const FaAutotunePoint *pt, StrBuf *out) {
  fa_sb_printf(out, "no point of the @autotune space of kernel '%s' passes its prune", k->name);
  int nfixed = 0;
  for (int t = 0; t < k->ntune; t++) {
    if (pt->chosen[t])
      continue;
    fa_sb_printf(out, "%s%s=", nfixed++ ? " " : " with ", k->tune[t].name);
    fa_config_print_value(k->tune[t].name, pt->values[t], out);
  }
  if (nfixed)
    fa_sb_puts(out, " given");
}

void fa_autotune_report_none_passes(FaCompiler *fc, const FaKernelInfo *k, const FaAutotunePoint *pt) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_autotune_none_passes_message(k, pt, &sb);
  fa_error(&fc->diag, k->prune ? k->prune->loc : k->fn->loc, "%s", sb.data ? sb.data : "");
  fa_sb_free(&sb);
}
