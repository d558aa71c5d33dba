/* check_split_ring.c - the protocol of a split ring (FaRingLoad, emit_cuda.c's
 * ring steps) modelled on the host: a producer warp and the compute warps of a
 * persistent thread block run its programs, each a loop of some iterations
 * over one ring with two loads, K and V, each with `stages` buffers and a
 * full mbarrier (one arrival, the producer's, and the copy's bytes) and an
 * empty one (one arrival per compute warp) per buffer.  As the attention
 * forward pass's code does it, for use u of the ring (slot u % stages,
 * parity (u / stages) & 1, the ring's counter running on across programs):
 *   the producer, per iteration: for K then V, wait empty (parity ^ 1), arm
 *     full, start the copy;
 *   each compute warp, per iteration: wait K's full of use u and, after the
 *     first iteration, V's of use u - 1 (read by the deferred product only);
 *     S reads K; the deferred product reads V of u - 1; K is released when S
 *     is complete, V of u - 1 after the deferred product's wait; after the
 *     loop, V of the last use is waited for, read and released.
 * The late protocol (FaPipelinePlan.defer_rescale: the deferred product
 * waited for at the head of the iteration after its issue): the head waits
 * for K of u and V of u - 1 as above, then releases V of u - 2, whose product
 * (issued in the iteration before) is complete there; after the loop V of
 * the last use but one is released, then the last is waited for, read and
 * released.  It deadlocks with 1 stage (V of u waits for the release of V of
 * u - 1, which comes after that wait), so the plan takes it from 2.
 * Copies land in any order at any later time (the buffer holds garbage
 * meanwhile), and the actors are stepped in a random order.  Every read must
 * find the tile of its own iteration, from when the product is issued until
 * it is complete, and nobody may wait forever. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mbar_model.h"

enum { LOADS = 2, STAGES_MAX = 4, WARPS_MAX = 8, PROGRAMS_MAX = 8, COPIES_MAX = LOADS * STAGES_MAX };
enum { K = 0, V = 1 };
enum { GARBAGE = -1 };

typedef struct Ring {
  int stages, warps;
  Mbar full[LOADS][STAGES_MAX], empty[LOADS][STAGES_MAX];
  int buf[LOADS][STAGES_MAX];  /* the tag of the tile a buffer holds, or GARBAGE while a copy writes it */
  struct {
    int load, slot, tag;
  } copies[COPIES_MAX];         /* started, not landed */
  int ncopies;
  int nprograms, len[PROGRAMS_MAX];
} Ring;

static unsigned slot_of(const Ring *r, unsigned u) { return u % (unsigned)r->stages; }
static unsigned parity_of(const Ring *r, unsigned u) { return (u / (unsigned)r->stages) & 1u; }
static int tag_of(int program, int it, int load) { return (program * 4096 + it) * LOADS + load; }

/* ---- the producer ---- */
typedef struct Producer {
  int program, it, load;
  unsigned use;
} Producer;

static bool producer_step(Ring *r, Producer *p) {
  while (p->program < r->nprograms && p->it == r->len[p->program]) {
    p->program++;
    p->it = 0;
  }
  if (p->program == r->nprograms)
    return false;
  unsigned s = slot_of(r, p->use);
  if (!passes(&r->empty[p->load][s], parity_of(r, p->use) ^ 1u))
    return false;
  /* arrive_expect_tx, then the copy: the buffer is being written */
  r->buf[p->load][s] = GARBAGE;
  ck_assert_int_lt(r->ncopies, COPIES_MAX);
  r->copies[r->ncopies].load = p->load;
  r->copies[r->ncopies].slot = (int)s;
  r->copies[r->ncopies].tag = tag_of(p->program, p->it, p->load);
  r->ncopies++;
  if (++p->load == LOADS) {
    p->load = 0;
    p->it++;
    p->use++;
  }
  return true;
}

/* The copy engine lands one of the started copies: the data, then the
 * full barrier's phase (its one arrival, the producer's, came with the
 * expected bytes). */
static bool copy_step(Ring *r) {
  if (!r->ncopies)
    return false;
  int i = (int)rnd((unsigned)r->ncopies);
  r->buf[r->copies[i].load][r->copies[i].slot] = r->copies[i].tag;
  arrive(&r->full[r->copies[i].load][r->copies[i].slot]);
  r->copies[i] = r->copies[--r->ncopies];
  return true;
}

/* ---- a compute warp ---- */
typedef struct Warp {
  int program, it, event;
  unsigned use;                 /* the ring's counter as this warp has it */
  bool done;
} Warp;

/* A read of load `load`'s buffer of use u, which must hold iteration `it`'s tile. */
static void expect_tile(const Ring *r, int load, unsigned u, int program, int it, const char *what) {
  int got = r->buf[load][slot_of(r, u)];
  ck_assert_msg(got == tag_of(program, it, load),
                "%d stages, %d warps: %s read %s of program %d iteration %d from buffer %u and found %s", r->stages,
                r->warps, what, load == K ? "K" : "V", program, it, slot_of(r, u),
                got == GARBAGE ? "a copy landing" : "another iteration's tile");
}

/* Skips programs with no key block; false (and done) after the last. */
static bool warp_has_program(const Ring *r, Warp *w) {
  while (!w->done && w->program < r->nprograms && r->len[w->program] == 0)
    w->program++;
  if (w->done || w->program == r->nprograms) {
    w->done = true;
    return false;
  }
  return true;
}

/* One event of the warp's program; false where it waits. */
static bool warp_step(Ring *r, Warp *w) {
  if (!warp_has_program(r, w))
    return false;
  int p = w->program, n = r->len[p];
  unsigned u = w->use;
  if (w->it < n) {
    bool deferred = w->it > 0;   /* the iteration before's O += P V */
    switch (w->event) {
    case 0:                      /* head: this iteration's K has landed */
      if (!passes(&r->full[K][slot_of(r, u)], parity_of(r, u)))
        return false;
      break;
    case 1:                      /* head: the iteration before's V has landed */
      if (deferred && !passes(&r->full[V][slot_of(r, u - 1)], parity_of(r, u - 1)))
        return false;
      break;
    case 2: expect_tile(r, K, u, p, w->it, "S's issue"); break;
    case 3:
      if (deferred)
        expect_tile(r, V, u - 1, p, w->it - 1, "the deferred product's issue");
      break;
    case 4:                      /* S complete (wait_group 1): K released */
      expect_tile(r, K, u, p, w->it, "S until complete");
      arrive(&r->empty[K][slot_of(r, u)]);
      break;
    case 5:                      /* the deferred product complete: its V released */
      if (deferred) {
        expect_tile(r, V, u - 1, p, w->it - 1, "the deferred product until complete");
        arrive(&r->empty[V][slot_of(r, u - 1)]);
      }
      break;
    }
    if (++w->event == 6) {
      w->event = 0;
      w->it++;
      w->use++;
    }
    return true;
  }
  /* after the loop: the last iteration's deferred product */
  switch (w->event) {
  case 0:
    if (!passes(&r->full[V][slot_of(r, u - 1)], parity_of(r, u - 1)))
      return false;
    expect_tile(r, V, u - 1, p, n - 1, "the last deferred product's issue");
    break;
  case 1:
    expect_tile(r, V, u - 1, p, n - 1, "the last deferred product until complete");
    arrive(&r->empty[V][slot_of(r, u - 1)]);
    break;
  }
  if (++w->event == 2) {
    w->event = 0;
    w->it = 0;
    w->program++;
  }
  return true;
}

/* The late protocol's events (see the top). */
static bool warp_step_late(Ring *r, Warp *w) {
  if (!warp_has_program(r, w))
    return false;
  int p = w->program, n = r->len[p];
  unsigned u = w->use;
  if (w->it < n) {
    switch (w->event) {
    case 0:                      /* head: this iteration's K has landed */
      if (!passes(&r->full[K][slot_of(r, u)], parity_of(r, u)))
        return false;
      break;
    case 1:                      /* head: the iteration before's V has landed */
      if (w->it > 0 && !passes(&r->full[V][slot_of(r, u - 1)], parity_of(r, u - 1)))
        return false;
      break;
    case 2:                      /* head: the product issued in the iteration before complete */
      if (w->it > 1) {
        expect_tile(r, V, u - 2, p, w->it - 2, "the deferred product until complete");
        arrive(&r->empty[V][slot_of(r, u - 2)]);
      }
      break;
    case 3: expect_tile(r, K, u, p, w->it, "S's issue"); break;
    case 4:
      if (w->it > 0)
        expect_tile(r, V, u - 1, p, w->it - 1, "the deferred product's issue");
      break;
    case 5:                      /* S complete (wait_group 1): K released */
      expect_tile(r, K, u, p, w->it, "S until complete");
      arrive(&r->empty[K][slot_of(r, u)]);
      break;
    }
    if (++w->event == 6) {
      w->event = 0;
      w->it++;
      w->use++;
    }
    return true;
  }
  switch (w->event) {
  case 0:                        /* after the loop: the product in flight complete */
    if (n > 1) {
      expect_tile(r, V, u - 2, p, n - 2, "the deferred product until complete");
      arrive(&r->empty[V][slot_of(r, u - 2)]);
    }
    break;
  case 1:
    if (!passes(&r->full[V][slot_of(r, u - 1)], parity_of(r, u - 1)))
      return false;
    expect_tile(r, V, u - 1, p, n - 1, "the last deferred product's issue");
    break;
  case 2:
    expect_tile(r, V, u - 1, p, n - 1, "the last deferred product until complete");
    arrive(&r->empty[V][slot_of(r, u - 1)]);
    break;
  }
  if (++w->event == 3) {
    w->event = 0;
    w->it = 0;
    w->program++;
  }
  return true;
}

/* Runs the block's programs; false on a deadlock. */
static bool run(int stages, int warps, int nprograms, const int *len, bool late) {
  Ring r;
  memset(&r, 0, sizeof r);
  r.stages = stages;
  r.warps = warps;
  r.nprograms = nprograms;
  memcpy(r.len, len, (size_t)nprograms * sizeof *len);
  for (int j = 0; j < LOADS; j++)
    for (int s = 0; s < stages; s++) {
      r.full[j][s] = (Mbar){1, 0, 0};
      r.empty[j][s] = (Mbar){(unsigned)warps, 0, 0};
      r.buf[j][s] = GARBAGE;
    }
  Producer prod = {0};
  Warp w[WARPS_MAX];
  memset(w, 0, sizeof w);
  long idle = 0;
  for (;;) {
    bool all_done = prod.program == nprograms && r.ncopies == 0;
    for (int i = 0; i < warps; i++)
      all_done &= w[i].done;
    if (all_done)
      return true;
    unsigned who = rnd((unsigned)warps + 2);
    bool moved = who == 0 ? producer_step(&r, &prod) : who == 1 ? copy_step(&r) : (late ? warp_step_late(&r, &w[who - 2]) : warp_step(&r, &w[who - 2]));
    if (moved) {
      idle = 0;
    } else if (++idle > 100000) {
      return false;
    }
  }
}

START_TEST(every_read_finds_its_tile) {
  rng = 0x2545f4914f6cdd1dull;
  for (int stages = 1; stages <= STAGES_MAX; stages++)
    for (int k = 0; k < 60; k++) {
      int warps = k % 2 ? 8 : 4, nprograms = 1 + (int)rnd(PROGRAMS_MAX), len[PROGRAMS_MAX];
      for (int i = 0; i < nprograms; i++)
        len[i] = (int)rnd(12);   /* 0 (a program with no key block), 1, ... 11 */
      ck_assert_msg(run(stages, warps, nprograms, len, false), "%d stages, %d warps, %d programs: deadlock", stages,
                    warps, nprograms);
    }
}
END_TEST

START_TEST(late_protocol_from_two_stages) {
  rng = 0x9e3779b97f4a7c15ull;
  for (int stages = 2; stages <= STAGES_MAX; stages++)
    for (int k = 0; k < 60; k++) {
      int warps = k % 2 ? 8 : 4, nprograms = 1 + (int)rnd(PROGRAMS_MAX), len[PROGRAMS_MAX];
      for (int i = 0; i < nprograms; i++)
        len[i] = (int)rnd(12);
      ck_assert_msg(run(stages, warps, nprograms, len, true), "late, %d stages, %d warps, %d programs: deadlock",
                    stages, warps, nprograms);
    }
  /* and with 1 stage it waits forever: the reason the plan needs 2 */
  int one[1] = {3};
  ck_assert(!run(1, 4, 1, one, true));
}
END_TEST

int main(void) {
  Suite *s = suite_create("split_ring");
  TCase *tc = tcase_create("protocol");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, every_read_finds_its_tile);
  tcase_add_test(tc, late_protocol_from_two_stages);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
