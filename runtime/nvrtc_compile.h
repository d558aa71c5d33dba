/* nvrtc_compile.h - compiling CUDA C++ at run time with NVRTC (nvrtc.c),
 * and reading a kernel's resource usage from ptxas' report.
 *
 * One nvrtcProgram per call, so several threads may compile at once (the
 * tuner compiles its candidates in parallel). */
#ifndef FADSL_RT_NVRTC_COMPILE_H
#define FADSL_RT_NVRTC_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

#include "cuda_loader.h"
#include "fadsl.h"
#include "util.h"

typedef struct FaNvrtcOptions {
  const char *arch;             /* "sm_80", "sm_90a", ... (a PTX build uses compute_XX[a]) */
  bool ptx;                     /* produce PTX instead of a cubin */
  bool lineinfo;                /* -lineinfo (fa_nvrtc_options_init: on) */
  bool fast_math;               /* --use_fast_math (off) */
  bool resource_usage;          /* --ptxas-options=-v: resource usage in the log (cubin only) */
  const char *const *extra;     /* further options, passed as they are */
  int nextra;
} FaNvrtcOptions;

void fa_nvrtc_options_init(FaNvrtcOptions *o, const char *arch);

/* The option list NVRTC will get, as one string (options separated by
 * '\n'), for cache keys and logs.  Returns false when the arch is not
 * sm_NN[a] / compute_NN[a]. */
bool fa_nvrtc_option_string(const FaNvrtcOptions *o, StrBuf *out);

typedef struct FaNvrtcOutput {
  unsigned char *code;          /* cubin, or PTX text (NUL-terminated); malloc'ed */
  size_t size;                  /* bytes; for PTX without the NUL */
  char *log;                    /* NVRTC's log, malloc'ed, never NULL after a call */
} FaNvrtcOutput;

void fa_nvrtc_output_free(FaNvrtcOutput *o);

/* Compiles `source` (named `name` in messages) with the given embedded
 * headers (NVRTC's include_names / headers: what `#include "NAME"` finds).
 * On failure returns FADSL_ERROR_NVRTC with the log (or another status)
 * and appends the message to `err`; out->log holds the log either way. */
fadsl_status fa_nvrtc_compile(const FaNvrtcApi *api, const char *source, const char *name,
                              const char *const *header_names, const char *const *header_texts,
                              int nheaders, const FaNvrtcOptions *opt, FaNvrtcOutput *out,
                              StrBuf *err);

/* Whether this NVRTC can target sm_NN (sm = NN); true when it cannot say. */
bool fa_nvrtc_supports_sm(const FaNvrtcApi *api, int sm);

/* Parses "sm_90a" / "compute_80" -> 90/80 and whether it is the
 * arch-specific ("a") variant.  False when not of that form. */
bool fa_arch_parse(const char *arch, int *sm, bool *arch_specific);

/* The resource usage of one entry function (-1: not known).  ptxas' report
 * (fa_parse_resource_usage) or the cubin (cubin.h) fills it. */
typedef struct FaKernelResources {
  int registers;                /* per thread */
  int spill_stores;             /* bytes */
  int spill_loads;              /* bytes */
  int stack_frame;              /* bytes of local memory per thread */
  int static_shared;            /* bytes of static shared memory */
  int barriers;
  int max_threads;              /* per block, from __launch_bounds__ (cubin only) */
} FaKernelResources;

/* Sets every field to -1 (unknown). */
void fa_kernel_resources_unknown(FaKernelResources *r);

/* Reads the resource usage of entry function `entry` (NULL: the first entry
 * function) from a log of a compilation with resource_usage set.  Returns
 * false when the log does not report that function. */
bool fa_parse_resource_usage(const char *log, const char *entry, FaKernelResources *out);

#endif
