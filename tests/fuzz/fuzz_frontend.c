/* fuzz_frontend.c - libFuzzer harness for the front end (make fuzz).
 *
 * Each input is lexed (token dump), parsed and, when it parses, dumped,
 * printed back as source, parsed again and compared: the reparsed tree must
 * be equal and printing it again must give the same text.  Any crash, leak,
 * sanitizer report or broken round trip is a finding.  A fresh FaCompiler per
 * input keeps the runs independent.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

static void fail(const char *what, const char *text) {
  fprintf(stderr, "fuzz_frontend: %s\n--- printed source ---\n%s\n--- end ---\n", what,
          text ? text : "");
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  FILE *sink = fopen("/dev/null", "w");
  Source *src = fa_source_new(&fc, "fuzz.fa", (const char *)data, size);
  if (src && sink) {
    fa_dump_tokens(&fc, src, sink);
    Node *module = fa_parse(&fc, src);
    if (module) {
      fa_ast_dump(module, sink);
      StrBuf first, second;
      fa_sb_init(&first);
      fa_sb_init(&second);
      fa_ast_print_source(module, &first);
      Source *printed = fa_source_new(&fc, "printed.fa", first.data ? first.data : "", first.len);
      int errors = fc.diag.errors;
      Node *again = printed ? fa_parse(&fc, printed) : NULL;
      if (!again || fc.diag.errors != errors)
        fail("the printed source does not parse", first.data);
      if (!fa_ast_equal(module, again))
        fail("the printed source parses to a different tree", first.data);
      fa_ast_print_source(again, &second);
      if (first.len != second.len || (first.len && memcmp(first.data, second.data, first.len) != 0))
        fail("printing is not stable", first.data);
      fa_sb_free(&first);
      fa_sb_free(&second);
    }
  }
  if (sink)
    fclose(sink);
  fa_compiler_free(&fc);
  return 0;
}
