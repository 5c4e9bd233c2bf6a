#!/bin/bash
# lead's device script (not committed)
source .stage/mlir/env.sh
export TILE_MLIR_CACHE_DIR=/tmp/tmcache
nvidia-smi --query-gpu=name --format=csv,noheader
timeout ${TEST_TIMEOUT:-400} python3 -m pytest -q -m gpu ${TESTS:-tests} -p no:cacheprovider --durations=15 > $OUT/gpu.log 2>&1
echo "pytest rc=$?"
grep -E "passed|failed" $OUT/gpu.log | tail -2
grep -E "^(FAILED|ERROR)" $OUT/gpu.log | head -40
if [ -n "$BENCH" ]; then
  timeout ${BENCH_TIMEOUT:-240} python3 bench/part2.py $BENCH > $OUT/part2.log 2>&1; tail -30 $OUT/part2.log
  cp bench/results/part2-* $OUT/ 2>/dev/null
fi
if [ -n "$ACC" ]; then timeout 120 python3 tests/ops_accuracy.py --ops $ACC --out $OUT/acc.md > $OUT/acc.log 2>&1; tail -3 $OUT/acc.log; fi
