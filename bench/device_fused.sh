#!/bin/sh
# attention_bwd_fused on the H200: the backward's correctness checks (float64 reference, 14 shapes;
# D = 128 now runs the fused kernel), racecheck + memcheck on a small GQA causal backward, then
# split vs fused timing through autograd.
. bench/device_env.sh
timeout 120 python3 bench/hopper_attention_bwd_check.py --phases check 2>&1 | tail -4
cat > /tmp/small_bwd.py <<'PY'
import torch, tiles
q = torch.randn(1, 200, 4, 128, device="cuda").bfloat16().requires_grad_()
k = torch.randn(1, 190, 2, 128, device="cuda").bfloat16().requires_grad_()
v = torch.randn(1, 190, 2, 128, device="cuda").bfloat16().requires_grad_()
for causal in (False, True):
    tiles.attention(q, k, v, causal=causal).sum().backward()
torch.cuda.synchronize()
print("small backward ok")
PY
python3 /tmp/small_bwd.py
for tool in racecheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --print-limit 4 python3 /tmp/small_bwd.py > "$OUT/$tool.txt" 2>&1
  grep -E "SUMMARY|small backward" "$OUT/$tool.txt"
  grep -E "^========= +(Invalid|Race|Error|at |by thread|Address)" "$OUT/$tool.txt" | head -12
done
timeout 200 python3 bench/hopper_tile_sweep.py --only fused 2>&1 | cut -c1-600
