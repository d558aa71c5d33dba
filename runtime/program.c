/* program.c - loading .fa programs (parse + check) and finding kernels. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "modules.h"
#include "rt_program.h"

/* Parses and checks `text`; on success fills prog->prog and the kernels. */
static fadsl_status load(fadsl_program *prog, const char *text, size_t len) {
  fadsl_context *ctx = prog->ctx;
  FaCompiler *fc = &prog->fc;
  Source *src = fa_source_new(fc, prog->name, text, len);
  if (!src) return fa_rt_fail(ctx, FADSL_ERROR_OUT_OF_MEMORY, "out of memory loading %s", prog->name);
  Node *module = fa_parse(fc, src);
  if (module) prog->prog = fa_program_check(fc, module);
  if (!module || !prog->prog || fc->diag.errors > 0)
    return fa_rt_fail(ctx, FADSL_ERROR_PROGRAM, "%s",
                      fc->diag.text.data && fc->diag.text.len ? fc->diag.text.data
                                                              : "the program was rejected");
  int n = prog->prog->nkernels;
  prog->kernels = calloc(n > 0 ? (size_t)n : 1, sizeof *prog->kernels);
  if (!prog->kernels) return FADSL_ERROR_OUT_OF_MEMORY;
  prog->nkernels = n;   /* before the loop: a failure in it frees what it made */
  for (int i = 0; i < n; i++) {
    fadsl_kernel *k = &prog->kernels[i];
    k->program = prog;
    k->info = prog->prog->kernels[i];
    /* the names a default point reads, looked up at every launch (bind.c's
       memo_key): walking the prune and prefer there cost microseconds */
    k->point_reads = calloc((size_t)k->info->nparams + 1, sizeof *k->point_reads);
    if (!k->point_reads) return FADSL_ERROR_OUT_OF_MEMORY;
    for (int j = 0; j < k->info->nparams; j++)
      k->point_reads[j] = fa_autotune_point_reads(k->info, k->info->params[j].name);
  }
  return FADSL_SUCCESS;
}

static fadsl_program *program_new(fadsl_context *ctx, const char *name) {
  fadsl_program *prog = calloc(1, sizeof *prog);
  if (!prog) return NULL;
  prog->ctx = ctx;
  prog->name = strdup(name);
  if (!prog->name) {
    free(prog);
    return NULL;
  }
  fa_compiler_init(&prog->fc, NULL);
  pthread_mutex_init(&prog->lock, NULL);
  return prog;
}

FADSL_API void fadsl_program_destroy(fadsl_program *prog) {
  if (!prog) return;
  for (int i = 0; i < prog->nkernels; i++) {
    for (FaRtVariant *v = prog->kernels[i].variants, *next; v; v = next) {
      next = v->next;
      fa_rt_variant_free(prog->ctx, v);
    }
    fa_rt_default_memo_free(&prog->kernels[i]);
    free(prog->kernels[i].point_reads);
  }
  free(prog->kernels);
  fa_compiler_free(&prog->fc);
  pthread_mutex_destroy(&prog->lock);
  free(prog->name);
  free(prog);
}

FADSL_API fadsl_status fadsl_program_load_string(fadsl_context *ctx, const char *name,
                                                 const char *text, fadsl_program **out) {
  if (!out) return FADSL_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!ctx || !text) return FADSL_ERROR_INVALID_ARGUMENT;
  fadsl_program *prog = program_new(ctx, name ? name : "<string>");
  if (!prog) return FADSL_ERROR_OUT_OF_MEMORY;
  fadsl_status st = load(prog, text, strlen(text));
  if (st != FADSL_SUCCESS) {
    fadsl_program_destroy(prog);
    return st;
  }
  *out = prog;
  return FADSL_SUCCESS;
}

FADSL_API fadsl_status fadsl_program_load_file(fadsl_context *ctx, const char *path,
                                               fadsl_program **out) {
  if (!out) return FADSL_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!ctx || !path) return FADSL_ERROR_INVALID_ARGUMENT;
  size_t len = 0;
  char *text = fa_read_file(path, &len);
  if (!text) return fa_rt_fail(ctx, FADSL_ERROR_IO, "%s: cannot read: %s", path, strerror(errno));
  fadsl_program *prog = program_new(ctx, path);
  fadsl_status st = prog ? load(prog, text, len) : FADSL_ERROR_OUT_OF_MEMORY;
  free(text);
  if (st != FADSL_SUCCESS) {
    fadsl_program_destroy(prog);
    return st;
  }
  *out = prog;
  return FADSL_SUCCESS;
}

FADSL_API int fadsl_program_kernel_count(const fadsl_program *prog) {
  return prog ? prog->nkernels : 0;
}

FADSL_API const char *fadsl_program_kernel_name(const fadsl_program *prog, int i) {
  if (!prog || i < 0 || i >= prog->nkernels) return NULL;
  return prog->kernels[i].info->name;
}

FADSL_API fadsl_status fadsl_program_kernel(fadsl_program *prog, const char *name,
                                            fadsl_kernel **out) {
  if (!out) return FADSL_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!prog || !name) return FADSL_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < prog->nkernels; i++)
    if (strcmp(prog->kernels[i].info->name, name) == 0) {
      *out = &prog->kernels[i];
      return FADSL_SUCCESS;
    }
  StrBuf names;
  fa_sb_init(&names);
  for (int i = 0; i < prog->nkernels; i++)
    fa_sb_printf(&names, "%s%s", i ? ", " : "", prog->kernels[i].info->name);
  fadsl_status st = fa_rt_fail(prog->ctx, FADSL_ERROR_NOT_FOUND, "%s has no kernel '%s' (it has: %s)",
                               prog->name, name, names.data ? names.data : "none");
  fa_sb_free(&names);
  return st;
}

FADSL_API fadsl_status fadsl_program_load_with_modules(fadsl_context *ctx, const char *name,
                                                       const char *text,
                                                       const fadsl_module_text *modules,
                                                       int nmodules, fadsl_program **out) {
  if (!out) return FADSL_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!ctx || !text || nmodules < 0 || (nmodules && !modules)) return FADSL_ERROR_INVALID_ARGUMENT;
  FaModuleText *texts = calloc(nmodules > 0 ? (size_t)nmodules : 1, sizeof *texts);
  fadsl_program *prog = texts ? program_new(ctx, name ? name : "<string>") : NULL;
  if (!prog) {
    free(texts);
    return FADSL_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < nmodules; i++) {
    texts[i].name = modules[i].name;
    texts[i].text = modules[i].text;
  }
  /* the given modules first: a built-in program must not pick up a file of
   * the same name from the current directory */
  FaImportPath path = {NULL, 0, texts, nmodules, true, false};
  prog->fc.imports = &path;
  fadsl_status st = load(prog, text, strlen(text));
  prog->fc.imports = NULL;   /* imports are resolved while the program is checked */
  free(texts);
  if (st != FADSL_SUCCESS) {
    fadsl_program_destroy(prog);
    return st;
  }
  *out = prog;
  return FADSL_SUCCESS;
}
