/* check_modules.c - unit tests of the module mechanism (modules.c): what an
 * import binds (functions, constants, modules, aliases, kernels imported by
 * name), linked names, shadowing by locals, where modules are found (the
 * importing file's directory, $FADSL_PATH, texts a host hands over, texts
 * first), modules read once (a diamond), cycles across files with the chain
 * in the message, and errors inside an imported module located in its own
 * file.  Files are written to a fresh temporary directory.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modules.h"
#include "sema_internal.h"

typedef struct Ctx {
  FaCompiler fc;
  FaProgram *prog;
} Ctx;

static char tmpdir[64];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/fa-modules-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

/* Writes tmpdir/name (directories included). */
static void put(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  for (char *p = path + strlen(tmpdir) + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0700);
      *p = '/';
    }
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static const char *diag(Ctx *c) { return c->fc.diag.text.data ? c->fc.diag.text.data : ""; }

/* Reads, parses and checks tmpdir/name. */
static FaProgram *load(Ctx *c, const char *name, const FaImportPath *ip) {
  memset(c, 0, sizeof *c);
  fa_compiler_init(&c->fc, NULL);
  c->fc.imports = ip;
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  Source *src = fa_source_read(&c->fc, path);
  Node *m = src ? fa_parse(&c->fc, src) : NULL;
  c->prog = m ? fa_program_check(&c->fc, m) : NULL;
  return c->prog;
}

/* A program given as text named `name`. */
static FaProgram *load_text(Ctx *c, const char *name, const char *text, const FaImportPath *ip) {
  memset(c, 0, sizeof *c);
  fa_compiler_init(&c->fc, NULL);
  c->fc.imports = ip;
  Source *src = fa_source_new(&c->fc, name, text, strlen(text));
  Node *m = src ? fa_parse(&c->fc, src) : NULL;
  c->prog = m ? fa_program_check(&c->fc, m) : NULL;
  return c->prog;
}

static bool has_helper(const FaProgram *p, const char *name) {
  for (int i = 0; i < p->nhelpers; i++)
    if (!strcmp(p->helpers[i]->name, name))
      return true;
  return false;
}

static IrKernel *specialize(Ctx *c, const char *kernel) {
  FaKernelInfo *k = fa_program_kernel(c->prog, kernel);
  ck_assert_msg(k != NULL, "no kernel %s", kernel);
  FaLaunchConfig cfg = {.warps = 4, .stages = 2};
  return fa_specialize(&c->fc, c->prog, k, NULL, 0, cfg);
}

static const char *LIB = "SCALE: constexpr = 3.0\n"
                         "\n"
                         "def twice(x):\n"
                         "    return x * SCALE\n"
                         "\n"
                         "def thrice(x):\n"
                         "    return twice(x) + x\n"
                         "\n"
                         "@kernel(grid=(1,))\n"
                         "def fill(x: *f32[16], BLOCK: constexpr = 16):\n"
                         "    store(x + arange(0, BLOCK), thrice(1.0))\n";

START_TEST(test_names) {
  put("lib/core.fa", LIB);
  put("main.fa", "import lib.core\n"
                 "import lib.core as c\n"
                 "from \"lib/core.fa\" import twice as dbl, fill as fill2, SCALE\n"
                 "\n"
                 "def twice(y):\n"
                 "    return lib.core.thrice(y) - dbl(y) * SCALE + c.SCALE\n"
                 "\n"
                 "@kernel(grid=(1,))\n"
                 "def k(x: *f32[16]):\n"
                 "    offs = arange(0, 16)\n"
                 "    store(x + offs, twice(load(x + offs)))\n");
  Ctx c;
  ck_assert_msg(load(&c, "main.fa", NULL) != NULL, "%s", diag(&c));
  /* the program's own names stay; imported definitions carry their module's name */
  ck_assert(has_helper(c.prog, "twice"));
  ck_assert(has_helper(c.prog, "core.twice"));
  ck_assert(has_helper(c.prog, "core.thrice"));
  /* a kernel imported by name is the program's, under its alias; the module's own is not */
  ck_assert_ptr_nonnull(fa_program_kernel(c.prog, "fill2"));
  ck_assert_ptr_null(fa_program_kernel(c.prog, "fill"));
  ck_assert_ptr_null(fa_program_kernel(c.prog, "core.fill"));
  ck_assert_msg(specialize(&c, "k") != NULL, "%s", diag(&c));
  ck_assert_msg(specialize(&c, "fill2") != NULL, "%s", diag(&c));
  /* the imported constant keeps its value and folds */
  FaConst v;
  Node *e = fa_node_new(&c.fc, N_NAME, fa_noloc());
  e->name = "SCALE";
  ck_assert_msg(fa_eval_const(&c.fc, c.prog, e, NULL, 0, &v), "%s", diag(&c));
  ck_assert(v.kind == CK_FLOAT && v.f == 3.0);
  fa_compiler_free(&c.fc);
}
END_TEST

START_TEST(test_locals_shadow) {
  put("lib/core.fa", LIB);
  /* a parameter and a local named like imported functions are the locals */
  put("main.fa", "from lib.core import twice, thrice\n"
                 "\n"
                 "def f(twice, x):\n"
                 "    thrice = x + twice\n"
                 "    return thrice\n"
                 "\n"
                 "@kernel(grid=(1,))\n"
                 "def k(x: *f32[16]):\n"
                 "    offs = arange(0, 16)\n"
                 "    store(x + offs, f(1.0, load(x + offs)))\n");
  Ctx c;
  ck_assert_msg(load(&c, "main.fa", NULL) != NULL, "%s", diag(&c));
  ck_assert_msg(specialize(&c, "k") != NULL, "%s", diag(&c));
  fa_compiler_free(&c.fc);
}
END_TEST

START_TEST(test_error_in_module) {
  put("lib/bad.fa", "def h(x):\n"
                    "    return x + undefined_thing\n");
  put("main.fa", "from lib.bad import h\n"
                 "\n"
                 "@kernel(grid=(1,))\n"
                 "def k(x: *f32[16]):\n"
                 "    store(x + arange(0, 16), h(1.0))\n");
  Ctx c;
  ck_assert_ptr_null(load(&c, "main.fa", NULL));
  /* reported in the module's own file, at the use */
  ck_assert_msg(strstr(diag(&c), "lib/bad.fa:2:16: error: unknown name 'undefined_thing'"), "%s", diag(&c));
  fa_compiler_free(&c.fc);
}
END_TEST

START_TEST(test_cycle_chain) {
  put("a.fa", "import b\nX = 1\n");
  put("b.fa", "import c\nY = 2\n");
  put("c.fa", "from a import X\n");
  Ctx c;
  ck_assert_ptr_null(load(&c, "a.fa", NULL));
  ck_assert_msg(strstr(diag(&c), "c.fa:1:6: error: import cycle: ") && strstr(diag(&c), "a.fa imports ") &&
                    strstr(diag(&c), "b.fa imports ") && strstr(diag(&c), "c.fa imports "),
                "%s", diag(&c));
  fa_compiler_free(&c.fc);
}
END_TEST

START_TEST(test_diamond) {
  put("d.fa", "def base(x):\n    return x + 1.0\n");
  put("b.fa", "from d import base\ndef viab(x):\n    return base(x)\n");
  put("c.fa", "import d\ndef viac(x):\n    return d.base(x)\n");
  put("a.fa", "from b import viab\nfrom c import viac\n"
              "@kernel(grid=(1,))\ndef k(x: *f32[16]):\n    store(x + arange(0, 16), viab(1.0) + viac(2.0))\n");
  Ctx c;
  ck_assert_msg(load(&c, "a.fa", NULL) != NULL, "%s", diag(&c));
  int bases = 0;
  for (int i = 0; i < c.prog->nhelpers; i++)
    bases += !strcmp(c.prog->helpers[i]->name, "d.base");
  ck_assert_int_eq(bases, 1);   /* read once */
  ck_assert_msg(specialize(&c, "k") != NULL, "%s", diag(&c));
  fa_compiler_free(&c.fc);
}
END_TEST

START_TEST(test_search_path) {
  put("far/away/core.fa", LIB);
  put("main.fa", "from core import twice\n"
                 "@kernel(grid=(1,))\ndef k(x: *f32[16]):\n    store(x + arange(0, 16), twice(1.0))\n");
  Ctx c;
  ck_assert_ptr_null(load(&c, "main.fa", NULL));
  ck_assert_msg(strstr(diag(&c), "cannot find module 'core' (looked for core.fa in"), "%s", diag(&c));
  fa_compiler_free(&c.fc);
  char dirs[600];
  snprintf(dirs, sizeof dirs, "/nonexistent:%s/far/away", tmpdir);
  setenv("FADSL_PATH", dirs, 1);
  ck_assert_msg(load(&c, "main.fa", NULL) != NULL, "%s", diag(&c));
  fa_compiler_free(&c.fc);
  /* an FaImportPath that ignores the environment */
  FaImportPath ip = {NULL, 0, NULL, 0, false, true};
  ck_assert_ptr_null(load(&c, "main.fa", &ip));
  fa_compiler_free(&c.fc);
  unsetenv("FADSL_PATH");
}
END_TEST

START_TEST(test_texts) {
  FaModuleText texts[] = {
      {"core.fa", LIB},
      {"variants/v.fa", "from \"../core.fa\" import thrice\n"
                        "def vv(x):\n    return thrice(x)\n"},
  };
  FaImportPath ip = {NULL, 0, texts, 2, true, true};
  const char *prog = "from \"variants/v.fa\" import vv\n"
                     "import core\n"
                     "@kernel(grid=(1,))\ndef k(x: *f32[16]):\n    store(x + arange(0, 16), vv(core.SCALE))\n";
  Ctx c;
  ck_assert_msg(load_text(&c, "main.fa", prog, &ip) != NULL, "%s", diag(&c));
  ck_assert(has_helper(c.prog, "v.vv") && has_helper(c.prog, "core.thrice"));
  ck_assert_msg(specialize(&c, "k") != NULL, "%s", diag(&c));
  fa_compiler_free(&c.fc);
  /* texts first: a file of the same name in the current directory is not taken */
  put("core.fa", "this is not a program\n");
  char cwd[512];
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  ck_assert_int_eq(chdir(tmpdir), 0);
  ck_assert_msg(load_text(&c, "main.fa", prog, &ip) != NULL, "%s", diag(&c));
  fa_compiler_free(&c.fc);
  /* without texts first, the file is found first (and fails to parse) */
  FaImportPath files_first = {NULL, 0, texts, 2, false, true};
  ck_assert_ptr_null(load_text(&c, "main.fa", prog, &files_first));
  fa_compiler_free(&c.fc);
  ck_assert_int_eq(chdir(cwd), 0);
}
END_TEST

START_TEST(test_no_imports_unchanged) {
  Ctx c;
  memset(&c, 0, sizeof c);
  fa_compiler_init(&c.fc, NULL);
  const char *text = "def f(x):\n    return x\n";
  Source *src = fa_source_new(&c.fc, "t.fa", text, strlen(text));
  Node *m = fa_parse(&c.fc, src);
  ck_assert(!fa_module_has_imports(m));
  ck_assert_ptr_eq(fa_modules_link(&c.fc, m), m);   /* nothing to link: the module itself */
  fa_compiler_free(&c.fc);
}
END_TEST

int main(void) {
  Suite *s = suite_create("modules");
  TCase *t = tcase_create("modules");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_names);
  tcase_add_test(t, test_locals_shadow);
  tcase_add_test(t, test_error_in_module);
  tcase_add_test(t, test_cycle_chain);
  tcase_add_test(t, test_diamond);
  tcase_add_test(t, test_search_path);
  tcase_add_test(t, test_texts);
  tcase_add_test(t, test_no_imports_unchanged);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
