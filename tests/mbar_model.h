/* mbar_model.h - an mbarrier as the host models of the device's barrier
 * protocols see it (check_next_tile.c, check_split_ring.c): a phase
 * completes when its expected arrivals have come, and try_wait.parity P
 * passes once the phase of parity P has completed (the completed phases'
 * count odd for P = 0, even for P = 1: a fresh mbarrier passes P = 1 at
 * once); and the random order in which the models step their actors. */
#ifndef FADSL_TESTS_MBAR_MODEL_H
#define FADSL_TESTS_MBAR_MODEL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct Mbar {
  unsigned arrivals, pending, completed;
} Mbar;

static inline void arrive(Mbar *b) {
  if (++b->pending == b->arrivals) {
    b->pending = 0;
    b->completed++;
  }
}

static inline bool passes(const Mbar *b, unsigned parity) { return (b->completed & 1u) != parity; }

/* xorshift64: the models' random steps, reproducible from the seed a test sets */
static uint64_t rng;
static inline unsigned rnd(unsigned n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng % n);
}

#endif
