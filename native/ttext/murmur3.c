/* murmur3.c -- MurmurHash3_x64_128 (see murmur3.h). */
#include "murmur3.h"

/* Multipliers of the reference implementation. */
#define C1 UINT64_C(0x87c37b91114253d5)
#define C2 UINT64_C(0x4cf5ad432745937f)

static uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

/* Little-endian read of n <= 8 bytes (the reference reads native x86 words). */
static uint64_t load_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    size_t i;
    for (i = n; i > 0; i--)
        v = (v << 8) | p[i - 1];
    return v;
}

static uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

static uint64_t mix_k1(uint64_t k1)
{
    k1 *= C1;
    k1 = rotl64(k1, 31);
    return k1 * C2;
}

static uint64_t mix_k2(uint64_t k2)
{
    k2 *= C2;
    k2 = rotl64(k2, 33);
    return k2 * C1;
}

void ttext_murmur3_x64_128(const void *key, size_t len, uint32_t seed, uint64_t out[2])
{
    const uint8_t *data = (const uint8_t *)key;
    const size_t nblocks = len / 16;
    const size_t tail_len = len & 15u;
    const uint8_t *tail = data + nblocks * 16;
    uint64_t h1 = seed, h2 = seed;
    size_t i;

    for (i = 0; i < nblocks; i++) {
        uint64_t k1 = load_le(data + i * 16, 8);
        uint64_t k2 = load_le(data + i * 16 + 8, 8);

        h1 ^= mix_k1(k1);
        h1 = rotl64(h1, 27);
        h1 += h2;
        h1 = h1 * 5 + 0x52dce729;

        h2 ^= mix_k2(k2);
        h2 = rotl64(h2, 31);
        h2 += h1;
        h2 = h2 * 5 + 0x38495ab5;
    }

    /* Tail: bytes 8..14 feed k2, bytes 0..7 feed k1 (the reference's
     * fall-through switch, written as two bounded loads). */
    if (tail_len > 8)
        h2 ^= mix_k2(load_le(tail + 8, tail_len - 8));
    if (tail_len > 0)
        h1 ^= mix_k1(load_le(tail, tail_len > 8 ? 8 : tail_len));

    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    out[0] = h1;
    out[1] = h2;
}
