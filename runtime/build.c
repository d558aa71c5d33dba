/* build.c - CUDA C++ -> cubin through the kernel cache: key, lookup, NVRTC
 * on a miss, store. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rt.h"

void fa_rt_binary_free(FaRtBinary *b) {
  free(b->cubin);
  free(b->log);
  memset(b, 0, sizeof *b);
}

/* The key of a compilation: everything that can change the cubin. */
static void build_key(const FaNvrtcApi *api, const char *source, const char *const *header_names,
                      const char *const *header_texts, int nheaders, const char *options,
                      const char *arch, unsigned char key[FA_SHA256_BYTES]) {
  FaSha256 h;
  fa_sha256_init(&h);
  fa_cache_key_str(&h, "fadsl kernel cache key v1");
  fa_cache_key_str(&h, PACKAGE_VERSION);
  char nvrtc_version[32];
  snprintf(nvrtc_version, sizeof nvrtc_version, "nvrtc %d.%d", api->major, api->minor);
  fa_cache_key_str(&h, nvrtc_version);
  fa_cache_key_str(&h, arch);
  fa_cache_key_str(&h, options);
  fa_cache_key_str(&h, source);
  for (int i = 0; i < nheaders; i++) {
    fa_cache_key_str(&h, header_names[i]);
    fa_cache_key_str(&h, header_texts[i]);
  }
  fa_sha256_final(&h, key);
}

/* The ptxas report is kept as a second entry beside the cubin, so that its
 * spill counts are known on cache hits too (everything else about resource
 * usage is read from the cubin itself, see cubin.h). */
static void report_key(const unsigned char key[FA_SHA256_BYTES], unsigned char out[FA_SHA256_BYTES]) {
  FaSha256 h;
  fa_sha256_init(&h);
  fa_cache_key_field(&h, key, FA_SHA256_BYTES);
  fa_cache_key_str(&h, "ptxas report");
  fa_sha256_final(&h, out);
}

fadsl_status fa_rt_build_cubin(fadsl_context *ctx, const char *source, const char *name,
                               const char *const *header_names, const char *const *header_texts,
                               int nheaders, const char *arch, FaRtBinary *out) {
  memset(out, 0, sizeof *out);
  const FaNvrtcApi *api;
  fadsl_status st = fa_rt_nvrtc(ctx, &api);
  if (st != FADSL_SUCCESS) return st;
  FaNvrtcOptions opt;
  fa_nvrtc_options_init(&opt, arch);
  opt.resource_usage = true;
  StrBuf options;
  fa_sb_init(&options);
  if (!fa_nvrtc_option_string(&opt, &options)) {
    fa_sb_free(&options);
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                      "unknown GPU architecture '%s' (expected e.g. sm_80 or sm_90a)", arch);
  }
  unsigned char key[FA_SHA256_BYTES], rkey[FA_SHA256_BYTES];
  build_key(api, source, header_names, header_texts, nheaders, options.data ? options.data : "",
            arch, key);
  fa_sb_free(&options);
  report_key(key, rkey);

  out->hit = fa_cache_get(&ctx->cache, key, &out->cubin, &out->size);
  if (out->hit != FA_CACHE_MISS) {
    unsigned char *report = NULL;
    size_t n = 0;
    if (fa_cache_get(&ctx->cache, rkey, &report, &n) != FA_CACHE_MISS) {
      out->log = malloc(n + 1);
      if (out->log) {
        memcpy(out->log, report, n);
        out->log[n] = '\0';
      }
      free(report);
    }
    if (!out->log) out->log = calloc(1, 1);
    if (!out->log) {
      fa_rt_binary_free(out);
      return FADSL_ERROR_OUT_OF_MEMORY;
    }
    return FADSL_SUCCESS;
  }

  FaNvrtcOutput res;
  StrBuf err;
  fa_sb_init(&err);
  st = fa_nvrtc_compile(api, source, name, header_names, header_texts, nheaders, &opt, &res, &err);
  if (st != FADSL_SUCCESS) {
    fa_rt_fail(ctx, st, "%s", err.data ? err.data : "NVRTC failed");
    fa_sb_free(&err);
    fa_nvrtc_output_free(&res);
    return st;
  }
  fa_sb_free(&err);
  fa_cache_put(&ctx->cache, key, res.code, res.size);
  /* An empty log (no report, no warnings: some NVRTC builds give ptxas'
   * report to a process's first compilation only) is not stored: a disk hit
   * then has no report, and the resource usage comes from the cubin. */
  if (res.log[0]) fa_cache_put(&ctx->cache, rkey, (const unsigned char *)res.log, strlen(res.log));
  out->cubin = res.code;
  out->size = res.size;
  out->log = res.log;
  out->hit = FA_CACHE_MISS;
  return FADSL_SUCCESS;
}
