/* check_lexer.c - unit tests of the scanner (compiler/lexer.l): tokens,
 * indentation, line joining, literal values and lexical diagnostics. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

/* The token dump of `text` (fadslc --emit=tokens); *errors gets the count. */
static char *tokens_n(const char *text, size_t len, int *errors) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Source *src = fa_source_new(&fc, "t.fa", text, len);
  char *buf = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&buf, &size);
  ck_assert_ptr_nonnull(src);
  ck_assert_ptr_nonnull(out);
  fa_dump_tokens(&fc, src, out);
  fclose(out);
  if (errors)
    *errors = fc.diag.errors;
  fa_compiler_free(&fc);
  return buf;
}

static char *tokens(const char *text, int *errors) { return tokens_n(text, strlen(text), errors); }

static void expect_tokens(const char *text, const char *want) {
  int errors = -1;
  char *got = tokens(text, &errors);
  ck_assert_int_eq(errors, 0);
  ck_assert_str_eq(got, want);
  free(got);
}

/* The diagnostics of parsing `text` (all of them, as one string). */
static char *diagnostics_n(const char *text, size_t len, int *errors) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  Source *src = fa_source_new(&fc, "t.fa", text, len);
  ck_assert_ptr_nonnull(src);
  Node *m = fa_parse(&fc, src);
  *errors = fc.diag.errors;
  ck_assert(m == NULL || fc.diag.errors == 0);
  char *d = strdup(fc.diag.text.data ? fc.diag.text.data : "");
  fa_compiler_free(&fc);
  return d;
}

/* Parsing `text` reports exactly one error, at line:col, containing msg. */
static void expect_error(const char *text, int line, int col, const char *msg) {
  int errors = 0;
  char *d = diagnostics_n(text, strlen(text), &errors);
  char head[64];
  snprintf(head, sizeof head, "t.fa:%d:%d: error: ", line, col);
  if (errors != 1 || strncmp(d, head, strlen(head)) != 0 || !strstr(d, msg))
    ck_abort_msg("for %s\nwanted one error '%s%s', got %d:\n%s", text, head, msg, errors, d);
  free(d);
}

/* The first statement's value (rhs of an assignment), parsed. */
static const Node *parse_value(FaCompiler *fc, const char *text) {
  Source *src = fa_source_new(fc, "t.fa", text, strlen(text));
  Node *m = fa_parse(fc, src);
  ck_assert_msg(m != NULL, "%s does not parse: %s", text, fc->diag.text.data);
  ck_assert_int_ge(m->body.len, 1);
  const Node *s = m->body.items[0];
  ck_assert_int_eq(s->kind, N_ASSIGN);
  return s->rhs;
}

START_TEST(simple_tokens) {
  expect_tokens("x = 1\n", "1:1 NAME x\n1:3 OP =\n1:5 INT 1\n1:6 NEWLINE\n2:1 EOF\n");
  expect_tokens("", "1:1 EOF\n");
  expect_tokens("\n\n# only a comment\n   \n", "5:1 EOF\n");
  /* no trailing newline: one is supplied */
  expect_tokens("pass", "1:1 KEYWORD pass\n1:5 NEWLINE\n1:5 EOF\n");
}
END_TEST

START_TEST(indentation) {
  expect_tokens("if a:\n    b\nc\n",
                "1:1 KEYWORD if\n1:4 NAME a\n1:5 OP :\n1:6 NEWLINE\n"
                "2:5 INDENT\n2:5 NAME b\n2:6 NEWLINE\n"
                "3:1 DEDENT\n3:1 NAME c\n3:2 NEWLINE\n4:1 EOF\n");
  /* two levels closed at once; blank and comment lines do not count */
  expect_tokens("if a:\n  if b:\n\n        # deep comment\n    c\nd\n",
                "1:1 KEYWORD if\n1:4 NAME a\n1:5 OP :\n1:6 NEWLINE\n"
                "2:3 INDENT\n2:3 KEYWORD if\n2:6 NAME b\n2:7 OP :\n2:8 NEWLINE\n"
                "5:5 INDENT\n5:5 NAME c\n5:6 NEWLINE\n"
                "6:1 DEDENT\n6:1 DEDENT\n6:1 NAME d\n6:2 NEWLINE\n7:1 EOF\n");
  /* end of file closes the open blocks */
  expect_tokens("if a:\n    b",
                "1:1 KEYWORD if\n1:4 NAME a\n1:5 OP :\n1:6 NEWLINE\n"
                "2:5 INDENT\n2:5 NAME b\n2:6 NEWLINE\n2:6 DEDENT\n2:6 EOF\n");
}
END_TEST

START_TEST(tabs_only_file) {
  expect_tokens("if a:\n\tb\n\tif c:\n\t\td\n",
                "1:1 KEYWORD if\n1:4 NAME a\n1:5 OP :\n1:6 NEWLINE\n"
                "2:2 INDENT\n2:2 NAME b\n2:3 NEWLINE\n"
                "3:2 KEYWORD if\n3:5 NAME c\n3:6 OP :\n3:7 NEWLINE\n"
                "4:3 INDENT\n4:3 NAME d\n4:4 NEWLINE\n5:1 DEDENT\n5:1 DEDENT\n5:1 EOF\n");
}
END_TEST

START_TEST(line_joining) {
  /* no NEWLINE inside brackets, whatever the indentation of the inner lines */
  expect_tokens("f(a,\n        b,\n  c)\n",
                "1:1 NAME f\n1:2 OP (\n1:3 NAME a\n1:4 OP ,\n2:9 NAME b\n2:10 OP ,\n"
                "3:3 NAME c\n3:4 OP )\n3:5 NEWLINE\n4:1 EOF\n");
  expect_tokens("x = 1 + \\\n    2\n",
                "1:1 NAME x\n1:3 OP =\n1:5 INT 1\n1:7 OP +\n2:5 INT 2\n2:6 NEWLINE\n3:1 EOF\n");
  /* Windows line ends */
  expect_tokens("a\r\nb\r\n", "1:1 NAME a\n1:2 NEWLINE\n2:1 NAME b\n2:2 NEWLINE\n3:1 EOF\n");
}
END_TEST

START_TEST(keywords_and_names) {
  expect_tokens("define iffy if None _x1 True\n",
                "1:1 NAME define\n1:8 NAME iffy\n1:13 KEYWORD if\n1:16 KEYWORD None\n"
                "1:21 NAME _x1\n1:25 KEYWORD True\n1:29 NEWLINE\n2:1 EOF\n");
}
END_TEST

START_TEST(operators_longest_match) {
  expect_tokens("**= ** * //= // / <<= << <= < >>= >> >= > == = != -> ... . @ ~ ^ | & % ; :\n",
                "1:1 OP **=\n1:5 OP **\n1:8 OP *\n1:10 OP //=\n1:14 OP //\n1:17 OP /\n"
                "1:19 OP <<=\n1:23 OP <<\n1:26 OP <=\n1:29 OP <\n1:31 OP >>=\n1:35 OP >>\n"
                "1:38 OP >=\n1:41 OP >\n1:43 OP ==\n1:46 OP =\n1:48 OP !=\n1:51 OP ->\n"
                "1:54 OP ...\n1:58 OP .\n1:60 OP @\n1:62 OP ~\n1:64 OP ^\n1:66 OP |\n"
                "1:68 OP &\n1:70 OP %\n1:72 OP ;\n1:74 OP :\n1:75 NEWLINE\n2:1 EOF\n");
}
END_TEST

START_TEST(integer_values) {
  static const struct { const char *text; int64_t value; } cases[] = {
    {"x = 0\n", 0}, {"x = 42\n", 42}, {"x = 0x1F\n", 31}, {"x = 0X_ff\n", 255},
    {"x = 0b101\n", 5}, {"x = 0o17\n", 15}, {"x = 1_000_000\n", 1000000}, {"x = 00\n", 0},
    {"x = 9223372036854775807\n", INT64_MAX}, {"x = 0x7fffffffffffffff\n", INT64_MAX},
  };
  for (int i = 0; i < FA_ARRAY_LEN(cases); i++) {
    FaCompiler fc;
    fa_compiler_init(&fc, NULL);
    const Node *v = parse_value(&fc, cases[i].text);
    ck_assert_int_eq(v->kind, N_INT);
    ck_assert_msg(v->int_val == cases[i].value, "%s gave %lld", cases[i].text, (long long)v->int_val);
    fa_compiler_free(&fc);
  }
}
END_TEST

START_TEST(float_values) {
  static const struct { const char *text; double value; } cases[] = {
    {"x = 1.5e3\n", 1500.0}, {"x = .5\n", 0.5}, {"x = 1.\n", 1.0}, {"x = 1e-3\n", 0.001},
    {"x = 1.5E+2\n", 150.0}, {"x = 1_0.0_5\n", 10.05}, {"x = 0e0\n", 0.0}, {"x = 1e-400\n", 0.0},
  };
  for (int i = 0; i < FA_ARRAY_LEN(cases); i++) {
    FaCompiler fc;
    fa_compiler_init(&fc, NULL);
    const Node *v = parse_value(&fc, cases[i].text);
    ck_assert_int_eq(v->kind, N_FLOAT);
    ck_assert_msg(v->float_val == cases[i].value, "%s gave %g", cases[i].text, v->float_val);
    fa_compiler_free(&fc);
  }
}
END_TEST

START_TEST(string_values) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  const Node *v = parse_value(&fc, "x = 'a\\n\\t\\x41\\\\\\'\"'\n");
  ck_assert_int_eq(v->kind, N_STR);
  ck_assert_uint_eq(v->str_len, 7);
  ck_assert_mem_eq(v->str, "a\n\tA\\'\"", 7);
  /* adjacent literals concatenate; UTF-8 is kept as bytes */
  v = parse_value(&fc, "x = \"ab\" 'c'  \"\xc3\xa9\"\n");
  ck_assert_uint_eq(v->str_len, 5);
  ck_assert_mem_eq(v->str, "abc\xc3\xa9", 5);
  /* \0 gives a NUL byte, counted in str_len */
  v = parse_value(&fc, "x = 'a\\0b'\n");
  ck_assert_uint_eq(v->str_len, 3);
  ck_assert_mem_eq(v->str, "a\0b", 3);
  fa_compiler_free(&fc);
}
END_TEST

START_TEST(lexical_errors) {
  expect_error("x = 'abc\n", 1, 5, "unterminated string");
  expect_error("x = \"abc\\\"\n", 1, 5, "unterminated string");
  expect_error("x = 1 $ 2\n", 1, 7, "invalid character '$'");
  expect_error("x = 1 ? 2\n", 1, 7, "invalid character '?'");
  expect_error("x = \x01\n", 1, 5, "invalid character '\\x01'");
  expect_error("x = caf\xc3\xa9\n", 1, 8, "invalid character");
  expect_error("x = \xff\n", 1, 5, "invalid UTF-8");
  expect_error("x = 1  # \xc0\xaf\n", 1, 10, "invalid UTF-8");
  expect_error("x = 'a\xed\xa0\x80'\n", 1, 7, "invalid UTF-8");
  expect_error("x = 99999999999999999999\n", 1, 5, "integer literal too large");
  expect_error("x = 9223372036854775808\n", 1, 5, "integer literal too large");
  expect_error("x = 1e400\n", 1, 5, "float literal out of range");
  expect_error("x = 0123\n", 1, 5, "leading zeros");
  expect_error("x = 1__0\n", 1, 6, "'_' must separate digits");
  expect_error("x = 1_\n", 1, 6, "'_' must separate digits");
  expect_error("x = 0x\n", 1, 5, "no digits");
  expect_error("x = 0b102\n", 1, 9, "invalid binary literal");
  expect_error("x = 12abc\n", 1, 7, "invalid decimal literal");
  expect_error("x = 1e\n", 1, 5, "exponent has no digits");
  expect_error("x = 'a\\qb'\n", 1, 7, "invalid escape sequence '\\q'");
  expect_error("x = '\\x4'\n", 1, 6, "invalid \\x escape");
  expect_error("class = 1\n", 1, 1, "'class' is a reserved keyword");
  expect_error("x = a \\ b\n", 1, 7, "line-continuation backslash must end the line");
  expect_error("x = 1)\n", 1, 6, "unmatched ')'");
  expect_error("x = (1]\n", 1, 7, "closing ']' does not match '('");
  expect_error("x = [1,\n  2\n", 1, 5, "'[' was never closed");
  expect_error("if a:\n        b\n    c\n", 3, 5, "unindent does not match any outer indentation level");
  expect_error("if a:\n\tb\nif c:\n    d\n", 4, 1, "inconsistent use of tabs and spaces");
  expect_error("if a:\n \tb\n", 2, 1, "inconsistent use of tabs and spaces");
}
END_TEST

START_TEST(nul_bytes) {
  int errors = 0;
  char *d = diagnostics_n("x = 1\0\n", 7, &errors);
  ck_assert_int_eq(errors, 1);
  ck_assert_ptr_nonnull(strstr(d, "t.fa:1:6: error: NUL character in source"));
  free(d);
  d = diagnostics_n("# a\0b\nx = 'a\0'\n", 15, &errors);
  ck_assert_int_eq(errors, 2);
  ck_assert_ptr_nonnull(strstr(d, "t.fa:1:4: error: NUL character in source"));
  ck_assert_ptr_nonnull(strstr(d, "t.fa:2:7: error: NUL character in source"));
  free(d);
}
END_TEST

START_TEST(length_limits) {
  enum { N = 5000 };
  char *text = malloc(N + 16);
  /* a 255-byte identifier is fine, 256 is not */
  memcpy(text, "x = ", 4);
  memset(text + 4, 'a', 255);
  strcpy(text + 4 + 255, "\n");
  int errors = 0;
  char *d = diagnostics_n(text, strlen(text), &errors);
  ck_assert_msg(errors == 0, "%s", d);
  free(d);
  memset(text + 4, 'a', 256);
  strcpy(text + 4 + 256, "\n");
  expect_error(text, 1, 5, "identifier too long");
  /* a 4097-digit number and a 4097-byte string are too long */
  memset(text + 4, '1', 4097);
  strcpy(text + 4 + 4097, "\n");
  expect_error(text, 1, 5, "literal too long");
  text[4] = '"';
  memset(text + 5, 'a', 4097);
  strcpy(text + 5 + 4097, "\"\n");
  expect_error(text, 1, 5, "literal too long");
  free(text);
}
END_TEST

START_TEST(bracket_depth) {
  /* FA_MAX_NESTING brackets are accepted, one more is not, and the scan stops */
  size_t n = FA_MAX_NESTING;
  char *text = malloc(2 * n + 16);
  strcpy(text, "x = ");
  memset(text + 4, '(', n);
  text[4 + n] = '1';
  memset(text + 5 + n, ')', n);
  strcpy(text + 5 + 2 * n, "\n");
  int errors = 0;
  char *d = diagnostics_n(text, strlen(text), &errors);
  ck_assert_msg(errors == 0, "%s", d);
  free(d);
  strcpy(text, "x = ");
  memset(text + 4, '(', n + 1);
  strcpy(text + 5 + n, "1\ny = $\n");
  expect_error(text, 1, 5 + (int)n, "too many nested brackets");
  free(text);
}
END_TEST

START_TEST(garbage_never_crashes) {
  /* every byte value, several times over, in a pseudo-random order */
  enum { N = 20000 };
  char *text = malloc(N);
  unsigned state = 12345;
  for (int i = 0; i < N; i++) {
    state = state * 1103515245u + 12345u;
    text[i] = (char)(state >> 16);
  }
  int errors = 0;
  char *t = tokens_n(text, N, &errors);
  ck_assert_int_gt(errors, 0);
  free(t);
  char *d = diagnostics_n(text, N, &errors);
  ck_assert_int_gt(errors, 0);
  free(d);
  free(text);
}
END_TEST

static Suite *lexer_suite(void) {
  Suite *s = suite_create("lexer");
  TCase *tc = tcase_create("tokens");
  tcase_add_test(tc, simple_tokens);
  tcase_add_test(tc, indentation);
  tcase_add_test(tc, tabs_only_file);
  tcase_add_test(tc, line_joining);
  tcase_add_test(tc, keywords_and_names);
  tcase_add_test(tc, operators_longest_match);
  suite_add_tcase(s, tc);
  tc = tcase_create("literals");
  tcase_add_test(tc, integer_values);
  tcase_add_test(tc, float_values);
  tcase_add_test(tc, string_values);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, lexical_errors);
  tcase_add_test(tc, nul_bytes);
  tcase_add_test(tc, length_limits);
  tcase_add_test(tc, bracket_depth);
  tcase_add_test(tc, garbage_never_crashes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(lexer_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
