/* sha256.h - private to runtime/: SHA-256 (FIPS 180-4), for the
 * graph_sha256 provenance key of checkpoints.  Not constant-time and not
 * streaming: it hashes one buffer already in memory. */
#ifndef GR_RUNTIME_SHA256_H
#define GR_RUNTIME_SHA256_H

#include <stddef.h>

/* SHA-256 of buf as 64 lowercase hex digits plus NUL into hex[65]. */
void sha256_hex(const void *buf, size_t len, char hex[65]);

#endif
