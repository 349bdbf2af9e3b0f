#!/bin/sh
# One device call for backend="cdna-emu": the planted-bug tests, then the portability suite through the
# emulated CDNA arch layer for both targets (forward and backward). Usage (device tool): sh bench/device_emu.sh [PYTEST_K]
. bench/device_env.sh
K=${1:-cdna-emu}
N=""; python3 -c "import xdist" 2>/dev/null && N="-n 8"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -m tiles info 2>&1 | tee "$OUT/info.txt"
python3 -m pytest -q -p no:cacheprovider $N tests/cdna_emu -W ignore 2>&1 > "$OUT/emu_tests.txt"; tail -3 "$OUT/emu_tests.txt"
python3 -m pytest -q -p no:cacheprovider $N tests/portability -k "$K" -rfs -W ignore --tb=short 2>&1 > "$OUT/portability.txt"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/portability.txt" | cut -c1-250 | head -120
