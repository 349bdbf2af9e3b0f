#!/bin/sh
# Session 47, second call: compute-sanitizer memcheck, racecheck and synccheck over packed launches with
# the tables of blocks (the forward and the split backward at D = 64 and 128, causal and not, an empty
# sequence and one of 5 rows, GQA; a chunked prefill over a paged cache), then the packed tests on the
# cdna-emu backend alone if time is left.
#   sh bench/device_session47b.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --report-api-errors no python3 -c "
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
torch.cuda.synchronize(); print('packed $tool run')
" 2>&1 | grep -a "ERROR SUMMARY\|RACECHECK SUMMARY\|packed .* run" | head -3
done
