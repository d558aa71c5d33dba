/* attention_compile.c - the kernels of a pass compiled side by side.
 *
 * A backward pass launches three kernels, and each is compiled on its first
 * launch: one after another, the pass's first call took the sum of three
 * NVRTC compilations (0.5 to 3.1 s on an H200's host for the variants, most
 * of it the two large kernels).  The runtime compiles on any thread (NVRTC
 * runs outside its locks), so the kernels a pass has not run yet are
 * compiled first, one thread each, and the launches then find them in the
 * context's kernel cache: the first call pays the longest compilation
 * instead of the sum.  Errors are left to the launches, which compile again
 * and report them where they belong. */
#include "attention_internal.h"

#include <pthread.h>
#include <string.h>

#include "fadsl.h"

enum { MAX_TOGETHER = 8 };

typedef struct CompileJob {
  fadsl_kernel *kernel;
  const fadsl_args *args;
  const char *cache;   /* out: where the compilation found the kernel; NULL when it failed */
} CompileJob;

static void *compile_job(void *arg) {
  CompileJob *job = arg;
  fadsl_kernel_info info;
  /* a failure is the launch's to report */
  job->cache = fadsl_compile(job->kernel, job->args, NULL, &info) == FADSL_SUCCESS ? info.cache : NULL;
  return NULL;
}

void fa_attn_compile_together(fadsl_kernel *const *kernels, fadsl_args *const *args, int n, const char **cache) {
  CompileJob jobs[MAX_TOGETHER];
  int at[MAX_TOGETHER], m = 0;   /* jobs[j] compiles kernels[at[j]] */
  for (int i = 0; i < n; i++) {
    cache[i] = NULL;
    if (kernels[i] && m < MAX_TOGETHER) {
      jobs[m] = (CompileJob){kernels[i], args[i], NULL};
      at[m++] = i;
    }
  }
  if (m < 2)
    return;   /* nothing to overlap: the launch compiles it */
  pthread_t threads[MAX_TOGETHER];
  bool started[MAX_TOGETHER] = {false};
  for (int j = 1; j < m; j++)
    started[j] = pthread_create(&threads[j], NULL, compile_job, &jobs[j]) == 0;
  compile_job(&jobs[0]);
  for (int j = 1; j < m; j++) {
    if (started[j])
      pthread_join(threads[j], NULL);
    else
      compile_job(&jobs[j]);   /* no thread for it: here, after the others */
  }
  for (int j = 0; j < m; j++)
    cache[at[j]] = jobs[j].cache;
}

void fa_attn_note_compiled(fadsl_kernel_info *info, const char *cache) {
  if (cache && info->cache && !strcmp(info->cache, "memory"))
    info->cache = cache;
}
