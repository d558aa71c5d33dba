/* fadslc_cuda.c - fadslc's --emit=cuda|ptx|cubin (see fadslc_cuda.h). */
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_plan.h"
#include "fadslc_cuda.h"
#include "problem_binds.h"

#include "cuda_loader.h"
#include "nvrtc_compile.h"

static bool compile_with_nvrtc(FaCompiler *fc, const FaCudaKernel *ck, const char *unit, const char *arch,
                               bool ptx, FILE *out) {
  FaCudaLoader loader;
  fa_loader_init(&loader, 0);
  const char *why = NULL;
  const FaNvrtcApi *api = fa_loader_nvrtc(&loader, &why);
  bool ok = false;
  if (!api) {
    fa_error(&fc->diag, fa_noloc(), "cannot compile to %s: %s", ptx ? "PTX" : "a cubin",
             why ? why : "NVRTC not found");
    fa_loader_free(&loader);
    return false;
  }
  int nh = 0;
  const FaEmbeddedHeader *hs = fa_device_headers(&nh);
  const char **names = calloc((size_t)nh + 1, sizeof *names);
  const char **texts = calloc((size_t)nh + 1, sizeof *texts);
  if (names && texts) {
    for (int i = 0; i < nh; i++) {
      names[i] = hs[i].name;
      texts[i] = hs[i].text;
    }
    FaNvrtcOptions opt;
    fa_nvrtc_options_init(&opt, arch);
    opt.ptx = ptx;
    FaNvrtcOutput res;
    memset(&res, 0, sizeof res);
    StrBuf err;
    fa_sb_init(&err);
    fadsl_status st = fa_nvrtc_compile(api, ck->source, unit, names, texts, nh, &opt, &res, &err);
    if (st != FADSL_SUCCESS) {
      fa_error(&fc->diag, fa_noloc(), "NVRTC could not compile the generated code of '%s' for %s: %s", ck->entry,
               arch, err.data ? err.data : "");
    } else {
      if (res.log && strstr(res.log, "warning"))
        fprintf(stderr, "%s", res.log);
      ok = fwrite(res.code, 1, res.size, out) == res.size;
    }
    fa_sb_free(&err);
    fa_nvrtc_output_free(&res);
  } else {
    fa_error(&fc->diag, fa_noloc(), "out of memory");
  }
  free(names);
  free(texts);
  fa_loader_free(&loader);
  return ok;
}

/* --assume: facts about runtime integer and pointer parameters. */
static bool parse_assumptions(FaCompiler *fc, const FaKernelInfo *k, const FaCompileRequest *req, FaArgFact **facts,
                              int *nfacts) {
  for (int i = 0; i < req->nassume; i++) {
    const char *why = NULL;
    int before = *nfacts;
    if (!fa_arg_facts_parse(&fc->arena, req->assume[i], facts, nfacts, &why)) {
      fa_error(&fc->diag, fa_noloc(), "--assume %s: %s", req->assume[i], why);
      return false;
    }
    for (int f = before; f < *nfacts; f++) {
      const FaParamInfo *pi = NULL;
      for (int j = 0; j < k->nparams; j++)
        if (!strcmp(k->params[j].name, (*facts)[f].name))
          pi = &k->params[j];
      bool integer = pi && pi->kind == PARAM_SCALAR && (pi->dtype == DT_VOID || fa_dtype_is_int(pi->dtype));
      if (!pi || !(integer || pi->kind == PARAM_POINTER)) {
        fa_error(&fc->diag, fa_noloc(), "--assume %s: '%s' is not a runtime integer or pointer parameter of '%s'",
                 req->assume[i], (*facts)[f].name, k->name);
        return false;
      }
    }
  }
  return true;
}

bool fa_fadslc_compile(FaCompiler *fc, const Node *module, const FaCompileRequest *req, FILE *out) {
  FaProgram *p = fa_program_check(fc, module);
  if (!p)
    return false;
  if (!req->kernel) {
    fa_error(&fc->diag, fa_noloc(), "--emit=%s needs --kernel NAME", req->what);
    return false;
  }
  FaKernelInfo *k = fa_program_kernel(p, req->kernel);
  if (!k) {
    fa_error(&fc->diag, fa_noloc(), "there is no kernel '%s'", req->kernel);
    return false;
  }
  const char *arch = req->arch ? req->arch : "sm_80";
  FaCudaTarget target;
  if (!fa_cuda_target_parse(arch, &target)) {
    fa_error(&fc->diag, fa_noloc(), "--arch %s: not a supported GPU architecture (sm_80 or newer, e.g. sm_80, "
             "sm_90a)", arch);
    return false;
  }
  FaLaunchConfig cfg = req->config;
  FaBinding *binds = NULL;
  int nb = fa_kernel_bindings_for_compile(fc, p, k, req->defines, req->ndefines, target.sm, &binds, &cfg);
  if (nb < 0)
    return false;
  FaArgFact *facts = NULL;
  int nfacts = 0;
  if (!parse_assumptions(fc, k, req, &facts, &nfacts))
    return false;
  FaCudaSpec spec = {p, k, binds, nb, cfg, target, facts, nfacts};
  bool want_plan = !strcmp(req->what, "plan");
  FaCudaPlan plan;
  IrKernel *ir;
  FaCudaKernel ck;
  if (fa_cuda_compile(fc, &spec, &ir, &ck, want_plan ? &plan : NULL) != FA_CUDA_DONE) {
    if (want_plan)
      fa_cuda_plan_free(&plan);
    return false;
  }
  if (want_plan) {
    StrBuf sb;
    fa_sb_init(&sb);
    fa_cuda_plan_print(&plan, &sb);
    fa_cuda_plan_free(&plan);
    bool ok = fputs(sb.data ? sb.data : "", out) >= 0;
    fa_sb_free(&sb);
    return ok;
  }
  if (!strcmp(req->what, "cuda"))
    return fputs(ck.source, out) >= 0;
  char name[64];
  fa_cuda_target_name(target, name, sizeof name);
  const char *unit = fa_arena_printf(&fc->arena, "%s.cu", k->name);
  return compile_with_nvrtc(fc, &ck, unit ? unit : "kernel.cu", name, !strcmp(req->what, "ptx"), out);
}
