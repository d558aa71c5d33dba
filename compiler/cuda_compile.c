/* cuda_compile.c - the entry point of the CUDA backend (see cuda_backend.h):
 * specialise a kernel of a checked program, plan it, print the plan. */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_plan.h"

FaCudaStage fa_cuda_compile(FaCompiler *fc, const FaCudaSpec *spec, IrKernel **ir, FaCudaKernel *out,
                            FaCudaPlan *plan) {
  memset(out, 0, sizeof *out);
  if (plan)
    memset(plan, 0, sizeof *plan);
  *ir = NULL;
  FaLaunchConfig config = spec->config;
  fa_config_fill_defaults(&config);
  int errors = fc->diag.errors;
  IrKernel *k = fa_specialize(fc, spec->program, spec->kernel, spec->binds, spec->nbinds, config);
  if (!k || fc->diag.errors > errors)
    return FA_CUDA_SPECIALISE_FAILED;
  *ir = k;
  FaCudaPlan local;
  FaCudaPlan *p = plan ? plan : &local;
  if (!fa_cuda_plan(fc, k, spec->target, spec->facts, spec->nfacts, p))
    return FA_CUDA_EMIT_FAILED;
  bool ok = fa_emit_cuda_plan(p, out) && fc->diag.errors == errors;
  if (!plan)
    fa_cuda_plan_free(p);
  return ok ? FA_CUDA_DONE : FA_CUDA_EMIT_FAILED;
}

/* ---- facts about the arguments -------------------------------------------------------------- */

/* The largest power of two, up to FA_SPECIALISE_MULTIPLE, that divides x
 * (two's complement keeps a negative integer's low bits: the same answer). */
static long long pow2_divisor(uint64_t x) {
  long long m = 1;
  while (m < FA_SPECIALISE_MULTIPLE && x % (uint64_t)(2 * m) == 0)
    m *= 2;
  return m;
}

bool fa_arg_fact_of_int(const char *name, int64_t value, FaArgFact *out) {
  long long m = pow2_divisor((uint64_t)value);
  if (m < FA_SPECIALISE_MULTIPLE_MIN)
    return false;
  out->name = name;
  out->multiple = m;
  return true;
}

FaArgFact fa_arg_fact_of_pointer(const char *name, uint64_t address) {
  FaArgFact f = {name, pow2_divisor(address)};
  return f;
}

void fa_arg_facts_print(const FaArgFact *facts, int n, StrBuf *out) {
  for (int i = 0; i < n; i++)
    fa_sb_printf(out, "%s%s%%%lld", i ? " " : "", facts[i].name ? facts[i].name : "?", facts[i].multiple);
}

bool fa_arg_facts_parse(Arena *arena, const char *text, FaArgFact **facts, int *n, const char **why) {
  const char *p = text;
  while (*p) {
    const char *start = p;
    while (*p && (isalnum((unsigned char)*p) || *p == '_'))
      p++;
    if (p == start || isdigit((unsigned char)*start) || *p != '%') {
      *why = "expected NAME%K, e.g. N%16";
      return false;
    }
    const char *name = fa_arena_strndup(arena, start, (size_t)(p - start));
    char *end = NULL;
    long long k = strtoll(p + 1, &end, 10);
    if (!end || end == p + 1 || k < 1 || (k & (k - 1)) != 0 || k > (1ll << 30)) {
      *why = "the divisor after % must be a power of two (1, 2, 4, ... 16, ...)";
      return false;
    }
    FaArgFact *grown = fa_arena_alloc(arena, (size_t)(*n + 1) * sizeof *grown);
    if (!grown || !name) {
      *why = "out of memory";
      return false;
    }
    if (*n)
      memcpy(grown, *facts, (size_t)*n * sizeof *grown);
    grown[*n].name = name;
    grown[*n].multiple = k;
    *facts = grown;
    (*n)++;
    p = end;
    if (*p == ',')
      p++;
    else if (*p) {
      *why = "facts are separated by commas: M%16,N%16";
      return false;
    }
  }
  return true;
}
