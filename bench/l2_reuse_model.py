#!/usr/bin/env python3
# l2_reuse_model.py - why attn_bwd_heads exists: an LRU model of the L2 for the blocks the fused
# backward pass streams (Q and dO: 16 KB, dQ's f32 accumulator: 32 KB per 64-row block at d_head 128),
# with 132 multiprocessors running one program each, programs started in the grid's order as they
# free up, every iteration one time unit.  With the causal mask and one program per (key block, kv
# head) walking the group's query heads one after another, the programs of neighbouring key blocks
# drift apart (program j's share of a head is 2j query blocks shorter than program 0's) and read
# the same block 2(g + 1) iterations apart at group g.  A model, not a measurement: the real L2 is two
# partitions, its replacement is not LRU, and iterations are not all equally long.
#   python3 bench/l2_reuse_model.py            (about 10 s)
#   python3 bench/l2_reuse_model.py --orders   (other walks of one program per kv head; about 2 min)
# Printed 2026-12-05 (50 MB): H16 causal 0.984; 64 query heads over 8 causal 0.512, full 0.985;
# causal with a program per query head (attn_bwd_heads) 0.984.  --orders, 64 over 8 causal: the
# query blocks walked from the last one down 0.519, the heads innermost (each query block for
# every head of the group before the next) 0.524, both 0.603 (neighbours in step, but programs
# that start at different times are not); the kv heads fastest in the grid instead of the key
# blocks 0.402 to 0.417.  No walk of the group inside one program comes near a program per head.
from collections import OrderedDict


def programs(H, KVH, causal, heads, descending=False, heads_inner=False, kv_heads_fastest=False,
             nqb=256, nkb=128):
    """Each program's (query head, query block) reads, programs in the grid's order."""
    G = H // KVH
    if heads:
        return [[(zg, i) for i in range(2 * j if causal else 0, nqb)] for zg in range(H) for j in range(nkb)]
    tiles = ([(z, j) for j in range(nkb) for z in range(KVH)] if kv_heads_fastest
             else [(z, j) for z in range(KVH) for j in range(nkb)])
    progs = []
    for z, j in tiles:
        blocks = list(range(2 * j if causal else 0, nqb))
        if descending:
            blocks.reverse()
        if heads_inner:
            progs.append([(z * G + g, i) for i in blocks for g in range(G)])
        else:
            progs.append([(z * G + g, i) for g in range(G) for i in blocks])
    return progs


def hit_rate(H, KVH, causal, heads, l2_mb=50, sms=132, **walk):
    progs = programs(H, KVH, causal, heads, **walk)
    cap = l2_mb * 1024 // 16          # in 16 KB units
    lru, used, hit, total = OrderedDict(), 0, 0, 0
    nxt, running, pos = 0, [None] * sms, [0] * sms

    def touch(key, units):
        nonlocal used, hit, total
        total += units
        if key in lru:
            lru.move_to_end(key)
            hit += units
            return
        lru[key] = units
        used += units
        while used > cap:
            used -= lru.popitem(last=False)[1]

    busy = True
    while busy:
        busy = False
        for s in range(sms):
            if running[s] is None or pos[s] >= len(running[s]):
                if nxt == len(progs):
                    running[s] = None
                    continue
                running[s], pos[s], nxt = progs[nxt], 0, nxt + 1
            h, i = running[s][pos[s]]
            pos[s] += 1
            busy = True
            touch(('q', h, i), 1)
            touch(('do', h, i), 1)
            touch(('dq', h, i), 2)
    return hit / total


if __name__ == '__main__':
    import sys
    if '--orders' in sys.argv[1:]:
        for name, walk in [("query blocks from the last down", dict(descending=True)),
                           ("heads innermost", dict(heads_inner=True)),
                           ("both", dict(descending=True, heads_inner=True)),
                           ("kv heads fastest in the grid", dict(kv_heads_fastest=True))]:
            print(f"64 over 8, causal, {name:35s} {hit_rate(64, 8, True, False, **walk):.3f}", flush=True)
        sys.exit(0)
    for name, H, KVH, causal, heads in [("16 heads, causal", 16, 16, True, False),
                                        ("64 query heads over 8, causal", 64, 8, True, False),
                                        ("64 query heads over 8, full", 64, 8, False, False),
                                        ("64 over 8, causal, a program per query head", 64, 8, True, True)]:
        print(f"{name:45s} L2 hit rate of the streamed blocks: {hit_rate(H, KVH, causal, heads):.3f}", flush=True)
