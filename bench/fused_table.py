"""The fused-backward rows of a `hopper_tile_sweep.py --only fused` log, one line a shape: the split
backward's time and each fused mode's speed over it (above 1 is faster), the modes whose outputs
strayed from the split path's, and with --diffs the largest differences (dq, dk, dv) of each mode.

    python3 bench/fused_table.py "$OUT/fused.txt" [--diffs]
"""
import json
import sys


def main(path, diffs=False):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    if not rows:
        sys.exit(f"{path}: no result rows")
    for r in rows:
        base = r["ms"]["split"]
        speed = {n.removeprefix("fused_") or "fused": round(base / t, 3) for n, t in r["ms"].items() if n != "split"}
        bad = [n for n, ok in r["ok"].items() if not ok] or "all ok"
        extra = ({n: ["%.1e" % x for x in d] for n, d in r["max_diff"].items() if n != "split"} if diffs else "")
        print(r["causal"], r["S"], r["H"], r["Hkv"], "split %.3f ms" % base, speed, bad, extra)


if __name__ == "__main__":
    main(sys.argv[1], "--diffs" in sys.argv[2:])
