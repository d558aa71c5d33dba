/* tune.h - fadsl-tune's parts and the data they pass between them.
 *
 *   problem.c   runs a @problem description: sizes, buffers, kernel launches
 *   space.c     the @autotune space of one launch: enumeration, prune, default
 *   compile.c   generates every candidate's CUDA (deduplicated by source hash)
 *               and compiles the distinct ones in parallel threads
 *   bench.c     times candidates with CUDA events and checks their outputs
 *   hostdata.c  seeded host data for buffers, dtype conversions, comparisons
 *   report.c    progress display, the summary tables and the --json document
 *   fadsl-tune.c  the command line, and the driver that ties them together
 */
#ifndef FADSL_TUNE_H
#define FADSL_TUNE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../compiler/cuda_backend.h"
#include "fadsl.h"
#include "sema.h"
#include "tune_db.h"

/* Exit statuses of fadsl-tune. */
enum {
  TUNE_EXIT_OK = 0,
  TUNE_EXIT_FAILED = 1,      /* the program has errors, or nothing could be tuned */
  TUNE_EXIT_USAGE = 2,       /* bad command line or input: unknown kernel/size, empty space, ... */
  TUNE_EXIT_NO_GPU = 3,      /* tuning needs a GPU and there is none */
};

typedef enum TuneMode { TUNE_MODE_TUNE, TUNE_MODE_DRY_RUN, TUNE_MODE_COMPILE_ONLY } TuneMode;

/* --only NAME=V1,V2: tune only these values of one axis. */
typedef struct TuneOnly {
  const char *name;
  FaConst *values;
  int nvalues;
} TuneOnly;

typedef struct TuneOptions {
  const char *file;
  const char *kernel;           /* --kernel, or NULL for every tunable kernel */
  FaBinding *sizes;             /* --size NAME=VALUE */
  int nsizes;
  TuneOnly *only;
  int nonly;
  int jobs;                     /* compile threads */
  const char *db_path;          /* the database to read and write */
  const char *json_path;        /* --json, or NULL */
  TuneMode mode;
  bool force;
  const char *arch;             /* --arch, or NULL (--compile-only and --dry-run: the GPU's, else sm_90a) */
  int device;
  int top;                      /* rows of the summary table per key */
  int min_runs;                 /* timed runs per candidate, at least */
  double min_ms;                /* final round: at least this much time of timed runs per candidate */
  double timeout_s;             /* a candidate's checked launch that has not finished by then stops the tuner */
  bool tty;                     /* progress as a redrawn bar */
  bool quiet;
  uint64_t seed;
} TuneOptions;

/* ---- problems (problem.c) ---------------------------------------------------------- */

typedef enum TuneFill { TUNE_FILL_RANDN, TUNE_FILL_RAND, TUNE_FILL_ZEROS, TUNE_FILL_EMPTY } TuneFill;

typedef struct TuneBuffer {
  const char *name;
  DType dtype;
  int rank;
  int64_t shape[FA_MAX_RANK];
  size_t count;                 /* elements */
  size_t bytes;
  TuneFill fill;
  uint64_t dptr;                /* 0 without a device, or until materialised */
  bool materialised;            /* allocated and filled on the device */
  SrcLoc loc;
} TuneBuffer;

/* One argument of a launch, per kernel parameter. */
typedef struct TuneArg {
  bool given;
  FaConst value;                /* constexpr and scalar parameters */
  int buffer;                   /* pointer parameters: index into TuneRun.bufs; -1 otherwise */
} TuneArg;

typedef struct TuneLaunch {
  const FaProblemInfo *problem;
  const FaKernelInfo *kernel;
  const Node *call;
  TuneArg *args;                /* one per kernel parameter */
  int index;                    /* the how-many-th launch of the problem */
} TuneLaunch;

/* A point of an @autotune space: the constexpr axes as bindings, and the
 * launch configuration. */
typedef struct TuneConfig {
  FaBinding *values;
  int nvalues;
  FaLaunchConfig config;        /* 0: not an axis (the runtime's default) */
} TuneConfig;

typedef enum TuneAction {
  TUNE_LAUNCH_DEFAULT,          /* launch as libfadsl would (database / default config) */
  TUNE_LAUNCH_CONFIG,           /* launch with the config the hook filled in */
  TUNE_SKIP,                    /* do not launch (no device, or not needed) */
  TUNE_STOP,                    /* stop running the problem: nothing more to do */
  TUNE_ABORT,                   /* stop with an error (already reported) */
} TuneAction;

typedef struct TuneRun TuneRun;
typedef TuneAction (*TuneLaunchHook)(void *user, TuneRun *run, const TuneLaunch *l, TuneConfig *cfg);

struct TuneRun {
  FaCompiler *fc;               /* diagnostics go to fc->diag */
  const FaProgram *prog;
  const TuneOptions *opt;
  const FaProblemInfo *problem;
  FaBinding *env;               /* sizes and compile-time locals */
  int nenv, capenv;
  TuneBuffer *bufs;
  int nbufs, capbufs;
  fadsl_context *ctx;           /* NULL for --dry-run; a compile-only context for --compile-only */
  fadsl_program *rprog;
  bool on_device;               /* buffers live on the GPU and kernels are launched */
  int arch;                     /* the target's compute capability, as prunes read it (sema.h) */
  TuneLaunchHook hook;
  void *user;
  int exit_status;              /* set by a hook that aborts */
  /* where the time outside the search goes (seconds, accumulated) */
  double fill_s;                /* generating randn/rand data on the host */
  double copy_s;                /* device allocation, host-to-device copies, memsets */
  double launch_s;              /* kernels run before the one being tuned */
  int nmade;                    /* buffers made on the device */
  size_t bytes_made;
};

/* Runs problem `pr` (sizes from its defaults, overridden by opt->sizes):
 * evaluates the body in order, allocating and filling buffers (on the
 * device when run->ctx is set) and calling the hook before each kernel
 * launch.  Returns TUNE_EXIT_OK, or another status after reporting. */
int fa_tune_run_problem(TuneRun *run, const FaProblemInfo *pr);
/* Buffers are allocated and filled on the device only when a launch that
 * runs (or is tuned) first passes them: a buffer that only kernels after
 * the last one tuned use is never made.  This materialises the launch's
 * pointer arguments.  False after reporting. */
bool fa_tune_materialise(TuneRun *run, const TuneLaunch *l);
/* Frees the device buffers of a run. */
void fa_tune_run_release(TuneRun *run);

/* Whether a problem's body launches kernel `name` (anywhere in it). */
bool fa_tune_problem_launches(const FaProblemInfo *pr, const char *name);

/* The launch's constexpr and scalar values as bindings (arena of run->fc),
 * leaving out the names in `skip` (the axes being tuned). */
int fa_tune_launch_bindings(TuneRun *run, const TuneLaunch *l, const char *const *skip, int nskip,
                            FaBinding **out);

/* The facts about the launch's runtime arguments that libfadsl will
 * specialise on (see FA_SPECIALISE_MULTIPLE in cuda_backend.h), so that the
 * candidates generated here are the code the launches run (arena of
 * run->fc; -1 on running out of memory). */
int fa_tune_launch_facts(TuneRun *run, const TuneLaunch *l, FaArgFact **out);

/* Arguments for libfadsl: every given parameter, plus the config's axes
 * (cfg may be NULL: leave them to the runtime).  NULL after reporting. */
fadsl_args *fa_tune_make_args(TuneRun *run, const TuneLaunch *l, fadsl_kernel *k,
                              const TuneConfig *cfg, StrBuf *err);

/* ---- host data (hostdata.c) -------------------------------------------------------- */

/* Fills `count` elements of dtype dt at dst from a seeded generator. */
void fa_tune_fill(void *dst, DType dt, size_t count, TuneFill fill, uint64_t seed);
/* Elements [first, first + count) of the same stream, into dst (which holds
 * element `first`), in up to `threads` threads; the result does not depend
 * on the number of threads nor on how a buffer is cut into ranges. */
void fa_tune_fill_range(void *dst, DType dt, size_t first, size_t count, TuneFill fill, uint64_t seed,
                        int threads);
double fa_tune_load_element(const void *src, DType dt, size_t i);
/* Relative error bound for comparing outputs of dtype dt. */
double fa_tune_tolerance(DType dt);

typedef struct TuneCompare {
  double rel_err;               /* ||a - b|| / ||b|| over elements finite in both */
  size_t nonfinite_mismatch;    /* elements finite in one and not the other */
  size_t first_bad;             /* index of the first such element, or of the largest error */
} TuneCompare;
void fa_tune_compare(const void *a, const void *b, DType dt, size_t count, TuneCompare *out);
/* The same in up to `threads` threads (for large buffers; the sums may
 * differ from the one-thread ones in the last bits). */
void fa_tune_compare_threads(const void *a, const void *b, DType dt, size_t count, int threads, TuneCompare *out);

/* ---- the space (space.c) ----------------------------------------------------------- */

typedef enum TuneStatus {
  TUNE_PRUNED,                  /* removed by @autotune(prune=...) or --only */
  TUNE_PENDING,                 /* survived so far */
  TUNE_REJECTED,                /* see stage and reason */
  TUNE_OK,                      /* compiled (and, when tuning, timed and checked) */
} TuneStatus;

typedef struct TuneCand {
  int index;                    /* position in the whole space (last axis fastest) */
  FaConst *values;              /* one per axis */
  TuneConfig cfg;
  char *label;                  /* "BLOCK_Q=64 BLOCK_K=32 stages=2 warps=4" */
  TuneStatus status;
  const char *stage;            /* where it was rejected: "specialise", "shared memory", ... */
  char *reason;
  bool is_default;
  /* generated code */
  uint64_t src_hash[2];
  int same_source_as;           /* runs the same code as this earlier candidate (index), or -1 */
  size_t shared_bytes;
  int threads;
  double work;                  /* per-thread size of the specialised code's tiles: predicts compile time */
  /* compiled code */
  int registers, spill_bytes, local_bytes;
  const char *cache;            /* "memory", "disk", "miss" */
  double compile_s;
  fadsl_args *args;
  /* timing */
  double screen_ms;             /* median of the screening runs; -1: not screened */
  bool dropped;                 /* screened out: clearly slower than the best (see bench.c) */
  double median_ms, min_ms, max_ms;   /* of the final runs (of the screening runs when dropped) */
  int runs;
  double rel_err;               /* against the reference candidate; -1: not compared */
  double tflops;                /* -1: unknown */
} TuneCand;

/* One kernel at one key: the unit of tuning, of the report and of the database. */
typedef struct TuneJob {
  const FaKernelInfo *kernel;
  const FaProblemInfo *problem;
  TuneLaunch launch;            /* copied: args belong to the job */
  FaBinding *key;
  int nkey;
  char *key_label;              /* "q_seq_len=1024 d_head=64 ..." */
  const char **exact_keys;      /* key names that are constexpr parameters */
  int nexact;
  FaBinding *fixed;             /* launch values other than the axes, for prune/flops/specialise */
  int nfixed;
  const TuneOnly **only;        /* per axis, or NULL */
  int naxes;
  int space_size;
  TuneCand *cands;              /* the whole space, in order */
  int ncands;
  int npruned, nsurvivors;
  int default_cand;             /* -1: none survives */
  int winner;                   /* -1: none */
  int reference;                /* the candidate outputs were compared against; -1 */
  int nunique_sources;
  int ncompiled;                /* NVRTC runs (cache misses) */
  bool has_flops;
  double flops;
  double setup_s;               /* buffers made and earlier kernels run for this job */
  double emit_s, compile_s, time_s, wall_s;
  int ndropped;                 /* candidates the screening round dropped */
  size_t flush_bytes;           /* the L2 flush memset */
  double flush_ms;              /* its GPU time per timed run; -1: unknown */
  int flush_reps;               /* memsets per timed run */
  bool cached;                  /* an exact database entry existed (no --force) */
  char *cached_label;
  bool compiler_bug;            /* some candidate disagreed with the reference */
  const char *verify_source;    /* after tuning: where a plain launch took its config
                                   from ("tuned", ...; "failed"), or NULL */
  const char *verify_config;    /* its constexprs and config, or the error */
} TuneJob;

/* Builds the job's space: enumerates, applies --only and the prune, marks
 * the default.  Returns false after reporting (prune not evaluable). */
bool fa_tune_space_build(TuneRun *run, TuneJob *job, const TuneOptions *opt);

/* "BLOCK_Q=64 stages=2" for a config. */
char *fa_tune_config_label(Arena *a, const TuneConfig *cfg);

/* ---- compiling (compile.c) ---------------------------------------------------------- */

typedef struct TuneProgress TuneProgress;

/* Called on the calling thread of fa_tune_compile for each distinct
 * candidate, in the space's order, as soon as it and the earlier ones are
 * compiled (while later ones still compile). */
typedef void (*TuneReadyFn)(void *user, TuneCand *c);

/* Generates every pending candidate's CUDA in `jobs` threads (each with its
 * own compiler context and parse of the file), rejects those that do not
 * specialise or need more shared memory than `smem_limit` (0: no limit),
 * and groups candidates that run the same code (same source up to comment
 * lines, same launch geometry).  Then compiles one candidate per group
 * through libfadsl (fadsl_compile, so that the kernel cache in memory and
 * on disk is used), in parallel; the others share its results.  Never fails
 * for a candidate: records the reason.  Returns false only for a failure of
 * the whole step. */
bool fa_tune_compile(TuneRun *run, TuneJob *job, fadsl_kernel *k, const char *source_text,
                     size_t source_len, const char *arch, size_t smem_limit, int jobs,
                     TuneProgress *progress, TuneReadyFn ready, void *ready_user);

/* Candidates that run the same code as an earlier one (same_source_as)
 * are neither compiled nor timed on their own: this copies the results of
 * the one they share code with. */
void fa_tune_copy_from_same_code(TuneRun *run, TuneJob *job);

/* ---- timing (bench.c) ---------------------------------------------------------------- */

/* Timing is in two rounds (successive halving with one cut):
 *   screening: as soon as a candidate is compiled, its outputs are checked
 *     and it is timed TUNE_SCREEN_RUNS times;
 *   final: once all are screened, those whose screening median is within
 *     TUNE_SCREEN_FACTOR of the best screening median, and the default
 *     configuration always, get TUNE_WARMUP_MS of warm-up runs and then at
 *     least opt->min_runs and opt->min_ms of timed runs (at most
 *     TUNE_MAX_RUNS), and their median and minimum are of those runs only:
 *     the candidates are compared at the clocks sustained work runs at, as
 *     benchmarks time them, not at those of a short burst after an idle GPU.
 *     The others are dropped: they keep their screening statistics and
 *     cannot win. */
enum { TUNE_SCREEN_RUNS = 5, TUNE_MAX_RUNS = 2000 };
#define TUNE_WARMUP_MS 25.0
#define TUNE_SCREEN_FACTOR 1.5

typedef struct TuneBench TuneBench;
/* Prepares timing one job (buffer snapshots, events, the L2 flush buffer).
 * NULL after reporting. */
TuneBench *fa_tune_bench_begin(TuneRun *run, TuneJob *job, fadsl_kernel *k, const TuneOptions *opt,
                               TuneProgress *progress);
/* The screening round of one compiled candidate (a TuneReadyFn). */
void fa_tune_bench_screen(void *bench, TuneCand *c);
/* The final round, the winner; frees the bench.  False when the GPU context
 * became unusable. */
bool fa_tune_bench_finish(TuneBench *b);

/* The screening decision on given medians (< 0: not timed): keep[i] is
 * true for candidates within `factor` of the best, and for `always` (an
 * index, or -1) when it was timed.  Returns how many are kept. */
int fa_tune_screen(const double *screen_ms, int n, double factor, int always, bool *keep);
/* Median of t[0..n) (sorts it); 0 for n == 0. */
double fa_tune_median(double *t, int n);

/* ---- reporting (report.c) ------------------------------------------------------------- */

TuneProgress *fa_tune_progress_new(FILE *out, bool tty, bool quiet);
void fa_tune_progress_free(TuneProgress *p);
/* Starts a phase ("compile", "time") of `total` steps for a job. */
void fa_tune_progress_begin(TuneProgress *p, const char *what, const char *job, int total);
/* One step done; `line` is what a plain (non-TTY) log says about it. */
void fa_tune_progress_step(TuneProgress *p, const char *line);
void fa_tune_progress_end(TuneProgress *p);
/* A line for the plain (non-TTY) log that is not a step of the phase. */
void fa_tune_progress_note(TuneProgress *p, const char *line);

typedef struct TuneEnv {
  const char *gpu;              /* device name, or NULL */
  const char *arch;
  const char *version;
  const char *db_path;
} TuneEnv;

void fa_tune_print_dry_run(FILE *out, const TuneJob *job);
void fa_tune_print_compile_only(FILE *out, const TuneJob *job);
void fa_tune_print_summary(FILE *out, const TuneJob *job, const TuneOptions *opt);
/* Writes the --json document.  False with a message on stderr. */
bool fa_tune_write_json(const char *path, const TuneOptions *opt, const TuneEnv *env, TuneJob **jobs,
                        int njobs, double wall_s);

/* Monotonic seconds. */
double fa_tune_now(void);

#endif
