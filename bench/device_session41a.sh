#!/bin/sh
# Session 41's first call: the forward at decode shapes (bench/attention_decode.py: the launcher's choice,
# forced key parts, SDPA's backends), then the fp8 GEMM's clock (bench/fp8_clock.py, prepared in
# session 38).
#   sh bench/device_session41a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 300 python3 bench/attention_decode.py 2>&1 | grep -v Warning
timeout 240 python3 bench/fp8_clock.py 2>&1 | grep -v Warning
