/* check_parser.c - unit tests of the parser (compiler/parser.y) and of the
 * AST walks (compiler/ast.c): tree shapes, precedence, locations, error
 * recovery, nesting limits, printing and structural equality. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

static Node *parse(FaCompiler *fc, const char *text) {
  Source *src = fa_source_new(fc, "t.fa", text, strlen(text));
  ck_assert_ptr_nonnull(src);
  return fa_parse(fc, src);
}

static Node *parse_ok(FaCompiler *fc, const char *text) {
  Node *m = parse(fc, text);
  ck_assert_msg(m != NULL, "does not parse:\n%s\n%s", text, fc->diag.text.data);
  return m;
}

/* A fully parenthesised prefix form of an expression, to check its shape. */
static void sexpr(StrBuf *sb, const Node *n) {
  if (!n) {
    fa_sb_puts(sb, "_");
    return;
  }
  switch (n->kind) {
  case N_NAME: fa_sb_puts(sb, n->name); return;
  case N_INT: fa_sb_printf(sb, "%lld", (long long)n->int_val); return;
  case N_FLOAT: fa_sb_printf(sb, "%g", n->float_val); return;
  case N_STR: fa_sb_printf(sb, "'%s'", n->str); return;
  case N_TRUE: fa_sb_puts(sb, "True"); return;
  case N_FALSE: fa_sb_puts(sb, "False"); return;
  case N_NONE: fa_sb_puts(sb, "None"); return;
  case N_UNARY:
    fa_sb_printf(sb, "(%s ", fa_op_spelling(n->op));
    sexpr(sb, n->lhs);
    fa_sb_putc(sb, ')');
    return;
  case N_BINARY:
    fa_sb_printf(sb, "(%s ", fa_op_spelling(n->op));
    sexpr(sb, n->lhs);
    fa_sb_putc(sb, ' ');
    sexpr(sb, n->rhs);
    fa_sb_putc(sb, ')');
    return;
  case N_IFEXP:
    fa_sb_puts(sb, "(if ");
    sexpr(sb, n->then);
    fa_sb_putc(sb, ' ');
    sexpr(sb, n->cond);
    fa_sb_putc(sb, ' ');
    sexpr(sb, n->els);
    fa_sb_putc(sb, ')');
    return;
  case N_ATTR:
    fa_sb_puts(sb, "(. ");
    sexpr(sb, n->lhs);
    fa_sb_printf(sb, " %s)", n->name);
    return;
  case N_KEYWORD:
    fa_sb_printf(sb, "%s=", n->name);
    sexpr(sb, n->rhs);
    return;
  case N_SLICE:
    fa_sb_puts(sb, "(: ");
    sexpr(sb, n->lo);
    fa_sb_putc(sb, ' ');
    sexpr(sb, n->hi);
    fa_sb_putc(sb, ' ');
    sexpr(sb, n->step);
    fa_sb_putc(sb, ')');
    return;
  case N_CALL: case N_SUBSCRIPT: case N_TUPLE: case N_LIST: case N_PTR_TYPE:
    fa_sb_puts(sb, n->kind == N_CALL ? "(call " : n->kind == N_SUBSCRIPT ? "([] "
                   : n->kind == N_TUPLE ? "(tuple" : n->kind == N_LIST ? "(list" : "(ptr ");
    if (n->kind == N_CALL || n->kind == N_SUBSCRIPT || n->kind == N_PTR_TYPE)
      sexpr(sb, n->lhs);
    for (int i = 0; i < n->args.len; i++) {
      fa_sb_putc(sb, ' ');
      sexpr(sb, n->args.items[i]);
    }
    for (int i = 0; i < n->kwargs.len; i++) {
      fa_sb_putc(sb, ' ');
      sexpr(sb, n->kwargs.items[i]);
    }
    fa_sb_putc(sb, ')');
    return;
  default:
    fa_sb_printf(sb, "<%s>", fa_node_kind_name(n->kind));
  }
}

/* The shape of the expression `text` (parsed as "x = text"). */
static void expect_shape(const char *text, const char *want) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  char *stmt = malloc(strlen(text) + 8);
  sprintf(stmt, "x = %s\n", text);
  Node *m = parse_ok(&fc, stmt);
  StrBuf sb;
  fa_sb_init(&sb);
  sexpr(&sb, m->body.items[0]->rhs);
  ck_assert_msg(strcmp(sb.data, want) == 0, "%s\n  parsed as %s\n  wanted    %s", text, sb.data, want);
  fa_sb_free(&sb);
  free(stmt);
  fa_compiler_free(&fc);
}

/* Parsing fails with exactly `count` errors, the first at line:col with msg. */
static void expect_errors(const char *text, int count, int line, int col, const char *msg) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Node *m = parse(&fc, text);
  ck_assert_ptr_null(m);
  char head[64];
  snprintf(head, sizeof head, "t.fa:%d:%d: error: ", line, col);
  const char *d = fc.diag.text.data ? fc.diag.text.data : "";
  ck_assert_msg(fc.diag.errors == count && strncmp(d, head, strlen(head)) == 0 && strstr(d, msg),
                "for:\n%.300s\nwanted %d errors, the first '%s%s'; got %d:\n%.2000s", text, count, head, msg,
                fc.diag.errors, d);
  fa_compiler_free(&fc);
}

/* Printing `text` back gives exactly `want`, which parses to the same tree. */
static void expect_printed(const char *text, const char *want) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Node *m = parse_ok(&fc, text);
  StrBuf sb;
  fa_sb_init(&sb);
  fa_ast_print_source(m, &sb);
  ck_assert_str_eq(sb.data ? sb.data : "", want);
  Node *again = parse_ok(&fc, sb.data ? sb.data : "");
  ck_assert(fa_ast_equal(m, again));
  fa_sb_free(&sb);
  fa_compiler_free(&fc);
}

START_TEST(precedence) {
  expect_shape("a + b * c", "(+ a (* b c))");
  expect_shape("a - b - c", "(- (- a b) c)");
  expect_shape("a / b // c % d @ e", "(@ (% (// (/ a b) c) d) e)");
  expect_shape("-x ** 2", "(- (** x 2))");
  expect_shape("x ** -y", "(** x (- y))");
  expect_shape("a ** b ** c", "(** a (** b c))");
  expect_shape("(-a) ** b", "(** (- a) b)");
  expect_shape("~-+a", "(~ (- (+ a)))");
  expect_shape("not a < b", "(not (< a b))");
  expect_shape("not not a", "(not (not a))");
  expect_shape("a or b and c", "(or a (and b c))");
  expect_shape("a and b or c and d", "(or (and a b) (and c d))");
  expect_shape("a | b ^ c & d << e + f", "(| a (^ b (& c (<< d (+ e f)))))");
  expect_shape("a >> b << c", "(<< (>> a b) c)");
  expect_shape("a < b | c", "(< a (| b c))");
  expect_shape("a == b and c != d", "(and (== a b) (!= c d))");
  expect_shape("a <= b or a >= b or a > b", "(or (or (<= a b) (>= a b)) (> a b))");
  expect_shape("a if b else c if d else e", "(if a b (if c d e))");
  expect_shape("a or b if c and d else e", "(if (or a b) (and c d) e)");
  expect_shape("(a if b else c) + 1", "(+ (if a b c) 1)");
  expect_shape("(a < b) < c", "(< (< a b) c)");
  expect_shape("~a.b[c](d)", "(~ (call ([] (. a b) c) d))");
  expect_shape("-2 ** 2", "(- (** 2 2))");
}
END_TEST

START_TEST(atoms_and_trailers) {
  expect_shape("()", "(tuple)");
  expect_shape("(a,)", "(tuple a)");
  expect_shape("(a, b,)", "(tuple a b)");
  expect_shape("a, b", "(tuple a b)");
  expect_shape("a,", "(tuple a)");
  expect_shape("[]", "(list)");
  expect_shape("[a, [b], (c)]", "(list a (list b) c)");
  expect_shape("[a, b,]", "(list a b)");
  expect_shape("f()", "(call f)");
  expect_shape("f(a, b, c=1, d=e)", "(call f a b c=1 d=e)");
  expect_shape("f(a,)", "(call f a)");
  expect_shape("f(g(h(1)))", "(call f (call g (call h 1)))");
  expect_shape("x.to(f16)", "(call (. x to) f16)");
  expect_shape("b_l[:, None]", "([] b_l (: _ _ _) None)");
  expect_shape("a[1:2, ::3, :n, i:]", "([] a (: 1 2 _) (: _ _ 3) (: _ n _) (: i _ _))");
  expect_shape("a[i][j]", "([] ([] a i) j)");
  expect_shape("a[i,]", "([] a i)");
  expect_shape("a[(i, j)]", "([] a (tuple i j))");
  expect_shape("'a' \"b\" 'c'", "'abc'");
  expect_shape("True and False or None", "(or (and True False) None)");
  expect_shape("...", "...");
  expect_shape("0x10 + 1.5", "(+ 16 1.5)");
}
END_TEST

START_TEST(statements) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Node *m = parse_ok(&fc,
                     "a, b = b, a\n"
                     "x = y = 0\n"
                     "x[i].f += 1; y <<= 2;\n"
                     "N: constexpr = 64\n"
                     "for i, j in pairs: pass\n"
                     "while x:\n    break\n    continue\n"
                     "if a:\n    pass\nelif b:\n    pass\nelse:\n    return 1, 2\n"
                     "f(x)\n"
                     "return\n");
  ck_assert_int_eq(m->body.len, 10);
  Node **s = m->body.items;
  ck_assert_int_eq(s[0]->kind, N_ASSIGN);
  ck_assert_int_eq(s[0]->args.len, 1);
  ck_assert_int_eq(s[0]->args.items[0]->kind, N_TUPLE);
  ck_assert_int_eq(s[0]->rhs->kind, N_TUPLE);
  ck_assert_int_eq(s[1]->kind, N_ASSIGN);
  ck_assert_int_eq(s[1]->args.len, 2);
  ck_assert_str_eq(s[1]->args.items[1]->name, "y");
  ck_assert_int_eq(s[2]->kind, N_AUGASSIGN);
  ck_assert_int_eq(s[2]->op, OP_ADD);
  ck_assert_int_eq(s[2]->lhs->kind, N_ATTR);
  ck_assert_int_eq(s[3]->kind, N_AUGASSIGN);
  ck_assert_int_eq(s[3]->op, OP_SHL);
  ck_assert_int_eq(s[4]->kind, N_ANNASSIGN);
  ck_assert_str_eq(s[4]->lhs->name, "N");
  ck_assert_str_eq(s[4]->annot->name, "constexpr");
  ck_assert_int_eq(s[4]->rhs->int_val, 64);
  ck_assert_int_eq(s[5]->kind, N_FOR);
  ck_assert_int_eq(s[5]->lhs->kind, N_TUPLE);
  ck_assert_int_eq(s[5]->body.len, 1);
  ck_assert_int_eq(s[6]->kind, N_WHILE);
  ck_assert_int_eq(s[6]->body.items[1]->kind, N_CONTINUE);
  /* elif is an N_IF alone in orelse */
  ck_assert_int_eq(s[7]->kind, N_IF);
  ck_assert_int_eq(s[7]->orelse.len, 1);
  Node *elif = s[7]->orelse.items[0];
  ck_assert_int_eq(elif->kind, N_IF);
  ck_assert_str_eq(elif->cond->name, "b");
  ck_assert_int_eq(elif->orelse.items[0]->kind, N_RETURN);
  ck_assert_int_eq(elif->orelse.items[0]->lhs->kind, N_TUPLE);
  ck_assert_int_eq(s[8]->kind, N_EXPR_STMT);
  ck_assert_int_eq(s[8]->lhs->kind, N_CALL);
  ck_assert_int_eq(s[9]->kind, N_RETURN);
  ck_assert_ptr_null(s[9]->lhs);
  fa_compiler_free(&fc);
}
END_TEST

START_TEST(functions) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Node *m = parse_ok(&fc,
                     "@kernel(grid=(cdiv(n, B), 1))\n"
                     "@autotune(B=[64, 128], key=(n,))\n"
                     "def k(x: *f16[z * g, n, 64], y: **T, n: i32, B: constexpr = 64, h=None) -> None:\n"
                     "    pass\n"
                     "\n"
                     "@problem\n"
                     "def p(N): pass\n"
                     "@a.b.c()\n"
                     "def helper(): return\n");
  ck_assert_int_eq(m->body.len, 3);
  Node *k = m->body.items[0];
  ck_assert_int_eq(k->kind, N_FUNC);
  ck_assert_str_eq(k->name, "k");
  ck_assert_int_eq(k->loc.line, 1);   /* the first token: the first decorator */
  ck_assert(fa_func_is_kernel(k));
  const Node *tune = fa_func_decorator(k, "autotune");
  ck_assert_ptr_nonnull(tune);
  ck_assert_int_eq(tune->kwargs.len, 2);
  ck_assert_str_eq(tune->kwargs.items[1]->name, "key");
  ck_assert_int_eq(tune->kwargs.items[1]->rhs->kind, N_TUPLE);
  ck_assert_ptr_null(fa_func_decorator(k, "problem"));
  ck_assert_int_eq(k->params.len, 5);
  Node *x = k->params.items[0];
  ck_assert_int_eq(x->annot->kind, N_PTR_TYPE);
  ck_assert_str_eq(x->annot->lhs->name, "f16");
  ck_assert_int_eq(x->annot->args.len, 3);
  ck_assert_int_eq(x->annot->args.items[0]->kind, N_BINARY);
  Node *y = k->params.items[1];
  ck_assert_int_eq(y->annot->kind, N_PTR_TYPE);
  ck_assert_int_eq(y->annot->lhs->kind, N_PTR_TYPE);
  ck_assert_int_eq(k->params.items[3]->rhs->int_val, 64);
  ck_assert_ptr_null(k->params.items[4]->annot);
  ck_assert_int_eq(k->params.items[4]->rhs->kind, N_NONE);
  ck_assert_int_eq(k->annot->kind, N_NONE);
  Node *p = m->body.items[1];
  ck_assert(!fa_func_is_kernel(p));
  ck_assert_ptr_nonnull(fa_func_decorator(p, "problem"));
  ck_assert_int_eq(p->body.len, 1);
  Node *h = m->body.items[2];
  ck_assert_str_eq(h->decorators.items[0]->name, "a.b.c");
  ck_assert_int_eq(h->loc.line, 8);
  fa_compiler_free(&fc);
}
END_TEST

START_TEST(locations) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Node *m = parse_ok(&fc, "def f(a):\n    x = a  +  g(1)[2]\n");
  Node *f = m->body.items[0];
  ck_assert_int_eq(f->loc.line, 1);
  ck_assert_int_eq(f->loc.col, 1);
  ck_assert_int_eq(f->params.items[0]->loc.col, 7);
  Node *s = f->body.items[0];
  ck_assert_int_eq(s->loc.line, 2);
  ck_assert_int_eq(s->loc.col, 5);
  Node *sum = s->rhs;        /* a binary node starts where its left operand does */
  ck_assert_int_eq(sum->loc.col, 9);
  ck_assert_int_eq(sum->rhs->kind, N_SUBSCRIPT);
  ck_assert_int_eq(sum->rhs->loc.col, 15);
  ck_assert_int_eq(sum->rhs->args.items[0]->loc.col, 20);
  ck_assert_ptr_eq(sum->loc.src, s->loc.src);
  ck_assert_str_eq(sum->loc.src->name, "t.fa");
  fa_compiler_free(&fc);
}
END_TEST

START_TEST(syntax_errors) {
  expect_errors("if x\n    y = 1\n", 1, 1, 5, "expected ':'");
  expect_errors("def f(x)\n    pass\n", 1, 1, 9, "expected '->' or ':'");
  expect_errors("x = = 1\n", 1, 1, 5, "syntax error: unexpected '='");
  expect_errors("f(a b)\n", 1, 1, 5, "unexpected identifier 'b', expected ')' or ','");
  expect_errors("x = 1\n    y = 2\n", 1, 2, 5, "unexpected indent");
  expect_errors("a < b < c\n", 1, 1, 7, "chained comparisons are not supported; use 'and'");
  expect_errors("x = a == b != c\n", 1, 1, 12, "chained comparisons");
  expect_errors("f(a=1, b)\n", 1, 1, 8, "positional argument follows keyword argument");
  expect_errors("f(a=1, a=2)\n", 1, 1, 8, "duplicate keyword argument 'a'");
  expect_errors("@k(a=1, a=2)\ndef f(): pass\n", 1, 1, 9, "duplicate keyword argument 'a'");
  expect_errors("def f(a, b, a): pass\n", 1, 1, 13, "duplicate parameter 'a'");
  expect_errors("1 = x\n", 1, 1, 1, "cannot assign to a literal");
  expect_errors("f(x) = 1\n", 1, 1, 1, "cannot assign to a function call");
  expect_errors("a, b += 1\n", 1, 1, 1, "augmented assignment");
  expect_errors("for f() in x: pass\n", 1, 1, 5, "cannot assign to a function call");
  expect_errors("def f():\n    def g(): pass\n", 1, 2, 5, "unexpected 'def'");
  expect_errors("f(a.b=1)\n", 1, 1, 6, "syntax error");
  expect_errors("x @= 1\n", 1, 1, 4, "syntax error");
  expect_errors("x = {}\n", 1, 1, 5, "unexpected '{'");
  expect_errors("if a:\n", 1, 2, 1, "unexpected end of file, expected indent");
  expect_errors("@kernel\nx = 1\n", 1, 2, 1, "expected 'def'");
  expect_errors("@ 3\ndef f(): pass\n", 1, 1, 3, "syntax error");
}
END_TEST

START_TEST(error_recovery) {
  /* every broken statement is reported, and the rest still parses */
  expect_errors("x = = 1\n"
                "def f(:\n"
                "    pass\n"
                "y = 2 +\n"
                "if a\n"
                "    z = $\n"
                "w = (1, 2)\n"
                "v = a < b < c\n",
                4, 1, 5, "unexpected '='");
  /* a broken header with a body: the body's errors are still found */
  expect_errors("def f(x y):\n    a = = 1\n    b = 2\nc = ]\n", 3, 1, 9, "unexpected identifier");
  /* unexpected indents do not cascade */
  expect_errors("x = 1\n    y = 2\n    z = 3\nw = 4\n", 1, 2, 5, "unexpected indent");
}
END_TEST

START_TEST(nesting_limits) {
  FaCompiler fc;
  /* 100,000 open brackets: a diagnostic, no stack overflow */
  enum { DEEP = 100000 };
  char *text = malloc(2 * DEEP + 16);
  strcpy(text, "x = ");
  memset(text + 4, '(', DEEP);
  strcpy(text + 4 + DEEP, "1\n");
  expect_errors(text, 1, 1, 5 + FA_MAX_NESTING, "too many nested brackets");
  /* 100,000 unary minus signs: the parser's stack runs out, with a diagnostic */
  memset(text + 4, '-', DEEP);
  expect_errors(text, 1, 1, 10000, "too deeply nested");
  free(text);
  /* a left-deep chain of 1,000,000 terms is rejected once, without recursion */
  enum { TERMS = 1000000 };
  text = malloc(2 * TERMS + 16);
  strcpy(text, "x = a");
  for (int i = 1; i < TERMS; i++)
    memcpy(text + 3 + 2 * i, "+a", 2);
  strcpy(text + 3 + 2 * TERMS, "\n");
  expect_errors(text, 1, 1, 5, "expression too deeply nested");
  /* just under the limit is fine, and every walk copes with it */
  strcpy(text + 3 + 2 * (FA_MAX_EXPR_DEPTH - 1), "\n");
  fa_compiler_init(&fc, NULL);
  Node *m = parse_ok(&fc, text);
  ck_assert_int_eq(m->body.items[0]->rhs->depth, FA_MAX_EXPR_DEPTH - 1);
  StrBuf sb;
  fa_sb_init(&sb);
  fa_ast_print_source(m, &sb);
  FILE *null = fopen("/dev/null", "w");
  fa_ast_dump(m, null);
  fclose(null);
  ck_assert(fa_ast_equal(m, parse_ok(&fc, sb.data)));
  fa_sb_free(&sb);
  fa_compiler_free(&fc);
  free(text);
}
END_TEST

START_TEST(printing) {
  expect_printed("x=(a+b)*c\n", "x = (a + b) * c\n");
  expect_printed("x = (a*b)+c\n", "x = a * b + c\n");
  expect_printed("x = a - (b - c)\n", "x = a - (b - c)\n");
  expect_printed("x = (-a)**b + -a**b + a**-b + (a**b)**c\n", "x = (-a) ** b + -a ** b + a ** -b + (a ** b) ** c\n");
  expect_printed("x = (a < b) < c\n", "x = (a < b) < c\n");
  expect_printed("x = not (a and b)\n", "x = not (a and b)\n");
  expect_printed("x = (a if b else c) if d else e\n", "x = (a if b else c) if d else e\n");
  expect_printed("x = - -a\n", "x = - -a\n");
  expect_printed("a, b = (b, a)\n", "a, b = b, a\n");
  expect_printed("x = (1,)\nf((a, b), ())\n", "x = (1,)\nf((a, b), ())\n");
  expect_printed("x = 'a\\n' \"\\x00\\xff\xc3\xa9\"\n", "x = \"a\\n\\x00\\xff\xc3\xa9\"\n");
  expect_printed("x = 0x10 + 1_0.5e1\n", "x = 0x10 + 1_0.5e1\n");
  expect_printed("if a:\n  pass\nelse:\n  if b: pass\n  else: c()\n",
                 "if a:\n    pass\nelif b:\n    pass\nelse:\n    c()\n");
  expect_printed("@k(1, g=2)\ndef f(a: *T[n, 2], b=1, c: i32 = 3) -> i32: return a\nx = 1\n",
                 "@k(1, g=2)\ndef f(a: *T[n, 2], b=1, c: i32 = 3) -> i32:\n    return a\n\nx = 1\n");
  expect_printed("", "");
}
END_TEST

START_TEST(equality) {
  static const char *const differ[][2] = {
    {"x = a + b\n", "x = a - b\n"}, {"x = a\n", "x = b\n"}, {"x = 1\n", "x = 2\n"},
    {"x = 1\n", "x = 1.0\n"}, {"x = 'a'\n", "x = 'b'\n"}, {"x = 'a'\n", "x = 'a\\0'\n"},
    {"f(a)\n", "f(a, b)\n"}, {"f(a=1)\n", "f(b=1)\n"}, {"x = a[1:2]\n", "x = a[1:2:1]\n"},
    {"if a: pass\n", "if a: pass\nelse: pass\n"}, {"x = 0.0\n", "x = -0.0\n"},
    {"def f(a): pass\n", "def f(a: i32): pass\n"}, {"x = (a,)\n", "x = [a]\n"},
  };
  for (int i = 0; i < FA_ARRAY_LEN(differ); i++) {
    FaCompiler fc;
    fa_compiler_init(&fc, NULL);
    Node *a = parse_ok(&fc, differ[i][0]);
    Node *b = parse_ok(&fc, differ[i][1]);
    ck_assert_msg(!fa_ast_equal(a, b), "%s and %s compare equal", differ[i][0], differ[i][1]);
    ck_assert(fa_ast_equal(a, a));
    fa_compiler_free(&fc);
  }
  /* spelling and locations do not matter */
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  ck_assert(fa_ast_equal(parse_ok(&fc, "x = 0x10 + ((a))\n"), parse_ok(&fc, "\n\nx=16+a")));
  ck_assert(fa_ast_equal(NULL, NULL));
  ck_assert(!fa_ast_equal(parse_ok(&fc, "x = 1\n"), NULL));
  fa_compiler_free(&fc);
}
END_TEST

START_TEST(names_and_spellings) {
  ck_assert_str_eq(fa_op_spelling(OP_FLOORDIV), "//");
  ck_assert_str_eq(fa_op_spelling(OP_NOT), "not");
  ck_assert_str_eq(fa_op_spelling(OP_NE), "!=");
  ck_assert_str_eq(fa_op_spelling(OP_MATMUL), "@");
  ck_assert_str_eq(fa_node_kind_name(N_PTR_TYPE), "PTR_TYPE");
  ck_assert_str_eq(fa_node_kind_name(N_MODULE), "MODULE");
  ck_assert_str_eq(fa_node_kind_name((NodeKind)999), "?");
  for (int k = N_NAME; k <= N_MODULE; k++)
    ck_assert_str_ne(fa_node_kind_name((NodeKind)k), "?");
  for (int op = OP_NEG; op <= OP_OR; op++)
    ck_assert_str_ne(fa_op_spelling((OpKind)op), "?");
}
END_TEST

START_TEST(dump_is_readable) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Node *m = parse_ok(&fc, "x = a + 0x10\n");
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  fa_ast_dump(m, out);
  fclose(out);
  ck_assert_str_eq(buf, "MODULE <1:1>\n"
                        "  ASSIGN <1:1>\n"
                        "    target: NAME x <1:1>\n"
                        "    value: BINARY + <1:5>\n"
                        "      NAME a <1:5>\n"
                        "      INT 16 (0x10) <1:9>\n");
  free(buf);
  fa_compiler_free(&fc);
}
END_TEST

START_TEST(independent_contexts) {
  /* two contexts at once share nothing */
  FaCompiler a, b;
  fa_compiler_init(&a, NULL);
  fa_compiler_init(&b, NULL);
  Node *ma = parse(&a, "x = = 1\n");
  Node *mb = parse(&b, "x = 1\n");
  ck_assert_ptr_null(ma);
  ck_assert_ptr_nonnull(mb);
  ck_assert_int_eq(a.diag.errors, 1);
  ck_assert_int_eq(b.diag.errors, 0);
  fa_compiler_free(&a);
  fa_compiler_free(&b);
  /* reading a file that is not there is an error, not a crash */
  FaCompiler c;
  fa_compiler_init(&c, NULL);
  ck_assert_ptr_null(fa_source_read(&c, "/nonexistent/x.fa"));
  ck_assert_int_eq(c.diag.errors, 1);
  ck_assert_ptr_nonnull(strstr(c.diag.text.data, "cannot read '/nonexistent/x.fa'"));
  fa_compiler_free(&c);
}
END_TEST

START_TEST(empty_module) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Node *m = parse_ok(&fc, "");
  ck_assert_int_eq(m->kind, N_MODULE);
  ck_assert_int_eq(m->body.len, 0);
  m = parse_ok(&fc, "\n\n   \n# nothing\n");
  ck_assert_int_eq(m->body.len, 0);
  fa_compiler_free(&fc);
}
END_TEST

static Suite *parser_suite(void) {
  Suite *s = suite_create("parser");
  TCase *tc = tcase_create("grammar");
  tcase_add_test(tc, precedence);
  tcase_add_test(tc, atoms_and_trailers);
  tcase_add_test(tc, statements);
  tcase_add_test(tc, functions);
  tcase_add_test(tc, locations);
  tcase_add_test(tc, empty_module);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, syntax_errors);
  tcase_add_test(tc, error_recovery);
  tcase_add_test(tc, nesting_limits);
  suite_add_tcase(s, tc);
  tc = tcase_create("walks");
  tcase_add_test(tc, printing);
  tcase_add_test(tc, equality);
  tcase_add_test(tc, names_and_spellings);
  tcase_add_test(tc, dump_is_readable);
  tcase_add_test(tc, independent_contexts);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(parser_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
