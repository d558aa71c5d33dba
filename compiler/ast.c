/* ast.c - the compiler context, sources, AST nodes, and three walks over the
 * tree: a readable dump (fadslc --emit=ast), a printer back to .fa source
 * (fadslc --emit=source; parsing its output gives an equal tree) and
 * structural equality.
 *
 * The walks recurse; the parser guarantees that no tree is deeper than
 * FA_MAX_EXPR_DEPTH, which keeps them within the stack.
 */
#include "ast.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- context and sources ---------------------------------------------------- */

void fa_compiler_init(FaCompiler *fc, FILE *diag_stream) {
  fa_arena_init(&fc->arena);
  fa_diag_init(&fc->diag, diag_stream);
  fc->sources.items = NULL;
  fc->sources.len = fc->sources.cap = 0;
  fc->imports = NULL;
}

void fa_compiler_free(FaCompiler *fc) {
  fa_ptrvec_free(&fc->sources);
  fa_diag_free(&fc->diag);
  fa_arena_free(&fc->arena);
}

/* The lexer indexes sources with int; refuse anything near that. */
enum { FA_MAX_SOURCE_LEN = INT_MAX / 2 };

Source *fa_source_new(FaCompiler *fc, const char *name, const char *text, size_t len) {
  Source *src = fa_arena_alloc(&fc->arena, sizeof *src);
  if (!src)
    return NULL;
  char *copy = fa_arena_alloc(&fc->arena, len + 1);
  src->name = fa_arena_strdup(&fc->arena, name ? name : "<string>");
  if (!copy || !src->name)
    return NULL;
  if (len)
    memcpy(copy, text, len);
  copy[len] = '\0';
  src->text = copy;
  src->len = len;
  fa_ptrvec_push(&fc->sources, src);
  return src;
}

Source *fa_source_read(FaCompiler *fc, const char *path) {
  size_t len = 0;
  char *text = fa_read_file(path, &len);
  if (!text) {
    fa_error(&fc->diag, fa_noloc(), "cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  if (len > FA_MAX_SOURCE_LEN) {
    free(text);
    fa_error(&fc->diag, fa_noloc(), "'%s' is too large (more than %d bytes)", path, FA_MAX_SOURCE_LEN);
    return NULL;
  }
  Source *src = fa_source_new(fc, path, text, len);
  free(text);
  if (!src)
    fa_error(&fc->diag, fa_noloc(), "out of memory reading '%s'", path);
  return src;
}

/* ---- nodes ------------------------------------------------------------------- */

Node *fa_node_new(FaCompiler *fc, NodeKind kind, SrcLoc loc) {
  Node *n = fa_arena_alloc(&fc->arena, sizeof *n);
  if (!n)
    return NULL;
  n->kind = kind;
  n->loc = loc;
  n->depth = 1;
  return n;
}

/* Lists grow by doubling inside the arena: the capacity is implied by the
 * length (the next power of two), so NodeList needs no capacity field. */
void fa_nodelist_push(FaCompiler *fc, NodeList *list, Node *n) {
  int len = list->len;
  if (len == INT_MAX)
    return;
  if ((len & (len - 1)) == 0) {   /* 0, 1, 2, 4, 8, ...: full */
    size_t cap = len ? (size_t)len * 2 : 1;
    Node **items = fa_arena_alloc(&fc->arena, cap * sizeof *items);
    if (!items)
      return;
    if (len)
      memcpy(items, list->items, (size_t)len * sizeof *items);
    list->items = items;
  }
  list->items[list->len++] = n;
}

const char *fa_op_spelling(OpKind op) {
  switch (op) {
  case OP_NONE: return "?";
  case OP_NEG: return "-";
  case OP_POS: return "+";
  case OP_INVERT: return "~";
  case OP_NOT: return "not";
  case OP_ADD: return "+";
  case OP_SUB: return "-";
  case OP_MUL: return "*";
  case OP_DIV: return "/";
  case OP_FLOORDIV: return "//";
  case OP_MOD: return "%";
  case OP_POW: return "**";
  case OP_MATMUL: return "@";
  case OP_SHL: return "<<";
  case OP_SHR: return ">>";
  case OP_BITAND: return "&";
  case OP_BITOR: return "|";
  case OP_BITXOR: return "^";
  case OP_LT: return "<";
  case OP_LE: return "<=";
  case OP_GT: return ">";
  case OP_GE: return ">=";
  case OP_EQ: return "==";
  case OP_NE: return "!=";
  case OP_AND: return "and";
  case OP_OR: return "or";
  }
  return "?";
}

const char *fa_node_kind_name(NodeKind kind) {
  static const char *const names[] = {
    [N_NAME] = "NAME", [N_INT] = "INT", [N_FLOAT] = "FLOAT", [N_STR] = "STR",
    [N_TRUE] = "TRUE", [N_FALSE] = "FALSE", [N_NONE] = "NONE", [N_UNARY] = "UNARY",
    [N_BINARY] = "BINARY", [N_IFEXP] = "IFEXP", [N_CALL] = "CALL", [N_KEYWORD] = "KEYWORD",
    [N_ATTR] = "ATTR", [N_SUBSCRIPT] = "SUBSCRIPT", [N_SLICE] = "SLICE", [N_TUPLE] = "TUPLE",
    [N_LIST] = "LIST", [N_PTR_TYPE] = "PTR_TYPE", [N_EXPR_STMT] = "EXPR_STMT",
    [N_ASSIGN] = "ASSIGN", [N_AUGASSIGN] = "AUGASSIGN", [N_ANNASSIGN] = "ANNASSIGN",
    [N_IF] = "IF", [N_FOR] = "FOR", [N_WHILE] = "WHILE", [N_RETURN] = "RETURN",
    [N_PASS] = "PASS", [N_BREAK] = "BREAK", [N_CONTINUE] = "CONTINUE", [N_IMPORT] = "IMPORT",
    [N_FROM_IMPORT] = "FROM_IMPORT", [N_PARAM] = "PARAM",
    [N_DECORATOR] = "DECORATOR", [N_FUNC] = "FUNC", [N_MODULE] = "MODULE",
  };
  if ((int)kind < 0 || (int)kind >= FA_ARRAY_LEN(names) || !names[kind])
    return "?";
  return names[kind];
}

const Node *fa_func_decorator(const Node *fn, const char *name) {
  if (!fn || fn->kind != N_FUNC)
    return NULL;
  for (int i = 0; i < fn->decorators.len; i++) {
    const Node *d = fn->decorators.items[i];
    if (d->name && strcmp(d->name, name) == 0)
      return d;
  }
  return NULL;
}

bool fa_func_is_kernel(const Node *fn) { return fa_func_decorator(fn, "kernel") != NULL; }

/* ---- string literals ---------------------------------------------------------- */

/* Writes bytes as a double-quoted literal that decodes back to them: valid
 * UTF-8 stays as it is, everything unprintable becomes an escape. */
static void put_quoted(StrBuf *sb, const char *s, size_t len) {
  fa_sb_putc(sb, '"');
  for (size_t i = 0; i < len;) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '\n': fa_sb_puts(sb, "\\n"); i++; continue;
    case '\t': fa_sb_puts(sb, "\\t"); i++; continue;
    case '\\': fa_sb_puts(sb, "\\\\"); i++; continue;
    case '"': fa_sb_puts(sb, "\\\""); i++; continue;
    default: break;
    }
    if (c >= 0x20 && c < 0x7f) {
      fa_sb_putc(sb, (char)c);
      i++;
      continue;
    }
    if (c >= 0x80) {   /* copy a whole valid UTF-8 sequence */
      int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
      bool ok = n > 0 && i + (size_t)n <= len && c <= 0xf4;
      for (int k = 1; ok && k < n; k++)
        ok = ((unsigned char)s[i + (size_t)k] & 0xc0) == 0x80;
      if (ok && n >= 3) {
        unsigned c1 = (unsigned char)s[i + 1];
        if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
            (c == 0xf4 && c1 > 0x8f))
          ok = false;
      }
      if (ok) {
        fa_sb_putn(sb, s + i, (size_t)n);
        i += (size_t)n;
        continue;
      }
    }
    fa_sb_printf(sb, "\\x%02x", c);
    i++;
  }
  fa_sb_putc(sb, '"');
}

/* ---- dump -------------------------------------------------------------------------- */

typedef struct Dumper {
  FILE *out;
  StrBuf line;
} Dumper;

static void dump_node(Dumper *d, const Node *n, int indent, const char *label);

static void dump_indent(Dumper *d, int indent) {
  for (int i = 0; i < indent; i++)
    fputs("  ", d->out);
}

static void dump_list(Dumper *d, NodeList l, int indent, const char *label) {
  if (l.len == 0)
    return;
  dump_indent(d, indent);
  fprintf(d->out, "%s:\n", label);
  for (int i = 0; i < l.len; i++)
    dump_node(d, l.items[i], indent + 1, NULL);
}

static void dump_node(Dumper *d, const Node *n, int indent, const char *label) {
  if (!n)
    return;
  dump_indent(d, indent);
  if (label)
    fprintf(d->out, "%s: ", label);
  fputs(fa_node_kind_name(n->kind), d->out);
  StrBuf *sb = &d->line;
  sb->len = 0;
  if (sb->data)
    sb->data[0] = '\0';
  switch (n->kind) {
  case N_NAME: case N_CALL: case N_KEYWORD: case N_ATTR: case N_PARAM: case N_DECORATOR:
  case N_FUNC:
    if (n->name)
      fa_sb_printf(sb, " %s", n->name);
    break;
  case N_IMPORT:
    if (n->name)
      fa_sb_printf(sb, " as %s", n->name);
    break;
  case N_INT:
    fa_sb_printf(sb, " %lld", (long long)n->int_val);
    break;
  case N_FLOAT:
    fa_sb_printf(sb, " %.17g", n->float_val);
    break;
  case N_STR:
    fa_sb_putc(sb, ' ');
    put_quoted(sb, n->str ? n->str : "", n->str_len);
    break;
  case N_UNARY: case N_BINARY:
    fa_sb_printf(sb, " %s", fa_op_spelling(n->op));
    break;
  case N_AUGASSIGN:
    fa_sb_printf(sb, " %s=", fa_op_spelling(n->op));
    break;
  default:
    break;
  }
  if ((n->kind == N_INT || n->kind == N_FLOAT) && n->text) {
    /* show the spelling when it differs from the value (0x10, 1e3) */
    char value[64];
    snprintf(value, sizeof value, "%s", sb->data ? sb->data + 1 : "");
    if (strcmp(value, n->text) != 0)
      fa_sb_printf(sb, " (%s)", n->text);
  }
  if (sb->len)
    fputs(sb->data, d->out);
  fprintf(d->out, " <%d:%d>\n", n->loc.line, n->loc.col);

  int in = indent + 1;
  switch (n->kind) {
  case N_UNARY:
    dump_node(d, n->lhs, in, NULL);
    break;
  case N_BINARY:
    dump_node(d, n->lhs, in, NULL);
    dump_node(d, n->rhs, in, NULL);
    break;
  case N_IFEXP:
    dump_node(d, n->then, in, "then");
    dump_node(d, n->cond, in, "if");
    dump_node(d, n->els, in, "else");
    break;
  case N_CALL:
    dump_node(d, n->lhs, in, "func");
    for (int i = 0; i < n->args.len; i++)
      dump_node(d, n->args.items[i], in, "arg");
    for (int i = 0; i < n->kwargs.len; i++)
      dump_node(d, n->kwargs.items[i], in, NULL);
    break;
  case N_KEYWORD:
    dump_node(d, n->rhs, in, NULL);
    break;
  case N_ATTR:
    dump_node(d, n->lhs, in, "of");
    break;
  case N_SUBSCRIPT:
    dump_node(d, n->lhs, in, "value");
    for (int i = 0; i < n->args.len; i++)
      dump_node(d, n->args.items[i], in, "index");
    break;
  case N_SLICE:
    dump_node(d, n->lo, in, "lo");
    dump_node(d, n->hi, in, "hi");
    dump_node(d, n->step, in, "step");
    break;
  case N_TUPLE: case N_LIST:
    for (int i = 0; i < n->args.len; i++)
      dump_node(d, n->args.items[i], in, NULL);
    break;
  case N_PTR_TYPE:
    dump_node(d, n->lhs, in, "to");
    for (int i = 0; i < n->args.len; i++)
      dump_node(d, n->args.items[i], in, "extent");
    break;
  case N_EXPR_STMT:
    dump_node(d, n->lhs, in, NULL);
    break;
  case N_ASSIGN:
    for (int i = 0; i < n->args.len; i++)
      dump_node(d, n->args.items[i], in, "target");
    dump_node(d, n->rhs, in, "value");
    break;
  case N_AUGASSIGN:
    dump_node(d, n->lhs, in, "target");
    dump_node(d, n->rhs, in, "value");
    break;
  case N_ANNASSIGN:
    dump_node(d, n->lhs, in, "target");
    dump_node(d, n->annot, in, "type");
    dump_node(d, n->rhs, in, "value");
    break;
  case N_IF:
    dump_node(d, n->cond, in, "cond");
    dump_list(d, n->body, in, "then");
    dump_list(d, n->orelse, in, "else");
    break;
  case N_FOR:
    dump_node(d, n->lhs, in, "target");
    dump_node(d, n->rhs, in, "iter");
    dump_list(d, n->body, in, "body");
    break;
  case N_WHILE:
    dump_node(d, n->cond, in, "cond");
    dump_list(d, n->body, in, "body");
    break;
  case N_RETURN:
    dump_node(d, n->lhs, in, NULL);
    break;
  case N_IMPORT:
    dump_node(d, n->lhs, in, "module");
    break;
  case N_FROM_IMPORT:
    dump_node(d, n->lhs, in, "module");
    for (int i = 0; i < n->args.len; i++)
      dump_node(d, n->args.items[i], in, "name");
    break;
  case N_NAME:
    dump_node(d, n->rhs, in, "as");
    break;
  case N_PARAM:
    dump_node(d, n->annot, in, "type");
    dump_node(d, n->rhs, in, "default");
    break;
  case N_DECORATOR:
    for (int i = 0; i < n->args.len; i++)
      dump_node(d, n->args.items[i], in, "arg");
    for (int i = 0; i < n->kwargs.len; i++)
      dump_node(d, n->kwargs.items[i], in, NULL);
    break;
  case N_FUNC:
    dump_list(d, n->decorators, in, "decorators");
    dump_list(d, n->params, in, "params");
    dump_node(d, n->annot, in, "returns");
    dump_list(d, n->body, in, "body");
    break;
  case N_MODULE:
    for (int i = 0; i < n->body.len; i++)
      dump_node(d, n->body.items[i], in, NULL);
    break;
  default:
    break;
  }
}

void fa_ast_dump(const Node *n, FILE *out) {
  Dumper d = {out, {0}};
  fa_sb_init(&d.line);
  dump_node(&d, n, 0, NULL);
  fa_sb_free(&d.line);
}

/* ---- printing back to source ---------------------------------------------------------- */

/* Binding strength of expression forms, weakest first (Python's order). */
enum {
  PREC_IFEXP = 1, PREC_OR, PREC_AND, PREC_NOT, PREC_CMP, PREC_BITOR, PREC_BITXOR,
  PREC_BITAND, PREC_SHIFT, PREC_ARITH, PREC_TERM, PREC_UNARY, PREC_POW, PREC_PRIMARY,
};

static int binary_prec(OpKind op) {
  switch (op) {
  case OP_OR: return PREC_OR;
  case OP_AND: return PREC_AND;
  case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE: return PREC_CMP;
  case OP_BITOR: return PREC_BITOR;
  case OP_BITXOR: return PREC_BITXOR;
  case OP_BITAND: return PREC_BITAND;
  case OP_SHL: case OP_SHR: return PREC_SHIFT;
  case OP_ADD: case OP_SUB: return PREC_ARITH;
  case OP_MUL: case OP_DIV: case OP_FLOORDIV: case OP_MOD: case OP_MATMUL: return PREC_TERM;
  case OP_POW: return PREC_POW;
  default: return PREC_PRIMARY;
  }
}

static int expr_prec(const Node *n) {
  switch (n->kind) {
  case N_IFEXP: return PREC_IFEXP;
  case N_BINARY: return binary_prec(n->op);
  case N_UNARY: return n->op == OP_NOT ? PREC_NOT : PREC_UNARY;
  default: return PREC_PRIMARY;
  }
}

static void print_expr(StrBuf *sb, const Node *n, int min_prec);

static void print_list(StrBuf *sb, NodeList l) {
  for (int i = 0; i < l.len; i++) {
    if (i)
      fa_sb_puts(sb, ", ");
    print_expr(sb, l.items[i], PREC_IFEXP);
  }
}

static void print_float(StrBuf *sb, const Node *n) {
  if (n->text) {
    fa_sb_puts(sb, n->text);
    return;
  }
  if (isinf(n->float_val) || isnan(n->float_val)) {   /* only in synthesised trees */
    fa_sb_puts(sb, isnan(n->float_val) ? "nan" : n->float_val > 0 ? "inf" : "-inf");
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", n->float_val);
  fa_sb_puts(sb, buf);
  if (!strpbrk(buf, ".eE"))
    fa_sb_puts(sb, ".0");
}

static void print_expr(StrBuf *sb, const Node *n, int min_prec) {
  if (!n) {
    fa_sb_puts(sb, "None");
    return;
  }
  int prec = expr_prec(n);
  bool parens = prec < min_prec;
  if (parens)
    fa_sb_putc(sb, '(');
  switch (n->kind) {
  case N_NAME:
    fa_sb_puts(sb, n->name ? n->name : "?");
    break;
  case N_INT:
    if (n->text)
      fa_sb_puts(sb, n->text);
    else
      fa_sb_printf(sb, "%lld", (long long)n->int_val);
    break;
  case N_FLOAT:
    print_float(sb, n);
    break;
  case N_STR:
    put_quoted(sb, n->str ? n->str : "", n->str_len);
    break;
  case N_TRUE: fa_sb_puts(sb, "True"); break;
  case N_FALSE: fa_sb_puts(sb, "False"); break;
  case N_NONE: fa_sb_puts(sb, "None"); break;
  case N_UNARY:
    if (n->op == OP_NOT) {
      fa_sb_puts(sb, "not ");
      print_expr(sb, n->lhs, PREC_NOT);
    } else {
      fa_sb_puts(sb, fa_op_spelling(n->op));
      /* "- -x" rather than "--x", which reads like a typo */
      if (n->lhs && n->lhs->kind == N_UNARY && n->lhs->op != OP_NOT)
        fa_sb_putc(sb, ' ');
      print_expr(sb, n->lhs, PREC_UNARY);
    }
    break;
  case N_BINARY: {
    int lmin = prec, rmin = prec + 1;
    if (n->op == OP_POW) {          /* right-associative; the operand on the left is a primary */
      lmin = PREC_PRIMARY;
      rmin = PREC_UNARY;
    } else if (prec == PREC_CMP) {  /* comparisons do not chain */
      lmin = rmin = PREC_CMP + 1;
    }
    print_expr(sb, n->lhs, lmin);
    fa_sb_printf(sb, " %s ", fa_op_spelling(n->op));
    print_expr(sb, n->rhs, rmin);
    break;
  }
  case N_IFEXP:
    print_expr(sb, n->then, PREC_OR);
    fa_sb_puts(sb, " if ");
    print_expr(sb, n->cond, PREC_OR);
    fa_sb_puts(sb, " else ");
    print_expr(sb, n->els, PREC_IFEXP);
    break;
  case N_CALL:
    print_expr(sb, n->lhs, PREC_PRIMARY);
    fa_sb_putc(sb, '(');
    print_list(sb, n->args);
    for (int i = 0; i < n->kwargs.len; i++) {
      if (i || n->args.len)
        fa_sb_puts(sb, ", ");
      print_expr(sb, n->kwargs.items[i], PREC_IFEXP);
    }
    fa_sb_putc(sb, ')');
    break;
  case N_KEYWORD:
    fa_sb_printf(sb, "%s=", n->name ? n->name : "?");
    print_expr(sb, n->rhs, PREC_IFEXP);
    break;
  case N_ATTR:
    print_expr(sb, n->lhs, PREC_PRIMARY);
    /* 1 .real: a float would swallow the dot */
    if (n->lhs && (n->lhs->kind == N_INT))
      fa_sb_putc(sb, ' ');
    fa_sb_printf(sb, ".%s", n->name ? n->name : "?");
    break;
  case N_SUBSCRIPT:
    print_expr(sb, n->lhs, PREC_PRIMARY);
    fa_sb_putc(sb, '[');
    print_list(sb, n->args);
    fa_sb_putc(sb, ']');
    break;
  case N_SLICE:
    if (n->lo)
      print_expr(sb, n->lo, PREC_IFEXP);
    fa_sb_putc(sb, ':');
    if (n->hi)
      print_expr(sb, n->hi, PREC_IFEXP);
    if (n->step) {
      fa_sb_putc(sb, ':');
      print_expr(sb, n->step, PREC_IFEXP);
    }
    break;
  case N_TUPLE:
    fa_sb_putc(sb, '(');
    print_list(sb, n->args);
    if (n->args.len == 1)
      fa_sb_putc(sb, ',');
    fa_sb_putc(sb, ')');
    break;
  case N_LIST:
    fa_sb_putc(sb, '[');
    print_list(sb, n->args);
    fa_sb_putc(sb, ']');
    break;
  case N_PTR_TYPE:
    fa_sb_putc(sb, '*');
    print_expr(sb, n->lhs, PREC_PRIMARY);
    if (n->args.len) {
      fa_sb_putc(sb, '[');
      print_list(sb, n->args);
      fa_sb_putc(sb, ']');
    }
    break;
  default:
    fa_sb_printf(sb, "<%s>", fa_node_kind_name(n->kind));
    break;
  }
  if (parens)
    fa_sb_putc(sb, ')');
}

static void print_stmt(StrBuf *sb, const Node *n, int indent);

/* Where a statement allows a bare tuple (a, b = b, a; return x, y; for i, j in
 * ...), print it without parentheses. */
static void print_exprlist(StrBuf *sb, const Node *n) {
  if (n && n->kind == N_TUPLE && n->args.len >= 2)
    print_list(sb, n->args);
  else
    print_expr(sb, n, PREC_IFEXP);
}

static void put_indent(StrBuf *sb, int indent) {
  for (int i = 0; i < indent; i++)
    fa_sb_puts(sb, "    ");
}

static void print_block(StrBuf *sb, NodeList body, int indent) {
  fa_sb_puts(sb, ":\n");
  if (body.len == 0) {
    put_indent(sb, indent);
    fa_sb_puts(sb, "pass\n");
  }
  for (int i = 0; i < body.len; i++)
    print_stmt(sb, body.items[i], indent);
}

static void print_params(StrBuf *sb, NodeList params) {
  for (int i = 0; i < params.len; i++) {
    const Node *p = params.items[i];
    if (i)
      fa_sb_puts(sb, ", ");
    fa_sb_puts(sb, p->name ? p->name : "?");
    if (p->annot) {
      fa_sb_puts(sb, ": ");
      print_expr(sb, p->annot, PREC_IFEXP);
    }
    if (p->rhs) {
      fa_sb_puts(sb, p->annot ? " = " : "=");
      print_expr(sb, p->rhs, PREC_IFEXP);
    }
  }
}

static void print_if(StrBuf *sb, const Node *n, int indent, const char *keyword) {
  put_indent(sb, indent);
  fa_sb_printf(sb, "%s ", keyword);
  print_expr(sb, n->cond, PREC_IFEXP);
  print_block(sb, n->body, indent + 1);
  if (n->orelse.len == 1 && n->orelse.items[0]->kind == N_IF) {
    print_if(sb, n->orelse.items[0], indent, "elif");
  } else if (n->orelse.len > 0) {
    put_indent(sb, indent);
    fa_sb_puts(sb, "else");
    print_block(sb, n->orelse, indent + 1);
  }
}

static void print_stmt(StrBuf *sb, const Node *n, int indent) {
  switch (n->kind) {
  case N_IF:
    print_if(sb, n, indent, "if");
    return;
  case N_FOR:
    put_indent(sb, indent);
    fa_sb_puts(sb, "for ");
    print_exprlist(sb, n->lhs);
    fa_sb_puts(sb, " in ");
    print_exprlist(sb, n->rhs);
    print_block(sb, n->body, indent + 1);
    return;
  case N_WHILE:
    put_indent(sb, indent);
    fa_sb_puts(sb, "while ");
    print_expr(sb, n->cond, PREC_IFEXP);
    print_block(sb, n->body, indent + 1);
    return;
  case N_FUNC:
    for (int i = 0; i < n->decorators.len; i++) {
      const Node *d = n->decorators.items[i];
      put_indent(sb, indent);
      fa_sb_printf(sb, "@%s", d->name ? d->name : "?");
      if (d->args.len || d->kwargs.len) {
        StrBuf args;
        fa_sb_init(&args);
        fa_sb_putc(&args, '(');
        print_list(&args, d->args);
        for (int k = 0; k < d->kwargs.len; k++) {
          if (k || d->args.len)
            fa_sb_puts(&args, ", ");
          print_expr(&args, d->kwargs.items[k], PREC_IFEXP);
        }
        fa_sb_putc(&args, ')');
        if (args.data)
          fa_sb_puts(sb, args.data);
        fa_sb_free(&args);
      }
      fa_sb_putc(sb, '\n');
    }
    put_indent(sb, indent);
    fa_sb_printf(sb, "def %s(", n->name ? n->name : "?");
    print_params(sb, n->params);
    fa_sb_putc(sb, ')');
    if (n->annot) {
      fa_sb_puts(sb, " -> ");
      print_expr(sb, n->annot, PREC_IFEXP);
    }
    print_block(sb, n->body, indent + 1);
    return;
  default:
    break;
  }
  put_indent(sb, indent);
  switch (n->kind) {
  case N_EXPR_STMT:
    print_exprlist(sb, n->lhs);
    break;
  case N_ASSIGN:
    for (int i = 0; i < n->args.len; i++) {
      print_exprlist(sb, n->args.items[i]);
      fa_sb_puts(sb, " = ");
    }
    print_exprlist(sb, n->rhs);
    break;
  case N_AUGASSIGN:
    print_expr(sb, n->lhs, PREC_IFEXP);
    fa_sb_printf(sb, " %s= ", fa_op_spelling(n->op));
    print_expr(sb, n->rhs, PREC_IFEXP);
    break;
  case N_ANNASSIGN:
    print_expr(sb, n->lhs, PREC_IFEXP);
    fa_sb_puts(sb, ": ");
    print_expr(sb, n->annot, PREC_IFEXP);
    fa_sb_puts(sb, " = ");
    print_expr(sb, n->rhs, PREC_IFEXP);
    break;
  case N_RETURN:
    fa_sb_puts(sb, "return");
    if (n->lhs) {
      fa_sb_putc(sb, ' ');
      print_exprlist(sb, n->lhs);
    }
    break;
  case N_PASS: fa_sb_puts(sb, "pass"); break;
  case N_BREAK: fa_sb_puts(sb, "break"); break;
  case N_CONTINUE: fa_sb_puts(sb, "continue"); break;
  case N_IMPORT:
    fa_sb_puts(sb, "import ");
    print_expr(sb, n->lhs, PREC_IFEXP);
    if (n->name)
      fa_sb_printf(sb, " as %s", n->name);
    break;
  case N_FROM_IMPORT:
    fa_sb_puts(sb, "from ");
    print_expr(sb, n->lhs, PREC_IFEXP);
    fa_sb_puts(sb, " import ");
    for (int i = 0; i < n->args.len; i++) {
      const Node *a = n->args.items[i];
      fa_sb_printf(sb, "%s%s", i ? ", " : "", a->name);
      if (a->rhs)
        fa_sb_printf(sb, " as %s", a->rhs->name);
    }
    break;
  default:
    /* an expression where a statement should be (only in synthesised trees) */
    print_expr(sb, n, PREC_IFEXP);
    break;
  }
  fa_sb_putc(sb, '\n');
}

void fa_ast_print_source(const Node *n, StrBuf *out) {
  if (!n)
    return;
  if (n->kind == N_MODULE) {
    for (int i = 0; i < n->body.len; i++) {
      /* a blank line around each function */
      if (i > 0 && (n->body.items[i]->kind == N_FUNC || n->body.items[i - 1]->kind == N_FUNC))
        fa_sb_putc(out, '\n');
      print_stmt(out, n->body.items[i], 0);
    }
  } else if (n->kind >= N_EXPR_STMT) {
    print_stmt(out, n, 0);
  } else {
    print_expr(out, n, PREC_IFEXP);
  }
}

/* ---- equality -------------------------------------------------------------------------- */

static bool str_eq(const char *a, const char *b) {
  if (!a || !b)
    return a == b;
  return strcmp(a, b) == 0;
}

static bool list_eq(NodeList a, NodeList b) {
  if (a.len != b.len)
    return false;
  for (int i = 0; i < a.len; i++)
    if (!fa_ast_equal(a.items[i], b.items[i]))
      return false;
  return true;
}

bool fa_ast_equal(const Node *a, const Node *b) {
  if (!a || !b)
    return a == b;
  if (a->kind != b->kind || a->op != b->op || !str_eq(a->name, b->name))
    return false;
  switch (a->kind) {
  case N_INT:
    if (a->int_val != b->int_val)
      return false;
    break;
  case N_FLOAT:
    if (!(a->float_val == b->float_val || (isnan(a->float_val) && isnan(b->float_val))) ||
        signbit(a->float_val) != signbit(b->float_val))
      return false;
    break;
  case N_STR:
    if (a->str_len != b->str_len ||
        (a->str_len && memcmp(a->str ? a->str : "", b->str ? b->str : "", a->str_len) != 0))
      return false;
    break;
  default:
    break;
  }
  return fa_ast_equal(a->lhs, b->lhs) && fa_ast_equal(a->rhs, b->rhs) &&
         fa_ast_equal(a->cond, b->cond) && fa_ast_equal(a->then, b->then) &&
         fa_ast_equal(a->els, b->els) && fa_ast_equal(a->lo, b->lo) &&
         fa_ast_equal(a->hi, b->hi) && fa_ast_equal(a->step, b->step) &&
         fa_ast_equal(a->annot, b->annot) && list_eq(a->args, b->args) &&
         list_eq(a->kwargs, b->kwargs) && list_eq(a->body, b->body) &&
         list_eq(a->orelse, b->orelse) && list_eq(a->decorators, b->decorators) &&
         list_eq(a->params, b->params);
}
