/* cuda_plan_print.c - the text form of a CUDA plan (`fadslc --emit=plan`).
 *
 * One decision per line, each starting with what it is about:
 *     kernel, arg, role, schedule, barrier, smem, layout   (the kernel as a whole)
 *     tile, pipeline                                         (shared memory)
 *     load, store, atomic, atomic_add, product, convert, reduce, scan, print,
 *     rescale
 *                                                            (ops, in program order)
 * and naming the source location (FILE:LINE:COL) of the op it belongs to,
 * so that test cases can look for a decision with a plain substring.  The
 * form is meant to stay stable: change it only together with tests/plan/. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cuda_plan.h"

static void put_loc(StrBuf *out, SrcLoc loc) { fa_sb_printf(out, "%s:%d:%d", fa_loc_file_base(loc), loc.line, loc.col); }

/* "b_q %12"; an unnamed conversion of a named value: "%13 from K". */
static void put_value(StrBuf *out, const IrValue *v) {
  if (v->name) {
    fa_sb_printf(out, "%s %%%d", v->name, v->id);
    return;
  }
  fa_sb_printf(out, "%%%d", v->id);
  const IrValue *x = v;
  for (int i = 0; i < 8 && x->def && x->def->kind == IR_CAST && !x->name; i++)
    x = x->def->operands[0];
  if (x != v && x->name)
    fa_sb_printf(out, " from %s", x->name);
}

/* A divisor given as log2 (FA_DIV_MAX: any power of two, e.g. of 0). */
static void put_div(StrBuf *out, int log2) {
  if (log2 == FA_DIV_UNKNOWN)
    fa_sb_puts(out, "-");
  else if (log2 >= FA_DIV_MAX)
    fa_sb_puts(out, "any");
  else
    fa_sb_printf(out, "%lld", 1ll << log2);
}

static const char *vec_limit_name(FaVecLimit l) {
  switch (l) {
  case FA_VEC_NO_ORIGIN: return "unknown block pointer";
  case FA_VEC_NO_UNIT_STRIDE: return "no dimension of stride 1";
  case FA_VEC_LAYOUT: return "layout";
  case FA_VEC_16_BYTES: return "16 bytes";
  case FA_VEC_BASE: return "base";
  case FA_VEC_STRIDE: return "stride";
  case FA_VEC_OFFSET: return "offsets";
  case FA_VEC_BOUND: return "bound";
  case FA_VEC_4_BYTES: return "4 bytes";
  case FA_VEC_REDUCE_INSTR: return "the red instructions of the target";
  }
  return "?";
}

static void put_layout(StrBuf *out, const FaLayout *l) {
  if (l)
    fa_sb_printf(out, "L%d", l->id);
  else
    fa_sb_puts(out, "-");
}

static void print_args(const FaCudaPlan *p, StrBuf *out) {
  for (int i = 0; i < p->fn->nparams; i++) {
    const IrValue *v = p->fn->params[i].value;
    const char *name = p->fn->params[i].name ? p->fn->params[i].name : "?";
    bool given = false;
    for (int f = 0; f < p->nfacts; f++)
      given |= p->facts[f].name && !strcmp(p->facts[f].name, name);
    int d = p->values[v->id].div_log2;
    if (v->type.dtype == DT_PTR) {
      long long bytes = (long long)fa_dtype_size(v->type.pointee) << d;
      fa_sb_printf(out, "arg %s: *%s aligned to %lld bytes%s\n", name, fa_dtype_name(v->type.pointee), bytes,
                   given ? "" : " (assumed)");
    } else if (fa_dtype_is_int(v->type.dtype) && v->type.dtype != DT_I1) {
      if (d > 0) {
        fa_sb_printf(out, "arg %s: %s multiple of ", name, fa_dtype_name(v->type.dtype));
        put_div(out, d);
        fa_sb_putc(out, '\n');
      } else {
        fa_sb_printf(out, "arg %s: %s no known divisor\n", name, fa_dtype_name(v->type.dtype));
      }
    } else {
      fa_sb_printf(out, "arg %s: %s\n", name, fa_dtype_name(v->type.dtype));
    }
  }
}

static void print_schedule(const FaCudaPlan *p, StrBuf *out) {
  const FaSchedulePlan *s = &p->schedule;
  if (s->kind != FA_SCHEDULE_PERSISTENT) {
    fa_sb_puts(out, "schedule: one thread block per program of the grid");
    if (s->grid_ordered)
      fa_sb_printf(out, ", program ids from the thread block's linear index, longest first: program_id(%c) %s (the "
                        "loops run %lld iterations at program_id(%c) = 1, %lld at 2), in groups of %d programs along "
                        "the other axes",
                   "012"[s->axis], s->descending ? "descending" : "ascending", s->work[0], "012"[s->axis],
                   s->work[1], s->group);
    else if (s->order == FA_ORDER_LONGEST_FIRST)
      fa_sb_printf(out, ", the hardware's order: longest first along program_id(%c), ascending (the loops run %lld "
                        "iterations at program_id(%c) = 1, %lld at 2), the other axes one after another",
                   "012"[s->axis], s->work[0], "012"[s->axis], s->work[1]);
    if (s->no_persistent)
      fa_sb_printf(out, " (not persistent: %s)", s->no_persistent);
    fa_sb_putc(out, '\n');
    return;
  }
  fa_sb_puts(out, "schedule: persistent: as many thread blocks as the GPU holds at once, each looping over "
                  "programs (the grid of programs in three more arguments); tile order ");
  static const char xyz[] = "012";
  if (s->order == FA_ORDER_LONGEST_FIRST)
    fa_sb_printf(out,
                 "longest first: program_id(%c) %s (the loops run %lld iterations at program_id(%c) = 1, %lld at 2), "
                 "in groups of %d programs along the other axes\n",
                 xyz[s->axis], s->descending ? "descending" : "ascending", s->work[0], xyz[s->axis], s->work[1],
                 s->group);
  else
    fa_sb_printf(out, "linear, program_id(0) fastest (%s)\n", s->linear_why ? s->linear_why : "");
  if (s->dynamic)
    fa_sb_printf(out,
                 "schedule: dynamic: after its first program each thread block takes the next from a counter in global "
                 "memory (one more argument, zeroed before the launch)%s; next program's slots at smem %zu\n",
                 s->next_full >= 0 ? ", the producer handing it to the compute warps" : ", through a barrier",
                 s->next_slots);
  else if (s->order == FA_ORDER_LONGEST_FIRST)
    fa_sb_puts(out, "schedule: rounds of one program per thread block, in alternating directions\n");
  if (s->kind == FA_SCHEDULE_PERSISTENT && !s->end_sync)
    fa_sb_puts(out, p->bulk_stores ? "schedule: the compute warps do not meet between programs (they write shared memory "
                                     "only into staging tiles, behind barriers of their own)\n"
                                   : "schedule: the compute warps do not meet between programs (they write no shared "
                                     "memory)\n");
}

static void print_mbarrier(const FaCudaPlan *p, const FaBarrierPlan *b, StrBuf *out) {
  static const char *const what[] = {"full", "empty", "load", "tile", "next full", "next empty"};
  fa_sb_printf(out, "barrier mbarrier %s: %d x %d arrival%s at smem %zu", what[b->mbar], b->slots, b->arrivals,
               b->arrivals == 1 ? "" : "s", b->offset);
  if (b->pipeline) {
    fa_sb_puts(out, " (pipeline ");
    put_loc(out, b->pipeline->loop->loc);
    fa_sb_putc(out, ')');
  } else if (b->load) {
    fa_sb_puts(out, " (load ");
    put_value(out, b->load->op->results[0]);
    fa_sb_putc(out, ')');
  } else if (b->mbar == FA_MBAR_NEXT_FULL) {
    fa_sb_puts(out, " (the producer has put the next program's id in its slot)");
  } else if (b->mbar == FA_MBAR_NEXT_EMPTY) {
    fa_sb_puts(out, " (every compute warp has read it)");
  } else if (b->mbar == FA_MBAR_TILE) {
    fa_sb_puts(out, " (the compute threads are done with a program's loads outside loops: ");
    if (p->schedule.tile_release_after) {
      fa_sb_puts(out, "after ");
      put_loc(out, p->schedule.tile_release_after->loc);
      fa_sb_puts(out, ", the producer loading the next program's under the rest of this one)");
    } else {
      fa_sb_puts(out, "at the end of each program)");
    }
  }
  fa_sb_putc(out, '\n');
}

static void print_tensor_map(const FaCudaPlan *p, const FaTensorMapPlan *m, StrBuf *out) {
  const char *name = p->fn->params[m->param].name;
  fa_sb_printf(out, "tensor map %d: %s, %d dims (extent dims", m->id, name ? name : "?", m->rank);
  for (int i = 0; i < m->rank; i++) {
    int first = i ? m->dims_end[i - 1] : 0;
    fa_sb_printf(out, "%s%d", i ? " | " : " ", first);
    for (int e = first + 1; e < m->dims_end[i]; e++)
      fa_sb_printf(out, "*%d", e);
  }
  fa_sb_puts(out, "), box [");
  for (int i = 0; i < m->rank; i++)
    fa_sb_printf(out, "%s%d", i ? ", " : "", m->box[i]);
  if (m->store)
    fa_sb_printf(out, "], swizzle %dB, written by bulk stores\n", m->swizzle);
  else
    fa_sb_printf(out, "], swizzle %dB, %s fill\n", m->swizzle, m->nan_fill ? "nan" : "zero");
}

static void print_kernel(const FaCudaPlan *p, StrBuf *out) {
  char arch[32];
  fa_cuda_target_name(p->target, arch, sizeof arch);
  fa_sb_printf(out, "kernel %s: %s, %d warps, %d stages, pipeline %s (", p->fn->name ? p->fn->name : "?", arch,
               p->warps, p->stages, fa_pipeline_name(p->pipeline));
  put_loc(out, p->fn->loc);
  fa_sb_puts(out, ")\n");
  print_args(p, out);
  for (int i = 0; i < p->nroles; i++) {
    const FaWarpRole *r = &p->roles[i];
    fa_sb_printf(out, "role %s: warps %d-%d (%d threads), registers %s",
                 r->kind == FA_ROLE_COMPUTE ? "compute" : r->kind == FA_ROLE_PRODUCER ? "producer" : "?",
                 r->first_warp, r->first_warp + r->nwarps - 1, 32 * r->nwarps,
                 r->max_registers ? "" : "as the compiler allocates");
    if (r->max_registers)
      fa_sb_printf(out, "%d (setmaxnreg)", r->max_registers);
    fa_sb_putc(out, '\n');
  }
  if (p->warp_specialised)
    fa_sb_printf(out, "warp specialisation: one thread of warp %d runs the producer's slice and issues every bulk "
                 "copy; %d threads per block, __launch_bounds__(%d, %d)\n",
                 p->warps, p->threads, p->threads, p->min_blocks);
  else if (p->no_warp_specialisation)
    fa_sb_printf(out, "warp specialisation: none (%s)\n", p->no_warp_specialisation);
  if (p->ring_registers)
    fa_sb_printf(out, "occupancy: __launch_bounds__(%d, %d): ring vectors read from shared memory, at most %d "
                 "registers a thread so that %d blocks share a multiprocessor, as their shared memory allows\n",
                 p->threads, p->min_blocks, p->ring_registers, p->min_blocks);
  if (p->npingpong) {
    fa_sb_puts(out, "ping-pong: consumer warpgroups 0 and 1 take turns on each product of the loops at");
    for (int i = 0; i < p->npingpong; i++) {
      fa_sb_puts(out, i ? ", " : " ");
      put_loc(out, p->pingpong_loops[i]->loc);
    }
    fa_sb_puts(out, " (named barriers 2 and 3; warpgroup 0 first)\n");
  } else if (p->no_pingpong) {
    fa_sb_printf(out, "ping-pong: none (%s)\n", p->no_pingpong);
  }
  print_schedule(p, out);
  if (!p->nbarriers)
    fa_sb_puts(out, "barrier: none\n");
  for (int i = 0; i < p->nbarriers; i++) {
    const FaBarrierPlan *b = &p->barriers[i];
    if (b->kind == FA_BARRIER_MBARRIER) {
      print_mbarrier(p, b, out);
      continue;
    }
    fa_sb_printf(out, "barrier %d: %s, %d threads, for", b->id,
                 b->kind == FA_BARRIER_CTA ? "__syncthreads" : b->kind == FA_BARRIER_NAMED ? "named" : "?", b->threads);
    const char *sep = " ";
    if (b->uses & FA_BARRIER_FOR_TILES) {
      fa_sb_printf(out, "%stile writes", sep);
      sep = ", ";
    }
    if (b->uses & FA_BARRIER_FOR_PIPELINE) {
      fa_sb_printf(out, "%spipeline buffers", sep);
      sep = ", ";
    }
    if (b->uses & FA_BARRIER_FOR_SCRATCH) {
      fa_sb_printf(out, "%sscratch", sep);
      sep = ", ";
    }
    if (b->uses & FA_BARRIER_FOR_TILE_END) {
      fa_sb_printf(out, "%sthe end of each program (persistent)", sep);
      sep = ", ";
    }
    if (b->uses & FA_BARRIER_FOR_STORES) {
      fa_sb_printf(out, "%sbulk stores' staging tiles", sep);
      sep = ", ";
    }
    if (b->uses & FA_BARRIER_FOR_NEXT) {
      fa_sb_printf(out, "%sthe next program's id (dynamic)", sep);
      sep = ", ";
    }
    if (b->uses & FA_BARRIER_FOR_TURNS)
      fa_sb_printf(out, "%sconsumer warpgroup %d's turn to issue its products", sep, b->warpgroup);
    fa_sb_putc(out, '\n');
  }
  fa_sb_printf(out, "smem: %zu bytes = tiles %zu + ", p->smem.total, p->smem.tiles);
  if (p->smem.barriers)
    fa_sb_printf(out, "mbarriers %zu + ", p->smem.barriers);
  fa_sb_printf(out, "scratch %zu + alignment %zu\n", (p->smem.scratch + 15) & ~(size_t)15, p->smem.align_pad);
  for (int i = 0; i < p->ntmaps; i++)
    print_tensor_map(p, p->tmaps[i], out);
  if (p->async_proxy_reads)
    fa_sb_puts(out, "fence: tiles are read through the async proxy (wgmma): every tile write is fenced\n");
  if (p->bulk_stores)
    fa_sb_puts(out, "bulk stores: thread 0 issues them (one bulk group each) and waits until they have read their "
                    "staging tiles before the block exits\n");
}

static void print_tile(const FaCudaPlan *p, const FaTilePlan *t, StrBuf *out) {
  (void)p;
  const IrValue *x = t->value;
  fa_sb_puts(out, "tile ");
  put_value(out, x);
  fa_sb_puts(out, " (");
  put_loc(out, x->loc);
  fa_sb_puts(out, "): ");
  fa_type_print(x->type, out);
  fa_sb_printf(out, " along dim %d, ", t->inner);
  if (t->format == FA_TILE_SWIZZLED)
    fa_sb_printf(out, "swizzled %dB (SwzTile<%d, %d>)", t->swizzle, t->rows, t->swizzle);
  else if (t->format == FA_TILE_DENSE)
    fa_sb_printf(out, "dense, %d bytes, read into registers", t->pitch);
  else
    fa_sb_printf(out, "padded rows of %d bytes (PadTile<%d>)", t->pitch, t->pitch);
  fa_sb_printf(out, ", offset %zu, %d x %zu bytes, ", t->offset, t->nbufs, t->buf_bytes);
  if (t->fill == FA_FILL_CP_ASYNC) {
    fa_sb_puts(out, "filled by cp.async (pipeline at ");
    put_loc(out, t->pipeline->loop->loc);
    fa_sb_putc(out, ')');
  } else if (t->fill == FA_FILL_TMA && t->pipeline) {
    fa_sb_puts(out, "filled by TMA (pipeline at ");
    put_loc(out, t->pipeline->loop->loc);
    fa_sb_putc(out, ')');
  } else if (t->fill == FA_FILL_TMA) {
    fa_sb_puts(out, "filled by TMA once");
  } else if (t->fill == FA_FILL_STAGED) {
    fa_sb_printf(out, "staged from registers, %d per store, for the bulk %s at ", t->store_vec,
                 t->load->tma->reduce ? "reduce-add" : "store");
    put_loc(out, t->load->op->loc);
  } else {
    fa_sb_printf(out, "written from registers, %d per store", t->store_vec);
  }
  fa_sb_printf(out, ", live %d..%d", t->live_start, t->live_end);
  if (t->drains)
    fa_sb_puts(out, ", shares memory with a staging tile (written after the bulk stores have read it)");
  if (t->alias) {
    fa_sb_puts(out, ", the memory of tile ");
    put_value(out, t->alias->value);
  }
  fa_sb_putc(out, '\n');
}

static void print_steps(StrBuf *out, const FaPipeStep *s, int n) {
  if (!n)
    fa_sb_puts(out, " -");
  for (int i = 0; i < n; i++) {
    fa_sb_puts(out, i ? ", " : " ");
    if (s[i].by == FA_BY_ISSUER)
      fa_sb_puts(out, "issuer ");
    else if (s[i].by == FA_BY_PRODUCER)
      fa_sb_puts(out, "producer ");
    else if (s[i].by == FA_BY_WARP)
      fa_sb_puts(out, "each warp ");
    switch (s[i].kind) {
    case FA_STEP_BARRIER: fa_sb_puts(out, "barrier"); break;
    case FA_STEP_ISSUE: fa_sb_printf(out, "issue +%d", s[i].arg); break;
    case FA_STEP_COMMIT: fa_sb_puts(out, "commit"); break;
    case FA_STEP_WAIT_GROUPS: fa_sb_printf(out, "wait until %d in flight", s[i].arg); break;
    case FA_STEP_PROXY_FENCE: fa_sb_puts(out, "proxy fence"); break;
    case FA_STEP_WAIT_EMPTY: fa_sb_printf(out, "wait empty +%d", s[i].arg); break;
    case FA_STEP_WAIT_FULL: fa_sb_puts(out, "wait full"); break;
    case FA_STEP_RELEASE: fa_sb_puts(out, "release"); break;
    case FA_STEP_DRAIN_STORES: fa_sb_puts(out, "wait until the bulk stores have read their staging tiles"); break;
    }
  }
  fa_sb_putc(out, '\n');
}

/* A load of a split ring (FaRingLoad): its barriers, when it is waited for
 * and released. */
static void print_ring_load(const FaPipelinePlan *pp, int j, StrBuf *out) {
  const FaRingLoad *r = &pp->split[j];
  fa_sb_puts(out, "pipeline ");
  put_loc(out, pp->loop->loc);
  fa_sb_puts(out, " split: load ");
  put_value(out, pp->loads[j]->op->results[0]);
  fa_sb_printf(out, " on full/empty mbarriers %d..%d, ", j * pp->stages, (j + 1) * pp->stages - 1);
  fa_sb_puts(out, r->next_head ? "waited for at the next iteration's head (read by the deferred product only)"
                               : "waited for at the head");
  switch (r->release) {
  case FA_RELEASE_TAIL: fa_sb_puts(out, ", released at the end of the iteration"); break;
  case FA_RELEASE_BEFORE:
    fa_sb_puts(out, ", released before ");
    put_loc(out, r->release_before->loc);
    fa_sb_puts(out, " (its products complete)");
    break;
  case FA_RELEASE_DEFERRED:
    fa_sb_puts(out, pp->defer_rescale ? ", released after the deferred product's wait, at the head of the iteration after"
                                        " the one that issues it"
                                      : ", released after the deferred product's wait in the next iteration");
    break;
  }
  fa_sb_putc(out, '\n');
}

static void print_pipeline(const FaPipelinePlan *pp, StrBuf *out) {
  fa_sb_puts(out, "pipeline ");
  put_loc(out, pp->loop->loc);
  if (pp->nproducer)
    fa_sb_printf(out, ": %d stages (the producer up to %d iterations ahead), ", pp->stages, pp->stages);
  else
    fa_sb_printf(out, ": %d stages (%d iteration%s ahead), ", pp->stages, pp->ahead, pp->ahead == 1 ? "" : "s");
  if (pp->sync == FA_SYNC_MBARRIER)
    fa_sb_printf(out, "TMA on mbarrier ring %d%s (%zu bytes per iteration)", pp->ring,
                 pp->shares ? " (shared with an earlier loop)" : "", pp->tx_bytes);
  else
    fa_sb_puts(out, "cp.async groups");
  fa_sb_puts(out, ", loads");
  for (int i = 0; i < pp->nloads; i++) {
    fa_sb_puts(out, i ? ", " : " ");
    put_value(out, pp->loads[i]->op->results[0]);
  }
  if (pp->deferred) {
    fa_sb_puts(out, "; ");
    put_value(out, pp->deferred->fused_add->results[0]);
    fa_sb_puts(out, "'s product deferred to the next iteration, issued after ");
    put_value(out, pp->defer_after->dot->results[0]);
    if (pp->defer_rescale) {
      fa_sb_puts(out, "'s and waited for at the head of the iteration after, where its ring buffer is released, the"
                      " next one's A operand (kept in registers) packed and the rescale at ");
      put_loc(out, pp->defer_rescale->loc);
      fa_sb_puts(out, " applied (its factors kept likewise), before the loop's first product (the last after the"
                      " loop)");
    } else {
      fa_sb_puts(out, "'s and waited for before ");
      put_loc(out, pp->defer_wait_before->loc);
      fa_sb_puts(out, " (the last after the loop; its ring buffer released after the wait)");
    }
  } else if (pp->no_deferral) {
    fa_sb_printf(out, "; last product not deferred: %s", pp->no_deferral);
  }
  if (pp->rotated) {
    fa_sb_puts(out, "; the next iteration's ");
    put_value(out, pp->rotated->dot->results[0]);
    fa_sb_puts(out, " issued at the head of each iteration (the first before the loop)");
  } else if (pp->no_rotation && pp->acc_registers > FA_ROTATION_REGISTERS) {
    fa_sb_printf(out, "; products not issued ahead: %s (about %d registers a thread for the products with it, "
                      "above %d)",
                 pp->no_rotation, pp->acc_registers, FA_ROTATION_REGISTERS);
  } else if (pp->no_rotation) {
    fa_sb_printf(out, "; products not issued ahead: %s", pp->no_rotation);
  }
  if (pp->sync != FA_SYNC_MBARRIER && pp->tma_refusal != FA_TMA_OK && pp->refused) {
    fa_sb_puts(out, "; not TMA: load ");
    put_value(out, pp->refused->op->results[0]);
    fa_sb_printf(out, " %s", fa_tma_refusal_text(pp->tma_refusal));
  }
  if (pp->no_split)
    fa_sb_printf(out, "; one full and one empty mbarrier a stage for all the loads: %s", pp->no_split);
  fa_sb_putc(out, '\n');
  for (int j = 0; pp->split && j < pp->nloads; j++)
    print_ring_load(pp, j, out);
  const char *part[5] = {"before the loop:", "each iteration:", "end of each iteration:", "after the loop:",
                         "the producer, each iteration:"};
  const FaPipeStep *steps[5] = {pp->prologue, pp->head, pp->tail, pp->epilogue, pp->producer};
  int n[5] = {pp->nprologue, pp->nhead, pp->ntail, pp->nepilogue, pp->nproducer};
  for (int i = 0; i < 5; i++) {
    if ((i == 2 && pp->sync != FA_SYNC_MBARRIER) || (i == 4 && !pp->nproducer))
      continue;
    fa_sb_puts(out, "pipeline ");
    put_loc(out, pp->loop->loc);
    fa_sb_printf(out, " %s", part[i]);
    if (i == 2 && pp->split) /* emit_cuda.c: each load's where its line says */
      fa_sb_puts(out, " each warp release the loads released at the end of the iteration (per load above)\n");
    else if (i == 2 && pp->deferred && n[i] == 1 && steps[i][0].kind == FA_STEP_RELEASE) /* emit_cuda.c: each warp releases after the deferred product's wait */
      fa_sb_puts(out, " each warp release, in the next iteration after the deferred product (after the loop for "
                      "the last)\n");
    else
      print_steps(out, steps[i], n[i]);
  }
}

/* The instruction of a reduce-store (atomic_add through a block pointer). */
static void put_reduce_instr(StrBuf *out, const FaAccessPlan *ap, DType dt) {
  int bytes = ap->vec * fa_dtype_size(dt);
  switch (ap->red) {
  case FA_RED_VECTOR:
    fa_sb_printf(out, "red.global.add.v%d.%s (%d x %s, %d bytes)", ap->vec, fa_dtype_name(dt), ap->vec,
                 fa_dtype_name(dt), bytes);
    break;
  case FA_RED_SCALAR:
    fa_sb_printf(out, "red.global.add%s.%s per element", dt == DT_F16 || dt == DT_BF16 ? ".noftz" : "",
                 dt == DT_I32 || dt == DT_U32 ? "u32" : dt == DT_I64 ? "u64" : fa_dtype_name(dt));
    break;
  case FA_RED_CAS: fa_sb_printf(out, "compare-and-swap per element (%s)", fa_dtype_name(dt)); break;
  }
}

/* "zg", "2 * z * n_groups + 3": a coordinate polynomial. */
static void put_poly(const FaCudaPlan *p, const FaSymPoly *c, StrBuf *out) {
  if (!c->nterms)
    fa_sb_puts(out, "0");
  for (int i = 0; i < c->nterms; i++) {
    const FaSymTerm *t = &c->terms[i];
    fa_sb_puts(out, i ? (t->coef < 0 ? " - " : " + ") : (t->coef < 0 ? "-" : ""));
    long long k = t->coef < 0 ? -t->coef : t->coef;
    if (k != 1 || !t->natoms)
      fa_sb_printf(out, "%lld%s", k, t->natoms ? " * " : "");
    for (int a = 0; a < t->natoms; a++) {
      int atom = t->atoms[a];
      const char *name = NULL;
      if (atom < FA_SYM_VALUE && atom < p->fn->nparams)
        name = p->fn->params[atom].name;
      for (int n = 0; !name && atom >= FA_SYM_VALUE && n < p->nops; n++)
        for (int r = 0; r < p->order[n]->nresults; r++)
          if (p->order[n]->results[r]->id == atom - FA_SYM_VALUE)
            name = p->order[n]->results[r]->name;
      if (name)
        fa_sb_printf(out, "%s%s", a ? " * " : "", name);
      else
        fa_sb_printf(out, "%s%%%d", a ? " * " : "", atom - FA_SYM_VALUE);
    }
  }
}

static void print_tma(const FaCudaPlan *p, const FaAccessPlan *ap, StrBuf *out) {
  const FaTmaPlan *t = ap->tma;
  if (ap->method == FA_ACCESS_TMA_STORE) {
    fa_sb_printf(out, "TMA %s from staging tile ", t->reduce ? "reduce-add (bulk tensor reduce .add)"
                                                              : "store (bulk tensor copy)");
    put_value(out, ap->tile->value);
    fa_sb_printf(out, " (offset %zu, layout ", ap->tile->offset);
    put_layout(out, ap->layout);
    fa_sb_printf(out, ", %d per store)", ap->tile->store_vec);
  } else {
    fa_sb_puts(out, ap->tile->format == FA_TILE_DENSE ? "TMA with the loop's ring into the dense tile " : "TMA into tile ");
    put_value(out, ap->tile->value);
    if (ap->pipeline)
      fa_sb_printf(out, ", %d stages", ap->pipeline->stages);
    else
      fa_sb_puts(out, ", once");
    if (ap->tile->format == FA_TILE_DENSE)
      fa_sb_puts(out, ", each thread reading its elements from shared memory where the load stands");
  }
  fa_sb_printf(out, ", tensor map %d, coordinates (", t->map->id);
  for (int i = 0; i < t->map->rank; i++) {
    fa_sb_puts(out, i ? ", " : "");
    if (t->block_dim[i] < 0)
      put_poly(p, &t->outer_coord, out);
    else
      fa_sb_printf(out, "offset %d", t->block_dim[i]);
  }
  fa_sb_printf(out, "), %d cop%s of %zu bytes", t->panels, t->panels == 1 ? "y" : "ies", t->panel_bytes);
  const char *done = t->drain_writes ? "is complete" : "has read its tile";
  if (ap->method == FA_ACCESS_TMA_STORE && t->drain_pending)
    fa_sb_printf(out, ", staged once every bulk group but the newest %d %s", t->drain_pending, done);
  else if (ap->method == FA_ACCESS_TMA_STORE)
    fa_sb_printf(out, ", staged once every bulk group %s", done);
  if (ap->method == FA_ACCESS_TMA_STORE && t->drain_with) {
    fa_sb_puts(out, " (drained before the barrier after the stage of tile ");
    put_value(out, t->drain_with->value);
    fa_sb_putc(out, ')');
  }
  if (t->wait_before) {
    fa_sb_puts(out, ", waited for before ");
    put_loc(out, t->wait_before->loc);
    if (t->wait_before->kind == IR_FOR && fa_plan_pipeline(p, t->wait_before) && !p->warp_specialised)
      fa_sb_puts(out, " (after the loop's first copies)");
  }
  if (t->wait_after) {
    fa_sb_puts(out, " and again after ");
    put_loc(out, t->wait_after->loc);
  }
}

static void print_access(const FaCudaPlan *p, const FaAccessPlan *ap, StrBuf *out) {
  const IrOp *op = ap->op;
  bool store = op->kind == IR_STORE || op->kind == IR_STORE_BLOCK || op->kind == IR_ATOMIC_ADD_BLOCK;
  fa_sb_puts(out, op->kind == IR_ATOMIC_ADD ? "atomic "
                  : op->kind == IR_ATOMIC_ADD_BLOCK ? "atomic_add "
                  : store ? "store " : "load ");
  if (!store && op->kind != IR_ATOMIC_ADD) {
    put_value(out, op->results[0]);
    fa_sb_putc(out, ' ');
  }
  fa_sb_putc(out, '(');
  put_loc(out, op->loc);
  fa_sb_puts(out, "): ");
  const IrValue *data = store ? op->operands[1] : op->kind == IR_ATOMIC_ADD ? op->operands[1] : op->results[0];
  DType dt = data->type.dtype;
  int bytes = ap->vec * fa_dtype_size(dt);
  switch (ap->method) {
  case FA_ACCESS_ELEMENT: fa_sb_puts(out, "one element per pointer"); break;
  case FA_ACCESS_ATOMIC: fa_sb_puts(out, "atomic per element"); break;
  case FA_ACCESS_REDUCE: put_reduce_instr(out, ap, dt); break;
  case FA_ACCESS_VECTOR:
    if (ap->vec > 1)
      fa_sb_printf(out, "vectors of %d x %s (%d bytes)", ap->vec, fa_dtype_name(dt), bytes);
    else
      fa_sb_printf(out, "scalar (1 x %s)", fa_dtype_name(dt));
    break;
  case FA_ACCESS_CP_ASYNC:
    fa_sb_printf(out, "cp.async %d x %s (%d bytes) into tile ", ap->vec, fa_dtype_name(dt), bytes);
    put_value(out, ap->tile->value);
    fa_sb_printf(out, ", %d stages", ap->pipeline->stages);
    break;
  case FA_ACCESS_TMA:
  case FA_ACCESS_TMA_STORE:
    print_tma(p, ap, out);
    fa_sb_putc(out, '\n');
    return;
  }
  fa_sb_puts(out, ", layout ");
  put_layout(out, ap->layout);
  if (ap->scratch)
    fa_sb_printf(out, ", scratch %zu", ap->scratch);
  if (op->kind == IR_LOAD_BLOCK || op->kind == IR_STORE_BLOCK || op->kind == IR_ATOMIC_ADD_BLOCK) {
    const FaVecFacts *f = &ap->facts;
    if (f->dim < 0) {
      fa_sb_printf(out, "; width limited by: %s", vec_limit_name(f->limit));
    } else {
      fa_sb_printf(out, "; along dim %d: layout ", f->dim);
      put_div(out, f->layout_log2);
      fa_sb_puts(out, ", 16 bytes ");
      put_div(out, f->bytes_log2);
      fa_sb_puts(out, ", base ");
      put_div(out, f->base_log2);
      fa_sb_puts(out, ", strides ");
      put_div(out, f->stride_log2);
      fa_sb_puts(out, ", offsets ");
      put_div(out, f->offset_log2);
      fa_sb_puts(out, ", bound ");
      put_div(out, f->bound_log2);
      fa_sb_printf(out, "; width limited by: %s", vec_limit_name(f->limit));
      if ((f->limit == FA_VEC_STRIDE || f->limit == FA_VEC_BOUND || f->limit == FA_VEC_BASE) && f->stride) {
        fa_sb_puts(out, " (");
        put_value(out, f->stride);
        fa_sb_putc(out, ')');
      }
    }
  }
  if (ap->tma_refusal != FA_TMA_OK) {
    fa_sb_printf(out, "; not TMA: %s", fa_tma_refusal_text(ap->tma_refusal));
    if (ap->tma_refusal_dim >= 0)
      fa_sb_printf(out, " (dim %d)", ap->tma_refusal_dim);
  }
  fa_sb_putc(out, '\n');
}

static const char *source_name(FaOperandSource s) {
  switch (s) {
  case FA_OPND_REGISTERS: return "registers";
  case FA_OPND_REGISTERS_F32: return "f32 registers rounded";
  case FA_OPND_TILE: return "tile";
  }
  return "?";
}

static void print_operand(StrBuf *out, const char *which, FaOperandSource src, const IrValue *regs,
                          const FaTilePlan *t, bool k_inner, bool ldmatrix) {
  fa_sb_printf(out, ", %s from %s ", which, source_name(src));
  if (src == FA_OPND_TILE && t) {
    put_value(out, t->value);
    if (t->format == FA_TILE_SWIZZLED)
      fa_sb_printf(out, " (swizzled %dB, %s-major)", t->swizzle, k_inner ? "K" : "MN");
    else
      fa_sb_printf(out, " (padded, %s-major%s)", k_inner ? "K" : "MN", ldmatrix ? ", ldmatrix" : "");
    if (t->format == FA_TILE_SWIZZLED && ldmatrix)
      fa_sb_puts(out, " with ldmatrix");
  } else if (regs) {
    put_value(out, regs);
  }
}

static void print_product(const FaProductPlan *pp, StrBuf *out) {
  const IrOp *op = pp->dot;
  fa_sb_puts(out, "product ");
  put_value(out, op->results[0]);
  fa_sb_puts(out, " (");
  put_loc(out, op->loc);
  fa_sb_printf(out, "): %dx%dx%d %s -> %s: ", pp->M, pp->N, pp->K, fa_dtype_name(pp->in), fa_dtype_name(pp->acc));
  switch (pp->instr) {
  case FA_INSTR_WGMMA:
    if (pp->wg_n > 1)
      fa_sb_printf(out, "wgmma m64n%dk16, %d block of 64 rows, its columns split across %d warpgroups, %d k16 steps",
                   pp->N / pp->wg_n, pp->mt, pp->wg_n, pp->kt);
    else
      fa_sb_printf(out, "wgmma m64n%dk16, %d x %d blocks of 64 rows per warpgroup, %d k16 steps", pp->N, pp->mt,
                   pp->wm / 4, pp->kt);
    break;
  case FA_INSTR_MMA_SYNC:
    fa_sb_printf(out, "mma.sync m16n8k16, warps %d x %d, per warp %d x %d tiles of 16x8, %d k16 steps", pp->wm, pp->wn,
                 pp->mt, pp->nt, pp->kt);
    break;
  case FA_INSTR_FMA:
    fa_sb_printf(out, "fma%s, A in L%d, B in L%d, scratch %zu", pp->tf32 ? " (tf32-rounded)" : "",
                 pp->la ? pp->la->id : -1, pp->lb ? pp->lb->id : -1, pp->scratch);
    break;
  }
  if (pp->instr != FA_INSTR_FMA) {
    bool ldm = pp->instr == FA_INSTR_MMA_SYNC;
    print_operand(out, "A", pp->a_src, pp->a_regs, pp->a_tile, pp->a_k_inner, ldm);
    print_operand(out, "B", pp->b_src, NULL, pp->b_tile, pp->b_k_inner, ldm);
  }
  if (pp->instr == FA_INSTR_MMA_SYNC && pp->why_not_wgmma)
    fa_sb_printf(out, ", not wgmma: %s", pp->why_not_wgmma);
  if (pp->instr == FA_INSTR_WGMMA && pp->wait == FA_WAIT_AT_ONCE) {
    fa_sb_puts(out, ", waited at once");
    if (pp->why_at_once)
      fa_sb_printf(out, " (%s)", pp->why_at_once);
  } else if (pp->instr == FA_INSTR_WGMMA && pp->deferred) {
    const FaPipelinePlan *ring = pp->b_tile ? pp->b_tile->pipeline : NULL;
    fa_sb_puts(out, ring && ring->defer_rescale
                        ? ", its A operand kept in registers here, packed at the next iteration's head and issued"
                          " there (the last after the loop)"
                        : ", its A fragments packed here, issued by the next iteration (the last after the loop)");
  } else if (pp->instr == FA_INSTR_WGMMA && pp->rotated) {
    fa_sb_puts(out, ", issued one iteration ahead and waited for at the back edge of the iteration before its own");
  } else if (pp->instr == FA_INSTR_WGMMA && pp->wait_at) {
    const FaWgmmaWait *w = pp->wait_at;
    fa_sb_puts(out, ", committed and waited for ");
    if (w->before) {
      fa_sb_puts(out, "before ");
      put_loc(out, w->before->loc);
    } else {
      fa_sb_puts(out, "at the end of its block");
      if (w->region->parent_op) {
        fa_sb_puts(out, " (");
        put_loc(out, w->region->parent_op->loc);
        fa_sb_putc(out, ')');
      }
    }
    fa_sb_printf(out, " (wait_group %d)", w->pending);
  }
  if (pp->takes_turn)
    fa_sb_puts(out, ", issued in its warpgroup's turn");
  if (pp->fused_add) {
    fa_sb_puts(out, ", accumulating onto ");
    put_value(out, pp->fused_add->operands[pp->addend]);
    fa_sb_puts(out, " (the addition at ");
    put_loc(out, pp->fused_add->loc);
    fa_sb_putc(out, ')');
  }
  fa_sb_putc(out, '\n');
}

static void print_conversions(const FaCudaPlan *p, const IrValue *x, StrBuf *out) {
  const FaValuePlan *vp = &p->values[x->id];
  for (int i = 0; i < vp->nconvs; i++) {
    const FaConversionPlan *c = &vp->convs[i];
    fa_sb_puts(out, "convert ");
    put_value(out, x);
    fa_sb_puts(out, " (");
    put_loc(out, x->loc);
    fa_sb_printf(out, "): L%d -> L%d ", c->from->id, c->to->id);
    if (c->in_registers)
      fa_sb_puts(out, "in registers\n");
    else
      fa_sb_printf(out, "through shared memory (%zu bytes)\n", c->scratch);
  }
}

/* " steps reg 0, lane 1, warp 0": the hardware bits an axis runs along. */
static void put_steps(StrBuf *out, const FaAxisSteps *st) {
  static const char *const kinds[] = {"reg", "lane", "warp"};
  fa_sb_puts(out, ", steps");
  for (int i = 0; i < st->nbits; i++)
    fa_sb_printf(out, "%s%s %d", i ? ", " : " ", kinds[st->bits[i].kind], st->bits[i].bit);
  if (!st->nbits)
    fa_sb_puts(out, " none");
}

static void print_reduce(const FaReducePlan *rp, StrBuf *out) {
  const IrOp *op = rp->op;
  static const char *const names[] = {"sum", "max", "min"};
  bool combine = op->kind == IR_REDUCE_FN;
  fa_sb_puts(out, "reduce ");
  put_value(out, op->results[0]);
  fa_sb_puts(out, " (");
  put_loc(out, op->loc);
  fa_sb_puts(out, "): ");
  if (combine)
    fa_sb_printf(out, "combine function of %d value%s (%zu bytes per element)", rp->nresults, rp->nresults == 1 ? "" : "s",
                 rp->elem_bytes);
  else
    fa_sb_puts(out, op->sub >= 0 && op->sub < 3 ? names[op->sub] : "?");
  fa_sb_printf(out, " along axis %d of L%d, lanes 0x%x", op->axis, rp->src->id, rp->lane_mask);
  if (rp->warp_mask)
    fa_sb_printf(out, ", across warps 0x%x (scratch %zu)", rp->warp_mask, rp->scratch);
  else
    fa_sb_puts(out, ", within warps");
  if (combine)
    put_steps(out, &rp->steps);
  if (rp->slice) {
    fa_sb_printf(out, ", result in L%d", rp->slice->id);
    for (int k = 0; k < rp->nresults; k++) {
      const FaConversionPlan *c = &rp->to_result[k];
      if (c->to == c->from)
        continue;
      if (rp->nresults > 1)
        fa_sb_printf(out, ", result %d", k);
      fa_sb_printf(out, " then L%d %s", c->to->id, c->in_registers ? "in registers" : "through shared memory");
    }
  }
  fa_sb_putc(out, '\n');
}

static void print_scan(const FaScanPlan *sp, StrBuf *out) {
  const IrOp *op = sp->op;
  fa_sb_puts(out, "scan ");
  put_value(out, op->results[0]);
  fa_sb_puts(out, " (");
  put_loc(out, op->loc);
  fa_sb_printf(out, "): inclusive%s, %d value%s (%zu bytes per element), along axis %d of L%d",
               sp->reverse ? " reversed" : "", op->nresults, op->nresults == 1 ? "" : "s", sp->elem_bytes, op->axis,
               sp->layout->id);
  put_steps(out, &sp->steps);
  if (sp->steps.across_warps)
    fa_sb_printf(out, ", across warps (scratch %zu)", sp->scratch);
  else
    fa_sb_puts(out, ", within warps");
  fa_sb_putc(out, '\n');
}

static void print_print(const FaPrintPlan *pp, StrBuf *out) {
  fa_sb_puts(out, "print (");
  put_loc(out, pp->op->loc);
  fa_sb_puts(out, "): ");
  if (!pp->layout)
    fa_sb_puts(out, "scalars from thread 0");
  else
    fa_sb_printf(out, "blocks in L%d, %s", pp->layout->id,
                 pp->owners_only ? "each element by its owner (the copies in other threads skipped)"
                                 : "each element by the thread holding it");
  fa_sb_putc(out, '\n');
}

/* A product by an online softmax's rescale factors, skipped where they are 1. */
static void print_rescale(const FaCudaPlan *p, const IrOp *op, StrBuf *out) {
  const IrValue *r = op->nresults == 1 ? op->results[0] : NULL;
  if (!r || op->kind != IR_BINARY || !p->values[r->id].unit_factors)
    return;
  const IrValue *f = p->values[r->id].unit_factors->def->operands[0];
  for (int i = 0; i < 4 && !f->name && f->def && (f->def->kind == IR_EXPAND_DIMS || f->def->kind == IR_RESHAPE); i++)
    f = f->def->operands[0];
  fa_sb_puts(out, "rescale ");
  put_value(out, r);
  fa_sb_puts(out, " (");
  put_loc(out, op->loc);
  fa_sb_puts(out, "): by ");
  put_value(out, f);
  fa_sb_puts(out, ", exp of a running maximum's change: each thread multiplies only where a factor it holds "
                  "is not 1\n");
}

/* The values an op defines, for their conversions. */
static void print_op_conversions(const FaCudaPlan *p, const IrOp *op, StrBuf *out) {
  for (int i = 0; i < op->nresults; i++)
    print_conversions(p, op->results[i], out);
  for (int g = 0; g < op->nregions; g++)
    for (int a = 0; a < op->regions[g]->nargs; a++)
      print_conversions(p, op->regions[g]->args[a], out);
}

void fa_cuda_plan_print(const FaCudaPlan *p, StrBuf *out) {
  print_kernel(p, out);
  for (int i = 0; i < p->ntiles; i++)
    print_tile(p, p->tiles[i], out);
  for (int i = 0; i < p->npipelines; i++)
    print_pipeline(p->pipelines[i], out);
  for (int n = 0; n < p->nops; n++) {
    const IrOp *op = p->order[n];
    if (!fa_plan_op_live(p, op))
      continue;
    const FaAccessPlan *ap = fa_plan_access(p, op);
    const FaProductPlan *pp = fa_plan_product(p, op);
    const FaReducePlan *rp = fa_plan_reduce(p, op);
    const FaScanPlan *sp = fa_plan_scan(p, op);
    const FaPrintPlan *prp = fa_plan_print(p, op);
    if (ap)
      print_access(p, ap, out);
    if (pp)
      print_product(pp, out);
    if (rp)
      print_reduce(rp, out);
    if (sp)
      print_scan(sp, out);
    if (prp)
      print_print(prp, out);
    print_rescale(p, op, out);
    print_op_conversions(p, op, out);
  }
  for (int i = 0; i < p->layouts.layouts.len; i++) {
    const FaLayout *l = p->layouts.layouts.items[i];
    fa_sb_printf(out, "layout L%d: ", l->id);
    fa_layout_describe(l, out);
    fa_sb_putc(out, '\n');
  }
}
