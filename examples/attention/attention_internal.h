/* attention_internal.h - inside libfadsl_attention: what the variant and
 * decoding calls (attention_variants.c, attention_decode.c) need of a
 * handle that fadsl_attention.c owns.  Not installed; nothing here is
 * exported (the library exports fadsl_attention_* only). */
#ifndef FADSL_ATTENTION_INTERNAL_H
#define FADSL_ATTENTION_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "fadsl_attention.h"

#define FA_ATTN_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The variant and decoding programs of a handle, loaded on first use
 * (attention_variants.c, attention_decode.c). */
/* The first seven are the fadsl_attention_kernel values of the same names
   (the info and launched records of the handle are shared with them). */
enum { VK_FWD, VK_BWD_D, VK_DKDV, VK_DQ, VK_PREP, VK_BWD, VK_CONVERT, VK_ZERO, VK_N };
enum { DK_SPLIT, DK_COMBINE, DK_N };
typedef struct FaAttnExtra {
  fadsl_program *prog;          /* the variant program; NULL until first used */
  bool owned;                   /* loaded here, rather than the handle's own */
  fadsl_kernel *k[VK_N];        /* attn_zero_f32 may be missing (then no sinks), and the fused
                                   backward kernels (then the deterministic ones run) */
  fadsl_args *args[VK_N];
  bool launched[VK_N];          /* launched at least once (then compiled for some shape) */
  fadsl_program *dprog;         /* the decoding program (decode.fa); NULL until first used */
  bool downed;
  fadsl_kernel *dk[DK_N];
  fadsl_args *dargs[DK_N];
} FaAttnExtra;

/* A handle's parts, by reference. */
typedef struct FaAttnHandle {
  fadsl_context *ctx;
  fadsl_program *prog;            /* attention.fa, or the file the handle was created from */
  pthread_mutex_t *lock;          /* held while arguments are bound and kernels launched */
  char *error;                    /* the last error's message */
  size_t error_size;
  const int *block_q, *block_k;   /* fadsl_attention_set_config's (0: automatic) */
  const int *warps, *stages;
  fadsl_kernel_info *info;        /* [FADSL_ATTENTION_KERNELS]: of the last launch */
  int *launched;                  /* [FADSL_ATTENTION_KERNELS] */
  FaAttnExtra **extra;
} FaAttnHandle;

/* fadsl_attention.c */
FaAttnHandle fa_attn_handle(fadsl_attention *a);

/* fadsl_attention_backward_ex with no variant in opts (read in full): the
 * plain program, fused when opts->dq_accum is given. */
fadsl_status fa_attn_api_backward_plain(fadsl_attention *a, const fadsl_attention_options *opts, uint64_t q,
                                        uint64_t k, uint64_t v, uint64_t o, uint64_t lse, uint64_t do_, uint64_t dq,
                                        uint64_t dk, uint64_t dv, uint64_t delta, int B, int H, int KVH, int Nq,
                                        int Nkv, int D, float scale, fadsl_attention_dtype dtype, void *stream);


/* attention_compile.c: compiles the kernels with their bound arguments at
 * once, one thread each (for the GPU; kernels[i] NULL: not that one; nothing
 * when fewer than two are left), so that the launches that follow find them
 * compiled.  cache[i] says where kernel i's compilation found it ("miss":
 * compiled now; NULL: failed or not tried).  Failures are left to the
 * launches. */
void fa_attn_compile_together(fadsl_kernel *const *kernels, fadsl_args *const *args, int n, const char **cache);
/* A launch's info after fa_attn_compile_together: the launch found the
 * kernel in memory, but this call compiled it (cache "miss") or read it
 * from disk, and info says so. */
void fa_attn_note_compiled(fadsl_kernel_info *info, const char *cache);

/* attention_variants.c */
void fa_attn_extra_free(FaAttnExtra *x);

/* The embedded .fa texts (attention_fa.c): attention.fa first. */
extern const fadsl_module_text fa_attention_modules[];
extern const int fa_attention_nmodules;

/* fadsl_attention.c: the embedded text of module `name` (NULL if none), and
 * whether a kernel (NULL: none) has a parameter of that name (a constexpr the
 * built-in programs have and a program of the caller's may lack). */
const char *fa_attn_module_text(const char *name);
bool fa_attn_kernel_has(fadsl_kernel *k, const char *name);

#endif
