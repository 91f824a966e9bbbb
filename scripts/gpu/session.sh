#!/usr/bin/env bash
# One stage of a GPU session, run on the GPU machine over a carried `.gpu` bundle
# (built here with ../shared/tools/gpu-bundle --filter 'gpu_|inplace|presets|fuzz|host_overhead|host_scalars|bench|graph'
#  -- --workspace --features nvfuser-cuda/gpu-tests: the GPU targets need that feature).
# Each stage fits one device call (at most 10 minutes) and writes its output under $OUT:
#
#   bash scripts/gpu/session.sh tests      # every staged test binary, NVFUSER_REQUIRE_GPU=1
#   bash scripts/gpu/session.sh fuzz SEED  # the differential fuzzer for ~200 s on 15 workers
#   bash scripts/gpu/session.sh perf       # host_overhead (with the host phase split), the
#                                          # benchmark and the PyTorch baseline in one run
#   bash scripts/gpu/session.sh sweep      # the hidden-size sweep (softmax, its backward,
#                                          # LayerNorm, RMSNorm) and PyTorch's, side by side
#
# The last lines of each output are printed at the end, so the call's reply shows them.
set -u
stage=${1:-}
out=${OUT:-/tmp/gpu-session}
mkdir -p "$out"
case "$stage" in
  tests | fuzz | perf | sweep) ;;
  *)
    echo "usage: bash scripts/gpu/session.sh tests | fuzz [SEED] | perf | sweep" >&2
    exit 2
    ;;
esac
bash .gpu/unpack.sh > "$out/unpack.txt" 2>&1 || { tail -5 "$out/unpack.txt"; exit 1; }
case "$stage" in
  tests)
    bash .gpu/run-tests.sh > "$out/tests.txt" 2>&1
    echo "TESTS_EXIT $?" >> "$out/tests.txt"
    grep -E "^test result" "$out/tests.txt" | awk '{p+=$4; f+=$6} END {print "tests: passed", p, "failed", f}'
    grep -E "FAILED|panicked" "$out/tests.txt" | head -20
    tail -1 "$out/tests.txt"
    ;;
  fuzz)
    seed=${2:-4000000}
    timeout 240 .gpu/examples/fuzz --seed "$seed" --count 40000 --jobs 15 --time-limit 200 \
      --no-shrink --quiet > "$out/fuzz.txt" 2>&1
    echo "FUZZ_EXIT $?" >> "$out/fuzz.txt"
    tail -25 "$out/fuzz.txt"
    ;;
  perf)
    .gpu/examples/host_overhead > "$out/host_overhead.txt" 2>&1
    .gpu/examples/bench --no-sweep --out "$out/res" > "$out/bench.txt" 2>&1
    python3 scripts/bench/torch_baseline.py --no-sweep --out "$out/res" > "$out/torch.txt" 2>&1
    cat "$out/host_overhead.txt"
    tail -15 "$out/bench.txt"
    tail -15 "$out/torch.txt"
    ;;
  sweep)
    .gpu/examples/bench --sweep-only --out "$out/res" > "$out/bench.txt" 2>&1
    python3 scripts/bench/torch_baseline.py --sweep-only --out "$out/res" > "$out/torch.txt" 2>&1
    grep -E "^\| sweep" "$out/bench.txt"
    grep -E "torch-compile" "$out/torch.txt"
    ;;
esac
