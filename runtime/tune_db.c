/* tune_db.c - the launch side of the tuning database.
 *
 * The database format and the nearest-key rule belong to fadsl-tune (see
 * docs/tuning.md); until it writes databases there is nothing to read, and
 * every lookup answers "not found", so launches take the documented default
 * configuration (fadsl.h, fadsl_args_set_config). */
#include "tune_db.h"

#include <string.h>

FaTuneMatch fa_tune_lookup(const FaTuneQuery *q, Arena *arena, FaTuneChoice *out) {
  (void)q;
  (void)arena;
  memset(out, 0, sizeof *out);
  out->match = FA_TUNE_NOT_FOUND;
  return out->match;
}
