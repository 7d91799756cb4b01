/* The Bloom filter's probe loops (dedup/bloom_native.py has the scheme and the why).
   Compiled by corpus.native: cc -O2 -shared -fPIC -ffp-contract=off -DGROUP=N. */
#include <stdint.h>
#include <stddef.h>

#ifndef GROUP
#define GROUP 16  /* keys whose probes are interleaved; dedup.bloom_native.GROUP passes its own */
#endif

/* x mod m without a division (Lemire, Kaser & Kurz 2019, "Faster remainder by direct
   computation"): with c = ceil(2^128 / m), x mod m is the top 64 bits of
   ((c * x) mod 2^128) * m, exact for every 64-bit x and m >= 2. */
typedef unsigned __int128 u128;
static inline uint64_t reduce(uint64_t x, u128 c, uint64_t m) {
    u128 fraction = c * x;  /* mod 2^128 */
    u128 low = ((u128)(uint64_t)fraction * m) >> 64;
    return (uint64_t)((low + (u128)(uint64_t)(fraction >> 64) * m) >> 64);
}

static inline uint64_t fmix(uint64_t x) {
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27; x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

void cf_bloom_add(uint8_t *bits, const uint64_t *keys, size_t n, uint64_t m, uint32_t k,
                  uint64_t s1, uint64_t s2, uint64_t a3, uint64_t c3, uint32_t shift3) {
    uint64_t pos[GROUP], stride[GROUP], h3[GROUP];
    u128 c = ~(u128)0 / m + 1;
    for (size_t start = 0; start < n; start += GROUP) {
        size_t size = n - start < GROUP ? n - start : GROUP;
        for (size_t j = 0; j < size; j++) {
            uint64_t key = keys[start + j];
            pos[j] = reduce(fmix(key ^ s1), c, m);
            stride[j] = reduce(fmix(key ^ s2), c, m) | 1;
            h3[j] = (key * a3 + c3) >> shift3;
        }
        for (uint32_t i = 0; i < k; i++) {
            for (size_t j = 0; j < size; j++) {
                uint64_t p = pos[j], s = stride[j];
                bits[p >> 3] |= (uint8_t)(1u << (p & 7));
                p += s; if (p >= m) p -= m;
                s += h3[j]; if (s >= m) s -= m;
                pos[j] = p; stride[j] = s;
            }
        }
    }
}

void cf_bloom_contains(const uint8_t *bits, const uint64_t *keys, size_t n, uint64_t m, uint32_t k,
                       uint64_t s1, uint64_t s2, uint64_t a3, uint64_t c3, uint32_t shift3, uint8_t *out) {
    uint64_t first[GROUP];
    u128 c = ~(u128)0 / m + 1;
    for (size_t start = 0; start < n; start += GROUP) {
        size_t size = n - start < GROUP ? n - start : GROUP;
        for (size_t j = 0; j < size; j++) {
            first[j] = reduce(fmix(keys[start + j] ^ s1), c, m);
            __builtin_prefetch(bits + (first[j] >> 3));
        }
        for (size_t j = 0; j < size; j++) {
            uint64_t p = first[j];
            uint8_t found = 0;
            if ((bits[p >> 3] >> (p & 7)) & 1) {
                uint64_t key = keys[start + j];
                uint64_t s = reduce(fmix(key ^ s2), c, m) | 1, h3 = (key * a3 + c3) >> shift3;
                uint32_t i = 1;
                for (; i < k; i++) {
                    p += s; if (p >= m) p -= m;
                    if (!((bits[p >> 3] >> (p & 7)) & 1)) break;
                    s += h3; if (s >= m) s -= m;
                }
                found = i == k;
            }
            out[start + j] = found;
        }
    }
}
