/* Every grid's edges (midpoints between neighbouring levels) under each tie rule, both signs, with
 * hand-listed expectations, plus the float neighbours just below and above each edge, which must
 * round to the lower and upper level under every nearest rule.
 *
 * RNE goes to the level with the even index (index = position in the ascending magnitude list):
 * E2M1 indices 0..7 are 0 0.5 1 1.5 2 3 4 6, so the even levels are 0, 1, 2, 4. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "ufp4/grid.h"

typedef struct {
  float edge, rne, rna, rnz; /* the edge and the level it rounds to under each rule */
} tie_case;

/* E2M1: even levels 0, 1, 2, 4. */
static const tie_case E2M1[] = {
    {0.25f, 0, 0.5f, 0}, {0.75f, 1, 1, 0.5f}, {1.25f, 1, 1.5f, 1}, {1.75f, 2, 2, 1.5f},
    {2.5f, 2, 3, 2},     {3.5f, 4, 4, 3},     {5.0f, 4, 6, 4},
};
/* E1M2: even levels 0, 0.5, 1, 1.5. */
static const tie_case E1M2[] = {
    {0.125f, 0, 0.25f, 0},     {0.375f, 0.5f, 0.5f, 0.25f}, {0.625f, 0.5f, 0.75f, 0.5f},
    {0.875f, 1, 1, 0.75f},     {1.125f, 1, 1.25f, 1},       {1.375f, 1.5f, 1.5f, 1.25f},
    {1.625f, 1.5f, 1.75f, 1.5f},
};
/* INT4: even levels 0, 2, 4, 6. */
static const tie_case INT4[] = {
    {0.5f, 0, 1, 0}, {1.5f, 2, 2, 1}, {2.5f, 2, 3, 2}, {3.5f, 4, 4, 3},
    {4.5f, 4, 5, 4}, {5.5f, 6, 6, 5}, {6.5f, 6, 7, 6},
};
/* The restricted grids keep E2M1's indices, so their edges tie exactly as E2M1's do, up to the top. */
static const tie_case MAX2[] = {
    {0.25f, 0, 0.5f, 0}, {0.75f, 1, 1, 0.5f}, {1.25f, 1, 1.5f, 1}, {1.75f, 2, 2, 1.5f},
};
static const tie_case MAX3[] = {
    {0.25f, 0, 0.5f, 0}, {0.75f, 1, 1, 0.5f}, {1.25f, 1, 1.5f, 1}, {1.75f, 2, 2, 1.5f},
    {2.5f, 2, 3, 2},
};
static const tie_case MAX4[] = {
    {0.25f, 0, 0.5f, 0}, {0.75f, 1, 1, 0.5f}, {1.25f, 1, 1.5f, 1}, {1.75f, 2, 2, 1.5f},
    {2.5f, 2, 3, 2},     {3.5f, 4, 4, 3},
};

static const struct {
  ufp4_grid_id id;
  const tie_case *cases;
  int n;
} GRIDS[] = {
    {UFP4_GRID_E2M1, E2M1, 7},      {UFP4_GRID_E1M2, E1M2, 7},      {UFP4_GRID_INT4, INT4, 7},
    {UFP4_GRID_E2M1_MAX2, MAX2, 4}, {UFP4_GRID_E2M1_MAX3, MAX3, 5}, {UFP4_GRID_E2M1_MAX4, MAX4, 6},
};

static float value_of(const ufp4_grid *g, float t, ufp4_round_mode m) {
  return ufp4_decode(g, ufp4_encode(g, t, m, 0));
}

static void expect(const ufp4_grid *g, float t, ufp4_round_mode m, float want) {
  float got = value_of(g, t, m);
  float got_level = g->levels[ufp4_round_index(g, t, m, 0)];
  if (got != want || got_level != fabsf(want))
    fprintf(stderr, "%s %s t=%a: want %g, got %g (index level %g)\n", g->name, ufp4_round_name(m),
            (double)t, (double)want, (double)got, (double)got_level);
  assert_true(got == want);
  assert_true(got_level == fabsf(want));
}

static void test_edges(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof GRIDS / sizeof GRIDS[0]; k++) {
    const ufp4_grid *g = ufp4_grid_get(GRIDS[k].id);
    assert_int_equal(g->n_levels - 1, GRIDS[k].n); /* every edge is listed */
    for (int i = 0; i < GRIDS[k].n; i++) {
      const tie_case *c = &GRIDS[k].cases[i];
      assert_true(g->edges[i] == c->edge);
      for (int s = 0; s < 2; s++) {
        float sg = s ? -1.0f : 1.0f;
        expect(g, sg * c->edge, UFP4_ROUND_RNE, sg * c->rne);
        expect(g, sg * c->edge, UFP4_ROUND_RNA, sg * c->rna);
        expect(g, sg * c->edge, UFP4_ROUND_RNZ, sg * c->rnz);
      }
    }
  }
}

/* The nearest float below an edge is closer to the lower level, the one above closer to the upper
 * level, under every rule. The lower level of edge i is levels[i] by construction of the table:
 * RNZ picks it at the tie. */
static void test_neighbours(void **state) {
  (void)state;
  static const ufp4_round_mode modes[3] = {UFP4_ROUND_RNE, UFP4_ROUND_RNA, UFP4_ROUND_RNZ};
  for (size_t k = 0; k < sizeof GRIDS / sizeof GRIDS[0]; k++) {
    const ufp4_grid *g = ufp4_grid_get(GRIDS[k].id);
    for (int i = 0; i < GRIDS[k].n; i++) {
      const tie_case *c = &GRIDS[k].cases[i];
      float lower = c->rnz, upper = c->rna;
      float below = nextafterf(c->edge, 0.0f), above = nextafterf(c->edge, INFINITY);
      for (int m = 0; m < 3; m++) {
        for (int s = 0; s < 2; s++) {
          float sg = s ? -1.0f : 1.0f;
          expect(g, sg * below, modes[m], sg * lower);
          expect(g, sg * above, modes[m], sg * upper);
        }
      }
    }
  }
}

/* A tie that rounds to zero keeps the sign in sign-magnitude codes (-0 = 0x8) and has no sign in
 * two's complement INT4. */
static void test_signed_zero(void **state) {
  (void)state;
  const ufp4_grid *e = ufp4_grid_get(UFP4_GRID_E2M1);
  assert_int_equal(ufp4_encode(e, -0.25f, UFP4_ROUND_RNE, 0), 0x8);
  assert_int_equal(ufp4_encode(e, -0.25f, UFP4_ROUND_RNZ, 0), 0x8);
  assert_int_equal(ufp4_encode(e, -0.25f, UFP4_ROUND_RNA, 0), 0x9); /* -0.5 */
  const ufp4_grid *q = ufp4_grid_get(UFP4_GRID_INT4);
  assert_int_equal(ufp4_encode(q, -0.5f, UFP4_ROUND_RNE, 0), 0x0);
  assert_int_equal(ufp4_encode(q, -0.5f, UFP4_ROUND_RNA, 0), 0xF); /* -1 */
  assert_int_equal(ufp4_encode(q, -6.5f, UFP4_ROUND_RNA, 0), 0x9); /* -7 */
  assert_int_equal(ufp4_encode(q, -6.5f, UFP4_ROUND_RNE, 0), 0xA); /* -6 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_neighbours),
      cmocka_unit_test(test_signed_zero),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
