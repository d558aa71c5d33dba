/* modules.h - `import` and `from ... import`: finding the modules a program
 * imports and linking them with it into the one module that the program
 * check (sema.c) and everything after it see.
 *
 * A module is a .fa file (or a text given by the embedding program, such as
 * a library's built-in programs).  Each module has its own namespace: its
 * functions and constants, and the names it imports.  Linking gives every
 * definition of an imported module a qualified name, "MODULE.NAME" (a name
 * no source can spell, so it cannot clash), and rewrites each module's
 * references to what they denote; the importing program's own names stay as
 * they are.  Definitions keep their nodes, so diagnostics and --emit output
 * point into the file that defines them.
 *
 * Kernels and problems of an imported module become kernels and problems of
 * the program only when the program imports them by name (`from core import
 * attn_bwd_d`); helpers and constants are there for whoever refers to them.
 *
 * Where a module is looked for (a dotted name a.b means the path a/b.fa; a
 * string is a path, relative unless it starts with '/'):
 *   1. relative to the directory of the importing file;
 *   2. in FaImportPath.dirs, in order;
 *   3. in the directories of $FADSL_PATH (colon-separated), unless ignore_env;
 *   4. among FaImportPath.texts, by name (relative to the importing text's
 *      name first, when the importer is itself a text).
 * With texts_first, 4 comes before 1-3 (a library whose built-in programs
 * must never pick up files from the current directory).
 */
#ifndef FADSL_MODULES_H
#define FADSL_MODULES_H

#include <stdbool.h>

#include "ast.h"

/* A module given as text: `name` is the path an import finds it by
 * ("attention_core.fa", "variants/window.fa"). */
typedef struct FaModuleText {
  const char *name;
  const char *text;
} FaModuleText;

/* Set on FaCompiler.imports (the caller keeps it alive while programs are
 * checked). */
typedef struct FaImportPath {
  const char *const *dirs;
  int ndirs;
  const FaModuleText *texts;
  int ntexts;
  bool texts_first;
  bool ignore_env;
} FaImportPath;

/* Whether a parsed module has import statements. */
bool fa_module_has_imports(const Node *module);

/* Loads, parses and links everything `module` imports (transitively) and
 * returns the linked module; `module` itself when it imports nothing.
 * Errors (a module not found, a name it does not define, an import cycle, a
 * name imported twice or both imported and defined) are reported with their
 * locations; then NULL. */
const Node *fa_modules_link(FaCompiler *fc, const Node *module);

#endif
