#!/bin/sh
# Session 45's second call: packed sequences (tiles.attention_varlen) on the GPU (the portability tests on
# hopper and cdna-emu, the Hopper sources compiled by the device's NVRTC), the rest of the first call's
# tests (cut at its time limit), compute-sanitizer over a varlen launch, then the varlen timing.
#   sh bench/device_session45c.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
gpu_tests 150 -n 6 tests/portability/test_attention_varlen.py tests/test_stopped_windows.py \
    "tests/hopper/test_split_tail.py::test_counts_on_the_host_cost_no_synchronization" \
    tests/hopper/test_attention_lower.py -k "varlen or packed or stopped or counts_on_the_host"
cp "$OUT/tests.txt" "$OUT/tests_varlen.txt"
gpu_tests 200 -n 8 tests/hopper/test_kv_rings.py tests/hopper/test_split_tail.py tests/portability/test_attention.py
timeout 60 compute-sanitizer --tool memcheck python3 -c "
import torch, tiles
cu = torch.tensor([0, 5, 300, 300, 1000], dtype=torch.int32, device='cuda')
q, k, v = (torch.randn(1000, 8, 128, device='cuda', dtype=torch.bfloat16) for _ in range(3))
for c in (False, True):
    tiles.attention_varlen(q, k[:, :2], v[:, :2], cu, cu, 700, 700, causal=c)
torch.cuda.synchronize(); print('varlen memcheck run')
" 2>&1 | grep -a "ERROR SUMMARY\|varlen memcheck" | head -3
timeout 150 python3 bench/attention_varlen.py 2>&1 | grep -a -v -i "warning" | tr -cd '\11\12\15\40-\176' | tail -c 5000
