#!/usr/bin/env python3
# l2_reuse_model.py - why attn_bwd_heads exists: an LRU model of the L2 for the blocks the fused
# backward pass streams (Q and dO: 16 KB, dQ's f32 accumulator: 32 KB per 64-row block at d_head 128),
# with 132 multiprocessors running one program each, programs started in the grid's order as they
# free up, every iteration one time unit.  With the causal mask and one program per (key block, kv
# head) walking the group's query heads one after another, the programs of neighbouring key blocks
# drift apart (program j's share of a head is 2j query blocks shorter than program 0's) and read
# the same block 2(g + 1) iterations apart at group g.  A model, not a measurement: the real L2 is two
# partitions, its replacement is not LRU, and iterations are not all equally long.
#   python3 bench/l2_reuse_model.py     (about 10 s)
# Printed 2026-12-05 (50 MB): H16 causal 0.984; 64 query heads over 8 causal 0.512, full 0.985;
# causal with a program per query head (attn_bwd_heads) 0.984.
from collections import OrderedDict


def hit_rate(H, KVH, causal, heads, l2_mb=50, sms=132, nqb=256, nkb=128):
    G = H // KVH
    progs = []
    if heads:
        for zg in range(H):
            for j in range(nkb):
                progs.append([(zg, i) for i in range(2 * j if causal else 0, nqb)])
    else:
        for z in range(KVH):
            for j in range(nkb):
                progs.append([(z * G + g, i) for g in range(G) for i in range(2 * j if causal else 0, nqb)])
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
    for name, H, KVH, causal, heads in [("16 heads, causal", 16, 16, True, False),
                                        ("64 query heads over 8, causal", 64, 8, True, False),
                                        ("64 query heads over 8, full", 64, 8, False, False),
                                        ("64 over 8, causal, a program per query head", 64, 8, True, True)]:
        print(f"{name:45s} L2 hit rate of the streamed blocks: {hit_rate(H, KVH, causal, heads):.3f}", flush=True)
