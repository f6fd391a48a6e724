#include "data/hashmap.h"

#include <stdlib.h>
#include <string.h>

uint64_t ufp4_fnv1a64(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

/* splitmix64 finalizer: pair keys (a<<32|b) are far from uniform. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

uint64_t *ufp4_u64map_get(const ufp4_u64map *m, uint64_t key) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
    if (m->keys[i] == key) return &m->vals[i];
    if (m->keys[i] == UINT64_MAX) return NULL;
  }
}

static int u64map_grow(ufp4_u64map *m) {
  size_t cap = m->cap ? 2 * m->cap : 64;
  uint64_t *keys = malloc(cap * sizeof *keys), *vals = malloc(cap * sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return -1;
  }
  memset(keys, 0xff, cap * sizeof *keys);
  for (size_t j = 0; j < m->cap; j++) {
    if (m->keys[j] == UINT64_MAX) continue;
    size_t i = mix64(m->keys[j]) & (cap - 1);
    while (keys[i] != UINT64_MAX) i = (i + 1) & (cap - 1);
    keys[i] = m->keys[j];
    vals[i] = m->vals[j];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  return 0;
}

uint64_t *ufp4_u64map_put(ufp4_u64map *m, uint64_t key, uint64_t val) {
  if (2 * (m->n + 1) > m->cap && u64map_grow(m)) return NULL;
  size_t mask = m->cap - 1, i = mix64(key) & mask;
  while (m->keys[i] != UINT64_MAX) {
    if (m->keys[i] == key) return &m->vals[i];
    i = (i + 1) & mask;
  }
  m->keys[i] = key;
  m->vals[i] = val;
  m->n++;
  return &m->vals[i];
}

void ufp4_u64map_free(ufp4_u64map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

uint64_t *ufp4_strmap_get(const ufp4_strmap *m, const void *key, size_t len) {
  if (!m->cap) return NULL;
  uint64_t h = ufp4_fnv1a64(UFP4_FNV_OFFSET, key, len);
  size_t mask = m->cap - 1;
  for (size_t i = mix64(h) & mask;; i = (i + 1) & mask) {
    const ufp4_strmap_slot *s = &m->slots[i];
    if (s->len == SIZE_MAX) return NULL;
    if (s->hash == h && s->len == len && !memcmp(m->arena + s->off, key, len)) return &m->slots[i].val;
  }
}

static int strmap_grow(ufp4_strmap *m) {
  size_t cap = m->cap ? 2 * m->cap : 64;
  ufp4_strmap_slot *slots = malloc(cap * sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < cap; i++) slots[i].len = SIZE_MAX;
  for (size_t j = 0; j < m->cap; j++) {
    if (m->slots[j].len == SIZE_MAX) continue;
    size_t i = mix64(m->slots[j].hash) & (cap - 1);
    while (slots[i].len != SIZE_MAX) i = (i + 1) & (cap - 1);
    slots[i] = m->slots[j];
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return 0;
}

uint64_t *ufp4_strmap_put(ufp4_strmap *m, const void *key, size_t len, uint64_t val, int *added) {
  if (added) *added = 0;
  uint64_t *v = ufp4_strmap_get(m, key, len);
  if (v) return v;
  if (2 * (m->n + 1) > m->cap && strmap_grow(m)) return NULL;
  if (m->arena_len + len > m->arena_cap) {
    size_t cap = m->arena_cap ? m->arena_cap : 4096;
    while (cap < m->arena_len + len) cap *= 2;
    uint8_t *a = realloc(m->arena, cap);
    if (!a) return NULL;
    m->arena = a;
    m->arena_cap = cap;
  }
  if (len) memcpy(m->arena + m->arena_len, key, len);
  uint64_t h = ufp4_fnv1a64(UFP4_FNV_OFFSET, key, len);
  size_t mask = m->cap - 1, i = mix64(h) & mask;
  while (m->slots[i].len != SIZE_MAX) i = (i + 1) & mask;
  m->slots[i] = (ufp4_strmap_slot){h, m->arena_len, len, val};
  m->arena_len += len;
  m->n++;
  if (added) *added = 1;
  return &m->slots[i].val;
}

void ufp4_strmap_clear(ufp4_strmap *m) {
  for (size_t i = 0; i < m->cap; i++) m->slots[i].len = SIZE_MAX;
  m->n = 0;
  m->arena_len = 0;
}

void ufp4_strmap_free(ufp4_strmap *m) {
  free(m->slots);
  free(m->arena);
  memset(m, 0, sizeof *m);
}
