/* sha256: FIPS 180-4 SHA-256, streamed (init, update, final), for checking
 * downloaded model files (tern pull). */
#ifndef TERN_SHA256_H
#define TERN_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint64_t len;       /* bytes hashed */
    unsigned char buf[64];
    size_t n;           /* bytes in buf */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t n);
/* Writes the digest as 64 lowercase hex digits and a NUL. */
void sha256_final_hex(struct sha256 *s, char hex[65]);

#endif
