#!/bin/sh
# Session 47, second call: which packed kernel faults (CUDA_ERROR_ILLEGAL_INSTRUCTION in the first call,
# old and new code alike), each case in a process of its own with blocking launches; compute-sanitizer
# on the first failing one; then the forward timing, new against OLD (the bench's kernel row fixed: it
# let the table go).
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
OLD=${OLD:-old47}
case_py() {  # case_py DIR D CAUSAL WHAT [BACKEND]
  (cd "$1" && PYTHONPATH=. CUDA_LAUNCH_BLOCKING=1 TILES_CACHE_DIR=/tmp/tc-$1 timeout 60 python3 -c "
import torch, tiles, sys
D, c, what = $2, bool($3), '$4'
cu = torch.tensor([0, 5, 300, 300, 1000], dtype=torch.int32, device='cuda')
g = what != 'fwd'
q, k, v = (torch.randn(1000, 8, D, device='cuda', dtype=torch.bfloat16).requires_grad_(g) for _ in range(3))
try:
    out = tiles.attention_varlen(q, k[:, :2], v[:, :2], cu, cu, 700, 700, causal=c, backend='${5:-hopper}')
    torch.cuda.synchronize()
    if g:
        out.float().sum().backward(); torch.cuda.synchronize()
    print('$1 D=$2 causal=$3 $4 ${5:-hopper} ok')
except Exception as e:
    import traceback; tb = traceback.extract_tb(e.__traceback__)
    print('$1 D=$2 causal=$3 $4 ${5:-hopper} FAIL', type(e).__name__, str(e).splitlines()[0][:160], [f'{f.name}:{f.lineno}' for f in tb[-6:]])
" 2>&1 | grep -a "ok\|FAIL" | head -2)
}
for dir in . "$OLD"; do
  for D in 64 128; do for c in 0 1; do case_py $dir $D $c fwd; case_py $dir $D $c bwd; done; done
done
case_py . 128 1 bwd cdna-emu:gfx942; case_py . 64 0 bwd cdna-emu:gfx950
timeout 90 python3 -m pytest -x -q -p no:cacheprovider -p no:xdist -W ignore tests/test_stopped_windows.py 2>&1 | \
  grep -a -E "^E  |passed|failed|^____" | cut -c1-250 | head -12
PYTHONPATH=. timeout 100 compute-sanitizer --tool memcheck --report-api-errors no python3 -c "
import torch, tiles
cu = torch.tensor([0, 5, 300, 300, 1000], dtype=torch.int32, device='cuda')
q, k, v = (torch.randn(1000, 8, 128, device='cuda', dtype=torch.bfloat16).requires_grad_() for _ in range(3))
tiles.attention_varlen(q, k[:, :2], v[:, :2], cu, cu, 700, 700, causal=True).float().sum().backward()
torch.cuda.synchronize()
" 2>&1 | grep -a -v "^=========     \(Host Frame\|in \|=\)" | grep -a -E "=====|Error|error" | head -24
bench() {
  (cd "$1" && PYTHONPATH=.:bench:tests/portability TILES_CACHE_DIR=/tmp/tc-b$$ timeout 110 \
    python3 bench/attention_varlen.py 2>&1 | grep -a -E "^fwd" | tr -cd '\11\12\15\40-\176' | cut -c1-330)
}
echo "== new"; bench .
echo "== old"; bench "$OLD"
