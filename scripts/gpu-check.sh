#!/usr/bin/env bash
# On the GPU machine (the device tool), in parts that fit its 600 s calls; each part's log
# and docs/benchmarks.md go to $OUT (default /tmp). Run scripts/gpu-machine.sh first where
# the service's packages are needed.
#   scripts/gpu-check.sh tests-a   the device pipeline, the device updater, the oracle on a
#                                  device-owned graph, result columns (about 4 min)
#   scripts/gpu-check.sh tests-b   every other test of tests/gpu marked gpu (about 7 min; the
#                                  Yeast parity case needs .local-data/yeast, carried)
#   scripts/gpu-check.sh bench     the device-graph benchmarks: pipeline, Enron, Yeast,
#                                  throughput against b (both in-flight rules), response
#                                  time (docs/benchmarks.md), the hand-off probe (ring.log)
#   scripts/gpu-check.sh service   the gpu-marked tests outside tests/gpu (the service end to
#                                  end on the gpu backend: REST and Kafka in, deltas out,
#                                  against the CPU engine); needs the wheels that
#                                  scripts/gpu-wheels.sh puts in .local-data/wheels, carried
#   scripts/gpu-check.sh tail      where the response-time tail comes from: the latency
#                                  replay at 100k-600k updates/s with the pool's compactions,
#                                  graph captures and collector passes beside it
#                                  (bench/latency_tail.py, about 1 min)
#   scripts/gpu-check.sh ab        an A/B on one machine instance (small-b figures differ by
#                                  up to 2x between instances): .base/ (made here with
#                                  `git archive REV --prefix=.base/ | tar x`, carried) and
#                                  this tree in turn, two rounds of the Enron runs of
#                                  bench/enron_ab.py and the batch sweep (about 5 min)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
first=(tests/gpu/test_pipeline.py tests/gpu/test_device_updater.py tests/gpu/test_oracle.py
       tests/gpu/test_result_columns.py)
case "${1:-}" in
  tests-a)
    python -m pytest -q -p no:cacheprovider -m gpu --timeout 300 "${first[@]}" \
        > "$out/tests-a.log" 2>&1
    rc=$? ;;
  tests-b)
    python -m pytest -q -p no:cacheprovider -m gpu --timeout 300 tests/gpu \
        "${first[@]/#/--deselect=}" > "$out/tests-b.log" 2>&1
    rc=$? ;;
  service)
    bash scripts/gpu-machine.sh
    python -m pytest -q -p no:cacheprovider -m gpu --timeout 300 tests/service tests/deploy \
        --ignore=tests/service/test_fuzz.py > "$out/service.log" 2>&1
    rc=$? ;;
  bench)
    CSM_BENCH_DEVICE_GRAPH=1 python bench/gpu_bench.py --repeat 2 --window 20000 \
        --batch-windows 20000,100000 \
        --sections pipeline,enron,yeast,batch,batch-equal,latency > "$out/bench.log" 2>&1
    rc=$?
    python bench/ring_probe.py 20000 > "$out/ring.log" 2>&1 || rc=1
    cp docs/benchmarks.md "$out/" ;;
  tail)
    CSM_BENCH_DEVICE_GRAPH=1 python bench/latency_tail.py --rates 1e5,3e5,6e5 \
        --max-query 3,5 > "$out/tail.log" 2>&1
    rc=$? ;;
  ab)
    export CSM_BENCH_DEVICE_GRAPH=1 ENRON=$PWD/.local-data/enron-labeled
    ab=$PWD/bench/enron_ab.py
    rc=0
    for round in 1 2; do
      for tree in .base .; do
        echo "== round $round: ${tree}"
        (cd "$tree" && PYTHONPATH=$PWD python "$ab" \
          && PYTHONPATH=$PWD python bench/gpu_bench.py --sections batch --window 20000 \
             --out /tmp/ab.md | grep -v '^|') || rc=1
      done
    done > "$out/ab.log" 2>&1 ;;
  *) echo "usage: $0 tests-a|tests-b|service|bench|tail|ab" >&2; exit 2 ;;
esac
tail -5 "$out/${1}.log"
exit $rc
