/* fadsl.h - the public C API of libfadsl: load fadsl programs (.fa), bind
 * kernel arguments, and launch the kernels on your own CUDA streams.
 *
 * Build against the installed library with
 *
 *     cc app.c $(pkg-config --cflags --libs fadsl)
 *
 * The library loads the CUDA driver (libcuda.so.1) and NVRTC (libnvrtc) at
 * run time with dlopen, so a program linked with it also starts on a machine
 * without a GPU: it can still load and compile programs, and a launch there
 * fails with FADSL_ERROR_NO_DRIVER and the message
 * "no CUDA driver found (libcuda.so.1 could not be loaded: ...)".
 * This header needs no CUDA headers: device pointers are uint64_t (the same
 * representation as CUdeviceptr) and streams and events are void * (the same
 * as CUstream / cudaStream_t and CUevent / cudaEvent_t).
 *
 * Conventions
 * - Every function that can fail returns an fadsl_status.  FADSL_SUCCESS is
 *   0.  After a failure, fadsl_context_last_error() gives a readable message
 *   (for a program that failed to compile: the compiler's diagnostics, in the
 *   form FILE:LINE:COL: error: MESSAGE with the source line and a caret; for
 *   an NVRTC failure: the NVRTC log).  The library never calls exit() or
 *   abort() and never prints unless asked to (see FADSL_LOG below).
 * - Objects are opaque and created/destroyed in pairs.  A context owns
 *   nothing the caller created; destroy programs before their context.
 * - Thread safety: a context, its programs and kernels may be used from
 *   several threads at once (compilation, caches and module loading are
 *   locked internally).  An fadsl_args object must not be changed by one
 *   thread while another uses it.  The last error message is per context:
 *   with concurrent failures it is the most recent one.
 *
 * Environment
 *   FADSL_LOG=warn|info|debug  print warnings (warn), plus one line per launch
 *                          saying kernel, constexprs, config and where it came
 *                          from (explicit/tuned/nearest/default), architecture,
 *                          grid and kernel-cache hit (memory/disk) or miss,
 *                          and once per context the libcuda and libnvrtc
 *                          files loaded with their versions (info); plus
 *                          each failure's message and where the cubin,
 *                          ptxas' report and the driver disagree about a
 *                          kernel's resources (debug), to stderr.  Unset: quiet, except for a
 *                          one-time warning when the disk cache is unusable.
 *                          FADSL_LOG=off silences that too.
 *   FADSL_CACHE_DIR=DIR    root of the on-disk caches (default
 *                          $XDG_CACHE_HOME/fadsl, else ~/.cache/fadsl);
 *                          compiled kernels go to DIR/kernels/.
 *   FADSL_TUNE_DB=FILE     tuning database to consult (default
 *                          CACHE_ROOT/tune.json, written by fadsl-tune).
 *   FADSL_NVRTC_PATH=PATH  libnvrtc to load (a file, or a directory holding
 *                          libnvrtc.so*) instead of searching for it.
 *   FADSL_CUDA_DRIVER_PATH=FILE  the CUDA driver library to load instead of
 *                          libcuda.so.1 (e.g. a compat driver).
 *   FADSL_NO_DRIVER=1      behave as if no CUDA driver were installed.
 */
#ifndef FADSL_H
#define FADSL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FADSL_API __attribute__((visibility("default")))
#else
#define FADSL_API
#endif

/* ---- status ------------------------------------------------------------ */

typedef enum fadsl_status {
  FADSL_SUCCESS = 0,
  FADSL_ERROR_INVALID_ARGUMENT,  /* NULL where an object is needed, bad size, ... */
  FADSL_ERROR_OUT_OF_MEMORY,     /* host memory */
  FADSL_ERROR_NO_DRIVER,         /* libcuda.so.1 could not be loaded or initialised */
  FADSL_ERROR_NO_DEVICE,         /* no such device, or a compile-only context (device -1) */
  FADSL_ERROR_NO_NVRTC,          /* libnvrtc could not be loaded */
  FADSL_ERROR_CUDA,              /* a CUDA driver call failed (message names it) */
  FADSL_ERROR_PROGRAM,           /* the .fa program was rejected (diagnostics in the message) */
  FADSL_ERROR_NVRTC,             /* NVRTC rejected the generated code (its log in the message) */
  FADSL_ERROR_NOT_FOUND,         /* no kernel of that name */
  FADSL_ERROR_BINDING,           /* unknown argument, wrong kind, duplicate or missing argument */
  FADSL_ERROR_IO,                /* a file could not be read */
  FADSL_ERROR_UNSUPPORTED,       /* e.g. a GPU architecture this NVRTC cannot target */
  FADSL_ERROR_TIMEOUT,           /* the GPU did not finish in the time given (fadsl_synchronize_within) */
} fadsl_status;

/* A short constant description of a status ("no CUDA driver", ...). */
FADSL_API const char *fadsl_status_string(fadsl_status status);

/* The library's version, e.g. "0.1.0". */
FADSL_API const char *fadsl_version(void);

/* ---- contexts -------------------------------------------------------------- */

typedef struct fadsl_context fadsl_context;

/* Creates a context for CUDA device `device` (0, 1, ...), or with device == -1
 * a context without a device that can load programs and compile them (see
 * fadsl_compile) but not launch.
 *
 * For a device, the driver is loaded and the device's primary context is
 * retained here.  When that fails (no driver, no such device, ...), the
 * function returns the error status AND still stores a usable context in
 * *out, whose fadsl_context_last_error() says why; it works like a
 * device -1 context.  The caller destroys it either way.  *out is NULL only
 * for FADSL_ERROR_OUT_OF_MEMORY and FADSL_ERROR_INVALID_ARGUMENT (out NULL or
 * device < -1). */
FADSL_API fadsl_status fadsl_context_create(int device, fadsl_context **out);

/* Releases the context and everything it loaded (modules, the primary
 * context reference, the dlopen'ed libraries).  NULL is allowed. */
FADSL_API void fadsl_context_destroy(fadsl_context *ctx);

/* The message of the last failure in this context ("" when none).  Valid
 * until the next failing call on the context. */
FADSL_API const char *fadsl_context_last_error(const fadsl_context *ctx);

/* The device number given at creation (-1 for a compile-only context). */
FADSL_API int fadsl_context_device(const fadsl_context *ctx);

/* Overrides the kernel-cache directory for this context (a directory that
 * holds the cache entries directly); NULL disables the disk cache.  The
 * in-memory cache is always on. */
FADSL_API fadsl_status fadsl_context_set_cache_dir(fadsl_context *ctx, const char *dir);

/* The kernel-cache directory in use, or NULL when the disk cache is off
 * (disabled, or found unwritable). */
FADSL_API const char *fadsl_context_cache_dir(const fadsl_context *ctx);

/* Overrides the tuning database consulted for launches (NULL: none). */
FADSL_API fadsl_status fadsl_context_set_tune_db(fadsl_context *ctx, const char *path);

/* What the context's device is. */
typedef struct fadsl_device_info {
  char name[256];               /* e.g. "NVIDIA H200" */
  int cc_major, cc_minor;       /* compute capability */
  char arch[16];                /* NVRTC target used for it: "sm_90a" on sm_90, else "sm_XY" */
  int multiprocessors;
  size_t total_memory;          /* bytes */
  size_t shared_per_block_optin;/* largest dynamic shared memory a block may request */
  int driver_version;           /* e.g. 13000 */
  size_t l2_bytes;              /* L2 cache size; 0 when unknown */
} fadsl_device_info;

FADSL_API fadsl_status fadsl_context_device_info(fadsl_context *ctx, fadsl_device_info *out);

/* ---- programs and kernels ---------------------------------------------------- */

typedef struct fadsl_program fadsl_program;
typedef struct fadsl_kernel fadsl_kernel;

/* Loads a .fa program from a file, or from a string (`name` is used in
 * diagnostics, e.g. "attention.fa"; NULL gives "<string>").  The program is
 * parsed and checked now; kernels are specialised and compiled on first use
 * for each distinct set of constexpr values and config, and kept. */
FADSL_API fadsl_status fadsl_program_load_file(fadsl_context *ctx, const char *path,
                                               fadsl_program **out);
FADSL_API fadsl_status fadsl_program_load_string(fadsl_context *ctx, const char *name,
                                                 const char *text, fadsl_program **out);
FADSL_API void fadsl_program_destroy(fadsl_program *prog);

/* A module a program may import (`import NAME` / `from "PATH" import ...`,
 * docs/language.md, "Modules"), given as text: `name` is the path an import
 * finds it by, such as "attention_core.fa" or "variants/window.fa". */
typedef struct fadsl_module_text {
  const char *name;
  const char *text;
} fadsl_module_text;

/* Like fadsl_program_load_string, for a program that imports modules: its
 * imports are looked up among `modules` first (relative to the importing
 * module's name, then by the name as written), and only then in the file
 * system (relative to `name`'s directory and $FADSL_PATH).  The array and its
 * texts need to live only during the call. */
FADSL_API fadsl_status fadsl_program_load_with_modules(fadsl_context *ctx, const char *name,
                                                       const char *text,
                                                       const fadsl_module_text *modules,
                                                       int nmodules, fadsl_program **out);

/* Number of kernels in the program and the name of the i-th. */
FADSL_API int fadsl_program_kernel_count(const fadsl_program *prog);
FADSL_API const char *fadsl_program_kernel_name(const fadsl_program *prog, int i);

/* Finds a kernel by name (FADSL_ERROR_NOT_FOUND otherwise).  The kernel
 * belongs to the program: do not free it. */
FADSL_API fadsl_status fadsl_program_kernel(fadsl_program *prog, const char *name,
                                            fadsl_kernel **out);

/* The kernel's parameters, in source order: name and kind. */
typedef enum fadsl_param_kind {
  FADSL_PARAM_POINTER,          /* bind with FADSL_ARG_PTR */
  FADSL_PARAM_SCALAR,           /* bind with the matching FADSL_ARG_I32/I64/F32/F64 */
  FADSL_PARAM_CONSTEXPR,        /* bind with FADSL_ARG_INT/FLOAT/BOOL/DTYPE */
} fadsl_param_kind;

FADSL_API int fadsl_kernel_param_count(const fadsl_kernel *k);
FADSL_API fadsl_status fadsl_kernel_param(const fadsl_kernel *k, int i, const char **name,
                                          fadsl_param_kind *kind);
FADSL_API const char *fadsl_kernel_name(const fadsl_kernel *k);

/* ---- arguments ---------------------------------------------------------------- */

typedef enum fadsl_arg_kind {
  FADSL_ARG_NONE = 0,
  FADSL_ARG_PTR,                /* device pointer (uint64_t / CUdeviceptr) */
  FADSL_ARG_I32,                /* runtime scalars; must match the parameter's dtype */
  FADSL_ARG_I64,
  FADSL_ARG_F32,
  FADSL_ARG_F64,
  FADSL_ARG_INT,                /* constexpr values */
  FADSL_ARG_FLOAT,
  FADSL_ARG_BOOL,
  FADSL_ARG_DTYPE,              /* a dtype name: "f16", "bf16", "f32", "i32", ... */
} fadsl_arg_kind;

typedef struct fadsl_value {
  fadsl_arg_kind kind;
  union {
    uint64_t ptr;
    int32_t i32;
    int64_t i64;                /* FADSL_ARG_I64, FADSL_ARG_INT, FADSL_ARG_BOOL (0/1) */
    float f32;
    double f64;                 /* FADSL_ARG_F64, FADSL_ARG_FLOAT */
    const char *dtype;          /* FADSL_ARG_DTYPE; copied when bound */
  } v;
} fadsl_value;

static inline fadsl_value fadsl_ptr(uint64_t p) { fadsl_value x; x.kind = FADSL_ARG_PTR; x.v.ptr = p; return x; }
static inline fadsl_value fadsl_i32(int32_t i) { fadsl_value x; x.kind = FADSL_ARG_I32; x.v.i32 = i; return x; }
static inline fadsl_value fadsl_i64(int64_t i) { fadsl_value x; x.kind = FADSL_ARG_I64; x.v.i64 = i; return x; }
static inline fadsl_value fadsl_f32(float f) { fadsl_value x; x.kind = FADSL_ARG_F32; x.v.f32 = f; return x; }
static inline fadsl_value fadsl_f64(double f) { fadsl_value x; x.kind = FADSL_ARG_F64; x.v.f64 = f; return x; }
static inline fadsl_value fadsl_int(int64_t i) { fadsl_value x; x.kind = FADSL_ARG_INT; x.v.i64 = i; return x; }
static inline fadsl_value fadsl_float(double f) { fadsl_value x; x.kind = FADSL_ARG_FLOAT; x.v.f64 = f; return x; }
static inline fadsl_value fadsl_bool(int b) { fadsl_value x; x.kind = FADSL_ARG_BOOL; x.v.i64 = b != 0; return x; }
static inline fadsl_value fadsl_dtype(const char *name) { fadsl_value x; x.kind = FADSL_ARG_DTYPE; x.v.dtype = name; return x; }

/* A set of arguments for one kernel.  Bind each parameter once, by name or by
 * position (source order, counting constexprs).  Errors (FADSL_ERROR_BINDING,
 * message in the context):
 *   unknown name / position out of range;
 *   wrong kind: a pointer parameter needs FADSL_ARG_PTR, a scalar the ARG of
 *     its exact dtype (i32 -> FADSL_ARG_I32, ...), a constexpr one of
 *     INT/FLOAT/BOOL/DTYPE;
 *   duplicate: the parameter is already bound (fadsl_args_clear starts over);
 *   missing (reported by fadsl_launch / fadsl_compile): a pointer or scalar
 *     not bound, or a constexpr without default and not in the @autotune
 *     space. */
typedef struct fadsl_args fadsl_args;

FADSL_API fadsl_status fadsl_args_create(fadsl_kernel *k, fadsl_args **out);
FADSL_API void fadsl_args_destroy(fadsl_args *a);
FADSL_API void fadsl_args_clear(fadsl_args *a);   /* unbinds everything, forgets the config and grid */

FADSL_API fadsl_status fadsl_args_set(fadsl_args *a, const char *name, fadsl_value value);
FADSL_API fadsl_status fadsl_args_set_at(fadsl_args *a, int position, fadsl_value value);

/* Shorthands for fadsl_args_set(a, name, fadsl_ptr(p)) etc. */
FADSL_API fadsl_status fadsl_args_set_ptr(fadsl_args *a, const char *name, uint64_t p);
FADSL_API fadsl_status fadsl_args_set_i32(fadsl_args *a, const char *name, int32_t v);
FADSL_API fadsl_status fadsl_args_set_i64(fadsl_args *a, const char *name, int64_t v);
FADSL_API fadsl_status fadsl_args_set_f32(fadsl_args *a, const char *name, float v);
FADSL_API fadsl_status fadsl_args_set_f64(fadsl_args *a, const char *name, double v);
FADSL_API fadsl_status fadsl_args_set_int(fadsl_args *a, const char *name, int64_t v);
FADSL_API fadsl_status fadsl_args_set_float(fadsl_args *a, const char *name, double v);
FADSL_API fadsl_status fadsl_args_set_bool(fadsl_args *a, const char *name, int v);
FADSL_API fadsl_status fadsl_args_set_dtype(fadsl_args *a, const char *name, const char *dtype);

/* Chooses the launch configuration explicitly (warps per program, software
 * pipelining stages; 0 leaves that one to the tuning database / default).
 * Each axis of the kernel's @autotune space (its constexprs, warps, stages)
 * gets its value from, in this order:
 *   1. explicit: a constexpr of the space bound with fadsl_args_set*, or
 *      warps/stages given here;
 *   2. tuned: the tuning database's entry for this kernel, GPU and the
 *      launch's @autotune key values, or the nearest key's entry;
 *   3. default: the first point of the space, in declaration order with the
 *      last axis varying fastest, that satisfies @autotune(prune=...) with
 *      the launch's other arguments (without a prune: the first value of each
 *      list; when no point passes: the first values, and a FADSL_LOG=warn
 *      warning).  warps = 4 and stages = 2 where the space does not list them.
 * The prune only chooses the axes left open: explicit values are used as
 * given, even where it would reject them.
 * fadsl_kernel_info.config_source says which: "explicit", "tuned",
 * "nearest", "default", or "explicit+default" when the caller fixed some
 * axes and the defaults filled the rest. */
FADSL_API fadsl_status fadsl_args_set_config(fadsl_args *a, int warps, int stages);
/* The same for one launch-configuration axis by name ("warps", "stages"):
 * 0 leaves it to the tuning database / default. */
FADSL_API fadsl_status fadsl_args_set_config_axis(fadsl_args *a, const char *name, int value);
/* The value fadsl_args_set_config_axis takes for `text` on the axis `name`:
 * a named one's value ("pipeline": "tma_ws" is 4; "schedule": "persistent"
 * is 2) or a number the axis allows ("warps": "8").  0 for NULL or "" (not
 * given), -1 for an unknown axis or a value it does not allow. */
FADSL_API int fadsl_config_value(const char *name, const char *text);
/* What the axis `name` allows, for messages ("one of grid, persistent (1 to
 * 2)"), or NULL for an unknown axis. */
FADSL_API const char *fadsl_config_allowed(const char *name);

/* Launches gx x gy x gz programs instead of the kernel's @kernel(grid=...)
 * (Triton's kernel[grid](...)), until fadsl_args_clear.  A grid with a zero
 * dimension launches nothing, as a computed one does.
 * FADSL_ERROR_INVALID_ARGUMENT (and the grid set before is kept) below 0 or
 * beyond CUDA's limits: gx up to 2^31 - 1, gy and gz up to 65535.
 * fadsl_launch and fadsl_interpret use it (an fadsl_interpret_options grid,
 * when given, comes first); fadsl_compile has no grid. */
FADSL_API fadsl_status fadsl_args_set_grid(fadsl_args *a, int64_t gx, int64_t gy, int64_t gz);

/* ---- launching and compiling ------------------------------------------------ */

/* What a launch or compilation used.  Strings are owned by the program and
 * stay valid until it is destroyed. */
typedef struct fadsl_kernel_info {
  const char *kernel;           /* kernel name in the .fa program */
  const char *entry;            /* extern "C" name of the CUDA kernel */
  const char *arch;             /* "sm_90a", "sm_80", ... */
  const char *constexprs;       /* e.g. "BLOCK_Q=128 BLOCK_K=64 d_head=64 T=f16" */
  int warps, stages;
  const char *config_source;    /* "explicit", "tuned", "nearest", "default", "explicit+default" */
  const char *cache;            /* "memory", "disk" or "miss" (compiled now) */
  int threads;                  /* per program (thread block) */
  size_t shared_bytes;          /* dynamic shared memory per program */
  /* Resource usage, read from the compiled cubin (and, after a launch, as
   * the driver reports it); spill counts come from ptxas' report. */
  int registers;                /* per thread; -1 when unknown */
  int spill_bytes;              /* spill stores + loads; 0 when the kernel has no stack frame;
                                   -1 when unknown (ptxas' report unavailable) */
  int local_bytes;              /* stack frame per thread; -1 when unknown */
  unsigned grid[3];             /* launches only; 0 otherwise */
  const char *cuda_source;      /* the generated CUDA C++ */
  int static_shared_bytes;      /* static shared memory per program, besides
                                   shared_bytes; -1 when unknown */
  int max_threads;              /* the kernel's __launch_bounds__ limit; -1 when none */
  const char *pipeline;         /* how loads feeding products were pipelined: "tma", "tma_ws_pp", ...
                                   on sm_90a, "cp_async" on other targets (docs/performance.md) */
  const char *schedule;         /* "grid" or "persistent" */
} fadsl_kernel_info;

/* Launches the kernel with these arguments on `stream` (a CUstream /
 * cudaStream_t; NULL = the legacy default stream) of the context's device.
 * The kernel is specialised, generated and compiled on first use of a
 * constexpr/config combination (then cached in memory and on disk); the grid
 * is the one fadsl_args_set_grid gave, else computed from @kernel(grid=...).
 * The launch is asynchronous: errors of
 * the running kernel show up at the next synchronisation.  `info` may be
 * NULL. */
FADSL_API fadsl_status fadsl_launch(fadsl_kernel *k, const fadsl_args *a, void *stream,
                                    fadsl_kernel_info *info);

/* Specialises and compiles without launching, for `arch` ("sm_80",
 * "sm_90a", ...; NULL = the context's device).  Works in a context without a
 * device.  Only constexprs (and, for the tuning lookup, the @autotune key
 * arguments) need to be bound. */
FADSL_API fadsl_status fadsl_compile(fadsl_kernel *k, const fadsl_args *a, const char *arch,
                                     fadsl_kernel_info *info);

/* ---- device helpers (for tools, tests and small programs) -------------------- */

FADSL_API fadsl_status fadsl_malloc(fadsl_context *ctx, size_t bytes, uint64_t *ptr);
FADSL_API fadsl_status fadsl_free(fadsl_context *ctx, uint64_t ptr);
FADSL_API fadsl_status fadsl_memcpy_htod(fadsl_context *ctx, uint64_t dst, const void *src,
                                         size_t bytes);
FADSL_API fadsl_status fadsl_memcpy_dtoh(fadsl_context *ctx, void *dst, uint64_t src,
                                         size_t bytes);
FADSL_API fadsl_status fadsl_memset(fadsl_context *ctx, uint64_t dst, unsigned char byte,
                                    size_t bytes);
/* Waits for all work on the device (stream NULL) or on one stream. */
FADSL_API fadsl_status fadsl_synchronize(fadsl_context *ctx, void *stream);
/* The same, for at most `seconds` (> 0): FADSL_ERROR_TIMEOUT when the work
 * has not finished by then (a kernel that never ends: nothing can stop it
 * short of ending the process, but the caller learns which launch it was).
 * The work queued on the stream up to the call is waited for (NULL: the
 * default stream, which waits for the other blocking streams); a driver
 * without cuEventQuery waits without a limit. */
FADSL_API fadsl_status fadsl_synchronize_within(fadsl_context *ctx, void *stream, double seconds);
/* Free and total device memory, in bytes. */
FADSL_API fadsl_status fadsl_mem_info(fadsl_context *ctx, size_t *free_bytes, size_t *total_bytes);

/* Events for timing (CUevent).  elapsed: milliseconds between two recorded
 * events, after the later one completed (this call waits for it). */
FADSL_API fadsl_status fadsl_event_create(fadsl_context *ctx, void **event);
FADSL_API fadsl_status fadsl_event_destroy(fadsl_context *ctx, void *event);
FADSL_API fadsl_status fadsl_event_record(fadsl_context *ctx, void *event, void *stream);
FADSL_API fadsl_status fadsl_event_elapsed_ms(fadsl_context *ctx, void *start, void *end,
                                              float *ms);

/* ---- parameters, for binding layers ------------------------------------------ */

/* What a parameter takes, beyond fadsl_kernel_param's name and kind: the
 * information a wrapper (the Python package, say) needs to turn its caller's
 * arrays and numbers into fadsl_values.  Strings are owned by the program. */
typedef struct fadsl_param_info {
  const char *name;
  fadsl_param_kind kind;
  const char *dtype;            /* pointers: the element dtype, scalars: the dtype ("f32",
                                   "i32", ...); NULL when a dtype constexpr gives it (see
                                   dtype_param) and for constexprs */
  const char *dtype_param;      /* the dtype constexpr naming it (`x: *T` gives "T"), or NULL */
  int has_default;              /* constexprs declared with `= value` */
  int tunable;                  /* constexprs that are an axis of the kernel's @autotune space */
} fadsl_param_info;

FADSL_API fadsl_status fadsl_kernel_param_info(const fadsl_kernel *k, int i, fadsl_param_info *out);

/* ---- the CPU interpreter ------------------------------------------------------ */

/* Runs a kernel on the CPU interpreter over host memory, with the numerics of
 * the GPU code (see docs/runtime.md): a way to test and debug kernels, and to
 * use them, without a GPU.  Works in any context, a device -1 one included.
 *
 * The arguments are bound as for fadsl_launch, except that a pointer is a
 * host address (fadsl_args_set_ptr(a, "x", (uint64_t)(uintptr_t)data)) which
 * must lie in one of `regions`: the kernel may then read and write from that
 * address to the end of its region, and every access is checked (an access
 * outside is FADSL_ERROR_PROGRAM with the location of the load or store; a
 * region smaller than a parameter's declared extent is
 * FADSL_ERROR_INVALID_ARGUMENT before anything runs).  Memory is read and
 * written in place.  Pointers must be aligned to their element size.
 *
 * The configuration (an @autotune space's constexprs, warps, stages) is the
 * caller's where bound, else the space's default point, as for a launch; the
 * tuning database, which describes GPUs, is not read.  The grid is
 * `opt`'s when it gives one, else the arguments' (fadsl_args_set_grid), else
 * the kernel's.  The call returns when the kernel has run. */
typedef struct fadsl_host_region {
  void *data;
  size_t bytes;
} fadsl_host_region;

typedef struct fadsl_interpret_options {
  int threads;                  /* programs run on this many threads; 0 or 1: one after another,
                                   in grid order (x fastest).  With threads, atomic_add is atomic,
                                   but programs that store to the same element race */
  int64_t grid[3];              /* all zero: the kernel's @kernel(grid=...); else this grid
                                   (a zero dimension among nonzero ones counts as 1) */
} fadsl_interpret_options;

typedef struct fadsl_interpret_info {
  char constexprs[512];         /* e.g. "BLOCK_Q=128 BLOCK_K=32 d_head=64 T=f16" */
  int warps, stages;
  const char *config_source;    /* "explicit", "default" or "explicit+default" */
  int64_t grid[3];
} fadsl_interpret_info;

/* `opt` and `info` may be NULL. */
FADSL_API fadsl_status fadsl_interpret(fadsl_kernel *k, const fadsl_args *a,
                                       const fadsl_host_region *regions, int nregions,
                                       const fadsl_interpret_options *opt,
                                       fadsl_interpret_info *info);

#ifdef __cplusplus
}
#endif

#endif
