/* ast.h - the abstract syntax tree of a .fa program, and the front end's
 * entry points (lexer.l, parser.y, ast.c).
 *
 * One Node type serves every syntactic form (the chibicc way): the kind says
 * which fields are meaningful, as listed next to each kind below.  All nodes
 * live in the FaCompiler's arena and carry the location of their first token.
 */
#ifndef FADSL_AST_H
#define FADSL_AST_H

#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "util.h"

typedef struct Node Node;

/* Limits that keep every recursive pass over the tree within the stack:
 * bracket nesting and indentation levels (lexer), and the depth of any
 * expression or statement tree (parser, computed bottom-up as nodes are
 * built, so even a left-deep chain a+a+...+a is caught without recursion). */
#define FA_MAX_NESTING 200
#define FA_MAX_EXPR_DEPTH 1000

typedef struct NodeList {
  Node **items;
  int len;
} NodeList;

typedef enum NodeKind {
  /* ---- expressions ---- */
  N_NAME,       /* name */
  N_INT,        /* int_val; text = spelling (e.g. "0x10") */
  N_FLOAT,      /* float_val; text = spelling */
  N_STR,        /* str (decoded bytes; a NUL only via a \0 or \x00 escape), str_len; text = spelling */
  N_TRUE,
  N_FALSE,
  N_NONE,
  N_UNARY,      /* op (OP_NEG, OP_POS, OP_INVERT, OP_NOT), lhs */
  N_BINARY,     /* op (arithmetic, bitwise, comparison, OP_AND/OP_OR), lhs, rhs */
  N_IFEXP,      /* then if cond else els */
  N_CALL,       /* lhs(args..., kwargs...) ; kwargs are N_KEYWORD */
  N_KEYWORD,    /* name = rhs  (inside calls and decorators) */
  N_ATTR,       /* lhs.name */
  N_SUBSCRIPT,  /* lhs[args] ; args may hold N_SLICE and N_NONE */
  N_SLICE,      /* lo:hi:step, each may be NULL  (only inside a subscript) */
  N_TUPLE,      /* (args...) or a bare a, b */
  N_LIST,       /* [args...] */
  N_PTR_TYPE,   /* *lhs  or  *lhs[args] (extents in terms of other parameters) */

  /* ---- statements ---- */
  N_EXPR_STMT,  /* lhs */
  N_ASSIGN,     /* args = rhs ; args holds one target, or several for a = b = c.
                   A tuple target (a, b = ...) is one N_TUPLE target. */
  N_AUGASSIGN,  /* lhs op= rhs */
  N_ANNASSIGN,  /* lhs: annot = rhs  (module-level typed constants, e.g. X: constexpr = 4) */
  N_IF,         /* if cond: body  else: orelse  (elif = an N_IF alone in orelse) */
  N_FOR,        /* for lhs in rhs: body */
  N_WHILE,      /* while cond: body (parsed; sema may reject) */
  N_RETURN,     /* return [lhs] */
  N_PASS,
  N_BREAK,
  N_CONTINUE,
  N_IMPORT,     /* import lhs [as name]: lhs an N_NAME (dotted module name) or N_STR (path); module level */
  N_FROM_IMPORT,/* from lhs import args: each an N_NAME (the imported name) whose rhs, if any, is the
                   N_NAME of its alias; module level.  Resolved by modules.c before the program check. */

  /* ---- definitions ---- */
  N_PARAM,      /* name [: annot] [= rhs] */
  N_DECORATOR,  /* @name  or  @name(args..., kwargs...) */
  N_FUNC,       /* decorators; def name(params) [-> annot]: body */
  N_MODULE,     /* body: N_FUNC and top-level statements */
} NodeKind;

typedef enum OpKind {
  OP_NONE,
  /* unary */
  OP_NEG, OP_POS, OP_INVERT, OP_NOT,
  /* binary arithmetic and bitwise */
  OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_MATMUL,
  OP_SHL, OP_SHR, OP_BITAND, OP_BITOR, OP_BITXOR,
  /* comparisons (not chained: a < b < c is a syntax error) */
  OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE,
  /* boolean */
  OP_AND, OP_OR,
} OpKind;

struct Node {
  NodeKind kind;
  OpKind op;
  SrcLoc loc;
  const char *name;     /* identifier, attribute, keyword, function or parameter name */
  const char *text;     /* literal spelling as written */
  const char *str;      /* decoded string literal */
  size_t str_len;
  int64_t int_val;
  double float_val;
  Node *lhs, *rhs;
  Node *cond, *then, *els;
  Node *lo, *hi, *step;
  Node *annot;          /* parameter / return / annotated-assignment type */
  NodeList args;        /* see the kinds above */
  NodeList kwargs;
  NodeList body;
  NodeList orelse;
  NodeList decorators;
  NodeList params;
  int depth;            /* height of the subtree (1 for a leaf); set by the parser */
};

/* ---- the compiler context --------------------------------------------------
 * One FaCompiler holds everything a compilation allocates (arena), where its
 * diagnostics go, and the sources it has read.  There is no global state: two
 * contexts may be used from two threads at once.
 */
struct FaImportPath;

typedef struct FaCompiler {
  Arena arena;
  Diag diag;
  PtrVec sources;       /* Source*, owned by the arena */
  const struct FaImportPath *imports;  /* where `import` looks besides the importing file's
                                          directory (modules.h); NULL: $FADSL_PATH only */
} FaCompiler;

void fa_compiler_init(FaCompiler *fc, FILE *diag_stream);
void fa_compiler_free(FaCompiler *fc);

/* Makes a Source from bytes (copied into the arena).  Returns NULL on OOM. */
Source *fa_source_new(FaCompiler *fc, const char *name, const char *text, size_t len);
/* Reads a file into a Source; on failure reports an error and returns NULL. */
Source *fa_source_read(FaCompiler *fc, const char *path);

/* ---- front end ----------------------------------------------------------------- */

/* Parses a whole source.  Returns the N_MODULE, or NULL when any syntax error
 * was reported (all of them are reported, thanks to error recovery). */
Node *fa_parse(FaCompiler *fc, const Source *src);

/* Prints the tokens of a source, one per line: LINE:COL KIND [spelling]. */
int fa_dump_tokens(FaCompiler *fc, const Source *src, FILE *out);

/* Prints a readable tree (fadslc --emit=ast). */
void fa_ast_dump(const Node *n, FILE *out);
/* Prints the tree back as .fa source; parsing the result gives the same tree. */
void fa_ast_print_source(const Node *n, StrBuf *out);
/* Structural equality, ignoring locations and literal spellings. */
bool fa_ast_equal(const Node *a, const Node *b);

/* Node construction, used by the parser and by later stages that synthesise code. */
Node *fa_node_new(FaCompiler *fc, NodeKind kind, SrcLoc loc);
void fa_nodelist_push(FaCompiler *fc, NodeList *list, Node *n);

const char *fa_op_spelling(OpKind op);   /* "+", "//", "and", ... */
const char *fa_node_kind_name(NodeKind kind);

/* True when a N_FUNC is a kernel (carries an @kernel decorator). */
bool fa_func_is_kernel(const Node *fn);
/* Finds a decorator by name on a N_FUNC, or NULL. */
const Node *fa_func_decorator(const Node *fn, const char *name);

#endif
