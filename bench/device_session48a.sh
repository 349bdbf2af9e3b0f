#!/bin/sh
# Session 47's packed-sequence changes on the GPU, prepared after its device time ran out: the tables of
# blocks (forward, dQ, dK / dV), the packed dK / dV without vec_tma, tables built on the host. The
# varlen, packed and stopped-window tests on hopper and cdna-emu (one process: a fault poisons a
# worker, and the first failure is the one to read), then the forward and backward timing. The
# sanitizers over packed launches are the next call: sh bench/device_session47b.sh.
#   sh bench/device_session48a.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
gpu_tests 200 -x -p no:xdist tests/portability/test_attention_varlen.py tests/test_stopped_windows.py \
    tests/hopper/test_attention_lower.py -k "varlen or packed or stop"
timeout 110 python3 bench/attention_varlen.py 2>&1 | grep -a -E "^(fwd|  )" | cut -c1-330
timeout 110 python3 bench/attention_varlen.py --backward 2>&1 | grep -a -E "^(fwd|  )|Error" | cut -c1-330
