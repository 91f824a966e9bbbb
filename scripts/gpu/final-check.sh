#!/usr/bin/env bash
# The closing check of a GPU session in one device call, over a carried `.gpu` bundle
# (../shared/tools/gpu-bundle --filter 'gpu_training|gpu_ops_more|gpu_fuzz_regressions|gpu_schedulers|gpu_graph|gpu_movement|gpu_segmented|fuzz|host_overhead|bench'):
# the GPU tests of reductions, segmentation, graphs and movement, host_overhead, the
# benchmark and PyTorch's baseline, and 90 s of the fuzzer. Writes under $OUT; prints the
# lines to quote.
#
#   bash scripts/gpu/final-check.sh [STAGE...]    stages: tests overhead bench torch fuzz
#                                                 (default: all, in that order)
# Environment: CASES (comma-separated case filter for bench and torch; default all),
# SWEEP=1 (include the hidden-size sweep), SEED (fuzz seed, default 5700000),
# FUZZ_SECONDS (default 90).
set -u
stages=${*:-tests overhead bench torch fuzz}
want() { [[ " $stages " == *" $1 "* ]]; }
bash .gpu/unpack.sh > $OUT/unpack.txt 2>&1
sweep=--no-sweep
[ "${SWEEP:-0}" = 1 ] && sweep=
cases=()
[ -n "${CASES:-}" ] && cases=(--cases "$CASES")
if want tests; then
  : > $OUT/tests.txt
  for b in .gpu/bin/gpu_training-* .gpu/bin/gpu_ops_more-* .gpu/bin/gpu_fuzz_regressions-* .gpu/bin/gpu_schedulers-* .gpu/bin/gpu_graph-* .gpu/bin/gpu_movement-* .gpu/bin/gpu_segmented-*; do
    [ -e "$b" ] || continue
    echo "=== $b" >> $OUT/tests.txt
    NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 timeout 120 "$b" --test-threads=1 >> $OUT/tests.txt 2>&1
  done
  grep -E "^test result" $OUT/tests.txt | awk '{p+=$4; f+=$6} END {print "tests: passed", p, "failed", f}'
  grep -E "FAILED|panicked|outputs compared" $OUT/tests.txt | head -8
fi
if want overhead; then
  timeout 60 .gpu/examples/host_overhead > $OUT/host_overhead.txt 2>&1; grep -E "overhead|batches" $OUT/host_overhead.txt
fi
if want bench; then
  timeout 300 .gpu/examples/bench $sweep "${cases[@]}" --out $OUT/res > $OUT/bench.txt 2>&1; echo BENCH_EXIT $?
  grep -E "^\| " $OUT/bench.txt | grep -v "^| case\|^|---" | cut -d'|' -f2-8
fi
if want torch; then
  timeout 400 python3 scripts/bench/torch_baseline.py $sweep "${cases[@]}" --out $OUT/res > $OUT/torch.txt 2>&1; echo TORCH_EXIT $?
  grep -E "torch-(eager|compile)" $OUT/torch.txt | grep -v wrote
fi
if want fuzz; then
  s=${FUZZ_SECONDS:-90}
  timeout $((s + 20)) .gpu/examples/fuzz --seed "${SEED:-5700000}" --count 40000 --jobs 15 --time-limit "$s" --no-shrink --quiet > $OUT/fuzz.txt 2>&1; echo FUZZ_EXIT $? >> $OUT/fuzz.txt
  tail -3 $OUT/fuzz.txt
fi
