#!/bin/sh
# Session 45's third call: compute-sanitizer memcheck over packed-sequence launches, whole reports, then
# the varlen timing with the prepared launch beside the API (offsets on the host).
#   sh bench/device_session45d.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
cat > /tmp/vl.py <<'P'
import sys, torch, tiles
causal, H = sys.argv[1] == "1", int(sys.argv[2])
cu = torch.tensor([0, 5, 300, 300, 1000], dtype=torch.int32, device='cuda')
q, k, v = (torch.randn(1000, H, 128, device='cuda', dtype=torch.bfloat16) for _ in range(3))
tiles.attention_varlen(q, k, v, cu, cu, 700, 700, causal=causal)
torch.cuda.synchronize(); print('varlen memcheck run', causal, H)
P
for c in 0 1; do
  timeout 60 compute-sanitizer --tool memcheck --print-limit 6 python3 /tmp/vl.py $c 2 2>&1 | grep -a -v "^=========     \(Host Frame\|in \)" | head -40
done
timeout 200 python3 bench/attention_varlen.py 2>&1 | grep -a -v -i "warning" | grep -a "^S<=\|differs\|Error" | tr -cd '\11\12\15\40-\176'
