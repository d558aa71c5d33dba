/* nvrtc.c - run-time compilation of generated CUDA C++ with NVRTC, and
 * parsing of ptxas' resource report. */
#include "nvrtc_compile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fa_nvrtc_options_init(FaNvrtcOptions *o, const char *arch) {
  memset(o, 0, sizeof *o);
  o->arch = arch;
  o->lineinfo = true;
}

bool fa_arch_parse(const char *arch, int *sm, bool *arch_specific) {
  const char *p;
  if (!arch) return false;
  if (strncmp(arch, "sm_", 3) == 0)
    p = arch + 3;
  else if (strncmp(arch, "compute_", 8) == 0)
    p = arch + 8;
  else
    return false;
  if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1])) return false;
  int n = 0;
  while (isdigit((unsigned char)*p) && n < 1000) n = n * 10 + (*p++ - '0');
  bool a = false;
  if (*p == 'a') {
    a = true;
    p++;
  }
  if (*p) return false;
  if (sm) *sm = n;
  if (arch_specific) *arch_specific = a;
  return true;
}

/* Builds the option array; strings live in `store` (kept alive by the caller). */
static int build_options(const FaNvrtcOptions *o, const char **argv, int max, char *arch_opt,
                         size_t arch_size) {
  int sm;
  bool a;
  if (!fa_arch_parse(o->arch, &sm, &a)) return -1;
  snprintf(arch_opt, arch_size, "-arch=%s_%d%s", o->ptx ? "compute" : "sm", sm, a ? "a" : "");
  int n = 0;
  argv[n++] = arch_opt;
  argv[n++] = "-std=c++17";
  argv[n++] = "-default-device";
  if (o->lineinfo) argv[n++] = "-lineinfo";
  if (o->fast_math) argv[n++] = "--use_fast_math";
  if (o->resource_usage && !o->ptx) argv[n++] = "--ptxas-options=-v";
  for (int i = 0; i < o->nextra && n < max; i++) argv[n++] = o->extra[i];
  return n;
}

enum { MAX_OPTIONS = 64 };

bool fa_nvrtc_option_string(const FaNvrtcOptions *o, StrBuf *out) {
  const char *argv[MAX_OPTIONS];
  char arch_opt[64];
  int n = build_options(o, argv, MAX_OPTIONS, arch_opt, sizeof arch_opt);
  if (n < 0) return false;
  for (int i = 0; i < n; i++) {
    fa_sb_puts(out, argv[i]);
    fa_sb_putc(out, '\n');
  }
  return true;
}

void fa_nvrtc_output_free(FaNvrtcOutput *o) {
  free(o->code);
  free(o->log);
  memset(o, 0, sizeof *o);
}

bool fa_nvrtc_supports_sm(const FaNvrtcApi *api, int sm) {
  int n = 0;
  if (!api->nvrtcGetNumSupportedArchs || !api->nvrtcGetSupportedArchs) return true;
  if (api->nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 4096) return true;
  int *archs = malloc(sizeof(int) * (size_t)n);
  if (!archs) return true;
  bool found = false;
  if (api->nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) found = true;
  for (int i = 0; i < n && !found; i++) found = archs[i] == sm;
  free(archs);
  return found;
}

static char *program_log(const FaNvrtcApi *api, nvrtcProgram prog) {
  size_t size = 0;
  if (api->nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0) size = 1;
  char *log = calloc(size + 1, 1);
  if (log && size > 1 && api->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) log[0] = '\0';
  return log;
}

fadsl_status fa_nvrtc_compile(const FaNvrtcApi *api, const char *source, const char *name,
                              const char *const *header_names, const char *const *header_texts,
                              int nheaders, const FaNvrtcOptions *opt, FaNvrtcOutput *out,
                              StrBuf *err) {
  memset(out, 0, sizeof *out);
  const char *argv[MAX_OPTIONS];
  char arch_opt[64];
  int argc = build_options(opt, argv, MAX_OPTIONS, arch_opt, sizeof arch_opt);
  if (argc < 0) {
    out->log = calloc(1, 1);
    fa_sb_printf(err, "unknown GPU architecture '%s' (expected sm_NN or sm_NNa, e.g. sm_80, sm_90a)",
                 opt->arch ? opt->arch : "(null)");
    return FADSL_ERROR_INVALID_ARGUMENT;
  }
  int sm = 0;
  fa_arch_parse(opt->arch, &sm, NULL);
  if (!fa_nvrtc_supports_sm(api, sm)) {
    out->log = calloc(1, 1);
    fa_sb_printf(err, "NVRTC %d.%d cannot compile for %s (too new or too old for it)", api->major,
                 api->minor, opt->arch);
    return FADSL_ERROR_UNSUPPORTED;
  }

  nvrtcProgram prog;
  nvrtcResult r = api->nvrtcCreateProgram(&prog, source, name, nheaders, header_texts, header_names);
  if (r != NVRTC_SUCCESS) {
    out->log = calloc(1, 1);
    fa_sb_printf(err, "nvrtcCreateProgram failed for %s: %s", name, api->nvrtcGetErrorString(r));
    return r == NVRTC_ERROR_OUT_OF_MEMORY ? FADSL_ERROR_OUT_OF_MEMORY : FADSL_ERROR_NVRTC;
  }
  r = api->nvrtcCompileProgram(prog, argc, argv);
  out->log = program_log(api, prog);
  fadsl_status st = FADSL_SUCCESS;
  if (!out->log) {
    st = FADSL_ERROR_OUT_OF_MEMORY;
    fa_sb_puts(err, "out of memory reading the NVRTC log");
  } else if (r != NVRTC_SUCCESS) {
    fa_sb_printf(err, "NVRTC could not compile %s for %s (%s):\n%s", name, opt->arch,
                 api->nvrtcGetErrorString(r), out->log);
    st = FADSL_ERROR_NVRTC;
  } else {
    size_t size = 0;
    r = opt->ptx ? api->nvrtcGetPTXSize(prog, &size) : api->nvrtcGetCUBINSize(prog, &size);
    if (r == NVRTC_SUCCESS && size == 0) {
      fa_sb_printf(err, "NVRTC produced no %s for %s", opt->ptx ? "PTX" : "cubin", opt->arch);
      st = FADSL_ERROR_NVRTC;
    } else if (r == NVRTC_SUCCESS) {
      out->code = malloc(size + 1);
      if (!out->code) {
        fa_sb_puts(err, "out of memory for the compiled code");
        st = FADSL_ERROR_OUT_OF_MEMORY;
      } else {
        r = opt->ptx ? api->nvrtcGetPTX(prog, (char *)out->code)
                     : api->nvrtcGetCUBIN(prog, (char *)out->code);
        out->code[size] = 0;
        /* NVRTC counts the PTX's terminating NUL in its size */
        out->size = opt->ptx ? strlen((char *)out->code) : size;
      }
    }
    if (st == FADSL_SUCCESS && r != NVRTC_SUCCESS) {
      fa_sb_printf(err, "NVRTC could not hand back the %s: %s", opt->ptx ? "PTX" : "cubin",
                   api->nvrtcGetErrorString(r));
      st = FADSL_ERROR_NVRTC;
    }
  }
  if (st != FADSL_SUCCESS) {
    free(out->code);
    out->code = NULL;
    out->size = 0;
  }
  api->nvrtcDestroyProgram(&prog);
  return st;
}

/* ---- resource usage -------------------------------------------------------- */

/* Finds "<number> <what>" in [line, end) and returns the number, or -1. */
static int number_before(const char *line, const char *end, const char *what) {
  size_t wlen = strlen(what);
  for (const char *p = line; p + wlen <= end; p++) {
    if (memcmp(p, what, wlen) != 0) continue;
    const char *q = p;
    while (q > line && q[-1] == ' ') q--;
    const char *digits_end = q;
    while (q > line && isdigit((unsigned char)q[-1])) q--;
    if (q == digits_end) continue;
    long v = strtol(q, NULL, 10);
    return v > 0x7fffffff ? 0x7fffffff : (int)v;
  }
  return -1;
}

/* Whether [line, end) contains `prefix` followed by the function name
 * (optionally quoted) and then the end of the name. */
static bool names_function(const char *line, const char *end, const char *prefix,
                           const char *entry, char *first, size_t first_size) {
  const char *p = strstr(line, prefix);
  if (!p || p >= end) return false;
  p += strlen(prefix);
  if (*p == '\'') p++;
  const char *name_end = p;
  while (name_end < end && *name_end != '\'' && !isspace((unsigned char)*name_end)) name_end++;
  size_t n = (size_t)(name_end - p);
  if (!entry) {
    if (!first[0]) {
      if (n >= first_size) n = first_size - 1;
      memcpy(first, p, n);
      first[n] = '\0';
    }
    return strlen(first) == (size_t)(name_end - p) && memcmp(first, p, n) == 0;
  }
  return strlen(entry) == n && memcmp(entry, p, n) == 0;
}

void fa_kernel_resources_unknown(FaKernelResources *r) {
  r->registers = r->spill_stores = r->spill_loads = -1;
  r->stack_frame = r->static_shared = r->barriers = r->max_threads = -1;
}

bool fa_parse_resource_usage(const char *log, const char *entry, FaKernelResources *out) {
  fa_kernel_resources_unknown(out);
  if (!log) return false;
  char first[256] = "";
  bool in_entry = false;      /* after "Compiling entry function" of ours */
  bool in_props = false;      /* after "Function properties for" ours */
  bool found = false;
  for (const char *line = log; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    if (strstr(line, "Compiling entry function") && strstr(line, "Compiling entry function") < end) {
      in_entry = names_function(line, end, "Compiling entry function ", entry, first, sizeof first);
      in_props = false;
    } else if (strstr(line, "Function properties for") &&
               strstr(line, "Function properties for") < end) {
      in_props = names_function(line, end, "Function properties for ", entry, first, sizeof first);
    } else if (in_props && number_before(line, end, "bytes stack frame") >= 0) {
      out->stack_frame = number_before(line, end, "bytes stack frame");
      out->spill_stores = number_before(line, end, "bytes spill stores");
      out->spill_loads = number_before(line, end, "bytes spill loads");
      in_props = false;
    } else if (in_entry && number_before(line, end, "registers") >= 0) {
      out->registers = number_before(line, end, "registers");
      int smem = number_before(line, end, "bytes smem");
      out->static_shared = smem < 0 ? 0 : smem;
      int bars = number_before(line, end, "barriers");
      out->barriers = bars < 0 ? 0 : bars;
      found = true;
      in_entry = false;
    }
    line = *end ? end + 1 : end;
  }
  return found;
}
