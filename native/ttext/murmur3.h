/*
 * murmur3.h -- MurmurHash3_x64_128, the hash behind the SVC sketch.
 *
 * Re-implemented from Austin Appleby's public-domain reference
 * (smhasher, MurmurHash3.cpp).  Blocks are read little-endian explicitly, so
 * the result is the same on every host, matching the reference on x86.
 */
#ifndef TTEXT_MURMUR3_H
#define TTEXT_MURMUR3_H

#include <stddef.h>
#include <stdint.h>

/* Hash len bytes at key with seed; out[0] = h1, out[1] = h2. Reads exactly len bytes. */
void ttext_murmur3_x64_128(const void *key, size_t len, uint32_t seed, uint64_t out[2]);

#endif /* TTEXT_MURMUR3_H */
