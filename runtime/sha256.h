/* sha256.h - SHA-256 (FIPS 180-4), for kernel-cache keys and entry checksums.
 *
 * The cache needs a hash that does not collide by accident across millions
 * of generated sources and that detects any corruption of an entry; FNV is
 * too weak for that, and a crypto library would be a dependency for 150
 * lines of code. */
#ifndef FADSL_RT_SHA256_H
#define FADSL_RT_SHA256_H

#include <stddef.h>
#include <stdint.h>

enum { FA_SHA256_BYTES = 32, FA_SHA256_HEX = 65 /* 64 digits + NUL */ };

typedef struct FaSha256 {
  uint32_t state[8];
  uint64_t total;          /* bytes hashed so far */
  unsigned char block[64]; /* pending partial block */
  size_t fill;             /* bytes in block */
} FaSha256;

void fa_sha256_init(FaSha256 *h);
void fa_sha256_update(FaSha256 *h, const void *data, size_t len);
void fa_sha256_final(FaSha256 *h, unsigned char digest[FA_SHA256_BYTES]);

/* One-shot convenience. */
void fa_sha256(const void *data, size_t len, unsigned char digest[FA_SHA256_BYTES]);

/* Lower-case hex of a digest, NUL-terminated. */
void fa_sha256_hex(const unsigned char digest[FA_SHA256_BYTES], char hex[FA_SHA256_HEX]);

#endif
