#!/bin/sh
# Session 45's fourth call: compute-sanitizer memcheck and racecheck over packed-sequence launches (the
# driver's API errors from cuda-python's symbol lookups left out of the report), then the fp8 GEMM's
# clock (bench/fp8_clock.py, prepared in session 38).
#   sh bench/device_session45e.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
cat > /tmp/vl.py <<'P'
import torch, tiles
cu = torch.tensor([0, 5, 300, 300, 1000], dtype=torch.int32, device='cuda')
for H, D in ((2, 128), (4, 64)):
    q, k, v = (torch.randn(1000, H, D, device='cuda', dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        tiles.attention_varlen(q, k[:, :1], v[:, :1], cu, cu, 700, 700, causal=causal, return_lse=True)
torch.cuda.synchronize(); print('varlen sanitizer run: 4 launches')
P
for tool in memcheck racecheck synccheck; do
  echo "== $tool"
  timeout 90 compute-sanitizer --tool $tool --report-api-errors no python3 /tmp/vl.py 2>&1 | grep -a "ERROR SUMMARY\|RACECHECK SUMMARY\|varlen sanitizer\|Invalid\|Hazard" | head -6
done
timeout 150 python3 bench/fp8_clock.py 2>&1 | grep -a -v Warning | tr -cd '\11\12\15\40-\176' | tail -c 4000
