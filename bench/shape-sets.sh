# shape-sets.sh - sourced by bench/run-attention.sh and bench/run-forward-configs.sh:
# the benchmark's shape sets, each shape passed to a function of the caller's.
#   std      16k tokens, hidden 2048: D in {64, 128}, N in {1024, 4096, 16384},
#            B = 16384 / N, H = 2048 / D, causal and not (FlashAttention-3's convention)
#   trading  one trading day at one-second resolution: B in {1, 4}, H = 12, N = 23400,
#            D = 64, causal
#   gqa      cuDNN's own benchmark shape: B = 1, 64 query heads over 8 K/V heads,
#            N = 16384, D = 128, causal, bf16
#   d256     B = 1, H = 16, N = 16384, D = 256, full and causal
# shape_sets "SETS" FUNCTION calls FUNCTION B H N D causal|full [KVH [DTYPE]] per shape;
# returns 2 (after saying so) on an unknown set.
shape_sets() {
  for set in $1; do
    case $set in
      std)
        for D in 64 128; do
          for N in 1024 4096 16384; do
            for causal in full causal; do
              "$2" $((16384 / N)) $((2048 / D)) "$N" "$D" "$causal"
            done
          done
        done ;;
      trading) for B in 1 4; do "$2" "$B" 12 23400 64 causal; done ;;
      gqa) "$2" 1 64 16384 128 causal 8 bf16 ;;
      d256) "$2" 1 16 16384 256 full; "$2" 1 16 16384 256 causal ;;
      *) echo "unknown shape set $set (std, trading, gqa, d256)" >&2; return 2 ;;
    esac
  done
}
