"""The SASS instructions where a kernel's warps were sampled most, from an ncu report's source page:

    ncu -o rep --section SourceCounters -k regex:attention --launch-skip 3 --launch-count 1 python3 ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > rep.csv
    python3 bench/ncu_hotspots.py rep.csv [top]

Prints the top instructions by warp-stall samples with their share and their three largest stall
reasons ("other": the samples no named reason covers, such as waits for the wgmma pipe), then the
samples summed by opcode: where in the loop the time goes, not just why.
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
    # the source page names most reasons per instruction but not all: what is left (a warp waiting for
    # the wgmma pipe, among others) is shown as "other"
    reasons = [c for c in col if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(number(r[col[samples]]) for r in body) or 1.0
    print(f"{len(body)} instructions, {total:.0f} samples; reason columns: {len(reasons)}")
    ranked = sorted(body, key=lambda r: -number(r[col[samples]]))
    for r in ranked[:top]:
        named = [(number(r[col[c]]), c.replace("stall_", "")) for c in reasons]
        named.append((number(r[col[samples]]) - sum(v for v, _ in named), "other"))
        why = ", ".join(f"{c} {v / total:.1%}" for v, c in sorted(named, reverse=True)[:3] if v > 0)
        addr = r[col["Address"]] if "Address" in col else ""
        print(f"{number(r[col[samples]]) / total:6.1%}  {addr:>6}  {r[col['Source']].strip()[:70]:70}  {why}")
    by_op = collections.Counter()
    for r in body:
        words = r[col["Source"]].split()
        if words and words[0].startswith("@"):  # a predicate guard (@P0, @!UP1) comes before the opcode
            words = words[1:]
        by_op[words[0].split(".")[0] if words else "?"] += number(r[col[samples]])
    print("by opcode:", ", ".join(f"{op} {v / total:.1%}" for op, v in by_op.most_common(14)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
