"""One line per (kernel, D, causal, S) of a hopper_tile_sweep.py schedule run: the default's TFLOP/s, then
each variant's speed over it (base time / variant time; below 1: the variant is slower; `!`: its
output differed from the default's).

    python3 bench/sweep_table.py $OUT/sweep.txt
"""
import json
import sys


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    for r in rows:
        if r.get("variant") != "base":
            continue
        key = (r["kind"], r["D"], r["causal"], r["S"])
        line = f"{r['kind']:8} D={r['D']:3} causal={int(r['causal'])} S={r['S']:5} base {r.get('tflops') or 0:6.0f} TFLOP/s"
        for v in rows:
            if (v["kind"], v["D"], v["causal"], v["S"]) == key and v["variant"] != "base":
                line += f"  {v['variant']} {v.get('vs_base') or 0:.3f}{'' if v.get('correct', True) else '!'}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
