"""The issue targets' ratios from standard-suite result files: each shape's tiles time over its named
baseline (attention against SDPA-cuDNN, GEMM against cuBLAS, fp8 block-scaled and row-wise against row-wise
`_scaled_mm`), and
the geomean of each kernel's ratios.

    python3 bench/suite_ratios.py bench/results/H200-2026-12-01m.json [...]
"""
import math
import sys

from tiles.bench.report import load, shape_key

BASELINE = {"attention_fwd": "sdpa_cudnn", "attention_bwd": "sdpa_cudnn", "gemm": "cublas",
            "gemm_fp8": "scaled_mm_rowwise", "gemm_fp8_rowwise": "scaled_mm_rowwise"}


def ratios(result: dict) -> dict:
    """kernel -> [(shape, baseline ms / tiles ms)] for the shapes where both ran."""
    ms = {}
    for r in result["rows"]:
        if "shape" in r and r.get("ms") and r["kernel"] in BASELINE:
            nt = r["shape"].get("layout") == "nt"  # x @ w.T rows: a geomean of their own, apart from #3's shapes
            ms.setdefault((r["kernel"] + (" NT" if nt else ""), r["kernel"], shape_key(r["shape"])), {})[r["impl"]] = r["ms"]
    out = {}
    for (group, kernel, shape), t in ms.items():
        if "tiles" in t and BASELINE[kernel] in t:
            out.setdefault(group, []).append((shape, t[BASELINE[kernel]] / t["tiles"]))
    return out


def main(paths) -> None:
    for path, result in zip(paths, load(paths)):
        print(f"{path} (tiles {result['environment'].get('tiles_commit')})")
        for kernel, rows in ratios(result).items():
            for shape, x in rows:
                print(f"  {kernel} {shape}: {x:.3f}x {BASELINE[kernel.split()[0]]}")
            g = math.exp(sum(math.log(x) for _, x in rows) / len(rows))
            print(f"  {kernel} geomean {g:.3f} over {len(rows)}")


if __name__ == "__main__":
    main(sys.argv[1:])
