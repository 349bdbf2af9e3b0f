"""The SASS instructions where a kernel's warps were sampled most, from an ncu report's source page:

    ncu -o rep --section SourceCounters -k regex:attention --launch-skip 3 --launch-count 1 python3 ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > rep.csv
    python3 bench/ncu_hotspots.py rep.csv [top]

Prints the top instructions by warp-stall samples with their share and their three largest stall
reasons, then the samples summed by opcode: where in the loop the time goes, not just why.
"""
import collections
import csv
import sys


def number(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def main(path, top=40):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    head_at = next(i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r))
    head, body = rows[head_at], rows[head_at + 1:]
    col = {name.strip(): i for i, name in enumerate(head)}
    samples = next(c for c in col if c.startswith("Warp Stall Sampling (All"))
    reasons = [c for c in col if c.startswith("stall_") or (c.startswith("Warp Stall Sampling") and c != samples
                                                              and "Not-issued" not in c and "All" not in c)]
    total = sum(number(r[col[samples]]) for r in body) or 1.0
    print(f"{len(body)} instructions, {total:.0f} samples; reason columns: {len(reasons)}")
    ranked = sorted(body, key=lambda r: -number(r[col[samples]]))
    for r in ranked[:top]:
        why = sorted(((number(r[col[c]]), c) for c in reasons), reverse=True)[:3]
        why = ", ".join(f"{c.replace('stall_', '')} {v / total:.1%}" for v, c in why if v > 0)
        addr = r[col["Address"]] if "Address" in col else ""
        print(f"{number(r[col[samples]]) / total:6.1%}  {addr:>6}  {r[col['Source']].strip()[:70]:70}  {why}")
    by_op = collections.Counter()
    for r in body:
        by_op[r[col["Source"]].strip().split(" ")[0].split(".")[0].lstrip("@!P0123456789UT ")] += number(r[col[samples]])
    print("by opcode:", ", ".join(f"{op} {v / total:.1%}" for op, v in by_op.most_common(14)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
