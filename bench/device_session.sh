#!/bin/sh
# One device call that measures and checks what the H200 can show (see the closing note):
# the benchmark suite, the GPU tests, and compute-sanitizer over every suite kernel the backend lowers.
# Usage (device tool): [KERNELS=gemm,attention_fwd] sh bench/device_session.sh [quick|standard] [PYTEST_FILTER]
. bench/device_env.sh
SUITE=${1:-quick}
FILTER=${2:-hopper or graph or large or probe}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv | tee "$OUT/gpu.txt"
python3 -m tiles.bench run --suite "$SUITE" --kernels "${KERNELS:-gemm,attention_fwd,attention_bwd}" \
    --reps 20 --budget 0.4 --out "$OUT/H200-$(date +%F).json" 2>&1 | tail -60 | tee "$OUT/bench.txt"
python3 -m pytest -q -p no:cacheprovider tests/portability tests/hopper -k "$FILTER" 2>&1 | tail -15 \
    | tee "$OUT/pytest.txt"
for tool in memcheck racecheck synccheck initcheck; do
    echo "== $tool" | tee -a "$OUT/sanitizer.txt"
    compute-sanitizer --tool $tool --report-api-errors no python3 bench/sanitize_suite.py 2>&1 | tail -3 \
        | tee -a "$OUT/sanitizer.txt"
done
