/* Non-cryptographic 64-bit hashing for cache keys and checksums. */
#ifndef KILN_HASH_H
#define KILN_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a over `size` bytes, continuing from `seed` (use KILN_HASH_SEED to start). */
#define KILN_HASH_SEED 0xcbf29ce484222325ull
uint64_t kiln_hash64(const void *data, size_t size, uint64_t seed);

#endif /* KILN_HASH_H */
