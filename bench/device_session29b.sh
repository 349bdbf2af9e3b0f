#!/bin/sh
# Session 29, second call: the forward's wait for P V held below its softmax (bench/attention_wait_edits.py
# pin_store, beside the launched kernel and cuDNN), 8-block A-scale boxes (bench/fp8_ab.py boxes), then
# the standard suite (zk) with the running row sum by lanes (quad_sums, launched) and the targets' ratios.
#   TILES_COMMIT=<commit> sh bench/device_session29b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 100 python3 bench/attention_wait_edits.py 2>&1 | tr -d '\000' | tail -8
timeout 120 python3 bench/fp8_ab.py boxes 2>&1 | tr -d '\000' | grep -v "bitwise vs launched: {'launched': True}$" | tail -12
RUNS=zk sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*zk.json
