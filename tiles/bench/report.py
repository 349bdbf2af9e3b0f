"""python -m tiles.bench report FILES... --out DIR: one side-by-side page from many devices' results.

A column per device (H100, H200, MI300X, MI325X, MI355X, plus any other device found); a device with
no results shows "not measured". Published numbers come from a separate file and are always labelled
"published, not measured here" with their source."""
from __future__ import annotations

import html
import json
import os
from collections import defaultdict

from . import peaks

SCHEMA = 1
ROW_KEYS = {"kernel", "shape", "impl", "correct"}


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:  # not UTF-8, or not JSON
        raise ValueError(f"{path}: not a JSON file ({e})") from None


def load(paths) -> list:
    results = []
    for p in paths:
        r = _read_json(p)
        validate(r, p)
        results.append(r)
    return results


def validate(r: dict, where: str = "result") -> None:
    """Schema check: raises ValueError naming the file and the first problem."""
    if not isinstance(r, dict) or r.get("schema") != SCHEMA:
        raise ValueError(f"{where}: not a tiles.bench result (schema {SCHEMA} expected)")
    env = r.get("environment")
    if not isinstance(env, dict) or not env.get("device"):
        raise ValueError(f"{where}: environment.device is missing")
    if not isinstance(env.get("date"), str):
        raise ValueError(f"{where}: environment.date is missing")
    rows = r.get("rows", [])
    if not isinstance(rows, list):
        raise ValueError(f"{where}: rows must be a list")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"{where}: row {i} is not an object")
        if "measure" in row or "error" in row:
            continue
        missing = ROW_KEYS - set(row)
        if missing:
            raise ValueError(f"{where}: row {i} lacks {sorted(missing)}")
        try:
            shape_key(row["shape"])
        except (KeyError, TypeError):
            raise ValueError(f"{where}: row {i} has a shape without M, N, K or B, H, S, D, causal: "
                             f"{row['shape']!r}") from None
        if row.get("ms") is not None and not (isinstance(row["ms"], (int, float)) and row["ms"] > 0):
            raise ValueError(f"{where}: row {i} has a bad time {row['ms']!r}")
        if row.get("ms") is not None and row["correct"] is not True:
            raise ValueError(f"{where}: row {i} reports a time for an incorrect result")


def load_published(path) -> list:
    if not path:
        return []
    pub = _read_json(path)
    if not isinstance(pub, list):
        raise ValueError(f"{path}: published numbers must be a JSON list of rows")
    for i, row in enumerate(pub):
        for key in ("device", "kernel", "shape", "impl", "tflops", "source"):
            if not isinstance(row, dict) or key not in row:
                raise ValueError(f"{path}: published row {i} lacks {key!r}")
    return pub


def shape_key(s: dict) -> str:
    if "M" in s:
        return f"{s['M']}x{s['N']}x{s['K']}" + (" NT" if s.get("layout", "nn") == "nt" else "")
    head = f"B{s['B']} H{s['H']}" + (f"/{s['H_kv']}" if s.get("H_kv", s["H"]) != s["H"] else "")
    seq = f"S{s['S']}" + (f"/{s['S_k']}" if s.get("S_k", s["S"]) != s["S"] else "")
    return f"{head} {seq} D{s['D']}{' causal' if s['causal'] else ''}"


def _pct(row, dev, kernel):
    """% of the device's datasheet peak for the kernel's input type (recomputed: the table may grow)."""
    pk = peaks.peak(dev, peaks.KERNEL_KIND.get(kernel, "bf16"))
    return 100 * row["tflops"] / pk if pk else row.get("pct_peak")


def table(results, published) -> tuple[list, dict]:
    """devices (in display order) and cells[(kernel, shape)][device] = {tiles, vendor, vendor_impl, ratio, pct,
    date}. Where result files of one device measured the same shape, its cell is the newest file's."""
    devices = list(peaks.DEVICES)
    cells = defaultdict(dict)
    for r in sorted(results, key=lambda r: r["environment"]["date"]):  # stable: equal dates keep their order
        dev = peaks.device_key(r["environment"]["device"])  # recomputed: older files keyed by substring
        if dev not in devices:
            devices.append(dev)
        by = defaultdict(dict)
        for row in r["rows"]:
            if row.get("tflops") is not None and row.get("correct") is True:
                by[(row["kernel"], shape_key(row["shape"]))][row["impl"]] = row
        for key, impls in by.items():
            t = impls.get("tiles")
            vendor = {n: x for n, x in impls.items() if not n.startswith("tiles")}  # tiles' other forms are not baselines
            best = max(vendor.items(), key=lambda kv: kv[1]["tflops"]) if vendor else None
            cells[key][dev] = dict(
                tiles=t["tflops"] if t else None, pct=_pct(t, dev, key[0]) if t else None,
                vendor=best[1]["tflops"] if best else None, vendor_impl=best[0] if best else None,
                ratio=(t["tflops"] / best[1]["tflops"]) if t and best else None,
                all={n: x["tflops"] for n, x in impls.items()}, date=r["environment"]["date"],
                replaced=cells[key][dev]["replaced"] + 1 if dev in cells[key] else 0)
    pubs = defaultdict(list)
    for p in published:
        pubs[(p["kernel"], shape_key(p["shape"]))].append(p)
    return devices, cells, pubs


def _fmt(x, spec=None):
    if x is None:
        return "–"
    return (spec or ("{:.0f}" if abs(x) >= 10 else "{:.2g}")).format(x)


def markdown(results, published) -> str:
    devices, cells, pubs = table(results, published)
    measured = {d for c in cells.values() for d in c}
    lines = ["# Benchmarks, side by side", "",
             "TFLOP/s of tiles on each device, the ratio to that device's best vendor baseline measured in the "
             "same process, and the percentage of the device's datasheet peak. Devices with no result file are "
             "shown as *not measured*. Rows marked *published* are quoted from their source and were "
             "**not measured here**.", ""]
    lines.append("## Environments")
    lines.append("")
    for r in results:
        e = r["environment"]
        extra = ", ".join(f"{k} {e[k]}" for k in ("cuda", "rocm", "driver", "torch", "tiles_commit", "clocks_mhz")
                          if e.get(k))
        lines.append(f"- **{e.get('device_key', e['device'])}** ({e['device']}), {e['date']}: {extra}")
    repeated = defaultdict(int)
    for c in cells.values():
        for d, x in c.items():
            repeated[d] += bool(x["replaced"])
    for d, n in repeated.items():
        if n:
            lines.append(f"- **{d}**: {n} shapes were measured in more than one result file; each cell shows the "
                         "newest file's measurement.")
    lines.append("")
    head = "| kernel | shape | " + " | ".join(devices) + " |"
    lines += [head, "|" + "---|" * (len(devices) + 2)]
    for (kernel, shape) in sorted(cells, key=lambda k: (k[0], k[1])):
        row = [kernel, shape]
        for d in devices:
            c = cells[(kernel, shape)].get(d)
            if c is None:
                row.append("not measured" if d not in measured else "–")
            else:
                row.append(f"{_fmt(c['tiles'])} ({_fmt(c['ratio'], '{:.2f}')}× {c['vendor_impl'] or ''}, "
                           f"{_fmt(c['pct'])}% peak)")
        lines.append("| " + " | ".join(row) + " |")
    if pubs:
        lines += ["", "## Published, not measured here", "", "| kernel | shape | device | impl | TFLOP/s | source |",
                  "|---|---|---|---|---|---|"]
        for (kernel, shape), rows in sorted(pubs.items()):
            for p in rows:
                lines.append(f"| {kernel} | {shape} | {p['device']} | {p['impl']} | {p['tflops']:.0f} | "
                             f"published, not measured here: {p['source']} |")
    lines += ["", "Peaks: " + "; ".join(f"{d} {v['bf16']} bf16 / {v['fp8']} fp8 TFLOP/s ({v['source']})"
                                        for d, v in peaks.PEAKS.items())]
    return "\n".join(lines) + "\n"


def figures(results, published, out_dir) -> list:
    """One SVG per kernel: grouped bars of TFLOP/s per shape, a bar per (device, impl)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices, cells, _ = table(results, published)
    paths = []
    for kernel in sorted({k for k, _ in cells}):
        keys = sorted(s for k, s in cells if k == kernel)
        series = []
        for d in devices:
            for impl in ("tiles", "vendor"):
                vals = [cells[(kernel, s)].get(d, {}).get(impl) for s in keys]
                if any(v is not None for v in vals):
                    series.append((f"{d} {'tiles' if impl == 'tiles' else 'best vendor'}", vals))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(keys) * len(series) / 2 + 2), 4))
        w = 0.8 / len(series)
        for i, (label, vals) in enumerate(series):
            ax.bar([j + i * w for j in range(len(keys))], [v or 0 for v in vals], w, label=label)
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(keys))])
        ax.set_xticklabels(keys, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{kernel}: tiles vs each device's best vendor kernel (measured)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = os.path.join(out_dir, f"{kernel}.svg")
        fig.savefig(p)
        plt.close(fig)
        paths.append(p)
    return paths


def write(paths, out_dir, published_path=None) -> dict:
    results = load(paths)
    published = load_published(published_path)
    os.makedirs(out_dir, exist_ok=True)
    md = markdown(results, published)
    figs = figures(results, published, out_dir)
    md += "\n" + "\n".join(f"![{os.path.basename(f)[:-4]}]({os.path.basename(f)})" for f in figs) + "\n"
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(md)
    body = "".join(f"<pre>{html.escape(md)}</pre>")
    imgs = "".join(f'<img src="{os.path.basename(f)}" alt="{os.path.basename(f)}">' for f in figs)
    with open(os.path.join(out_dir, "report.html"), "w") as f:
        f.write(f"<!doctype html><meta charset=utf-8><title>tiles benchmarks</title>{body}{imgs}\n")
    return {"markdown": os.path.join(out_dir, "report.md"), "html": os.path.join(out_dir, "report.html"),
            "figures": figs}
