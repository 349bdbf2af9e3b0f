"""The fused-backward sweep's records (`hopper_tile_sweep.py --only fused` output), one line a shape:
the split backward's time, then each fused form's speed over it ('!' where its gradients were not
within 2 % of the split backward's).

    python3 bench/fused_summary.py "$OUT/fused.txt"
"""
import json
import sys

for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r.get("kind") != "fused":
        print(line[:300])
        continue
    ms = r["ms"]
    print(f"D={r['D']} causal={int(r['causal'])} S={r['S']} split {ms['split']:.3f} ms",
          " ".join(f"{n.replace('fused_', '')} {ms['split'] / t:.3f}{'' if r['ok'][n] else '!'}"
                   for n, t in ms.items() if n != "split"))
