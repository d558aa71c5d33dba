/* check_cuda_plan.c - unit tests of the CUDA backend's plan (compiler/cuda_plan.c)
 * and of its entry point (fa_cuda_compile):
 *   - the invariants of every plan of attention.fa's kernels, over head
 *     dimensions, causal or not, configurations and both targets: tiles
 *     aligned, inside the tile area, never overlapping in memory while both
 *     are live; the budget adds up; pipelined loads fill pipelined tiles;
 *     vector widths are powers of two of at most 16 bytes; wgmma only on
 *     sm_90a and only from swizzled tiles;
 *   - the plan and the emitted code agree (shared memory, the products'
 *     instructions);
 *   - the entry point says which stage failed (specialisation, lowering);
 *   - facts about the arguments change the plan's vector widths and
 *     pipelines exactly as the divisibility they state allows.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_plan.h"
#include "problem_binds.h"
#include "sema.h"

#ifndef FA_SRCDIR
#define FA_SRCDIR "."
#endif

typedef struct Ctx {
  FaCompiler fc;
  FaProgram *prog;
} Ctx;

static const char *diag(Ctx *c) { return c->fc.diag.text.data ? c->fc.diag.text.data : ""; }

static FaProgram *load_text(Ctx *c, const char *name, const char *text) {
  fa_compiler_init(&c->fc, NULL);
  Source *src = fa_source_new(&c->fc, name, text, strlen(text));
  ck_assert_ptr_nonnull(src);
  Node *m = fa_parse(&c->fc, src);
  ck_assert_msg(m != NULL, "parse: %s", diag(c));
  c->prog = fa_program_check(&c->fc, m);
  ck_assert_msg(c->prog != NULL, "check: %s", diag(c));
  return c->prog;
}

static FaProgram *load_file(Ctx *c, const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", FA_SRCDIR, rel);
  size_t len = 0;
  char *text = fa_read_file(path, &len);
  ck_assert_msg(text != NULL, "cannot read %s", path);
  FaProgram *p = load_text(c, path, text);
  free(text);
  return p;
}

/* Specialises and plans kernel `name` with -D-style values ("d_head=64 T=f16"). */
static FaCudaStage compile(Ctx *c, const char *name, const char *defines, FaLaunchConfig cfg, const char *arch,
                           const FaArgFact *facts, int nfacts, FaCudaKernel *out, FaCudaPlan *plan) {
  FaKernelInfo *k = fa_program_kernel(c->prog, name);
  ck_assert_msg(k != NULL, "no kernel %s", name);
  FaBinding given[16];
  int ng = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", defines ? defines : "");
  for (char *tok = strtok(buf, " "); tok && ng < 16; tok = strtok(NULL, " ")) {
    char *eq = strchr(tok, '=');
    ck_assert_ptr_nonnull(eq);
    *eq = '\0';
    given[ng].name = fa_arena_strdup(&c->fc.arena, tok);
    ck_assert(fa_const_parse(eq + 1, &given[ng].value));
    ng++;
  }
  FaCudaTarget target;
  ck_assert(fa_cuda_target_parse(arch, &target));
  FaBinding *binds = NULL;
  int nb = fa_kernel_bindings_for_compile(&c->fc, c->prog, k, given, ng, target.sm, &binds, &cfg);
  ck_assert_msg(nb >= 0, "bindings: %s", diag(c));
  FaCudaSpec spec = {c->prog, k, binds, nb, cfg, target, facts, nfacts};
  IrKernel *ir = NULL;
  return fa_cuda_compile(&c->fc, &spec, &ir, out, plan);
}

static bool is_pow2(long long x) { return x > 0 && (x & (x - 1)) == 0; }

static size_t tile_size(const FaTilePlan *t) { return t->buf_bytes * (size_t)t->nbufs; }

static void assert_invariants(const FaCudaPlan *p, const FaCudaKernel *ck, const char *what) {
  /* the budget */
  ck_assert_msg(p->smem.total ==
                    p->smem.tiles + p->smem.barriers + ((p->smem.scratch + 15) & ~(size_t)15) + p->smem.align_pad,
                "%s: smem total", what);
  ck_assert_msg(ck->shared_bytes == p->smem.total, "%s: the kernel asks for what the plan says", what);
  ck_assert_int_eq(ck->threads, p->threads);
  ck_assert_int_eq(p->threads, 32 * p->warps + (p->warp_specialised ? 128 : 0));
  /* tiles */
  for (int i = 0; i < p->ntiles; i++) {
    const FaTilePlan *t = p->tiles[i];
    ck_assert_int_eq(t->id, i);
    ck_assert_msg(t->offset % p->smem.tile_align == 0, "%s: tile %d at %zu", what, i, t->offset);
    ck_assert_msg(t->offset + tile_size(t) <= p->smem.tiles, "%s: tile %d outside the tile area", what, i);
    ck_assert(t->buf_bytes == (size_t)t->rows * (size_t)t->pitch);
    if (t->format == FA_TILE_SWIZZLED) {
      ck_assert(p->target.arch_specific);
      ck_assert(t->swizzle == 32 || t->swizzle == 64 || t->swizzle == 128);
      ck_assert_int_eq(p->smem.tile_align, 1024);
    }
    bool ring = t->fill == FA_FILL_CP_ASYNC || (t->fill == FA_FILL_TMA && t->load && t->load->pipeline);
    ck_assert_msg(ring == (t->pipeline != NULL), "%s: tile %d fill", what, i);
    if (t->fill == FA_FILL_TMA)
      ck_assert_ptr_eq(t->load->tile, t);
    if (t->pipeline) {
      ck_assert_int_eq(t->nbufs, t->pipeline->stages);
      ck_assert_ptr_eq(t->load->tile, t);
    }
    for (int j = 0; j < i; j++) {
      const FaTilePlan *o = p->tiles[j];
      bool time = !(o->live_end < t->live_start || t->live_end < o->live_start);
      bool space = t->offset < o->offset + tile_size(o) && o->offset < t->offset + tile_size(t);
      if (t->alias == o || o->alias == t || (t->alias && t->alias == o->alias))
        continue; /* one ring of two loops: the same memory on purpose */
      ck_assert_msg(!(time && space), "%s: tiles %d and %d overlap while both are live", what, j, i);
    }
  }
  /* accesses */
  for (int i = 0; i < p->naccesses; i++) {
    const FaAccessPlan *a = p->accesses[i];
    const IrOp *op = a->op;
    const IrValue *data = op->kind == IR_LOAD || op->kind == IR_LOAD_BLOCK ? op->results[0] : op->operands[1];
    int size = fa_dtype_size(data->type.dtype);
    ck_assert_msg(is_pow2(a->vec) && a->vec * size <= 16, "%s: access %d of %d elements", what, i, a->vec);
    ck_assert_msg(a->vec == 1 || a->vec * size >= 4, "%s: access %d narrower than 4 bytes", what, i);
    ck_assert_ptr_eq(fa_plan_access(p, op), a);
    if (a->method == FA_ACCESS_CP_ASYNC) {
      ck_assert_ptr_nonnull(a->tile);
      ck_assert_ptr_eq(a->tile->pipeline, a->pipeline);
      bool listed = false;
      for (int j = 0; j < a->pipeline->nloads; j++)
        listed |= a->pipeline->loads[j] == a;
      ck_assert(listed);
    }
  }
  /* products */
  for (int i = 0; i < p->nproducts; i++) {
    const FaProductPlan *pp = p->products[i];
    ck_assert_ptr_eq(fa_plan_product(p, pp->dot), pp);
    if (pp->instr == FA_INSTR_WGMMA) {
      ck_assert_msg(p->target.sm == 90 && p->target.arch_specific, "%s: wgmma off sm_90a", what);
      ck_assert(pp->b_tile->format == FA_TILE_SWIZZLED);
      ck_assert(pp->a_src != FA_OPND_TILE || pp->a_tile->format == FA_TILE_SWIZZLED);
      ck_assert(p->async_proxy_reads);
    }
    if (pp->instr != FA_INSTR_FMA)
      ck_assert_ptr_nonnull(pp->b_tile);
  }
  /* the code carries one comment per tensor-core product */
  int wg = 0, mma = 0;
  for (int i = 0; i < p->nproducts; i++) {
    /* a product issued one iteration ahead is written twice: before the loop and in it; a
       deferred one too: in the next iteration and after the loop */
    wg += (p->products[i]->instr == FA_INSTR_WGMMA) * (p->products[i]->rotated || p->products[i]->deferred ? 2 : 1);
    mma += p->products[i]->instr == FA_INSTR_MMA_SYNC;
  }
  int wg_code = 0, mma_code = 0;
  for (const char *s = ck->source; (s = strstr(s, "// (wgmma: ")); s++)
    wg_code++;
  for (const char *s = ck->source; (s = strstr(s, "// (per warp: ")); s++)
    mma_code++;
  ck_assert_msg(wg == wg_code && mma == mma_code, "%s: plan %d/%d, code %d/%d", what, wg, mma, wg_code, mma_code);
  ck_assert_int_eq(p->nroles, p->warp_specialised ? 2 : 1);
  ck_assert_int_eq(p->roles[0].nwarps, p->warps);
}

/* Warp specialisation: a producer warpgroup right after the compute warps,
 * registers moved only above 256 threads and within the register file; no
 * CTA-wide barrier (the producer never reaches one); every ring filled by
 * the producer, the consumers only waiting and releasing; the producer's
 * slice scalars, block pointers, control flow and the loads it issues. */
static void assert_ws_invariants(const FaCudaPlan *p, const FaCudaKernel *ck, const char *what) {
  if (!p->warp_specialised) {
    ck_assert_ptr_null(strstr(ck->source, "setmaxnreg"));
    return;
  }
  ck_assert_int_eq(p->roles[1].kind, FA_ROLE_PRODUCER);
  ck_assert_int_eq(p->roles[1].first_warp, p->warps);
  ck_assert_int_eq(p->roles[1].nwarps, 4);
  ck_assert_int_eq(p->min_blocks, 1);
  int pr = p->roles[1].max_registers, cr = p->roles[0].max_registers;
  if (p->threads <= 256) {
    ck_assert(pr == 0 && cr == 0);
  } else {
    ck_assert_msg(pr >= 24 && cr <= 240 && cr % 8 == 0 && 128 * pr + 32 * p->warps * cr <= 65536, "%s: %d / %d", what,
                  pr, cr);
    ck_assert_ptr_nonnull(strstr(ck->source, "setmaxnreg_inc"));
  }
  for (int i = 0; i < p->nbarriers; i++)
    ck_assert_msg(p->barriers[i].kind != FA_BARRIER_CTA, "%s: a CTA barrier with a producer warp", what);
  ck_assert_ptr_nonnull(strstr(ck->source, "#define FA_COMPUTE_THREADS"));
  for (int i = 0; i < p->npipelines; i++) {
    const FaPipelinePlan *pp = p->pipelines[i];
    ck_assert_int_eq(pp->sync, FA_SYNC_MBARRIER);
    ck_assert_int_eq(pp->nprologue, 0);
    ck_assert_int_eq(pp->nproducer, 2);
    ck_assert(fa_plan_in_producer(p, pp->loop));
  }
  /* ping-pong: two consumer warpgroups, every warpgroup product of those
     loops issued in turns, one wait and one pass per product in the code */
  int turns = 0, in_turns = 0;
  for (int i = 0; i < p->nproducts; i++) {
    turns += p->products[i]->takes_turn;
    in_turns += p->products[i]->takes_turn * (p->products[i]->rotated ? 2 : 1); /* written twice */
  }
  if (p->npingpong) {
    ck_assert_int_eq(p->warps, 8);
    ck_assert(turns > 0);
    int named = 0;
    for (int i = 0; i < p->nbarriers; i++)
      named += p->barriers[i].kind == FA_BARRIER_NAMED && (p->barriers[i].uses & FA_BARRIER_FOR_TURNS);
    ck_assert_int_eq(named, 2);
  } else {
    ck_assert_int_eq(turns, 0);
  }
  int waits = 0, passes = 0;
  for (const char *c = ck->source; (c = strstr(c, "fa::wait_turn(")); c++)
    waits++;
  for (const char *c = ck->source; (c = strstr(c, "fa::pass_turn(")); c++)
    passes++;
  ck_assert_msg(waits == in_turns && passes == in_turns, "%s: %d products in turns, %d waits, %d passes", what,
                in_turns, waits, passes);
  for (int n = 0; n < p->nops; n++) {
    const IrOp *op = p->order[n];
    if (!fa_plan_in_producer(p, op))
      continue;
    bool scalar = true;
    for (int r = 0; r < op->nresults; r++)
      scalar &= op->results[r]->type.rank == 0 || op->results[r]->type.dtype == DT_BLOCKPTR;
    ck_assert_msg(scalar || op->kind == IR_FOR || op->kind == IR_IF ||
                      (op->kind == IR_LOAD_BLOCK && fa_plan_access(p, op)->method == FA_ACCESS_TMA),
                  "%s: the producer computes a block value", what);
  }
}

START_TEST(test_attention_invariants) {
  static const char *const kernels[] = {"attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"};
  static const int dims[] = {32, 64, 128};
  static const struct {
    const char *blocks;
    int warps, stages;
  } cfgs[] = {{"", 0, 0}, {"BLOCK_Q=64 BLOCK_K=64", 4, 3}, {"BLOCK_Q=128 BLOCK_K=128", 8, 4}};
  static const char *const archs[] = {"sm_80", "sm_90a"};
  int planned = 0;
  for (int ki = 0; ki < 3; ki++)
    for (int di = 0; di < 3; di++)
      for (int causal = 0; causal < 2; causal++)
        for (int ci = 0; ci < 3; ci++)
          for (int ai = 0; ai < 2; ai++) {
            Ctx c;
            load_file(&c, "examples/attention/attention.fa");
            char defs[128], what[256];
            snprintf(defs, sizeof defs, "d_head=%d is_causal=%s %s", dims[di], causal ? "True" : "False",
                     cfgs[ci].blocks);
            snprintf(what, sizeof what, "%s %s %s", kernels[ki], defs, archs[ai]);
            FaCudaKernel ck;
            FaCudaPlan plan;
            FaLaunchConfig cfg = {.warps = cfgs[ci].warps, .stages = cfgs[ci].stages};
            FaCudaStage st = compile(&c, kernels[ki], defs, cfg, archs[ai], NULL, 0, &ck, &plan);
            ck_assert_msg(st == FA_CUDA_DONE, "%s: %s", what, diag(&c));
            assert_invariants(&plan, &ck, what);
            if (ai == 0)
              ck_assert(!plan.async_proxy_reads);
            planned++;
            fa_cuda_plan_free(&plan);
            fa_compiler_free(&c.fc);
          }
  ck_assert_int_eq(planned, 108);
}
END_TEST

static const char *const matmul_src =
    "@kernel(grid=(cdiv(M, BM), cdiv(N, BN)))\n"
    "def mm(a: *f16[M, K], b: *f16[K, N], c: *f32[M, N], M: i32, N: i32, K: i32,\n"
    "       BM: constexpr = 128, BN: constexpr = 64, BK: constexpr = 32):\n"
    "    p_a = make_block_ptr(a, shape=(M, K), strides=(K, 1), offsets=(program_id(0) * BM, 0),\n"
    "                         block_shape=(BM, BK), order=(1, 0))\n"
    "    p_b = make_block_ptr(b, shape=(K, N), strides=(N, 1), offsets=(0, program_id(1) * BN),\n"
    "                         block_shape=(BK, BN), order=(1, 0))\n"
    "    acc = zeros((BM, BN), dtype=f32)\n"
    "    for _ in range(0, cdiv(K, BK)):\n"
    "        acc = dot(load(p_a, boundary_check=(0, 1), padding=\"zero\"),\n"
    "                  load(p_b, boundary_check=(0, 1), padding=\"zero\"), acc)\n"
    "        p_a = advance(p_a, (0, BK))\n"
    "        p_b = advance(p_b, (BK, 0))\n"
    "    p_c = make_block_ptr(c, shape=(M, N), strides=(N, 1), offsets=(program_id(0) * BM, program_id(1) * BN),\n"
    "                         block_shape=(BM, BN), order=(1, 0))\n"
    "    store(p_c, acc, boundary_check=(0, 1))\n";

/* The block loads of the matrix product, in program order. */
static void block_loads(const FaCudaPlan *p, const FaAccessPlan **out, int *n) {
  *n = 0;
  for (int i = 0; i < p->naccesses && *n < 2; i++)
    if (p->accesses[i]->op->kind == IR_LOAD_BLOCK)
      out[(*n)++] = p->accesses[i];
}

START_TEST(test_facts_widen_accesses) {
  static const FaArgFact div16[] = {{"M", 16}, {"N", 16}, {"K", 16}};
  static const FaArgFact k_only[] = {{"K", 16}};
  static const FaArgFact k8[] = {{"K", 8}, {"N", 4}};
  static const FaArgFact unaligned[] = {{"M", 16}, {"N", 16}, {"K", 16}, {"a", 2}};
  struct {
    const FaArgFact *facts;
    int nfacts;
    int vec_a, vec_b;       /* elements per access of A's and B's loads */
    bool pipelined_a, pipelined_b;
  } cases[] = {
      {NULL, 0, 1, 1, false, false},          /* nothing known: scalar (the stride may be odd) */
      {div16, 3, 8, 8, true, true},           /* multiples of 16: 16-byte vectors, cp.async */
      {k_only, 1, 8, 1, true, false},         /* A's row stride is K, B's is N */
      {k8, 2, 8, 4, true, true},              /* 8 x f16 for A; B by 4 (8-byte cp.async) */
      {unaligned, 4, 1, 8, false, true},      /* A's base only 2-byte aligned */
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
    Ctx c;
    load_text(&c, "mm.fa", matmul_src);
    FaCudaKernel ck;
    FaCudaPlan plan;
    FaLaunchConfig cfg = {.warps = 4, .stages = 3, .pipeline = FA_PIPELINE_CP_ASYNC}; /* the cp.async widths */
    ck_assert_msg(compile(&c, "mm", "", cfg, "sm_90a", cases[i].facts, cases[i].nfacts, &ck, &plan) == FA_CUDA_DONE,
                  "case %d: %s", i, diag(&c));
    assert_invariants(&plan, &ck, "mm");
    const FaAccessPlan *loads[2];
    int n;
    block_loads(&plan, loads, &n);
    ck_assert_int_eq(n, 2);
    ck_assert_msg(loads[0]->vec == cases[i].vec_a && loads[1]->vec == cases[i].vec_b, "case %d: widths %d, %d", i,
                  loads[0]->vec, loads[1]->vec);
    ck_assert_int_eq(loads[0]->method == FA_ACCESS_CP_ASYNC, cases[i].pipelined_a);
    ck_assert_int_eq(loads[1]->method == FA_ACCESS_CP_ASYNC, cases[i].pipelined_b);
    if (cases[i].pipelined_a)
      ck_assert_int_eq(loads[0]->pipeline->stages, 3);
    /* the products run on wgmma whatever the loads do */
    ck_assert_int_eq(plan.nproducts, 1);
    ck_assert_int_eq(plan.products[0]->instr, FA_INSTR_WGMMA);
    /* the kernel's arguments say what alignment the code assumes */
    ck_assert_int_eq(ck.args[0].align, i == 4 ? 2 : 16);
    fa_cuda_plan_free(&plan);
    fa_compiler_free(&c.fc);
  }
}
END_TEST

/* What every plan with bulk copies keeps: the mbarriers between the tiles
 * and the scratch, 8-byte aligned, not overlapping; a ring's loads all
 * bulk copies of the ring's pipeline; each copy's tile swizzled, its map one
 * of the kernel's tensor-map arguments (after its parameters, in order);
 * a copy outside loops waited for. */
static void assert_tma_invariants(const FaCudaPlan *p, const FaCudaKernel *ck, const char *what) {
  size_t at = p->smem.tiles;
  for (int i = 0; i < p->nbarriers; i++) {
    const FaBarrierPlan *b = &p->barriers[i];
    if (b->kind != FA_BARRIER_MBARRIER)
      continue;
    ck_assert_msg(b->offset == at && b->offset % 8 == 0, "%s: mbarrier %d at %zu", what, i, b->offset);
    at += 8 * (size_t)b->slots;
  }
  ck_assert_msg(at <= p->smem.tiles + p->smem.barriers, "%s: mbarriers outside their area", what);
  for (int i = 0; i < p->npipelines; i++) {
    const FaPipelinePlan *pp = p->pipelines[i];
    if (pp->sync != FA_SYNC_MBARRIER)
      continue;
    /* a split ring: a stage's barriers for each load (FaRingLoad) */
    int per_stage = pp->split ? pp->nloads : 1;
    ck_assert_int_eq(p->barriers[pp->full].slots, pp->stages * per_stage);
    ck_assert_int_eq(p->barriers[pp->empty].slots, pp->stages * per_stage);
    ck_assert_msg(!pp->split || (p->warp_specialised && !pp->rotated && pp->nloads > 1),
                  "%s: a split ring without a producer warp, or with a product issued ahead", what);
    for (int j = 0; pp->split && j < pp->nloads; j++) {
      const FaRingLoad *r = &pp->split[j];
      ck_assert_msg(r->release != FA_RELEASE_DEFERRED || pp->deferred, "%s: released after no deferred product", what);
      ck_assert_msg(!r->next_head || r->release == FA_RELEASE_DEFERRED, "%s: waited for late, released early", what);
      ck_assert_msg(r->release != FA_RELEASE_BEFORE || (r->release_before && r->release_before->parent == pp->loop->regions[0]),
                    "%s: released before an op outside the loop's body", what);
    }
    ck_assert_int_eq(p->barriers[pp->empty].arrivals, p->warps);
    size_t bytes = 0;
    for (int j = 0; j < pp->nloads; j++) {
      ck_assert_int_eq(pp->loads[j]->method, FA_ACCESS_TMA);
      bytes += pp->loads[j]->tma->bytes;
    }
    ck_assert_uint_eq(bytes, pp->tx_bytes);
  }
  for (int i = 0; i < p->naccesses; i++) {
    const FaAccessPlan *a = p->accesses[i];
    if (a->method != FA_ACCESS_TMA)
      continue;
    const FaTmaPlan *t = a->tma;
    ck_assert_int_eq(a->tile->fill, FA_FILL_TMA);
    ck_assert_int_eq(a->tile->format, FA_TILE_SWIZZLED);
    ck_assert_uint_eq(t->panel_bytes, (size_t)a->tile->rows * (size_t)a->tile->swizzle);
    ck_assert_uint_eq(t->bytes * (size_t)1, a->tile->buf_bytes);
    ck_assert_msg(a->pipeline || t->wait_before, "%s: a copy outside loops never waited for", what);
    const FaCudaArg *arg = &ck->args[p->fn->nparams + t->map->id];
    ck_assert_int_eq(arg->kind, CUDA_ARG_TENSOR_MAP);
    ck_assert_int_eq(arg->param, t->map->param);
    ck_assert_int_eq(arg->rank, t->map->rank);
    ck_assert_int_eq(arg->swizzle_bytes, a->tile->swizzle);
    for (int d = 0; d < arg->rank; d++)
      ck_assert_int_eq(arg->box[d], t->map->box[d]);
    ck_assert_int_eq(arg->dims_end[arg->rank - 1], p->fn->params[t->map->param].extent_rank);
  }
  ck_assert_int_eq(ck->nargs, p->fn->nparams + p->ntmaps + (ck->persistent ? 3 : 0) + (ck->tile_counter ? 1 : 0));
}

/* Every kernel of attention.fa with pipeline=tma on sm_90a: every
 * pipeline a ring of bulk copies (the views of Q, K (transposed), V and dO
 * are provably their extents'), Q / K / V / dO outside loops one copy each;
 * on sm_80 nothing changes but the reasons. */
/* Late waits: every late product waited for exactly once, after it in the
 * program; the code has one wgmma.wait_group per wait point and one in the
 * helper of each product waited for at once. */
static void assert_wait_invariants(const FaCudaPlan *p, const FaCudaKernel *ck, const char *what) {
  int at_once = 0;
  for (int i = 0; i < p->nproducts; i++) {
    const FaProductPlan *pp = p->products[i];
    if (pp->instr != FA_INSTR_WGMMA)
      continue;
    if (pp->wait == FA_WAIT_AT_ONCE) {
      at_once++;
      continue;
    }
    ck_assert_int_ge(p->pipeline, FA_PIPELINE_TMA_ASYNC);
    if (pp->rotated || pp->deferred) { /* waited for by the printer: rotated before its loop and at
                                          each back edge, deferred in the next iteration and after the loop */
      ck_assert_ptr_null(pp->wait_at);
      ck_assert(!(pp->rotated && pp->deferred));
      continue;
    }
    ck_assert_msg(pp->wait_at != NULL, "%s: a late product without its wait", what);
    int found = 0;
    for (int w = 0; w < p->nwaits; w++)
      for (int j = 0; j < p->waits[w]->nproducts; j++)
        found += p->waits[w]->products[j] == pp;
    ck_assert_int_eq(found, 1);
    const IrOp *issue = pp->fused_add ? pp->fused_add : pp->dot;
    if (pp->wait_at->before)
      ck_assert_msg(pp->wait_at->before->parent == issue->parent, "%s: waited for in another region", what);
  }
  for (int w = 0; w < p->nwaits; w++)
    ck_assert(p->waits[w]->pending >= 0 && p->waits[w]->nproducts > 0);
  int in_code = 0, rotated = 0, late = 0;
  for (const char *s = ck->source; (s = strstr(s, "fa::wgmma_wait<")); s++)
    in_code++;
  for (int i = 0; i < p->npipelines; i++) {
    const FaPipelinePlan *pp = p->pipelines[i];
    rotated += pp->rotated != NULL || pp->deferred != NULL;
    if (pp->deferred) {
      /* the deferred product: the loop's last, accumulating into a carried value, its B tile
         in the loop's ring; issued after the first product, waited for before a later op, or
         (with its rescale moved there) at the next iteration's head, before the first product */
      ck_assert(pp->deferred->deferred && pp->deferred->fused_add && !pp->rotated);
      ck_assert(pp->deferred->b_tile->pipeline == pp);
      ck_assert(pp->defer_after && pp->defer_after != pp->deferred && !pp->defer_after->deferred);
      const IrOp *mark = pp->defer_rescale ? pp->defer_rescale : pp->defer_wait_before;
      ck_assert(mark && mark->parent == pp->loop->regions[0]);
      ck_assert(pp->defer_rescale ? pp->defer_wait_before == NULL && pp->stages >= (pp->split ? 2 : 3)
                                  : pp->defer_wait_before != NULL);
      ck_assert(pp->defer_head && pp->defer_head->parent == pp->loop->regions[0]);
      bool after = false, mark_after = false, head_first = false;
      for (const IrOp *op = pp->loop->regions[0]->first; op; op = op->next) {
        head_first |= op == pp->defer_head && !after;
        after |= op == pp->defer_after->dot;
        mark_after |= after && op == mark;
      }
      ck_assert_msg(mark_after, "%s: the deferred product waited for before the first product", what);
      ck_assert_msg(head_first, "%s: the head after the first product", what);
      ck_assert_msg(!pp->no_deferral, "%s: deferred and refused", what);
      late += pp->defer_rescale != NULL;
    }
  }
  /* a deferred product's waits: in the loop and after it; waited for at the
     head, one more after the loop (the one in flight, then the last) */
  ck_assert_msg(in_code == p->nwaits + at_once + 2 * rotated + late,
                "%s: %d waits in the code, %d + %d + 2 * %d + %d in the plan", what, in_code, p->nwaits, at_once,
                rotated, late);
  int refused = 0;
  for (int i = 0; i < p->npipelines; i++) {
    const FaPipelinePlan *pp = p->pipelines[i];
    if (pp->rotated)
      ck_assert_msg(pp->acc_registers <= FA_ROTATION_REGISTERS, "%s: rotated at %d registers", what,
                    pp->acc_registers);
    if (pp->no_rotation) {
      ck_assert_msg(!pp->rotated, "%s: rotated and refused", what);
      if (strstr(pp->no_rotation, "registers"))
        ck_assert_msg(pp->acc_registers > FA_ROTATION_REGISTERS, "%s: refused at %d registers", what,
                      pp->acc_registers);
      refused++;
    }
  }
  if (p->pipeline >= FA_PIPELINE_TMA_WS_PP && p->warp_specialised)
    ck_assert_msg(rotated > 0 || refused > 0 || strstr(what, "mm"), "%s: no loop issues its first product ahead",
                  what);
}

START_TEST(test_attention_tma_plans) {
  static const char *const kernels[] = {"attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"};
  static const int dims[] = {32, 64, 128, 256};
  int planned = 0;
  for (int pi = FA_PIPELINE_TMA; pi <= FA_PIPELINE_TMA_WS_PP; pi++)
  for (int ki = 0; ki < 3; ki++)
    for (int di = 0; di < 4; di++)
      for (int causal = 0; causal < 2; causal++)
        for (int ai = 0; ai < 2; ai++) {
          Ctx c;
          load_file(&c, "examples/attention/attention.fa");
          char defs[128], what[256];
          snprintf(defs, sizeof defs, "d_head=%d is_causal=%s", dims[di], causal ? "True" : "False");
          const char *arch = ai ? "sm_90a" : "sm_80";
          snprintf(what, sizeof what, "%s %s %s %s", kernels[ki], defs, arch, fa_pipeline_name(pi));
          FaCudaKernel ck;
          FaCudaPlan plan;
          FaLaunchConfig cfg = {.pipeline = pi};
          ck_assert_msg(compile(&c, kernels[ki], defs, cfg, arch, NULL, 0, &ck, &plan) == FA_CUDA_DONE, "%s: %s",
                        what, diag(&c));
          assert_invariants(&plan, &ck, what);
          assert_tma_invariants(&plan, &ck, what);
          assert_wait_invariants(&plan, &ck, what);
          assert_ws_invariants(&plan, &ck, what);
          ck_assert_int_eq(plan.pipeline, pi);
          ck_assert_int_eq(plan.warp_specialised, pi >= FA_PIPELINE_TMA_WS && ai == 1);
          ck_assert(plan.warps == 8 || plan.npingpong == 0); /* 4 warps: one consumer warpgroup */
          ck_assert(plan.npipelines > 0);
          int copies = 0;
          for (int i = 0; i < plan.naccesses; i++)
            copies += plan.accesses[i]->method == FA_ACCESS_TMA;
          for (int i = 0; i < plan.npipelines; i++)
            ck_assert_msg(plan.pipelines[i]->sync == (ai ? FA_SYNC_MBARRIER : FA_SYNC_CP_ASYNC_GROUPS), "%s", what);
          if (ai) {
            ck_assert_msg(copies >= 3 && plan.ntmaps >= 3 && strstr(ck.source, "fa::tma_load<3>"), "%s: %d copies",
                          what, copies);
          } else {
            ck_assert_int_eq(copies, 0);
            ck_assert_int_eq(plan.ntmaps, 0);
            ck_assert_int_eq(plan.pipelines[0]->tma_refusal, FA_TMA_TARGET);
          }
          planned++;
          fa_cuda_plan_free(&plan);
          fa_compiler_free(&c.fc);
        }
  ck_assert_int_eq(planned, 192);
}
END_TEST

/* Two consumer warpgroups and the producer (384 threads): registers move
 * between them. */
START_TEST(test_ws_eight_warps) {
  static const struct {
    const char *file, *kernel, *defs;
  } cases[] = {
      {"examples/attention/attention.fa", "attn_fwd", "d_head=64 is_causal=False BLOCK_Q=128 BLOCK_K=64"},
      {"examples/attention/attention.fa", "attn_fwd", "d_head=128 is_causal=True BLOCK_Q=128 BLOCK_K=64"},
      {"examples/attention/attention.fa", "attn_bwd_dq", "d_head=64 is_causal=True BLOCK_Q=128 BLOCK_K=128"},
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
    Ctx c;
    load_file(&c, cases[i].file);
    FaCudaKernel ck;
    FaCudaPlan plan;
    FaLaunchConfig cfg = {.warps = 8, .stages = 2, .pipeline = FA_PIPELINE_TMA_WS_PP};
    ck_assert_msg(compile(&c, cases[i].kernel, cases[i].defs, cfg, "sm_90a", NULL, 0, &ck, &plan) == FA_CUDA_DONE,
                  "%s: %s", cases[i].kernel, diag(&c));
    ck_assert_int_eq(plan.npingpong, plan.npipelines);
    assert_invariants(&plan, &ck, cases[i].kernel);
    assert_tma_invariants(&plan, &ck, cases[i].kernel);
    assert_ws_invariants(&plan, &ck, cases[i].kernel);
    ck_assert(plan.warp_specialised);
    ck_assert_int_eq(plan.threads, 384);
    ck_assert_int_eq(plan.roles[0].max_registers, 240);
    ck_assert_int_eq(plan.roles[1].max_registers, 24);
    fa_cuda_plan_free(&plan);
    fa_compiler_free(&c.fc);
  }
}
END_TEST

/* The Triton-style matrix product with runtime sizes and pipeline=tma: the
 * facts about M, N, K decide which strides are multiples of 16 bytes, and
 * a pipeline is a ring of bulk copies only when all of its loads can be. */
START_TEST(test_tma_matmul_facts) {
  static const FaArgFact div16[] = {{"M", 16}, {"N", 16}, {"K", 16}};
  static const FaArgFact k8[] = {{"K", 8}, {"N", 4}};
  static const FaArgFact unaligned[] = {{"M", 16}, {"N", 16}, {"K", 16}, {"a", 2}};
  struct {
    const FaArgFact *facts;
    int nfacts;
    FaAccessMethod a, b;
    FaTmaRefusal why_a, why_b;
  } cases[] = {
      {div16, 3, FA_ACCESS_TMA, FA_ACCESS_TMA, FA_TMA_OK, FA_TMA_OK},
      /* B's row stride N is a multiple of 4 elements only: 8 bytes */
      {k8, 2, FA_ACCESS_CP_ASYNC, FA_ACCESS_CP_ASYNC, FA_TMA_PIPELINE, FA_TMA_STRIDE_ALIGN},
      /* A is not pipelined (2-byte aligned: no vectors); B's ring alone */
      {unaligned, 4, FA_ACCESS_VECTOR, FA_ACCESS_TMA, FA_TMA_IN_LOOP, FA_TMA_OK},
      /* nothing known: no vectors, no pipeline */
      {NULL, 0, FA_ACCESS_VECTOR, FA_ACCESS_VECTOR, FA_TMA_IN_LOOP, FA_TMA_IN_LOOP},
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
    Ctx c;
    load_text(&c, "mm.fa", matmul_src);
    FaCudaKernel ck;
    FaCudaPlan plan;
    FaLaunchConfig cfg = {.warps = 4, .stages = 3, .pipeline = FA_PIPELINE_TMA};
    ck_assert_msg(compile(&c, "mm", "", cfg, "sm_90a", cases[i].facts, cases[i].nfacts, &ck, &plan) == FA_CUDA_DONE,
                  "case %d: %s", i, diag(&c));
    assert_invariants(&plan, &ck, "mm");
    assert_tma_invariants(&plan, &ck, "mm");
    const FaAccessPlan *loads[2];
    int n;
    block_loads(&plan, loads, &n);
    ck_assert_int_eq(n, 2);
    ck_assert_msg(loads[0]->method == cases[i].a && loads[1]->method == cases[i].b, "case %d: methods %d, %d", i,
                  loads[0]->method, loads[1]->method);
    ck_assert_msg(loads[0]->tma_refusal == cases[i].why_a && loads[1]->tma_refusal == cases[i].why_b,
                  "case %d: reasons %d, %d", i, loads[0]->tma_refusal, loads[1]->tma_refusal);
    if (cases[i].a == FA_ACCESS_TMA) {
      /* A [M, K]: rows of BK = 32 f16 (64 bytes, the 64-byte swizzle), BM rows */
      const FaTensorMapPlan *m = loads[0]->tma->map;
      ck_assert_int_eq(m->rank, 2);
      ck_assert_int_eq(m->box[0], 128);
      ck_assert_int_eq(m->box[1], 32);
      ck_assert_int_eq(m->swizzle, 64);
      ck_assert_int_eq(loads[0]->tma->outer, -1);
      ck_assert_int_eq(loads[0]->tma->panels, 1);
    }
    if (cases[i].b == FA_ACCESS_TMA) {
      /* B [K, N]: rows of BN = 64 f16 (128 bytes), BK rows */
      const FaTensorMapPlan *m = loads[1]->tma->map;
      ck_assert_int_eq(m->box[0], 32);
      ck_assert_int_eq(m->box[1], 64);
      ck_assert_int_eq(m->swizzle, 128);
    }
    fa_cuda_plan_free(&plan);
    fa_compiler_free(&c.fc);
  }
}
END_TEST

/* A view that is not the extent's, written several ways: the outer
 * coordinate of a [B, H, N, D] tensor found through either way of writing
 * the base; a view narrower than the extent, a transposed extent, and a
 * base moved along a dimension of the view are refused. */
static const char *const views_src =
    "@kernel(grid=(1,))\n"
    "def v(x: *f16[B, H, N, 64], o: *f32[N, N], B: i32, H: i32, N: i32, z: i32, h: i32, WHICH: constexpr):\n"
    "    if WHICH == 0:\n"
    "        base = x + z * H * N * 64 + h * N * 64\n"
    "        p = make_block_ptr(base, shape=(N, 64), strides=(64, 1), offsets=(0, 0), block_shape=(64, 64), order=(1, 0))\n"
    "    elif WHICH == 1:\n"
    "        base = x + (z * H + h) * (N * 64)\n"
    "        p = make_block_ptr(base, shape=(N, 64), strides=(64, 1), offsets=(0, 0), block_shape=(64, 64), order=(1, 0))\n"
    "    elif WHICH == 2:\n"
    "        p = make_block_ptr(x, shape=(N - 1, 64), strides=(64, 1), offsets=(0, 0), block_shape=(64, 64), order=(1, 0))\n"
    "    elif WHICH == 3:\n"
    "        p = make_block_ptr(x, shape=(64, N), strides=(N, 1), offsets=(0, 0), block_shape=(64, 64), order=(1, 0))\n"
    "    else:\n"
    "        base = x + z * 64\n"
    "        p = make_block_ptr(base, shape=(N, 64), strides=(64, 1), offsets=(0, 0), block_shape=(64, 64), order=(1, 0))\n"
    "    a = load(p, boundary_check=(0,), padding=\"zero\")\n"
    "    r = dot(a, trans(a), out_dtype=f32)\n"
    "    q = make_block_ptr(o, shape=(N, N), strides=(N, 1), offsets=(0, 0), block_shape=(64, 64), order=(1, 0))\n"
    "    store(q, r, boundary_check=(0, 1))\n";

START_TEST(test_tma_views) {
  static const FaTmaRefusal want[] = {FA_TMA_OK, FA_TMA_OK, FA_TMA_SHAPE, FA_TMA_SHAPE, FA_TMA_OFFSET};
  for (int w = 0; w < 5; w++) {
    Ctx c;
    load_text(&c, "views.fa", views_src);
    FaCudaKernel ck;
    FaCudaPlan plan;
    FaLaunchConfig cfg = {.warps = 4, .stages = 2, .pipeline = FA_PIPELINE_TMA};
    char defs[32];
    snprintf(defs, sizeof defs, "WHICH=%d", w);
    ck_assert_msg(compile(&c, "v", defs, cfg, "sm_90a", NULL, 0, &ck, &plan) == FA_CUDA_DONE, "%d: %s", w, diag(&c));
    assert_tma_invariants(&plan, &ck, "views");
    const FaAccessPlan *load = NULL;
    for (int i = 0; i < plan.naccesses; i++)
      if (plan.accesses[i]->op->kind == IR_LOAD_BLOCK)
        load = plan.accesses[i];
    ck_assert_ptr_nonnull(load);
    FaTmaRefusal got = load->method == FA_ACCESS_TMA ? FA_TMA_OK : load->tma_refusal;
    ck_assert_msg(got == want[w], "WHICH=%d: %s", w, fa_tma_refusal_text(got));
    if (got == FA_TMA_OK) {
      /* B and H merged into one outer dimension, z * H + h its coordinate */
      const FaTmaPlan *t = load->tma;
      ck_assert_int_eq(t->map->rank, 3);
      ck_assert_int_eq(t->map->dims_end[0], 2);
      ck_assert_int_eq(t->outer, 0);
      ck_assert_int_eq(t->outer_coord.nterms, 2);
      ck_assert_ptr_nonnull(strstr(ck.source, "(long long)H * (long long)z"));
    }
    fa_cuda_plan_free(&plan);
    fa_compiler_free(&c.fc);
  }
}
END_TEST

START_TEST(test_entry_point_stages) {
  Ctx c;
  FaCudaKernel ck;
  FaCudaPlan plan;
  FaLaunchConfig cfg = {0};
  /* a static_assert: specialisation fails, nothing is emitted */
  load_text(&c, "t.fa",
            "@kernel(grid=(1,))\n"
            "def k(x: *f32[64], y: *f32[64], B: constexpr):\n"
            "    static_assert(B > 8, \"B too small\")\n"
            "    o = arange(0, B)\n"
            "    store(y + o, load(x + o))\n");
  ck_assert_int_eq(compile(&c, "k", "B=4", cfg, "sm_80", NULL, 0, &ck, &plan), FA_CUDA_SPECIALISE_FAILED);
  ck_assert_ptr_nonnull(strstr(diag(&c), "B too small"));
  ck_assert_ptr_null(ck.source);
  ck_assert_int_eq(compile(&c, "k", "B=64", cfg, "sm_80", NULL, 0, &ck, &plan), FA_CUDA_DONE);
  ck_assert_ptr_nonnull(ck.source);
  ck_assert_int_eq(plan.warps, 4); /* the default configuration */
  ck_assert_int_eq(plan.stages, 2);
  fa_cuda_plan_free(&plan);
  /* a target below sm_80: specialised, then refused by the backend */
  FaKernelInfo *k = fa_program_kernel(c.prog, "k");
  FaBinding b = {"B", {CK_INT, 64, 0, DT_VOID, NULL}};
  FaCudaSpec spec = {c.prog, k, &b, 1, cfg, {75, false}, NULL, 0};
  IrKernel *ir = NULL;
  ck_assert_int_eq(fa_cuda_compile(&c.fc, &spec, &ir, &ck, NULL), FA_CUDA_EMIT_FAILED);
  ck_assert_ptr_nonnull(ir);
  ck_assert_ptr_nonnull(strstr(diag(&c), "needs sm_80 or newer"));
  fa_compiler_free(&c.fc);
  /* an atomic_add whose previous values are used, on a block smaller than the
     thread block: the plan refuses it at the op's location */
  load_text(&c, "t.fa",
            "@kernel(grid=(1,))\n"
            "def k(x: *f32[16], y: *f32[16]):\n"
            "    o = arange(0, 16)\n"
            "    old = atomic_add(x + o, load(y + o))\n"
            "    store(y + o, old)\n");
  ck_assert_int_eq(compile(&c, "k", "", cfg, "sm_80", NULL, 0, &ck, &plan), FA_CUDA_EMIT_FAILED);
  ck_assert_msg(strstr(diag(&c), "t.fa:4:") && strstr(diag(&c), "copies in several threads"), "%s", diag(&c));
  fa_cuda_plan_free(&plan);
  fa_compiler_free(&c.fc);
}
END_TEST

static int occurrences(const char *s, const char *what) {
  int n = 0;
  for (; (s = strstr(s, what)); s++)
    n++;
  return n;
}

/* Persistent kernels: the three grid arguments after the parameters and
 * tensor maps, one loop over programs per role (the only reader of
 * blockIdx), program ids from it, a barrier ending each program, the tile
 * mbarrier exactly where a producer warp loads tiles outside loops, at most
 * one rotated loop; causal attention's programs longest first (its forward
 * and dQ passes descending, dK/dV ascending), the others in the hardware's
 * order. */
static void assert_schedule_invariants(const FaCudaPlan *p, const FaCudaKernel *ck, const char *kernel, bool causal,
                                       const char *what) {
  const FaSchedulePlan *s = &p->schedule;
  ck_assert_int_eq(s->kind, FA_SCHEDULE_PERSISTENT);
  ck_assert(ck->persistent);
  /* programs that differ in work are taken from a counter, the one more argument */
  ck_assert_int_eq(s->dynamic, s->order == FA_ORDER_LONGEST_FIRST);
  ck_assert_int_eq(ck->tile_counter, s->dynamic);
  ck_assert_int_eq(ck->nargs, p->fn->nparams + p->ntmaps + 3 + (s->dynamic ? 1 : 0));
  for (int d = 0; d < 3; d++) {
    ck_assert_int_eq(ck->args[p->fn->nparams + p->ntmaps + d].kind, CUDA_ARG_GRID);
    ck_assert_int_eq(ck->args[p->fn->nparams + p->ntmaps + d].param, d);
  }
  if (s->dynamic) {
    ck_assert_int_eq(ck->args[ck->nargs - 1].kind, CUDA_ARG_TILE_COUNTER);
    /* with a producer warp it takes the programs and hands them over; else thread 0, behind a barrier */
    ck_assert_int_eq(occurrences(ck->source, "fa::next_tile_publish("), p->warp_specialised ? 1 : 0);
    ck_assert_int_eq(occurrences(ck->source, "fa::next_tile_take("), p->warp_specialised ? 1 : 0);
    ck_assert_int_eq(occurrences(ck->source, "fa::next_tile_shared("), p->warp_specialised ? 0 : 1);
    ck_assert_int_eq(s->next_full >= 0 && s->next_empty >= 0, p->warp_specialised);
    ck_assert(s->next_slots >= p->smem.tiles && s->next_slots + 8 <= p->smem.tiles + p->smem.barriers);
  }
  int roles = p->warp_specialised ? 2 : 1;
  ck_assert_int_eq(occurrences(ck->source, "for (unsigned fa_tile = blockIdx.x;") +
                       occurrences(ck->source, "for (unsigned fa_round = 0, fa_tile = blockIdx.x;"),
                   roles);
  /* (twice in a loop in rounds of alternating direction: its start and snake_tile) */
  int per_loop = s->order == FA_ORDER_LONGEST_FIRST && !s->dynamic ? 2 : 1;
  ck_assert_msg(occurrences(ck->source, "blockIdx") == roles * per_loop, "%s: blockIdx outside the loops over programs",
                what);
  ck_assert_msg(strstr(ck->source, "fa_pid.v[0]") != NULL, "%s", what);
  ck_assert_int_eq(occurrences(ck->source, "this program's shared memory is free for the next"), s->end_sync ? 1 : 0);
  /* no barrier at the end of a program only where the compute warps write no shared memory */
  if (!s->end_sync) {
    ck_assert(p->warp_specialised && p->smem.scratch == 0);
    for (int i = 0; i < p->ntiles; i++)
      ck_assert(p->tiles[i]->fill == FA_FILL_TMA || p->tiles[i]->fill == FA_FILL_STAGED);
  }
  ck_assert_int_eq(strstr(ck->source, "fa::snake_tile") != NULL, s->order == FA_ORDER_LONGEST_FIRST && !s->dynamic);
  bool once = false;
  for (int i = 0; i < p->naccesses; i++)
    once |= p->accesses[i]->method == FA_ACCESS_TMA && !p->accesses[i]->pipeline;
  ck_assert_int_eq(s->tile_barrier >= 0, p->warp_specialised && once);
  if (s->tile_barrier >= 0) {
    ck_assert_int_eq(p->barriers[s->tile_barrier].mbar, FA_MBAR_TILE);
    ck_assert_int_eq(p->barriers[s->tile_barrier].arrivals, 32 * p->warps);
    ck_assert_int_eq(occurrences(ck->source, "done with this program's copies outside loops"), 1);
    /* released before the end of the program where the plan says so */
    const char *release = strstr(ck->source, "done with this program's copies outside loops");
    ck_assert(release != NULL);
    if (s->end_sync) {
      const char *end = strstr(ck->source, "this program's shared memory is free for the next");
      ck_assert_msg(end && release < end, "%s: the tiles released after the program's end", what);
    }
    if (s->tile_release_after)
      ck_assert_msg(strstr(release, "store_block") || strstr(release, "fa::tma_store"),
                    "%s: the tiles released after the stores", what);
    int onces = 0;
    for (int i = 0; i < p->naccesses; i++)
      onces += p->accesses[i]->method == FA_ACCESS_TMA && !p->accesses[i]->pipeline;
    /* the producer waits before each copy outside loops */
    ck_assert_int_eq(occurrences(ck->source, "the previous program is done with its copy"), onces);
  }
  if (once)
    ck_assert_msg(strstr(ck->source, "fa_tiles_done & 1u"), "%s: a load outside loops waited for at phase 0", what);
  int rotated = 0;
  for (int i = 0; i < p->npipelines; i++)
    rotated += p->pipelines[i]->rotated != NULL;
  ck_assert_int_le(rotated, 1);
  if (causal) {
    ck_assert_msg(s->order == FA_ORDER_LONGEST_FIRST && s->axis == 0, "%s: not longest first", what);
    ck_assert_int_eq(s->descending, strcmp(kernel, "attn_bwd_dkdv") != 0);
    ck_assert(s->descending ? s->work[1] > s->work[0] : s->work[1] < s->work[0]);
    ck_assert_int_eq(s->group, FA_SCHEDULE_GROUP);
  } else {
    ck_assert_msg(s->order == FA_ORDER_LINEAR && s->linear_why, "%s", what);
  }
}

START_TEST(test_persistent_plans) {
  static const char *const kernels[] = {"attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"};
  static const int dims[] = {64, 128};
  int planned = 0;
  for (int pi = FA_PIPELINE_CP_ASYNC; pi <= FA_PIPELINE_TMA_WS_PP; pi++)
    for (int ki = 0; ki < 3; ki++)
      for (int di = 0; di < 2; di++)
        for (int causal = 0; causal < 2; causal++)
          for (int wi = 0; wi < 2; wi++) {
            /* attn_fwd's space leaves persistent thread blocks out with bulk copies alone
               (fwd_schedule_ok): no point passes with both given */
            if (ki == 0 && pi == FA_PIPELINE_TMA)
              continue;
            Ctx c;
            load_file(&c, "examples/attention/attention.fa");
            char defs[160], what[256];
            /* 8 warps on the blocks that fill two warpgroups */
            snprintf(defs, sizeof defs, "d_head=%d is_causal=%s%s", dims[di], causal ? "True" : "False",
                     !wi ? "" : ki == 0 ? " BLOCK_Q=128 BLOCK_K=64" : " BLOCK_Q=128 BLOCK_K=128");
            snprintf(what, sizeof what, "%s %s %s warps=%d persistent", kernels[ki], defs, fa_pipeline_name(pi),
                     wi ? 8 : 4);
            FaCudaKernel ck;
            FaCudaPlan plan;
            /* with the 8-warp tiles every axis is given: the spaces try some pipelines at some
               tiles only (attn_bwd_dkdv: tma_async not at 128x128), so no stages would pass */
            FaLaunchConfig cfg = {.warps = wi ? 8 : 0, .stages = wi ? 2 : 0, .pipeline = pi,
                                  .schedule = FA_SCHEDULE_PERSISTENT};
            ck_assert_msg(compile(&c, kernels[ki], defs, cfg, "sm_90a", NULL, 0, &ck, &plan) == FA_CUDA_DONE,
                          "%s: %s", what, diag(&c));
            assert_invariants(&plan, &ck, what);
            assert_tma_invariants(&plan, &ck, what);
            assert_wait_invariants(&plan, &ck, what);
            assert_ws_invariants(&plan, &ck, what);
            assert_schedule_invariants(&plan, &ck, kernels[ki], causal, what);
            planned++;
            fa_cuda_plan_free(&plan);
            fa_compiler_free(&c.fc);
          }
  ck_assert_int_eq(planned, 120 - 8); /* attn_fwd with tma alone: 2 dims x 2 causal x 2 warps */
}
END_TEST

static Suite *plan_suite(void) {
  Suite *s = suite_create("cuda_plan");
  TCase *t = tcase_create("plan");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, test_attention_invariants);
  tcase_add_test(t, test_facts_widen_accesses);
  tcase_add_test(t, test_attention_tma_plans);
  tcase_add_test(t, test_tma_matmul_facts);
  tcase_add_test(t, test_tma_views);
  tcase_add_test(t, test_ws_eight_warps);
  tcase_add_test(t, test_persistent_plans);
  tcase_add_test(t, test_entry_point_stages);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(plan_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
