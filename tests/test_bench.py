"""The benchmark harness on the CPU: a tiny run through the interpreter, schema checks, and the
side-by-side report from two vendors' fixture results (one device missing)."""
import copy
import json
import os

import pytest

from tiles.bench import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fixture(device, key, tiles_tf, vendor, vendor_tf):
    shape = {"M": 8192, "N": 8192, "K": 8192}
    return {"schema": 1, "suite": "standard",
            "environment": {"device": device, "device_key": key, "date": "2026-11-29T00:00:00+00:00",
                            "torch": "x", "tiles_commit": "abc"},
            "rows": [dict(kernel="gemm", shape=shape, impl="tiles", correct=True, ms=1.0, tflops=tiles_tf,
                          pct_peak=50.0),
                     dict(kernel="gemm", shape=shape, impl=vendor, correct=True, ms=1.0, tflops=vendor_tf),
                     dict(kernel="gemm", shape=shape, impl="other", correct=False, max_err=1.0)]}


def test_report_two_vendors_and_a_missing_device(tmp_path):
    a = tmp_path / "h200.json"
    b = tmp_path / "mi300x.json"
    a.write_text(json.dumps(_fixture("NVIDIA H200", "H200", 780.0, "cublas", 772.0)))
    b.write_text(json.dumps(_fixture("AMD Instinct MI300X", "MI300X", 600.0, "hipblaslt", 700.0)))
    out = report.write([str(a), str(b)], str(tmp_path / "rep"), os.path.join(ROOT, "bench", "published.json"))
    md = open(out["markdown"]).read()
    line = next(l for l in md.splitlines() if l.startswith("| gemm | 8192x8192x8192"))
    cols = [c.strip() for c in line.strip("|").split("|")]
    assert cols[2] == "not measured"  # H100
    assert cols[3].startswith("780 (1.01× cublas")  # H200
    assert cols[4].startswith("600 (0.86× hipblaslt")  # MI300X
    assert "published, not measured here" in md and "HipKittens" in md
    assert out["figures"] and open(out["figures"][0]).read().lstrip().startswith("<?xml")
    assert os.path.exists(out["html"])


@pytest.mark.parametrize("mutate,msg", [
    (lambda r: r.update(schema=2), "schema 1 expected"),
    (lambda r: r["environment"].pop("device"), "environment.device is missing"),
    (lambda r: r["rows"][0].pop("impl"), "lacks ['impl']"),
    (lambda r: r["rows"][0].update(ms=-1.0), "bad time"),
    (lambda r: r["rows"][0].update(correct=False), "time for an incorrect result"),
    (lambda r: r["environment"].pop("date"), "environment.date is missing"),
    (lambda r: r["rows"][0].update(shape={"M": 1}), "a shape without M, N, K"),
])
def test_schema_checks(mutate, msg):
    r = copy.deepcopy(_fixture("NVIDIA H200", "H200", 1.0, "cublas", 1.0))
    mutate(r)
    with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        report.validate(r, "fixture")


def test_tiny_run_through_the_interpreter(tmp_path):
    from tiles.bench.run import run

    out = tmp_path / "cpu.json"
    r = run("tiny", ("gemm", "attention_fwd"), str(out), "interp", reps=3, budget=0.2, quiet=True)
    report.validate(json.loads(out.read_text()), str(out))
    timed = [row for row in r["rows"] if row.get("ms") is not None]
    assert {row["impl"] for row in timed} >= {"tiles", "torch_cpu", "torch_sdpa"}
    assert all(row["correct"] for row in r["rows"] if "correct" in row)


def test_committed_results_pass_the_schema():
    d = os.path.join(ROOT, "bench", "results")
    files = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json")] if os.path.isdir(d) else []
    for f in files:
        report.validate(json.load(open(f)), f)


def test_each_launch_takes_the_next_input_set():
    """Consecutive timed launches never share an input set (one that fits in L2 would be found there by
    the second), and every impl is timed once a rep, in the same order."""
    import torch

    from tiles.bench.run import time_interleaved

    seen = []
    impls = {name: (lambda x, name=name: seen.append((name, x))) for name in ("tiles", "cublas", "other")}
    sets = ["s0", "s1", "s2", "s3"]
    times = time_interleaved(impls, sets, torch.device("cpu"), reps=6, budget_s=10.0)
    assert {n: len(t) for n, t in times.items()} == {"tiles": 6, "cublas": 6, "other": 6}
    timed = seen[2 * len(impls):]  # after the warm-up (each impl on the first two sets)
    assert [n for n, _ in timed] == ["tiles", "cublas", "other"] * 6
    assert all(a[1] != b[1] for a, b in zip(timed, timed[1:])), timed
    assert {x for n, x in timed if n == "cublas"} == set(sets)  # every impl meets more than one set


def test_suite_ratios_divide_by_the_named_baseline():
    """bench/suite_ratios.py (the closing calls' target printout): each shape's baseline time over
    tiles', against the baseline its issue names (cuBLAS for gemm, not whatever else ran)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_ratios", os.path.join(ROOT, "bench", "suite_ratios.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = _fixture("NVIDIA H200", "H200", 800.0, "cublas", 790.0)
    r["rows"][0]["ms"], r["rows"][1]["ms"] = 2.0, 3.0
    r["rows"].append(dict(kernel="gemm", shape=r["rows"][0]["shape"], impl="other2", correct=True, ms=1.0))
    assert mod.ratios(r) == {"gemm": [("8192x8192x8192", 1.5)]}


def test_one_device_in_two_files_shows_the_newest_and_says_so(tmp_path):
    old = _fixture("NVIDIA H200", "H200", 700.0, "cublas", 772.0)
    new = _fixture("NVIDIA H200", "H200", 790.0, "cublas", 772.0)
    new["environment"]["date"] = "2026-12-04T00:00:00+00:00"
    for order in ((new, old), (old, new)):  # the argument order does not decide
        paths = []
        for i, r in enumerate(order):
            paths.append(tmp_path / f"{i}.json")
            paths[-1].write_text(json.dumps(r))
        md = report.markdown(report.load([str(p) for p in paths]), [])
        line = next(l for l in md.splitlines() if l.startswith("| gemm | 8192x8192x8192"))
        assert line.split("|")[4].strip().startswith("790 (1.02× cublas")
        assert "**H200**: 1 shapes were measured in more than one result file" in md


@pytest.mark.parametrize("name,key", [("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100"),
                                      ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"), ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
                                      ("NVIDIA GH200 480GB", "NVIDIA GH200 480GB"), ("AMD Instinct MI300X", "MI300X")])
def test_device_names_map_by_whole_words(name, key):
    """A GH200 is not an H200, and the PCIe and NVL parts do not have the SXM part's peak."""
    from tiles.bench import peaks
    assert peaks.device_key(name) == key


def test_fresh_result_names_never_replace_a_file(tmp_path):
    from tiles.bench.run import fresh_path
    names = []
    for _ in range(28):
        p = fresh_path(str(tmp_path), "H200-2026-12-04")
        open(p, "w").close()
        names.append(os.path.basename(p))
    assert names[:3] == ["H200-2026-12-04.json", "H200-2026-12-04b.json", "H200-2026-12-04c.json"]
    assert names[25:] == ["H200-2026-12-04z.json", "H200-2026-12-04zb.json", "H200-2026-12-04zc.json"]
    assert len(set(names)) == 28


@pytest.mark.parametrize("argv,needle", [
    (["report", "/nonexistent.json", "--out", "OUT"], "No such file or directory: /nonexistent.json"),
    (["report", "BAD", "--out", "OUT"], "not a JSON file"),
    (["run", "--reps", "0"], "--reps must be at least 1"),
    (["run", "--budget", "-5"], "--budget must be a number of seconds > 0"),
    (["run", "--kernels", ","], "--kernels: none given"),
    (["run", "--backend", "nosuch"], "--backend: backend='nosuch' is not a tiles backend"),
    (["run", "--suite", "decode", "--kernels", "gemm"], "--suite decode times attention_fwd only"),
])
def test_cli_errors_are_one_line(argv, needle, tmp_path):
    """Bad arguments and unreadable files: exit status 2 and one line naming the problem, no traceback."""
    import subprocess
    import sys
    (tmp_path / "BAD").write_text("{")
    argv = [str(tmp_path / a) if a in ("BAD", "OUT") else a for a in argv]
    r = subprocess.run([sys.executable, "-m", "tiles.bench", *argv], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_failing_tiles_kernel_is_a_wrong_row_not_a_skip(tmp_path, monkeypatch):
    """A tiles implementation that raises is recorded as incorrect (with the error), never as skipped."""
    import tiles
    from tiles.bench.run import run

    def broken(*a, **k):
        raise RuntimeError("planted failure")
    monkeypatch.setattr(tiles, "attention", broken)
    r = run("tiny", ("attention_fwd",), str(tmp_path / "cpu.json"), "interp", reps=2, budget=0.1, quiet=True)
    rows = [row for row in r["rows"] if row.get("impl") == "tiles"]
    assert rows and all(row["correct"] is False and "planted failure" in row["failed"] for row in rows)
    assert not any("skipped" in row for row in rows)


def test_nt_gemm_rows_time_x_at_w_transposed(monkeypatch):
    """The x @ w.T rows: B reaches every impl as the transpose of an (N, K) storage, the row keeps its
    layout, the report keys it apart from the NN shape, and suite_ratios gives it a geomean of its own."""
    import importlib.util

    import torch

    import tiles
    from tiles.bench import run as R
    from tiles.bench import shapes

    assert {shapes.gemm_layout(s) for s in shapes.gemm_shapes("standard")} == {"nn", "nt"}
    seen = []
    real = tiles.gemm
    monkeypatch.setattr(tiles, "gemm", lambda a, b, **kw: seen.append((tuple(b.shape), b.stride())) or real(a, b, **kw))
    s = dict(M=64, N=48, K=32, layout="nt")
    rows = R.bench_gemm(s, torch.device("cpu"), "interp", reps=2, budget=0.1, progress=lambda rows: None)
    assert seen and all(shape == (32, 48) and stride == (1, 32) for shape, stride in seen)
    assert all(r["correct"] and r["shape"]["layout"] == "nt" for r in rows)
    assert report.shape_key(s) == "64x48x32 NT" and report.shape_key(dict(s, layout="nn")) == "64x48x32"
    spec = importlib.util.spec_from_file_location("suite_ratios", os.path.join(ROOT, "bench", "suite_ratios.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = [dict(kernel="gemm", shape=dict(M=8, N=8, K=8), impl="tiles", correct=True, ms=1.0),
            dict(kernel="gemm", shape=dict(M=8, N=8, K=8), impl="cublas", correct=True, ms=2.0),
            dict(kernel="gemm", shape=dict(M=8, N=8, K=8, layout="nt"), impl="tiles", correct=True, ms=4.0),
            dict(kernel="gemm", shape=dict(M=8, N=8, K=8, layout="nt"), impl="cublas", correct=True, ms=2.0)]
    assert mod.ratios({"rows": rows}) == {"gemm": [("8x8x8", 2.0)], "gemm NT": [("8x8x8 NT", 0.5)]}


def test_decode_suite_is_a_few_query_rows_against_a_cache():
    """The decode suite: attention_fwd only, one query row (non-causal: the same either way) or a few
    (speculative decoding, causal, bottom-right), GQA among its heads; and decode rows through the harness
    on the interpreter are timed and correct against the reference, SDPA included: its baseline takes the
    lower-right causal bias where seq_q != seq_k (is_causal would align top-left, a different mask)."""
    import torch

    from tiles.bench import baselines
    from tiles.bench import run as R
    from tiles.bench import shapes

    fwd = shapes.attention_shapes("decode")
    assert fwd and all(s["S"] <= 16 and s["S_k"] >= 2048 and s["causal"] == (s["S"] > 1) for s in fwd)
    assert any(s["H_kv"] < s["H"] for s in fwd) and any(s["H_kv"] == s["H"] for s in fwd)
    assert any(s["S"] > 1 and s["H_kv"] < s["H"] for s in fwd)
    assert shapes.attention_shapes("decode", backward=True) == [] == shapes.gemm_shapes("decode")
    with pytest.raises(ValueError, match="attention_fwd only"):
        R.run("decode", ("gemm",), None, "interp", quiet=True)
    q, k = torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 5, 8)
    assert baselines._causal(q, k, False) == {"is_causal": False} and baselines._causal(q, q, True) == {"is_causal": True}
    assert "attn_mask" in baselines._causal(q, k, True)
    for s in (dict(B=2, H=8, H_kv=2, S=1, S_k=300, D=64, causal=False),
              dict(B=2, H=8, H_kv=2, S=4, S_k=300, D=64, causal=True)):
        rows = R.bench_attention(s, torch.device("cpu"), "interp", False, reps=2, budget=0.1, progress=lambda rows: None)
        assert {r["impl"] for r in rows if r.get("ms") is not None} >= {"tiles", "torch_sdpa"}
        assert all(r["correct"] for r in rows if "correct" in r), rows
    assert report.shape_key(fwd[0]) == "B1 H32/8 S1/32768 D128"
