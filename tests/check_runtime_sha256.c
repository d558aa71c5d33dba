/* check_runtime_sha256.c - the runtime's SHA-256 against the FIPS 180-4
 * example vectors, byte-at-a-time and block-straddling updates. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

static void hex_of(const void *data, size_t len, char hex[FA_SHA256_HEX]) {
  unsigned char d[FA_SHA256_BYTES];
  fa_sha256(data, len, d);
  fa_sha256_hex(d, hex);
}

START_TEST(test_known_vectors) {
  char hex[FA_SHA256_HEX];
  hex_of("", 0, hex);
  ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  hex_of("abc", 3, hex);
  ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  hex_of(two_blocks, strlen(two_blocks), hex);
  ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *four =
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  hex_of(four, strlen(four), hex);
  ck_assert_str_eq(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}
END_TEST

START_TEST(test_million_a) {
  size_t n = 1000000;
  char *a = malloc(n);
  ck_assert_ptr_nonnull(a);
  memset(a, 'a', n);
  char hex[FA_SHA256_HEX];
  hex_of(a, n, hex);
  ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(a);
}
END_TEST

/* The padding edge cases: 55, 56, 63, 64, 65 bytes, fed in pieces of every
 * size, must equal the one-shot hash. */
START_TEST(test_incremental_equals_oneshot) {
  unsigned char msg[300];
  for (size_t i = 0; i < sizeof msg; i++) msg[i] = (unsigned char)(i * 7 + 3);
  size_t lens[] = {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 300};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    unsigned char want[FA_SHA256_BYTES];
    fa_sha256(msg, lens[li], want);
    for (size_t piece = 1; piece <= 70; piece += 3) {
      FaSha256 h;
      fa_sha256_init(&h);
      for (size_t at = 0; at < lens[li]; at += piece)
        fa_sha256_update(&h, msg + at, lens[li] - at < piece ? lens[li] - at : piece);
      unsigned char got[FA_SHA256_BYTES];
      fa_sha256_final(&h, got);
      ck_assert_mem_eq(got, want, FA_SHA256_BYTES);
    }
  }
  /* and different inputs differ */
  unsigned char a[FA_SHA256_BYTES], b[FA_SHA256_BYTES];
  fa_sha256("abd", 3, a);
  fa_sha256("abc", 3, b);
  ck_assert(memcmp(a, b, FA_SHA256_BYTES) != 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_sha256");
  TCase *tc = tcase_create("sha256");
  tcase_add_test(tc, test_known_vectors);
  tcase_add_test(tc, test_million_a);
  tcase_add_test(tc, test_incremental_equals_oneshot);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
