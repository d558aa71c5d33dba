/* autotune_point.h - a kernel's default configuration: the point of its
 * @autotune space that is used when nothing else chooses one.
 *
 * This is the one definition for every part of the system that needs it (a
 * launch without a tuning-database entry, fadsl_interpret, fadsl-run,
 * fadslc --check/--emit, the NVRTC sweep, the tuner's default row), so that
 * they agree.  fa_autotune_default_point() promises:
 *
 *  1. An axis the caller fixes keeps its value: a constexpr axis named in
 *     `known`, a launch-configuration axis (config_axes.c) set (> 0) in
 *     `given`.  The prune never judges a fixed value; it chooses among the
 *     other, "open", axes.  When every axis is fixed there is nothing to
 *     choose and that point is the result.
 *  2. The open axes take the first point of the space, in declaration order
 *     with the last axis varying fastest, that @autotune(prune=...) admits
 *     and @autotune(prefer=...) prefers; when the prune admits points but
 *     prefer takes none of them (or there is no prefer), the first point
 *     that the prune admits.  prefer only chooses the default among the
 *     points the prune admits; it removes none from the tuner's space.  The
 *     prune and prefer see the point (fixed axes included), `known` (the
 *     constexprs and runtime scalars the caller has values for), each other
 *     constexpr's declared default, the launch-configuration axes that
 *     are not axes of the space (given, else their default), and `arch`,
 *     the compute capability of the target the caller compiles for
 *     (sema.h: FA_PRUNE_ARCH; FA_ARCH_NONE, 0, on the interpreter).
 *  3. A prune that cannot be evaluated at a point (it reads a value not known
 *     there, such as a runtime size at compile time) admits the point;
 *     specialisation then judges it.  A prefer expression that cannot be
 *     evaluated at a point does not prefer it (a default is only moved off
 *     the prune's first point by an answer, never by an error).  Either
 *     way the messages of the failed evaluation are dropped.
 *  4. When no point passes, the open axes take their first values and
 *     none_passes says so; the caller decides what that means.  The
 *     compile-time tools (fadslc, the NVRTC sweep) stop with an error
 *     (fa_autotune_report_none_passes).  The runtime (fadsl_launch,
 *     fadsl_interpret) and fadsl-run go on with those first values and warn
 *     (FADSL_LOG=warn; fadsl-run on stderr), because a prune that reads
 *     runtime sizes (BLOCK <= n) can reject every tile for a small problem
 *     that the kernel's masks handle.
 */
#ifndef FADSL_AUTOTUNE_POINT_H
#define FADSL_AUTOTUNE_POINT_H

#include "sema.h"

typedef struct FaAutotunePoint {
  FaConst *values;          /* one per axis of the space, in declaration order */
  bool *chosen;             /* per axis: chosen here (it was open), not fixed by the caller */
  int nchosen;
  FaLaunchConfig config;    /* every configuration axis: given, else the point's, else its default */
  bool none_passes;         /* no point passed the prune (rule 4) */
  bool preferred;           /* the open axes were chosen by @autotune(prefer=...) (rule 2) */
  const char *source;       /* "default" (the caller fixed no axis), "explicit" (nothing was
                               open), "explicit+default" (some of each): a string constant */
} FaAutotunePoint;

/* Chooses the default point of kernel k of program p (the rules above) for
 * target `arch` (compute capability * 10, or FA_ARCH_NONE).  `given` may be
 * NULL (no configuration axis given).  The arrays of *out are allocated in
 * `arena`.  Returns false only when out of memory. */
bool fa_autotune_default_point(Arena *arena, const FaProgram *p, const FaKernelInfo *k, const FaBinding *known,
                               int nknown, const FaLaunchConfig *given, int arch, FaAutotunePoint *out);

/* Whether the default point can depend on the value of `name` in `known`:
 * it is an axis of the space (a fixed axis keeps its value), or the prune
 * or prefer expression names it.  (A function they call sees only what they
 * pass it and module constants, so the names in the expressions are all
 * they read.)  The runtime keys the points it keeps on these values alone. */
bool fa_autotune_point_reads(const FaKernelInfo *k, const char *name);

/* Whether the caller fixes axis t of k's space (rule 1). */
bool fa_autotune_axis_fixed(const FaKernelInfo *k, int t, const FaBinding *known, int nknown,
                            const FaLaunchConfig *given);

/* Whether the caller fixed anything: an axis of the space (a bound constexpr
 * or a given launch setting) or a launch setting outside it.  A point chosen
 * with nothing fixed is the "default"; the runtime asks it of the caller's
 * own configuration, without what FADSL_PIPELINE / FADSL_SCHEDULE add. */
bool fa_autotune_any_fixed(const FaKernelInfo *k, const FaBinding *known, int nknown, const FaLaunchConfig *given);

/* Writes the constexpr axes the point chose (not the fixed ones, not the
 * configuration axes, which are in pt->config) to out, which has room for
 * k->ntune bindings; returns how many. */
int fa_autotune_point_bindings(const FaKernelInfo *k, const FaAutotunePoint *pt, FaBinding *out);

/* Appends "no point of the @autotune space of kernel 'k' passes its prune
 * with BLOCK_Q=32 given" (the fixed axes, if any). */
void fa_autotune_none_passes_message(const FaKernelInfo *k, const FaAutotunePoint *pt, StrBuf *out);

/* The compile-time tools' rule 4: that message as an error located at the
 * prune expression. */
void fa_autotune_report_none_passes(FaCompiler *fc, const FaKernelInfo *k, const FaAutotunePoint *pt);

#endif
