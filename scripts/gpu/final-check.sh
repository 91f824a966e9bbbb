#!/usr/bin/env bash
# The closing check of a GPU session in one device call, over a carried `.gpu` bundle
# (../shared/tools/gpu-bundle --filter 'gpu_training|gpu_ops_more|gpu_fuzz_regressions|gpu_schedulers|gpu_graph|gpu_movement|fuzz|host_overhead|bench'):
# the GPU tests of reductions, graphs and movement, host_overhead, the benchmark and
# PyTorch's baseline, and 90 s of the fuzzer. Writes under $OUT; prints the lines to quote.
set -u
bash .gpu/unpack.sh > $OUT/unpack.txt 2>&1
: > $OUT/tests.txt
for b in .gpu/bin/gpu_training-* .gpu/bin/gpu_ops_more-* .gpu/bin/gpu_fuzz_regressions-* .gpu/bin/gpu_schedulers-* .gpu/bin/gpu_graph-* .gpu/bin/gpu_movement-*; do
  echo "=== $b" >> $OUT/tests.txt
  NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 timeout 120 "$b" --test-threads=1 >> $OUT/tests.txt 2>&1
done
grep -E "^test result" $OUT/tests.txt | awk '{p+=$4; f+=$6} END {print "tests: passed", p, "failed", f}'
grep -E "FAILED|panicked" $OUT/tests.txt | head -5
timeout 60 .gpu/examples/host_overhead > $OUT/host_overhead.txt 2>&1; grep -E "overhead|batches" $OUT/host_overhead.txt
timeout 200 .gpu/examples/bench --no-sweep --out $OUT/res > $OUT/bench.txt 2>&1; echo BENCH_EXIT $?
timeout 150 python3 scripts/bench/torch_baseline.py --no-sweep --out $OUT/res > $OUT/torch.txt 2>&1; echo TORCH_EXIT $?
grep -E "^\| (batchnorm|outer_sum|layernorm|rms|softmax|rope|silu|cross|embed|kv|gelu|bias|transpose|inner)" $OUT/bench.txt | cut -d'|' -f2-8
tail -4 $OUT/torch.txt
timeout 110 .gpu/examples/fuzz --seed 5700000 --count 40000 --jobs 15 --time-limit 90 --no-shrink --quiet > $OUT/fuzz.txt 2>&1; echo FUZZ_EXIT $? >> $OUT/fuzz.txt
tail -3 $OUT/fuzz.txt
