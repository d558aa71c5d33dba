/* cubin.h - a kernel's resource usage read from the compiled cubin itself
 * (cubin.c), so that it does not depend on ptxas' verbose report reaching
 * NVRTC's log (some NVRTC builds hand it back for the first compilation of
 * a process only).
 *
 * A cubin is an ELF64 file (e_machine EM_CUDA).  What it says about an entry
 * function F:
 *   .nv.info            attributes of the whole module, several keyed by the
 *                       symbol index of F: EIATTR_REGCOUNT (registers per
 *                       thread), EIATTR_FRAME_SIZE (stack frame = local
 *                       memory per thread), EIATTR_MIN_STACK_SIZE and
 *                       EIATTR_MAX_STACK_SIZE (stack with callees);
 *   .nv.info.F          F's own attributes: EIATTR_MAX_THREADS (from
 *                       __launch_bounds__), EIATTR_NUM_BARRIERS, ...;
 *   .nv.shared.F        F's static shared memory (a NOBITS section; in
 *                       cubins that lay out the driver's reserved window,
 *                       recognised by a .nv.shared.reserved.0 section,
 *                       it is included at the front and is not counted);
 *   .text.F             sh_info bits 24..31: the register count in older
 *                       layouts (a fallback).
 * Spill stores and loads are only in ptxas' report.  Every offset and size
 * read from the file is checked against the buffer: a truncated or corrupt
 * cubin gives "unknown" (false), never a crash. */
#ifndef FADSL_RT_CUBIN_H
#define FADSL_RT_CUBIN_H

#include <stdbool.h>
#include <stddef.h>

#include "nvrtc_compile.h"
#include "util.h"

/* The driver's reserved shared memory window per block that sm_90 cubins
 * place at the front of each kernel's shared section
 * (CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK on those GPUs). */
enum { FA_CUBIN_RESERVED_SHARED = 1024 };

/* Reads what the cubin says about entry function `entry` (NULL: the first
 * function with a .text section).  Fields it does not find stay -1;
 * spill_stores/spill_loads are 0 when the stack frame is 0 (no local
 * memory, so nothing spilled) and -1 otherwise.  Returns false (with a
 * reason in `why`, which may be NULL) when the buffer is not a readable CUDA
 * ELF or has no such function. */
bool fa_cubin_resources(const unsigned char *cubin, size_t size, const char *entry,
                        FaKernelResources *out, char *why, size_t why_size);

/* The resource usage of `entry`: from the cubin, with the spill counts (and
 * anything the cubin lacks) from ptxas' report `log` when it has one.
 * Where both give a value and they differ, a line saying so is appended to
 * `notes` (may be NULL); the cubin's value is kept.  Returns false when
 * neither source knows the entry (all fields -1). */
bool fa_kernel_resources(const unsigned char *cubin, size_t size, const char *log,
                         const char *entry, FaKernelResources *out, StrBuf *notes);

#endif
