/* parser.y - the grammar of .fa programs, building the AST of ast.h.
 *
 * A pure (reentrant) bison parser with locations.  The lexer (lexer.l) hands
 * it Python-style NEWLINE / INDENT / DEDENT tokens, so the grammar reads much
 * like Python's: statements end at NEWLINE, blocks are INDENT stmts DEDENT.
 *
 * Precedence is spelled out as one nonterminal per level (lowest first:
 * conditional expression, or, and, not, comparison, |, ^, &, shifts, + -,
 * * / // % @, unary + - ~, **, primary), which also lets us reject chained
 * comparisons with a clear message instead of a generic syntax error.
 *
 * Error recovery: a statement that fails to parse is skipped up to the end of
 * its line (and the indented block under it, if any), and parsing goes on, so
 * every syntax error of a file is reported in one run.
 *
 * Every node is built through the helpers below, which also compute its depth
 * bottom-up (Node.depth) and report trees deeper than FA_MAX_EXPR_DEPTH once,
 * so that no later recursive pass can overflow the stack.
 */

%define api.pure full
%define api.prefix {fa_yy}
%define api.token.prefix {TK_}
%define parse.error custom
%define parse.lac full
%locations
%param {FaParseState *ps}

%code requires {
#include <stdbool.h>

#include "ast.h"

typedef struct FaLexer FaLexer;

/* Everything one parse needs; passed to every action and to the lexer. */
typedef struct FaParseState {
  FaCompiler *fc;
  const Source *src;
  FaLexer *lexer;
  Node *module;             /* the result */
  bool depth_reported;      /* "too deeply nested" is said once per file */
  bool oom_reported;
  Node oom_sink;            /* handed out when the arena is exhausted (an error is reported) */
} FaParseState;
}

%code provides {
/* The lexer's interface (lexer.l). */
FaLexer *fa_lexer_new(FaCompiler *fc, const Source *src);
void fa_lexer_free(FaLexer *lx);
/* Next token; its value and location go to *lval and *lloc. */
int fa_lexer_next(FaLexer *lx, FA_YYSTYPE *lval, FA_YYLTYPE *lloc);
/* Spelling of the last token returned (a pointer into the source text). */
const char *fa_lexer_text(const FaLexer *lx, size_t *len);

int fa_yylex(FA_YYSTYPE *lval, FA_YYLTYPE *lloc, FaParseState *ps);
void fa_yyerror(FA_YYLTYPE *lloc, FaParseState *ps, const char *msg);
}

%union {
  Node *node;
  NodeList list;
  const char *name;
  int op;
}

%code {
#include <stdlib.h>
#include <string.h>

static SrcLoc loc_of(FaParseState *ps, FA_YYLTYPE l) {
  return fa_loc(ps->src, l.first_line, l.first_column);
}

/* A new node; on arena exhaustion reports once and returns a scratch node, so
 * that actions never see NULL (the parse fails because an error was reported). */
static Node *mk(FaParseState *ps, NodeKind kind, FA_YYLTYPE l) {
  Node *n = fa_node_new(ps->fc, kind, loc_of(ps, l));
  if (n)
    return n;
  if (!ps->oom_reported) {
    fa_error(&ps->fc->diag, loc_of(ps, l), "out of memory");
    ps->oom_reported = true;
  }
  memset(&ps->oom_sink, 0, sizeof ps->oom_sink);
  ps->oom_sink.kind = kind;
  ps->oom_sink.depth = 1;
  return &ps->oom_sink;
}

static void push(FaParseState *ps, NodeList *list, Node *n) {
  int before = list->len;
  fa_nodelist_push(ps->fc, list, n);
  if (list->len == before && !ps->oom_reported) {
    fa_error(&ps->fc->diag, n->loc, "out of memory");
    ps->oom_reported = true;
  }
}

static void append(FaParseState *ps, NodeList *to, NodeList from) {
  for (int i = 0; i < from.len; i++)
    push(ps, to, from.items[i]);
}

static NodeList list1(FaParseState *ps, Node *n) {
  NodeList l = {0};
  push(ps, &l, n);
  return l;
}

static bool is_expr_kind(NodeKind k) { return k <= N_PTR_TYPE; }

static int max_depth(int d, const Node *n) { return n && n->depth > d ? n->depth : d; }
static int max_depth_list(int d, NodeList l) {
  for (int i = 0; i < l.len; i++)
    d = max_depth(d, l.items[i]);
  return d;
}

/* Sets n->depth from its children (already finished) and enforces the limit. */
static Node *fin(FaParseState *ps, Node *n) {
  int d = 0;
  d = max_depth(d, n->lhs);
  d = max_depth(d, n->rhs);
  d = max_depth(d, n->cond);
  d = max_depth(d, n->then);
  d = max_depth(d, n->els);
  d = max_depth(d, n->lo);
  d = max_depth(d, n->hi);
  d = max_depth(d, n->step);
  d = max_depth(d, n->annot);
  d = max_depth_list(d, n->args);
  d = max_depth_list(d, n->kwargs);
  if (n->kind != N_MODULE)
    d = max_depth_list(d, n->body);
  d = max_depth_list(d, n->orelse);
  d = max_depth_list(d, n->decorators);
  d = max_depth_list(d, n->params);
  n->depth = d + 1;
  if (n->depth > FA_MAX_EXPR_DEPTH && !ps->depth_reported) {
    ps->depth_reported = true;
    fa_error(&ps->fc->diag, n->loc, is_expr_kind(n->kind) ? "expression too deeply nested"
                                                          : "statements too deeply nested");
  }
  return n;
}

static Node *mk_unary(FaParseState *ps, OpKind op, Node *operand, FA_YYLTYPE l) {
  Node *n = mk(ps, N_UNARY, l);
  n->op = op;
  n->lhs = operand;
  return fin(ps, n);
}

static Node *mk_binary(FaParseState *ps, OpKind op, Node *lhs, Node *rhs) {
  Node *n = fa_node_new(ps->fc, N_BINARY, lhs->loc);
  if (!n) {
    FA_YYLTYPE l = {lhs->loc.line, lhs->loc.col, lhs->loc.line, lhs->loc.col};
    n = mk(ps, N_BINARY, l);
  }
  n->op = op;
  n->lhs = lhs;
  n->rhs = rhs;
  return fin(ps, n);
}

static Node *mk_tuple(FaParseState *ps, NodeList items, FA_YYLTYPE l) {
  Node *n = mk(ps, N_TUPLE, l);
  n->args = items;
  return fin(ps, n);
}

/* A node with the location of an existing node. */
static Node *mk_at(FaParseState *ps, NodeKind kind, const Node *at) {
  FA_YYLTYPE l = {at->loc.line, at->loc.col, at->loc.line, at->loc.col};
  return mk(ps, kind, l);
}

static const char *describe(const Node *n) {
  switch (n->kind) {
  case N_INT: case N_FLOAT: case N_STR: case N_TRUE: case N_FALSE: case N_NONE:
    return "a literal";
  case N_NAME: return "'...'";
  case N_CALL: return "a function call";
  case N_UNARY: case N_BINARY: return "an operator expression";
  case N_IFEXP: return "a conditional expression";
  case N_KEYWORD: return "a keyword argument";
  case N_SLICE: return "a slice";
  case N_TUPLE: return "a tuple";
  case N_LIST: return "a list";
  case N_PTR_TYPE: return "a type";
  default: return "this expression";
  }
}

/* Assignment targets: names, attributes, subscripts, and (not for augmented
 * assignment) tuples and lists of targets.  Tuples nest only inside brackets,
 * so this recursion is bounded by FA_MAX_NESTING. */
static void check_target(FaParseState *ps, const Node *t, bool augmented) {
  switch (t->kind) {
  case N_NAME:
    if (strcmp(t->name, "...") == 0)
      fa_error(&ps->fc->diag, t->loc, "cannot assign to '...'");
    return;
  case N_ATTR:
  case N_SUBSCRIPT:
    return;
  case N_TUPLE:
  case N_LIST:
    if (augmented) {
      fa_error(&ps->fc->diag, t->loc, "%s cannot be the target of an augmented assignment",
               describe(t));
      return;
    }
    for (int i = 0; i < t->args.len; i++)
      check_target(ps, t->args.items[i], false);
    return;
  default:
    fa_error(&ps->fc->diag, t->loc, "cannot assign to %s", describe(t));
  }
}

static int cmp_named(const void *a, const void *b) {
  const Node *x = *(const Node *const *)a, *y = *(const Node *const *)b;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  if (x->loc.line != y->loc.line)
    return x->loc.line < y->loc.line ? -1 : 1;
  return (x->loc.col > y->loc.col) - (x->loc.col < y->loc.col);
}

/* Reports every repeated name in a list of named nodes (keyword arguments or
 * parameters), at its second and later occurrences.  Sorting keeps this
 * O(n log n) even for absurdly long argument lists. */
static void check_duplicates(FaParseState *ps, NodeList l, const char *what) {
  if (l.len < 2)
    return;
  Node **sorted = malloc((size_t)l.len * sizeof *sorted);
  if (!sorted)
    return;
  memcpy(sorted, l.items, (size_t)l.len * sizeof *sorted);
  qsort(sorted, (size_t)l.len, sizeof *sorted, cmp_named);
  for (int i = 1; i < l.len; i++)
    if (strcmp(sorted[i]->name, sorted[i - 1]->name) == 0)
      fa_error(&ps->fc->diag, sorted[i]->loc, "duplicate %s '%s'", what, sorted[i]->name);
  free(sorted);
}

/* Adds one argument to a call under construction (an N_CALL holding args and
 * kwargs); positional arguments may not follow keyword arguments. */
static void add_arg(FaParseState *ps, Node *call, Node *arg) {
  if (arg->kind == N_KEYWORD) {
    push(ps, &call->kwargs, arg);
  } else {
    if (call->kwargs.len > 0)
      fa_error(&ps->fc->diag, arg->loc, "positional argument follows keyword argument");
    push(ps, &call->args, arg);
  }
}

/* Concatenates adjacent string literals into one N_STR. */
static Node *join_strings(FaParseState *ps, NodeList parts) {
  Node *first = parts.items[0];
  if (parts.len == 1)
    return first;
  size_t len = 0, tlen = 0;
  for (int i = 0; i < parts.len; i++) {
    len += parts.items[i]->str_len;
    tlen += strlen(parts.items[i]->text) + 1;
  }
  Node *n = mk_at(ps, N_STR, first);
  char *s = fa_arena_alloc(&ps->fc->arena, len + 1);
  char *t = fa_arena_alloc(&ps->fc->arena, tlen + 1);
  if (!s || !t) {
    n->str = "";
    n->text = "''";
    return fin(ps, n);
  }
  size_t o = 0, to = 0;
  for (int i = 0; i < parts.len; i++) {
    memcpy(s + o, parts.items[i]->str, parts.items[i]->str_len);
    o += parts.items[i]->str_len;
    size_t l = strlen(parts.items[i]->text);
    if (i)
      t[to++] = ' ';
    memcpy(t + to, parts.items[i]->text, l);
    to += l;
  }
  s[o] = '\0';
  t[to] = '\0';
  n->str = s;
  n->str_len = len;
  n->text = t;
  return fin(ps, n);
}
}

%token END 0 "end of file"
%token <name> NAME "identifier"
%token <node> INT "integer literal" FLOAT "float literal" STRING "string literal"
%token NEWLINE "end of line" INDENT "indent" DEDENT "dedent"
%token DEF "'def'" IF "'if'" ELIF "'elif'" ELSE "'else'" FOR "'for'" IN "'in'" WHILE "'while'"
%token RETURN "'return'" PASS "'pass'" BREAK "'break'" CONTINUE "'continue'"
%token IMPORT "'import'" FROM "'from'" AS "'as'"
%token AND "'and'" OR "'or'" NOT "'not'" TRUE "'True'" FALSE "'False'" NONE "'None'"
%token POW "'**'" FLOORDIV "'//'" SHL "'<<'" SHR "'>>'"
%token LE "'<='" GE "'>='" EQ "'=='" NE "'!='" ARROW "'->'" ELLIPSIS "'...'"
%token <op> AUGOP "augmented assignment operator"
/* braces have no use yet, but the lexer pairs them like the other brackets */
%token '{' '}'

%type <node> module funcdef decorator param type type_base
%type <node> import_stmt module_ref import_name
%type <node> small_stmt assign compound if_stmt for_stmt while_stmt
%type <node> exprlist expr or_expr and_expr not_expr comparison chain bor bxor band shift arith term
%type <node> factor power primary atom arglist arg_seq arg subscript opt_expr
%type <list> item stmt stmts suite simple_stmts small_list decorators params param_seq
%type <list> elif_tail expr_seq sub_seq subscripts strings import_names
%type <name> dotted
%type <op> compop

/* After a statement that failed to parse, an indented block that follows it
 * belongs to it (e.g. a def with a broken header): shift the INDENT rather
 * than treating it as an unexpected indent. */
%precedence ERROR_LINE
%precedence INDENT

%start module

%%

module
  : %empty              { $$ = ps->module = mk(ps, N_MODULE, @$); $$->loc = fa_loc(ps->src, 1, 1); }
  | module item         { $$ = $1; append(ps, &$$->body, $2); }
  ;

item
  : NEWLINE             { $$ = (NodeList){0}; }
  | stmt
  | funcdef             { $$ = list1(ps, $1); }
  | import_stmt         { $$ = list1(ps, $1); }
  ;

/* ---- definitions ---- */

funcdef
  : decorators DEF NAME '(' params ')' ':' suite
      { $$ = mk(ps, N_FUNC, @2); $$->decorators = $1; $$->name = $3; $$->params = $5; $$->body = $8;
        if ($1.len) $$->loc = $1.items[0]->loc;
        check_duplicates(ps, $5, "parameter"); fin(ps, $$); }
  | decorators DEF NAME '(' params ')' ARROW type ':' suite
      { $$ = mk(ps, N_FUNC, @2); $$->decorators = $1; $$->name = $3; $$->params = $5;
        $$->annot = $8; $$->body = $10;
        if ($1.len) $$->loc = $1.items[0]->loc;
        check_duplicates(ps, $5, "parameter"); fin(ps, $$); }
  ;

decorators
  : %empty              { $$ = (NodeList){0}; }
  | decorators decorator { $$ = $1; push(ps, &$$, $2); }
  ;

decorator
  : '@' dotted NEWLINE  { $$ = mk(ps, N_DECORATOR, @1); $$->name = $2; fin(ps, $$); }
  | '@' dotted '(' ')' NEWLINE
                        { $$ = mk(ps, N_DECORATOR, @1); $$->name = $2; fin(ps, $$); }
  | '@' dotted '(' arglist ')' NEWLINE
      { $$ = mk(ps, N_DECORATOR, @1); $$->name = $2; $$->args = $4->args; $$->kwargs = $4->kwargs;
        check_duplicates(ps, $4->kwargs, "keyword argument"); fin(ps, $$); }
  ;

dotted
  : NAME
  | dotted '.' NAME     { $$ = fa_arena_printf(&ps->fc->arena, "%s.%s", $1, $3); if (!$$) $$ = $3; }
  ;

params
  : %empty              { $$ = (NodeList){0}; }
  | param_seq
  | param_seq ','
  ;

param_seq
  : param               { $$ = list1(ps, $1); }
  | param_seq ',' param { $$ = $1; push(ps, &$$, $3); }
  ;

param
  : NAME                { $$ = mk(ps, N_PARAM, @1); $$->name = $1; fin(ps, $$); }
  | NAME ':' type       { $$ = mk(ps, N_PARAM, @1); $$->name = $1; $$->annot = $3; fin(ps, $$); }
  | NAME '=' expr       { $$ = mk(ps, N_PARAM, @1); $$->name = $1; $$->rhs = $3; fin(ps, $$); }
  | NAME ':' type '=' expr
      { $$ = mk(ps, N_PARAM, @1); $$->name = $1; $$->annot = $3; $$->rhs = $5; fin(ps, $$); }
  ;

/* Types: i32, constexpr, T, None, *T, **T, *T[extent, ...]. */
type
  : type_base
  | '*' type            { $$ = mk(ps, N_PTR_TYPE, @1); $$->lhs = $2; fin(ps, $$); }
  | POW type            { Node *inner = mk(ps, N_PTR_TYPE, @1); inner->lhs = $2; fin(ps, inner);
                          $$ = mk(ps, N_PTR_TYPE, @1); $$->lhs = inner; fin(ps, $$); }
  | '*' type_base '[' expr_seq ']'
                        { $$ = mk(ps, N_PTR_TYPE, @1); $$->lhs = $2; $$->args = $4; fin(ps, $$); }
  | '*' type_base '[' expr_seq ',' ']'
                        { $$ = mk(ps, N_PTR_TYPE, @1); $$->lhs = $2; $$->args = $4; fin(ps, $$); }
  ;

type_base
  : NAME                { $$ = mk(ps, N_NAME, @1); $$->name = $1; }
  | NONE                { $$ = mk(ps, N_NONE, @1); }
  ;

/* ---- statements ---- */

stmts
  : stmt
  | stmts stmt          { $$ = $1; append(ps, &$$, $2); }
  ;

stmt
  : simple_stmts
  | compound            { $$ = list1(ps, $1); }
  | INDENT stmts DEDENT
      { fa_error(&ps->fc->diag, loc_of(ps, @1), "unexpected indent"); $$ = $2; }
  | error NEWLINE %prec ERROR_LINE
                        { $$ = (NodeList){0}; }
  | error NEWLINE INDENT stmts DEDENT
                        { $$ = (NodeList){0}; }
  ;

suite
  : simple_stmts
  | NEWLINE INDENT stmts DEDENT { $$ = $3; }
  ;

simple_stmts
  : small_list NEWLINE
  | small_list ';' NEWLINE
  ;

small_list
  : small_stmt          { $$ = list1(ps, $1); }
  | small_list ';' small_stmt { $$ = $1; push(ps, &$$, $3); }
  ;

small_stmt
  : exprlist            { $$ = mk_at(ps, N_EXPR_STMT, $1); $$->lhs = $1; fin(ps, $$); }
  | assign              { fin(ps, $1); $$ = $1; }
  | exprlist AUGOP expr
      { check_target(ps, $1, true);
        $$ = mk_at(ps, N_AUGASSIGN, $1); $$->op = $2; $$->lhs = $1; $$->rhs = $3; fin(ps, $$); }
  | NAME ':' type '=' expr
      { $$ = mk(ps, N_ANNASSIGN, @1);
        Node *t = mk(ps, N_NAME, @1); t->name = $1;
        $$->lhs = t; $$->annot = $3; $$->rhs = $5; fin(ps, $$); }
  | PASS                { $$ = mk(ps, N_PASS, @1); }
  | BREAK               { $$ = mk(ps, N_BREAK, @1); }
  | CONTINUE            { $$ = mk(ps, N_CONTINUE, @1); }
  | RETURN              { $$ = mk(ps, N_RETURN, @1); }
  | RETURN exprlist     { $$ = mk(ps, N_RETURN, @1); $$->lhs = $2; fin(ps, $$); }
  ;

/* a = b = c: every exprlist but the last is a target. */
assign
  : exprlist '=' exprlist
      { check_target(ps, $1, false);
        $$ = mk_at(ps, N_ASSIGN, $1); push(ps, &$$->args, $1); $$->rhs = $3; }
  | assign '=' exprlist
      { check_target(ps, $1->rhs, false);
        $$ = $1; push(ps, &$$->args, $1->rhs); $$->rhs = $3; }
  ;

compound
  : if_stmt
  | for_stmt
  | while_stmt
  ;

if_stmt
  : IF expr ':' suite elif_tail
      { $$ = mk(ps, N_IF, @1); $$->cond = $2; $$->body = $4; $$->orelse = $5; fin(ps, $$); }
  ;

elif_tail
  : %empty              { $$ = (NodeList){0}; }
  | ELSE ':' suite      { $$ = $3; }
  | ELIF expr ':' suite elif_tail
      { Node *n = mk(ps, N_IF, @1); n->cond = $2; n->body = $4; n->orelse = $5; fin(ps, n);
        $$ = list1(ps, n); }
  ;

for_stmt
  : FOR exprlist IN exprlist ':' suite
      { check_target(ps, $2, false);
        $$ = mk(ps, N_FOR, @1); $$->lhs = $2; $$->rhs = $4; $$->body = $6; fin(ps, $$); }
  ;

while_stmt
  : WHILE expr ':' suite
      { $$ = mk(ps, N_WHILE, @1); $$->cond = $2; $$->body = $4; fin(ps, $$); }
  ;

/* ---- expressions ---- */

/* An expression, or a bare tuple when there is a top-level comma. */
exprlist
  : expr_seq            { $$ = $1.len == 1 ? $1.items[0] : mk_tuple(ps, $1, @1); }
  | expr_seq ','        { $$ = mk_tuple(ps, $1, @1); }
  ;

expr_seq
  : expr                { $$ = list1(ps, $1); }
  | expr_seq ',' expr   { $$ = $1; push(ps, &$$, $3); }
  ;

expr
  : or_expr
  | or_expr IF or_expr ELSE expr
      { $$ = mk_at(ps, N_IFEXP, $1); $$->then = $1; $$->cond = $3; $$->els = $5; fin(ps, $$); }
  ;

or_expr
  : and_expr
  | or_expr OR and_expr { $$ = mk_binary(ps, OP_OR, $1, $3); }
  ;

and_expr
  : not_expr
  | and_expr AND not_expr { $$ = mk_binary(ps, OP_AND, $1, $3); }
  ;

not_expr
  : comparison
  | NOT not_expr        { $$ = mk_unary(ps, OP_NOT, $2, @1); }
  ;

/* Comparisons do not chain: a < b < c is an error (Python would read it as
 * a < b and b < c, C as (a < b) < c; we make the author say which). */
comparison
  : bor
  | bor compop bor      { $$ = mk_binary(ps, $2, $1, $3); }
  | chain
  ;

chain
  : bor compop bor compop bor
      { fa_error(&ps->fc->diag, loc_of(ps, @4), "chained comparisons are not supported; use 'and'");
        $$ = mk_binary(ps, $4, mk_binary(ps, $2, $1, $3), $5); }
  | chain compop bor    { $$ = mk_binary(ps, $2, $1, $3); }
  ;

compop
  : '<'                 { $$ = OP_LT; }
  | '>'                 { $$ = OP_GT; }
  | LE                  { $$ = OP_LE; }
  | GE                  { $$ = OP_GE; }
  | EQ                  { $$ = OP_EQ; }
  | NE                  { $$ = OP_NE; }
  ;

bor
  : bxor
  | bor '|' bxor        { $$ = mk_binary(ps, OP_BITOR, $1, $3); }
  ;

bxor
  : band
  | bxor '^' band       { $$ = mk_binary(ps, OP_BITXOR, $1, $3); }
  ;

band
  : shift
  | band '&' shift      { $$ = mk_binary(ps, OP_BITAND, $1, $3); }
  ;

shift
  : arith
  | shift SHL arith     { $$ = mk_binary(ps, OP_SHL, $1, $3); }
  | shift SHR arith     { $$ = mk_binary(ps, OP_SHR, $1, $3); }
  ;

arith
  : term
  | arith '+' term      { $$ = mk_binary(ps, OP_ADD, $1, $3); }
  | arith '-' term      { $$ = mk_binary(ps, OP_SUB, $1, $3); }
  ;

term
  : factor
  | term '*' factor     { $$ = mk_binary(ps, OP_MUL, $1, $3); }
  | term '/' factor     { $$ = mk_binary(ps, OP_DIV, $1, $3); }
  | term FLOORDIV factor { $$ = mk_binary(ps, OP_FLOORDIV, $1, $3); }
  | term '%' factor     { $$ = mk_binary(ps, OP_MOD, $1, $3); }
  | term '@' factor     { $$ = mk_binary(ps, OP_MATMUL, $1, $3); }
  ;

factor
  : power
  | '-' factor          { $$ = mk_unary(ps, OP_NEG, $2, @1); }
  | '+' factor          { $$ = mk_unary(ps, OP_POS, $2, @1); }
  | '~' factor          { $$ = mk_unary(ps, OP_INVERT, $2, @1); }
  ;

/* ** is right-associative and binds tighter than a unary operator on its
 * left: -x ** 2 is -(x ** 2), and x ** -y is allowed. */
power
  : primary
  | primary POW factor  { $$ = mk_binary(ps, OP_POW, $1, $3); }
  ;

primary
  : atom
  | primary '.' NAME
      { $$ = mk_at(ps, N_ATTR, $1); $$->lhs = $1; $$->name = $3; fin(ps, $$); }
  | primary '(' ')'     { $$ = mk_at(ps, N_CALL, $1); $$->lhs = $1; fin(ps, $$); }
  | primary '(' arglist ')'
      { $$ = $3; $$->loc = $1->loc; $$->lhs = $1;
        check_duplicates(ps, $$->kwargs, "keyword argument"); fin(ps, $$); }
  | primary '[' subscripts ']'
      { $$ = mk_at(ps, N_SUBSCRIPT, $1); $$->lhs = $1; $$->args = $3; fin(ps, $$); }
  ;

/* Arguments are collected in an N_CALL whose callee is filled in above. */
arglist
  : arg_seq
  | arg_seq ','
  ;

arg_seq
  : arg                 { $$ = mk(ps, N_CALL, @1); add_arg(ps, $$, $1); }
  | arg_seq ',' arg     { $$ = $1; add_arg(ps, $$, $3); }
  ;

arg
  : expr
  | NAME '=' expr       { $$ = mk(ps, N_KEYWORD, @1); $$->name = $1; $$->rhs = $3; fin(ps, $$); }
  ;

subscripts
  : sub_seq
  | sub_seq ','
  ;

sub_seq
  : subscript           { $$ = list1(ps, $1); }
  | sub_seq ',' subscript { $$ = $1; push(ps, &$$, $3); }
  ;

subscript
  : expr
  | opt_expr ':' opt_expr
      { $$ = mk(ps, N_SLICE, @$); if ($1) $$->loc = $1->loc; else $$->loc = loc_of(ps, @2);
        $$->lo = $1; $$->hi = $3; fin(ps, $$); }
  | opt_expr ':' opt_expr ':' opt_expr
      { $$ = mk(ps, N_SLICE, @$); if ($1) $$->loc = $1->loc; else $$->loc = loc_of(ps, @2);
        $$->lo = $1; $$->hi = $3; $$->step = $5; fin(ps, $$); }
  ;

opt_expr
  : %empty              { $$ = NULL; }
  | expr
  ;

atom
  : NAME                { $$ = mk(ps, N_NAME, @1); $$->name = $1; }
  | INT
  | FLOAT
  | strings             { $$ = join_strings(ps, $1); }
  | TRUE                { $$ = mk(ps, N_TRUE, @1); }
  | FALSE               { $$ = mk(ps, N_FALSE, @1); }
  | NONE                { $$ = mk(ps, N_NONE, @1); }
  | ELLIPSIS            { $$ = mk(ps, N_NAME, @1); $$->name = "..."; }
  | '(' ')'             { $$ = mk_tuple(ps, (NodeList){0}, @1); }
  | '(' exprlist ')'    { $$ = $2; if ($$->kind == N_TUPLE) $$->loc = loc_of(ps, @1); }
  | '[' ']'             { $$ = mk(ps, N_LIST, @1); }
  | '[' expr_seq ']'    { $$ = mk(ps, N_LIST, @1); $$->args = $2; fin(ps, $$); }
  | '[' expr_seq ',' ']' { $$ = mk(ps, N_LIST, @1); $$->args = $2; fin(ps, $$); }
  ;

strings
  : STRING              { $$ = list1(ps, $1); }
  | strings STRING      { $$ = $1; push(ps, &$$, $2); }
  ;

/* ---- imports (module level only; resolved by modules.c) ----
 * Last in the grammar: bison numbers character tokens in the order they
 * first appear, and the order of the tokens a syntax error lists as expected
 * follows it. */

import_stmt
  : IMPORT module_ref NEWLINE
      { $$ = mk(ps, N_IMPORT, @1); $$->lhs = $2; fin(ps, $$); }
  | IMPORT module_ref AS NAME NEWLINE
      { $$ = mk(ps, N_IMPORT, @1); $$->lhs = $2; $$->name = $4; fin(ps, $$); }
  | FROM module_ref IMPORT import_names NEWLINE
      { $$ = mk(ps, N_FROM_IMPORT, @1); $$->lhs = $2; $$->args = $4; fin(ps, $$); }
  | FROM module_ref IMPORT '(' import_names ')' NEWLINE
      { $$ = mk(ps, N_FROM_IMPORT, @1); $$->lhs = $2; $$->args = $5; fin(ps, $$); }
  | FROM module_ref IMPORT '(' import_names ',' ')' NEWLINE
      { $$ = mk(ps, N_FROM_IMPORT, @1); $$->lhs = $2; $$->args = $5; fin(ps, $$); }
  ;

/* a dotted name (attention_core, variants.window) or a path ("core.fa") */
module_ref
  : dotted              { $$ = mk(ps, N_NAME, @1); $$->name = $1; }
  | STRING              { $$ = $1; }
  ;

import_names
  : import_name         { $$ = list1(ps, $1); }
  | import_names ',' import_name { $$ = $1; push(ps, &$$, $3); }
  ;

/* NAME, or NAME as ALIAS (the alias is the item's rhs) */
import_name
  : NAME                { $$ = mk(ps, N_NAME, @1); $$->name = $1; }
  | NAME AS NAME
      { $$ = mk(ps, N_NAME, @1); $$->name = $1;
        Node *alias = mk(ps, N_NAME, @3); alias->name = $3;
        $$->rhs = alias; fin(ps, $$); }
  ;

%%

int fa_yylex(FA_YYSTYPE *lval, FA_YYLTYPE *lloc, FaParseState *ps) {
  return fa_lexer_next(ps->lexer, lval, lloc);
}

/* Called by bison for the errors that are not syntax errors (the parser's
 * stack exhausted by absurdly deep nesting). */
void fa_yyerror(FA_YYLTYPE *lloc, FaParseState *ps, const char *msg) {
  if (strcmp(msg, "memory exhausted") == 0)
    fa_error(&ps->fc->diag, loc_of(ps, *lloc), "program too deeply nested (the parser's stack is exhausted)");
  else
    fa_error(&ps->fc->diag, loc_of(ps, *lloc), "%s", msg);
}

/* "syntax error: unexpected ')', expected identifier or '('" */
static int yyreport_syntax_error(const yypcontext_t *ctx, FaParseState *ps) {
  SrcLoc loc = loc_of(ps, *yypcontext_location(ctx));
  yysymbol_kind_t got = yypcontext_token(ctx);
  if (got == YYSYMBOL_INDENT) {
    fa_error(&ps->fc->diag, loc, "unexpected indent");
    return 0;
  }
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_puts(&sb, "syntax error");
  if (got != YYSYMBOL_YYEMPTY) {
    fa_sb_printf(&sb, ": unexpected %s", yysymbol_name(got));
    if (got == YYSYMBOL_NAME || got == YYSYMBOL_INT || got == YYSYMBOL_FLOAT) {
      size_t len;
      const char *text = fa_lexer_text(ps->lexer, &len);
      if (len > 0 && len <= 40)
        fa_sb_printf(&sb, " '%.*s'", (int)len, text);
    }
  }
  /* List what was expected when that is short; when almost anything could
   * follow, name only the tokens that close a construct, which is usually
   * what is missing (a ':' after "if x", a ')' or ',' in a call). */
  enum { MAX_LISTED = 5, MAX_EXPECTED = 128 };
  yysymbol_kind_t expected[MAX_EXPECTED];
  int n = yypcontext_expected_tokens(ctx, expected, MAX_EXPECTED);
  if (n > MAX_LISTED) {
    int k = 0;
    for (int i = 0; i < n; i++) {
      const char *name = yysymbol_name(expected[i]);
      if (strcmp(name, "':'") == 0 || strcmp(name, "')'") == 0 || strcmp(name, "']'") == 0 ||
          strcmp(name, "','") == 0 || expected[i] == YYSYMBOL_NEWLINE)
        expected[k++] = expected[i];
    }
    n = k;
  }
  for (int i = 0; i < n; i++)
    fa_sb_printf(&sb, "%s%s", i == 0 ? ", expected " : i == n - 1 ? " or " : ", ",
                 yysymbol_name(expected[i]));
  fa_error(&ps->fc->diag, loc, "%s", sb.data ? sb.data : "syntax error");
  fa_sb_free(&sb);
  return 0;
}

Node *fa_parse(FaCompiler *fc, const Source *src) {
  FaParseState ps;
  memset(&ps, 0, sizeof ps);
  ps.fc = fc;
  ps.src = src;
  int errors_before = fc->diag.errors;
  ps.lexer = fa_lexer_new(fc, src);
  if (!ps.lexer) {
    fa_error(&fc->diag, fa_loc(src, 0, 0), "out of memory");
    return NULL;
  }
  int rc = fa_yyparse(&ps);
  fa_lexer_free(ps.lexer);
  if (rc != 0 && fc->diag.errors == errors_before)
    fa_error(&fc->diag, fa_loc(src, 0, 0), "the parser gave up");
  if (rc != 0 || fc->diag.errors > errors_before || !ps.module || ps.module == &ps.oom_sink)
    return NULL;
  return ps.module;
}

/* Token names for fadslc --emit=tokens: the grammar's names, without quotes. */
static const char *token_kind(int tok) {
  switch (tok) {
  case TK_NAME: return "NAME";
  case TK_INT: return "INT";
  case TK_FLOAT: return "FLOAT";
  case TK_STRING: return "STRING";
  case TK_NEWLINE: return "NEWLINE";
  case TK_INDENT: return "INDENT";
  case TK_DEDENT: return "DEDENT";
  case TK_END: return "EOF";
  case TK_FA_YYerror: return "ERROR";
  case TK_AUGOP: return "OP";
  default: break;
  }
  if (tok < 256)
    return "OP";
  const char *name = yysymbol_name(YYTRANSLATE(tok));
  /* keywords are named "'def'" and so on; operators "'**'" */
  if (name[0] == '\'' && ((name[1] >= 'a' && name[1] <= 'z') || (name[1] >= 'A' && name[1] <= 'Z')))
    return "KEYWORD";
  return "OP";
}

int fa_dump_tokens(FaCompiler *fc, const Source *src, FILE *out) {
  int errors_before = fc->diag.errors;
  FaLexer *lx = fa_lexer_new(fc, src);
  if (!lx) {
    fa_error(&fc->diag, fa_loc(src, 0, 0), "out of memory");
    return -1;
  }
  for (;;) {
    FA_YYSTYPE val;
    FA_YYLTYPE loc;
    int tok = fa_lexer_next(lx, &val, &loc);
    fprintf(out, "%d:%d %s", loc.first_line, loc.first_column, token_kind(tok));
    size_t len;
    const char *text = fa_lexer_text(lx, &len);
    if (tok != TK_NEWLINE && tok != TK_INDENT && tok != TK_DEDENT && tok != TK_END && len > 0) {
      fputc(' ', out);
      for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x20 && c != 0x7f)
          fputc(c, out);
        else
          fprintf(out, "\\x%02x", c);
      }
    }
    fputc('\n', out);
    if (tok == TK_END)
      break;
  }
  fa_lexer_free(lx);
  return fc->diag.errors > errors_before ? -1 : 0;
}
