/* check_next_tile.c - the protocol by which a persistent kernel's producer
 * warp hands the compute warps the next program (fa::next_tile_publish and
 * fa::next_tile_take in compiler/device/fa_hopper.cuh), modelled on the
 * host: two slots, each with a `full` mbarrier (one arrival: the producer)
 * and an `empty` one (one arrival per compute warp), whose parity waits
 * pass as the hardware's do (try_wait.parity P passes once the phase of
 * parity P has completed: when the completed phases' count is odd for
 * P = 0, even for P = 1, a fresh mbarrier passing P = 1 at once).  The
 * producer and the warps are stepped in a random order, other thread blocks
 * taking tickets in between; every warp must see the producer's programs in
 * the same order and nobody may wait forever.  The slot and use of round r
 * are the device code's: slot (r - 1) % 2, use (r - 1) / 2. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mbar_model.h"

enum { WARPS_MAX = 8, SEQ_MAX = 2048 };

/* The device code's slot and use of round r >= 1. */
static unsigned slot_of(unsigned r) { return (r - 1u) & 1u; }
static unsigned use_of(unsigned r) { return (r - 1u) >> 1; }

typedef struct Side {
  unsigned round, tile;
  int state;                    /* 0 running a program, 1 waiting to hand over / take the next, 2 done */
  unsigned seq[SEQ_MAX];
  int n;
} Side;

/* One block among G of `total` programs; false on a deadlock or a mismatch. */
static bool run(unsigned total, unsigned G, unsigned block, int warps) {
  Mbar full[2], empty[2];
  unsigned slots[2] = {~0u, ~0u}, counter = 0;
  for (int s = 0; s < 2; s++) {
    full[s] = (Mbar){1, 0, 0};
    empty[s] = (Mbar){(unsigned)warps, 0, 0};
  }
  Side side[1 + WARPS_MAX];   /* 0: the producer */
  memset(side, 0, sizeof side);
  for (int i = 0; i <= warps; i++) side[i].tile = block;
  for (long steps = 0; steps < 1000000; steps++) {
    bool all_done = true;
    for (int i = 0; i <= warps; i++) all_done &= side[i].state == 2;
    if (all_done) break;
    Side *x = &side[rnd((unsigned)warps + 1)];
    int who = (int)(x - side);
    if (x->state == 2) continue;
    if (x->state == 0) {               /* this round's program */
      if (x->tile >= total) {
        x->state = 2;
        continue;
      }
      ck_assert_int_lt(x->n, SEQ_MAX);
      x->seq[x->n++] = x->tile;
      x->round++;
      x->state = 1;
      if (who == 0) {                  /* the producer takes its ticket; other blocks take some too */
        x->tile = G + counter++;
        counter += rnd(3);
      }
      continue;
    }
    unsigned s = slot_of(x->round), u = use_of(x->round);
    if (who == 0) {                    /* next_tile_publish */
      if (!passes(&empty[s], (u & 1u) ^ 1u)) continue;
      slots[s] = x->tile;
      arrive(&full[s]);
    } else {                           /* next_tile_take */
      if (!passes(&full[s], u & 1u)) continue;
      ck_assert_msg(slots[s] != ~0u, "a warp read slot %u before the producer wrote it (round %u)", s, x->round);
      x->tile = slots[s];
      arrive(&empty[s]);
    }
    x->state = 0;
  }
  for (int i = 0; i <= warps; i++) {
    if (side[i].state != 2) return false;
    if (i && (side[i].n != side[0].n || memcmp(side[i].seq, side[0].seq, (size_t)side[0].n * sizeof *side[0].seq)))
      return false;
  }
  return true;
}

START_TEST(hands_over_every_program_in_order) {
  rng = 0x9e3779b97f4a7c15ull;
  static const unsigned totals[] = {1, 5, 132, 133, 140, 1000};
  for (int t = 0; t < 6; t++)
    for (int k = 0; k < 40; k++) {
      unsigned total = totals[t], G = total < 132 ? total : 132, block = (unsigned)k % G;
      int warps = k % 2 ? 8 : 4;
      ck_assert_msg(run(total, G, block, warps), "%u programs, block %u of %u, %d warps: deadlock or mismatch", total,
                    block, G, warps);
    }
}
END_TEST

int main(void) {
  Suite *s = suite_create("next_tile");
  TCase *tc = tcase_create("protocol");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, hands_over_every_program_in_order);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
