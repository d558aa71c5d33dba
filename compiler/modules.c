/* modules.c - finding, loading and linking imported modules (modules.h).
 *
 * Linking walks the import graph depth first from the program (cycles are
 * errors), so that a module's dependencies are linked before it.  For each
 * module it builds a namespace (Def: what a name of that module denotes),
 * then rewrites the module's definitions against it: a reference to a name
 * of the module's own, or to an imported one, becomes the definition's
 * linked name, "MODULE.NAME" ("NAME" for the program's own definitions), and
 * `mod.NAME` of a module imported with `import` becomes the same.  Names a
 * function binds (its parameters and everything it assigns) shadow module
 * names, as in Python.  Rewriting copies only the nodes on the path to a
 * change, so the parsed trees stay as they were (fadslc --emit=ast/source
 * print them), and unchanged nodes keep their identity and locations.
 *
 * The linked module is the program's items in order, preceded by the
 * helpers and constants of the imported modules (dependencies first), with
 * a copy of each kernel or problem the program imports by name, named as the
 * program calls it, and a constant NAME = MODULE.NAME for each constant it
 * imports by name.
 */
#include "modules.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct Module Module;

typedef enum DefKind { DEF_FUNC, DEF_CONST, DEF_MODULE } DefKind;

/* What a name of a module denotes. */
typedef struct Def {
  DefKind kind;
  const char *name;          /* the name in this module */
  const char *linked;        /* DEF_FUNC / DEF_CONST: its name in the linked module */
  const Node *fn;            /* DEF_FUNC: the source N_FUNC (of the defining module) */
  const Node **linked_fn;    /* DEF_FUNC: where the rewritten N_FUNC will be (set when its module is done) */
  Module *module;            /* DEF_MODULE: that module */
  SrcLoc at;                 /* where it was defined or imported */
  bool imported;
} Def;

struct Module {
  const char *key;           /* realpath of the file, or "text:" + name */
  const char *display;       /* the path or text name, for messages */
  const char *text_name;     /* for a text module: its (normalised) name; else NULL */
  const char *prefix;        /* "" for the program, else "SHORTNAME." */
  const Source *src;
  const Node *ast;
  int state;                 /* 0 not linked, 1 being linked, 2 linked */
  bool failed;               /* errors in it or in what it imports */
  Def *defs;
  int ndefs, capdefs;
  const Node **fns;          /* rewritten functions, one slot per function def (see Def.linked_fn) */
};

typedef struct Linker {
  FaCompiler *fc;
  PtrVec modules;            /* Module* */
  PtrVec stack;              /* Module* being linked, outermost first */
  PtrVec items;              /* Node*: the linked module's body */
  bool err;
} Linker;

static void lerror(Linker *K, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void lerror(Linker *K, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fa_diag_vreport(&K->fc->diag, loc, DIAG_ERROR, fmt, ap);
  va_end(ap);
  K->err = true;
}

static void *oom(Linker *K) {
  lerror(K, fa_noloc(), "out of memory");
  return NULL;
}

bool fa_module_has_imports(const Node *module) {
  if (!module || module->kind != N_MODULE)
    return false;
  for (int i = 0; i < module->body.len; i++) {
    NodeKind k = module->body.items[i]->kind;
    if (k == N_IMPORT || k == N_FROM_IMPORT)
      return true;
  }
  return false;
}

/* ---- paths --------------------------------------------------------------------------- */

/* The directory part of a path ("" for a bare file name), with its '/'. */
static char *dir_of(Arena *A, const char *path) {
  const char *slash = strrchr(path, '/');
  return fa_arena_strndup(A, path, slash ? (size_t)(slash - path + 1) : 0);
}

/* Removes "." components and "x/.." pairs, lexically; keeps leading "..". */
static char *normalize(Arena *A, const char *path) {
  size_t n = strlen(path);
  char *out = fa_arena_alloc(A, n + 2);
  const char **parts = fa_arena_alloc(A, (n / 2 + 2) * sizeof *parts);
  size_t *lens = fa_arena_alloc(A, (n / 2 + 2) * sizeof *lens);
  if (!out || !parts || !lens)
    return NULL;
  bool absolute = path[0] == '/';
  int np = 0;
  for (const char *p = path; *p;) {
    while (*p == '/')
      p++;
    const char *e = p;
    while (*e && *e != '/')
      e++;
    size_t len = (size_t)(e - p);
    if (len == 0 || (len == 1 && p[0] == '.')) {
      /* skip */
    } else if (len == 2 && p[0] == '.' && p[1] == '.' && np > 0 &&
               !(lens[np - 1] == 2 && parts[np - 1][0] == '.' && parts[np - 1][1] == '.')) {
      np--;
    } else if (!(len == 2 && p[0] == '.' && p[1] == '.' && absolute && np == 0)) {
      parts[np] = p;
      lens[np++] = len;
    }
    p = e;
  }
  size_t o = 0;
  if (absolute)
    out[o++] = '/';
  for (int i = 0; i < np; i++) {
    if (i)
      out[o++] = '/';
    memcpy(out + o, parts[i], lens[i]);
    o += lens[i];
  }
  out[o] = '\0';
  return out;
}

/* "a.b" -> "a/b.fa"; a string is the path itself. */
static const char *ref_path(Arena *A, const Node *ref) {
  if (ref->kind == N_STR)
    return ref->str;
  char *p = fa_arena_printf(A, "%s.fa", ref->name);
  if (p)
    for (char *c = p; c[3]; c++)
      if (*c == '.')
        *c = '/';
  return p;
}

/* How the module is called in messages and linked names: its file name
 * without the directory and the .fa. */
static const char *short_name(Arena *A, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n > 3 && !strcmp(base + n - 3, ".fa"))
    n -= 3;
  return fa_arena_strndup(A, base, n);
}

static bool is_regular_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- finding and loading ---------------------------------------------------------------- */

static Module *find_loaded(Linker *K, const char *key) {
  for (int i = 0; i < K->modules.len; i++) {
    Module *m = K->modules.items[i];
    if (!strcmp(m->key, key))
      return m;
  }
  return NULL;
}

static Module *module_new(Linker *K, const char *key, const char *display, const char *text_name) {
  Arena *A = &K->fc->arena;
  Module *m = fa_arena_alloc(A, sizeof *m);
  if (!m)
    return oom(K);
  m->key = fa_arena_strdup(A, key);
  m->display = fa_arena_strdup(A, display);
  m->text_name = text_name ? fa_arena_strdup(A, text_name) : NULL;
  const char *base = short_name(A, display);
  /* linked names must differ between modules that share a file name */
  const char *prefix = fa_arena_printf(A, "%s.", base);
  for (int n = 2; prefix; n++) {
    bool taken = false;
    for (int i = 0; i < K->modules.len; i++)
      taken |= !strcmp(((Module *)K->modules.items[i])->prefix, prefix);
    if (!taken)
      break;
    prefix = fa_arena_printf(A, "%s~%d.", base, n);
  }
  m->prefix = prefix;
  if (!m->key || !m->display || !m->prefix || (text_name && !m->text_name))
    return oom(K);
  fa_ptrvec_push(&K->modules, m);
  return K->modules.items ? m : oom(K);
}

/* Parses a module's text; NULL after errors (reported by the parser). */
static Module *load_text(Linker *K, const char *key, const char *display, const char *text_name, const char *text,
                         size_t len) {
  Module *m = module_new(K, key, display, text_name);
  if (!m)
    return NULL;
  m->src = fa_source_new(K->fc, display, text, len);
  if (!m->src)
    return oom(K);
  m->ast = fa_parse(K->fc, m->src);
  if (!m->ast)
    K->err = true;
  return m;
}

static Module *load_file(Linker *K, const char *open_path, const char *display, SrcLoc at) {
  char real[PATH_MAX];
  const char *key = realpath(open_path, real) ? real : open_path;
  Module *m = find_loaded(K, key);
  if (m)
    return m;
  size_t len = 0;
  char *text = fa_read_file(open_path, &len);
  if (!text) {
    lerror(K, at, "cannot read module '%s': %s", display, strerror(errno));
    return NULL;
  }
  if (len > INT_MAX / 2) {
    free(text);
    lerror(K, at, "module '%s' is too large", display);
    return NULL;
  }
  m = load_text(K, key, display, NULL, text, len);
  free(text);
  return m;
}

static const FaModuleText *find_text(const FaImportPath *ip, const char *name) {
  for (int i = 0; ip && name && i < ip->ntexts; i++)
    if (ip->texts[i].name && ip->texts[i].text && !strcmp(ip->texts[i].name, name))
      return &ip->texts[i];
  return NULL;
}

static Module *load_from_texts(Linker *K, const Module *importer, const char *rel) {
  Arena *A = &K->fc->arena;
  const FaImportPath *ip = K->fc->imports;
  if (!ip || !ip->ntexts || rel[0] == '/')
    return NULL;
  const char *names[2] = {NULL, normalize(A, rel)};
  if (importer->text_name)
    names[0] = normalize(A, fa_arena_printf(A, "%s%s", dir_of(A, importer->text_name), rel));
  for (int i = 0; i < 2; i++) {
    const FaModuleText *t = find_text(ip, names[i]);
    if (!t)
      continue;
    const char *key = fa_arena_printf(A, "text:%s", t->name);
    if (!key)
      return oom(K);
    Module *m = find_loaded(K, key);
    return m ? m : load_text(K, key, t->name, t->name, t->text, strlen(t->text));
  }
  return NULL;
}

/* Adds the directories of a colon-separated list to `dirs`. */
static void split_dirs(Arena *A, const char *list, PtrVec *dirs) {
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ':');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n)
      fa_ptrvec_push(dirs, fa_arena_strndup(A, p, n));
    p = e ? e + 1 : p + n;
  }
}

/* Tries dir + rel for each directory; on success returns the module. */
static Module *load_from_dirs(Linker *K, const PtrVec *dirs, const char *rel, SrcLoc at, StrBuf *looked) {
  Arena *A = &K->fc->arena;
  if (rel[0] == '/') {
    if (is_regular_file(rel))
      return load_file(K, rel, rel, at);
    fa_sb_puts(looked, "/");
    return NULL;
  }
  for (int i = 0; i < dirs->len; i++) {
    const char *d = dirs->items[i];
    const char *joined = fa_arena_printf(A, "%s%s%s", d, *d && d[strlen(d) - 1] != '/' ? "/" : "", rel);
    const char *display = joined ? normalize(A, joined) : NULL;
    const char *dir = normalize(A, d);
    if (!display || !dir)
      return oom(K);
    if (is_regular_file(joined))
      return load_file(K, joined, display, at);
    fa_sb_printf(looked, "%s%s", looked->len ? ", " : "", dir[0] ? dir : ".");
  }
  return NULL;
}

/* Finds (loading it if need be) the module an import statement names. */
static Module *resolve(Linker *K, const Module *importer, const Node *ref) {
  Arena *A = &K->fc->arena;
  const FaImportPath *ip = K->fc->imports;
  const char *rel = ref_path(A, ref);
  if (!rel)
    return oom(K);
  if (!rel[0]) {
    lerror(K, ref->loc, "empty module path");
    return NULL;
  }
  Module *m = NULL;
  if (ip && ip->texts_first && (m = load_from_texts(K, importer, rel)))
    return m;
  PtrVec dirs = {0};
  if (!importer->text_name)
    fa_ptrvec_push(&dirs, dir_of(A, importer->src->name));
  for (int i = 0; ip && i < ip->ndirs; i++)
    fa_ptrvec_push(&dirs, (void *)ip->dirs[i]);
  if (!ip || !ip->ignore_env)
    split_dirs(A, getenv("FADSL_PATH"), &dirs);
  StrBuf looked;
  fa_sb_init(&looked);
  m = load_from_dirs(K, &dirs, rel, ref->loc, &looked);
  fa_ptrvec_free(&dirs);
  if (!m && !(ip && ip->texts_first))
    m = load_from_texts(K, importer, rel);
  if (!m) {
    const char *what = ref->kind == N_STR ? "module file" : "module";
    if (ip && ip->ntexts)
      fa_sb_printf(&looked, "%sthe built-in modules", looked.len ? ", " : "");
    lerror(K, ref->loc, "cannot find %s '%s' (looked for %s in %s)", what, ref->kind == N_STR ? ref->str : ref->name,
           rel, looked.len ? looked.data : "no directory");
  }
  fa_sb_free(&looked);
  return m;
}

/* ---- namespaces ---------------------------------------------------------------------------- */

static Def *lookup(Module *m, const char *name) {
  for (int i = 0; i < m->ndefs; i++)
    if (!strcmp(m->defs[i].name, name))
      return &m->defs[i];
  return NULL;
}

static const char *def_what(const Def *d) {
  if (d->kind == DEF_MODULE)
    return "module";
  if (d->kind == DEF_CONST)
    return "constant";
  if (fa_func_is_kernel(d->fn))
    return "kernel";
  return fa_func_decorator(d->fn, "problem") ? "problem" : "helper";
}

/* Adds a definition.  A clash with an import is an error here; a clash
 * between two definitions of the module is left to the program check, which
 * reports it (with the linked names) as for any program. */
static Def *add_def(Linker *K, Module *m, Def d) {
  Def *old = lookup(m, d.name);
  if (old && (old->imported || d.imported)) {
    const Def *first = old->at.line < d.at.line || (old->at.line == d.at.line && old->at.col <= d.at.col) ? old : &d;
    const Def *second = first == old ? &d : old;
    lerror(K, second->at, "'%s' is %s at line %d and %s here", d.name, first->imported ? "imported" : "defined",
           first->at.line, second->imported ? "imported again" : "defined again");
    return NULL;
  }
  if (old)
    return old;
  if (m->ndefs == m->capdefs) {
    int cap = m->capdefs ? 2 * m->capdefs : 16;
    Def *defs = fa_arena_alloc(&K->fc->arena, (size_t)cap * sizeof *defs);
    if (!defs)
      return oom(K);
    if (m->ndefs)
      memcpy(defs, m->defs, (size_t)m->ndefs * sizeof *defs);
    m->defs = defs;
    m->capdefs = cap;
  }
  m->defs[m->ndefs] = d;
  return &m->defs[m->ndefs++];
}

static const Node *const_target(const Node *s) {
  if (s->kind == N_ANNASSIGN && s->rhs && s->lhs && s->lhs->kind == N_NAME)
    return s->lhs;
  if (s->kind == N_ASSIGN && s->args.len == 1 && s->args.items[0]->kind == N_NAME)
    return s->args.items[0];
  return NULL;
}

static bool is_root(const Module *m) { return m->prefix[0] == '\0'; }

static bool link_module(Linker *K, Module *m);

/* The module an import statement names, linked. */
static Module *imported_module(Linker *K, Module *m, const Node *s) {
  Module *dep = resolve(K, m, s->lhs);
  if (!dep || !dep->ast)
    return NULL;
  if (dep->state == 1) {
    StrBuf chain;
    fa_sb_init(&chain);
    int from = 0;
    while (from < K->stack.len && K->stack.items[from] != dep)
      from++;
    for (int i = from; i < K->stack.len; i++)
      fa_sb_printf(&chain, "%s imports ", ((Module *)K->stack.items[i])->display);
    fa_sb_puts(&chain, dep->display);
    lerror(K, s->lhs->loc, "import cycle: %s", chain.data ? chain.data : "");
    fa_sb_free(&chain);
    return NULL;
  }
  if (dep->state == 0)
    link_module(K, dep);
  return dep->failed ? NULL : dep;
}

/* `import a.b [as x]`: the name x (or a.b) denotes the module. */
static void import_module(Linker *K, Module *m, const Node *s) {
  Module *dep = imported_module(K, m, s);
  if (!dep)
    return;
  const char *alias = s->name;
  if (!alias && s->lhs->kind == N_NAME)
    alias = s->lhs->name;
  if (!alias) {
    lerror(K, s->lhs->loc, "importing a module by its path needs a name for it: import \"%s\" as NAME",
           s->lhs->str);
    return;
  }
  Def d = {DEF_MODULE, alias, NULL, NULL, NULL, dep, s->loc, true};
  add_def(K, m, d);
}

/* `from M import a [as b], ...`: each name denotes what it denotes in M. */
static void import_names(Linker *K, Module *m, const Node *s) {
  Module *dep = imported_module(K, m, s);
  if (!dep)
    return;
  for (int i = 0; i < s->args.len; i++) {
    const Node *it = s->args.items[i];
    Def *target = lookup(dep, it->name);
    if (!target) {
      lerror(K, it->loc, "module '%s' (%s) has no '%s'", short_name(&K->fc->arena, dep->display), dep->display,
             it->name);
      continue;
    }
    Def d = *target;
    d.name = it->rhs ? it->rhs->name : it->name;
    d.at = it->rhs ? it->rhs->loc : it->loc;
    d.imported = true;
    /* a kernel or problem the program imports by name is copied into it under that name */
    if (is_root(m) && d.kind == DEF_FUNC && (fa_func_is_kernel(d.fn) || fa_func_decorator(d.fn, "problem")))
      d.linked = d.name;
    add_def(K, m, d);
  }
}

/* Pass 1: the module's own definitions and its imports. */
static void collect_defs(Linker *K, Module *m) {
  Arena *A = &K->fc->arena;
  const NodeList *body = &m->ast->body;
  int nfns = 0;
  for (int i = 0; i < body->len; i++)
    nfns += body->items[i]->kind == N_FUNC;
  m->fns = fa_arena_alloc(A, (size_t)(nfns + 1) * sizeof *m->fns);
  if (!m->fns) {
    oom(K);
    return;
  }
  int f = 0;
  for (int i = 0; i < body->len; i++) {
    const Node *s = body->items[i];
    if (s->kind == N_IMPORT) {
      import_module(K, m, s);
    } else if (s->kind == N_FROM_IMPORT) {
      import_names(K, m, s);
    } else if (s->kind == N_FUNC) {
      Def d = {DEF_FUNC, s->name, fa_arena_printf(A, "%s%s", m->prefix, s->name), s, &m->fns[f++], NULL, s->loc,
               false};
      if (!d.linked)
        oom(K);
      else
        add_def(K, m, d);
    } else if (const_target(s)) {
      const Node *t = const_target(s);
      Def d = {DEF_CONST, t->name, fa_arena_printf(A, "%s%s", m->prefix, t->name), NULL, NULL, NULL, t->loc, false};
      if (!d.linked)
        oom(K);
      else
        add_def(K, m, d);
    }
  }
}

/* ---- rewriting ------------------------------------------------------------------------------- */

/* The names a function binds: parameters and assignment targets. */
typedef struct Locals {
  PtrVec names;
} Locals;

static bool is_local(const Locals *l, const char *name) {
  for (int i = 0; l && i < l->names.len; i++)
    if (!strcmp(l->names.items[i], name))
      return true;
  return false;
}

static void add_targets(Locals *l, const Node *t) {
  if (!t)
    return;
  if (t->kind == N_NAME)
    fa_ptrvec_push(&l->names, (void *)t->name);
  else if (t->kind == N_TUPLE || t->kind == N_LIST)
    for (int i = 0; i < t->args.len; i++)
      add_targets(l, t->args.items[i]);
}

static void collect_assigned(Locals *l, const NodeList *body) {
  for (int i = 0; i < body->len; i++) {
    const Node *s = body->items[i];
    switch (s->kind) {
    case N_ASSIGN:
      for (int j = 0; j < s->args.len; j++)
        add_targets(l, s->args.items[j]);
      break;
    case N_AUGASSIGN:
    case N_ANNASSIGN: add_targets(l, s->lhs); break;
    case N_FOR:
      add_targets(l, s->lhs);
      collect_assigned(l, &s->body);
      break;
    case N_IF:
      collect_assigned(l, &s->body);
      collect_assigned(l, &s->orelse);
      break;
    case N_WHILE: collect_assigned(l, &s->body); break;
    default: break;
    }
  }
}

typedef struct Rewriter {
  Linker *K;
  Module *m;
  const Locals *locals;
} Rewriter;

static Node *rewrite(Rewriter *R, Node *n);

static Node *copy_node(Linker *K, const Node *n) {
  Node *c = fa_arena_alloc(&K->fc->arena, sizeof *c);
  if (!c)
    return oom(K);
  *c = *n;
  return c;
}

static Node *name_node(Linker *K, const char *name, SrcLoc loc) {
  Node *c = fa_node_new(K->fc, N_NAME, loc);
  if (!c)
    return oom(K);
  c->name = name;
  return c;
}

/* A list rewritten; the same list when nothing in it changed. */
static NodeList rewrite_list(Rewriter *R, NodeList l, bool *changed) {
  NodeList out = l;
  bool copied = false;
  for (int i = 0; i < l.len; i++) {
    Node *n = rewrite(R, l.items[i]);
    if (n == l.items[i])
      continue;
    if (!copied) {
      out.items = fa_arena_alloc(&R->K->fc->arena, (size_t)(l.len ? l.len : 1) * sizeof(Node *));
      if (!out.items) {
        oom(R->K);
        return l;
      }
      memcpy(out.items, l.items, (size_t)l.len * sizeof(Node *));
      copied = true;
    }
    out.items[i] = n;
  }
  *changed |= copied;
  return out;
}

/* What a plain name refers to in this module: the linked name, or NULL to
 * leave it (a local, a builtin, a dtype, or unknown: the check reports it). */
static const char *resolve_name(Rewriter *R, const Node *n) {
  if (is_local(R->locals, n->name))
    return NULL;
  const Def *d = lookup(R->m, n->name);
  if (!d)
    return NULL;
  if (d->kind == DEF_MODULE) {
    lerror(R->K, n->loc, "'%s' is a module; name what it defines: %s.NAME", n->name, n->name);
    return NULL;
  }
  return strcmp(d->linked, n->name) ? d->linked : NULL;
}

/* The dotted spelling of an attribute chain of names (a.b.c), or NULL. */
static const char *dotted(Arena *A, const Node *n) {
  if (n->kind == N_NAME)
    return n->name;
  if (n->kind != N_ATTR)
    return NULL;
  const char *base = dotted(A, n->lhs);
  return base ? fa_arena_printf(A, "%s.%s", base, n->name) : NULL;
}

/* The first name of a chain. */
static const Node *chain_base(const Node *n) {
  while (n->kind == N_ATTR)
    n = n->lhs;
  return n;
}

/* mod.NAME (mod imported with `import`): the linked name of NAME.  Returns
 * n unchanged when the chain does not start with a module. */
static Node *rewrite_attr(Rewriter *R, Node *n) {
  Arena *A = &R->K->fc->arena;
  const Node *base = chain_base(n);
  if (base->kind != N_NAME || is_local(R->locals, base->name))
    return NULL;
  const char *whole = dotted(A, n);
  const Def *self = whole ? lookup(R->m, whole) : NULL;
  if (self && self->kind == DEF_MODULE) {
    lerror(R->K, n->loc, "'%s' is a module; name what it defines: %s.NAME", whole, whole);
    return n;
  }
  /* the longest prefix of the chain that names a module of this module's */
  const Node *mod_node = NULL;
  const Def *mod = NULL;
  for (const Node *p = n->lhs; p; p = p->kind == N_ATTR ? p->lhs : NULL) {
    const char *s = dotted(A, p);
    const Def *d = s ? lookup(R->m, s) : NULL;
    if (d && d->kind == DEF_MODULE) {
      mod = d;
      mod_node = p;
      break;
    }
    if (p->kind != N_ATTR)
      break;
  }
  if (!mod)
    return NULL;
  /* walk down from the module: mod.x, then (mod.x).y ... */
  const Node *path[FA_MAX_EXPR_DEPTH];
  int depth = 0;
  for (const Node *p = n; p != mod_node && depth < FA_MAX_EXPR_DEPTH; p = p->lhs)
    path[depth++] = p;
  Module *cur = mod->module;
  for (int i = depth - 1; i >= 0; i--) {
    const Node *a = path[i];
    const Def *d = lookup(cur, a->name);
    if (!d) {
      lerror(R->K, a->loc, "module '%s' (%s) has no '%s'", short_name(A, cur->display), cur->display, a->name);
      return n;
    }
    if (d->kind == DEF_MODULE) {
      cur = d->module;
      continue;
    }
    if (d->kind == DEF_FUNC && (fa_func_is_kernel(d->fn) || fa_func_decorator(d->fn, "problem")) &&
        strchr(d->linked, '.')) {
      lerror(R->K, a->loc, "%s '%s' of module '%s' is not part of this program: import it by name (from %s import %s)",
             def_what(d), a->name, short_name(A, cur->display), dotted(A, mod_node), a->name);
      return n;
    }
    Node *out = name_node(R->K, d->linked, a->loc);
    /* what follows the definition (x.dtype, f(...).y) stays an attribute of it */
    for (int j = i - 1; out && j >= 0; j--) {
      Node *attr = copy_node(R->K, path[j]);
      if (!attr)
        return n;
      attr->lhs = out;
      out = attr;
    }
    return out ? out : n;
  }
  lerror(R->K, n->loc, "'%s' is a module; name what it defines: %s.NAME", dotted(A, n), dotted(A, n));
  return n;
}

static Node *rewrite(Rewriter *R, Node *n) {
  if (!n)
    return n;
  if (n->kind == N_NAME) {
    const char *linked = resolve_name(R, n);
    if (!linked)
      return n;
    Node *c = copy_node(R->K, n);
    if (c)
      c->name = linked;
    return c ? c : n;
  }
  if (n->kind == N_ATTR) {
    Node *r = rewrite_attr(R, n);
    if (r)
      return r;
  }
  bool changed = false;
  Node tmp = *n;
  Node **fields[] = {&tmp.lhs, &tmp.rhs, &tmp.cond, &tmp.then, &tmp.els, &tmp.lo, &tmp.hi, &tmp.step, &tmp.annot};
  for (int i = 0; i < FA_ARRAY_LEN(fields); i++) {
    Node *r = rewrite(R, *fields[i]);
    changed |= r != *fields[i];
    *fields[i] = r;
  }
  tmp.args = rewrite_list(R, n->args, &changed);
  tmp.kwargs = rewrite_list(R, n->kwargs, &changed);
  tmp.body = rewrite_list(R, n->body, &changed);
  tmp.orelse = rewrite_list(R, n->orelse, &changed);
  tmp.decorators = rewrite_list(R, n->decorators, &changed);
  tmp.params = rewrite_list(R, n->params, &changed);
  if (!changed)
    return n;
  Node *c = copy_node(R->K, &tmp);
  return c ? c : n;
}

/* A function with its references rewritten, named `name`. */
static const Node *rewrite_func(Linker *K, Module *m, const Node *fn, const char *name) {
  Locals params = {{0}}, body = {{0}}, deco = {{0}};
  for (int i = 0; i < fn->params.len; i++) {
    const char *p = fn->params.items[i]->name;
    fa_ptrvec_push(&params.names, (void *)p);
    fa_ptrvec_push(&body.names, (void *)p);
    fa_ptrvec_push(&deco.names, (void *)p);
  }
  /* @autotune(prune=...) may name the launch settings */
  fa_ptrvec_push(&deco.names, "warps");
  fa_ptrvec_push(&deco.names, "stages");
  collect_assigned(&body, &fn->body);
  Node *c = copy_node(K, fn);
  if (c && (params.names.len && !params.names.items))
    c = oom(K);
  if (c) {
    bool changed = false;
    Rewriter R = {K, m, &params};
    c->params = rewrite_list(&R, fn->params, &changed);
    c->annot = rewrite(&R, fn->annot);
    R.locals = &deco;
    c->decorators = rewrite_list(&R, fn->decorators, &changed);
    R.locals = &body;
    c->body = rewrite_list(&R, fn->body, &changed);
    c->name = name;
  }
  fa_ptrvec_free(&params.names);
  fa_ptrvec_free(&body.names);
  fa_ptrvec_free(&deco.names);
  return c;
}

/* Pass 2: the module's items in the linked module. */
static void emit_items(Linker *K, Module *m) {
  const NodeList *body = &m->ast->body;
  int f = 0;
  for (int i = 0; i < body->len; i++) {
    Node *s = body->items[i];
    if (s->kind == N_FUNC) {
      const char *name = m->prefix[0] ? fa_arena_printf(&K->fc->arena, "%s%s", m->prefix, s->name) : s->name;
      const Node *fn = name ? rewrite_func(K, m, s, name) : oom(K);
      m->fns[f++] = fn;
      bool exported = is_root(m) || !(fa_func_is_kernel(s) || fa_func_decorator(s, "problem"));
      if (fn && exported)
        fa_ptrvec_push(&K->items, (void *)fn);
      continue;
    }
    if (s->kind == N_IMPORT)
      continue;
    if (s->kind == N_FROM_IMPORT) {
      if (!is_root(m))
        continue;
      /* the kernels and problems the program takes from a module, and its
       * constants under the program's names (for what evaluates a name of the
       * program from outside it, such as fa_eval_const) */
      for (int j = 0; j < s->args.len; j++) {
        const Node *it = s->args.items[j];
        const Def *d = lookup(m, it->rhs ? it->rhs->name : it->name);
        if (d && d->kind == DEF_CONST) {
          Node *assign = fa_node_new(K->fc, N_ASSIGN, d->at);
          Node *target = name_node(K, d->name, d->at), *value = name_node(K, d->linked, d->at);
          if (!assign || !target || !value)
            return;
          fa_nodelist_push(K->fc, &assign->args, target);
          assign->rhs = value;
          fa_ptrvec_push(&K->items, assign);
          continue;
        }
        if (!d || d->kind != DEF_FUNC || strcmp(d->linked, d->name) || !d->linked_fn || !*d->linked_fn)
          continue;
        Node *copy = copy_node(K, *d->linked_fn);
        if (copy) {
          copy->name = d->name;
          fa_ptrvec_push(&K->items, copy);
        }
      }
      continue;
    }
    Rewriter R = {K, m, NULL};
    Node *r = rewrite(&R, s);
    const Node *t = const_target(s);
    if (t && m->prefix[0]) {
      /* the constant's own name, qualified */
      Node *target = name_node(K, fa_arena_printf(&K->fc->arena, "%s%s", m->prefix, t->name), t->loc);
      if (r == s)
        r = copy_node(K, s);
      if (!target || !r || !target->name)
        return;
      if (r->kind == N_ANNASSIGN) {
        r->lhs = target;
      } else {
        Node **one = fa_arena_alloc(&K->fc->arena, sizeof *one);
        if (!one) {
          oom(K);
          return;
        }
        one[0] = target;
        r->args.items = one;
        r->args.len = 1;
      }
    }
    if (r)
      fa_ptrvec_push(&K->items, r);
  }
}

/* Links one module (its imports first).  Every error of its imports and
 * their uses is reported; the result is used only when there was none. */
static bool link_module(Linker *K, Module *m) {
  int errors = K->fc->diag.errors;
  m->state = 1;
  fa_ptrvec_push(&K->stack, m);
  collect_defs(K, m);
  /* rewriting reports the errors of the uses (mod.NAME that does not exist,
   * a module used as a value) even after errors in the imports; names that
   * failed to import stay as they are and are not reported again */
  emit_items(K, m);
  K->stack.len--;
  m->state = 2;
  m->failed = K->fc->diag.errors > errors;
  return !m->failed;
}

const Node *fa_modules_link(FaCompiler *fc, const Node *module) {
  if (!fa_module_has_imports(module))
    return module;
  Linker K;
  memset(&K, 0, sizeof K);
  K.fc = fc;
  const char *name = module->loc.src ? module->loc.src->name : "<string>";
  char real[PATH_MAX];
  /* keyed like any file, so that a module importing the program is a cycle */
  const char *key = is_regular_file(name) && realpath(name, real) ? real : "(the program)";
  Module *root = module_new(&K, key, name, NULL);
  const Node *out = NULL;
  if (root) {
    root->prefix = "";
    root->src = module->loc.src;
    root->ast = module;
    /* a program given as a text of the import path imports relative to it */
    const FaImportPath *ip = fc->imports;
    if (ip && ip->texts_first && root->src && find_text(ip, root->src->name))
      root->text_name = root->src->name;
    if (root->src && link_module(&K, root)) {
      Node *linked = fa_node_new(fc, N_MODULE, module->loc);
      if (linked) {
        for (int i = 0; i < K.items.len; i++)
          fa_nodelist_push(fc, &linked->body, K.items.items[i]);
        if (linked->body.len == K.items.len)
          out = linked;
      }
      if (!out)
        oom(&K);
    }
  }
  fa_ptrvec_free(&K.modules);
  fa_ptrvec_free(&K.stack);
  fa_ptrvec_free(&K.items);
  return out;
}
