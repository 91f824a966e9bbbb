#!/usr/bin/env bash
# Runs the GPU fuzzer's workers directly (no driver), each over its own share of the
# seeds with its own output file under $OUT, so that a worker that hangs or dies is seen
# with the last case it finished: the next seed of its share is the suspect.
#
#   bash scripts/gpu/fuzz-workers.sh SEED JOBS SECONDS   (after bash .gpu/unpack.sh)
set -u
seed=${1:-6300000}; jobs=${2:-15}; secs=${3:-90}
share=2667
for j in $(seq 0 $((jobs - 1))); do
  from=$((seed + j * share))
  ( timeout $((secs + 30)) .gpu/examples/fuzz --worker --seed $from --count $share --time-limit "$secs" --no-shrink > $OUT/worker-$j.txt 2>&1; echo "EXIT $?" >> $OUT/worker-$j.txt ) &
done
wait
for j in $(seq 0 $((jobs - 1))); do
  f=$OUT/worker-$j.txt
  printf 'worker %2d: %5d cases, %s, last: %s\n' $j "$(grep -c '^case' $f)" "$(tail -1 $f)" "$(grep '^case' $f | tail -1 | cut -c1-80)"
done
cat $OUT/worker-*.txt | grep '^case' | awk '{print $3}' | sort | uniq -c
grep -h "^case.* fail" $OUT/worker-*.txt | head -5 | cut -c1-300
