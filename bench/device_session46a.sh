#!/bin/sh
# Session 46's changes on the GPU, prepared on the CPU (no device time was left to this session): the
# packed backward (tiles.attention_varlen's gradients) on hopper and cdna-emu (gfx942, gfx950) against
# float64 and bitwise against tiles.attention on each sequence alone, its Hopper and CDNA sources through
# the device's compilers, compute-sanitizer over packed backward launches, then its timing
# (bench/attention_varlen.py --backward). The sanitizers also run a chunked prefill over a paged cache; the
# tests, Hopper's one-shot tile zeroed past a stop (tests/test_stopped_windows.py).
#   sh bench/device_session46a.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
gpu_tests 180 -n 8 tests/portability/test_attention_varlen.py tests/hopper/test_attention_lower.py \
    tests/test_stopped_windows.py -k "varlen or packed or stop"
for tool in memcheck racecheck synccheck; do
  timeout 80 compute-sanitizer --tool $tool --report-api-errors no python3 -c "
import torch, tiles
cu = torch.tensor([0, 5, 300, 300, 1000], dtype=torch.int32, device='cuda')
for D, c in ((128, False), (128, True), (64, True)):
    q, k, v = (torch.randn(1000, 8, D, device='cuda', dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    out = tiles.attention_varlen(q, k[:, :2], v[:, :2], cu, cu, 700, 700, causal=c)
    out.float().sum().backward()
with torch.no_grad():  # chunked prefill: packed queries over a paged cache
    pool = torch.randn(9, 256, 2, 128, device='cuda', dtype=torch.bfloat16)
    table = torch.randperm(9, device='cuda')[:8].view(4, 2).int()
    ck = torch.tensor([0, 300, 301, 301, 800], dtype=torch.int32, device='cuda')
    q = torch.randn(1000, 8, 128, device='cuda', dtype=torch.bfloat16)
    tiles.attention_varlen(q, pool, pool, cu, ck, 700, 512, causal=True, block_table=table)
torch.cuda.synchronize(); print('varlen backward $tool run')
" 2>&1 | grep -a "ERROR SUMMARY\|RACECHECK SUMMARY\|varlen backward" | head -3
done
timeout 170 python3 bench/attention_varlen.py --backward 2>&1 | grep -a -v -i "warning" | tr -cd '\11\12\15\40-\176' | tail -c 5000
