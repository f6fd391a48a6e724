/* Open-addressing hash maps used by the tokenizers and the BPE trainer: uint64 keys, and byte-string
 * keys (copied into the map's own arena). Both grow at half load and never shrink. */
#ifndef UFP4_DATA_HASHMAP_H
#define UFP4_DATA_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

uint64_t ufp4_fnv1a64(uint64_t h, const void *data, size_t n);
#define UFP4_FNV_OFFSET UINT64_C(0xcbf29ce484222325)

/* UINT64_MAX is reserved as the empty-slot key. */
typedef struct {
  uint64_t *keys, *vals;
  size_t cap, n;
} ufp4_u64map;

uint64_t *ufp4_u64map_get(const ufp4_u64map *m, uint64_t key);
/* Inserts key with value `val` if absent; returns the value slot (existing or new), NULL on OOM. */
uint64_t *ufp4_u64map_put(ufp4_u64map *m, uint64_t key, uint64_t val);
void ufp4_u64map_free(ufp4_u64map *m);

typedef struct {
  uint64_t hash;
  size_t off, len;
  uint64_t val;
} ufp4_strmap_slot;

typedef struct {
  ufp4_strmap_slot *slots; /* len == SIZE_MAX marks an empty slot */
  size_t cap, n;
  uint8_t *arena;
  size_t arena_len, arena_cap;
} ufp4_strmap;

uint64_t *ufp4_strmap_get(const ufp4_strmap *m, const void *key, size_t len);
/* *added (may be NULL) tells whether the key was new. */
uint64_t *ufp4_strmap_put(ufp4_strmap *m, const void *key, size_t len, uint64_t val, int *added);
void ufp4_strmap_clear(ufp4_strmap *m);
void ufp4_strmap_free(ufp4_strmap *m);

#endif
