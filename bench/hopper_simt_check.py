"""One device call for the Hopper no-mma lowering (lower_simt.py): correctness, timing, sanitizers.

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 bench/hopper_simt_check.py                 # all phases
    ... --phase check|time|sanitize|small

check:    tiles.layernorm / tiles.rotary / attention_bwd_prep against float64 references (the
          portability tests' tolerances), plus the interpreter on small shapes, unaligned and strided
          windows (the element-by-element path), and poisoned outputs (a missed write shows as NaN).
time:     GB/s = bytes read + written / median time (CUDA events, tiles and torch interleaved, inputs
          rotated over sets larger than L2), against torch (F.layer_norm; the eager rotary formula)
          and torch's device copy of the same bytes (the practical ceiling, ~4.2 TB/s on H200).
sanitize: compute-sanitizer memcheck and racecheck over `--phase small` (small shapes, every kernel).
Rows go to $OUT/hopper_simt.json as they are measured.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

OUT = os.environ.get("OUT", "/tmp/hopper_out")
JSON = os.path.join(OUT, "hopper_simt.json")


def emit(row):
    os.makedirs(OUT, exist_ok=True)
    with open(JSON, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def _setup():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


# ----------------------------------------------------------------------------- correctness


def ref_layernorm(x, w, b, eps):
    import torch
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(), b.double(), eps)


def ref_rotary(x, cos, sin):
    import torch
    D = x.shape[-1]
    x1, x2 = x.double()[..., : D // 2], x.double()[..., D // 2:]
    c, s = cos.double()[None, :, None], sin.double()[None, :, None]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def phase_check(small=False):
    torch = _setup()
    import tiles
    from tiles import backends
    from tiles.kernels import attention_bwd_prep, layernorm, rotary

    hop = backends.get("hopper")
    interp = backends.get("interp")
    dev = "cuda"
    g = torch.Generator().manual_seed(0)
    results = []

    def record(name, ok, err=None):
        results.append(ok)
        emit({"phase": "check", "case": name, "ok": bool(ok), "err": err})

    ln_shapes = [(3, 5, 300), (17, 1024), (2, 4097), (1, 1)] if small else \
        [(3, 5, 300), (17, 1024), (2, 4097), (1, 1), (1000, 4096), (33, 16384), (64, 768), (4096, 8192)]
    for shape in ln_shapes:
        for dt in (torch.bfloat16, torch.float16, torch.float32):
            x = (torch.randn(shape, generator=g) * 3 + 1).to(dt).to(dev)
            w = torch.randn(shape[-1], generator=g).to(dt).to(dev)
            b = torch.randn(shape[-1], generator=g).to(dt).to(dev)
            y = tiles.layernorm(x, w, b, eps=1e-5, backend="hopper")
            ref = ref_layernorm(x, w, b, 1e-5)
            try:
                torch.testing.assert_close(y, ref.to(dt))
                record(f"layernorm {shape} {dt}", True)
            except AssertionError as e:
                record(f"layernorm {shape} {dt}", False, str(e).splitlines()[1:4])

    rot_shapes = [(1, 1, 1, 64), (2, 65, 3, 128), (1, 130, 2, 32)] if small else \
        [(1, 1, 1, 64), (2, 65, 3, 128), (1, 130, 2, 32), (4, 4096, 32, 128), (2, 1000, 8, 64)]
    for shape in rot_shapes:
        for dt in (torch.float32, torch.bfloat16):
            B, S, H, D = shape
            x = torch.randn(shape, generator=g).to(dt).to(dev)
            ang = torch.randn(S, D // 2, generator=g)
            cos, sin = ang.cos().to(dev), ang.sin().to(dev)
            y = tiles.rotary(x, cos, sin, backend="hopper")
            try:
                torch.testing.assert_close(y, ref_rotary(x, cos, sin).to(dt))
                record(f"rotary {shape} {dt}", True)
            except AssertionError as e:
                record(f"rotary {shape} {dt}", False, str(e).splitlines()[1:4])

    # a strided x (B, H, S, D) seen as (B, S, H, D): the row stride is not S's
    x = torch.randn(2, 3, 70, 128, generator=g).to(torch.bfloat16).to(dev).transpose(1, 2)
    ang = torch.randn(70, 64, generator=g)
    cos, sin = ang.cos().to(dev), ang.sin().to(dev)
    y = torch.full(x.shape, float("nan"), dtype=x.dtype, device=dev)
    hop.launch(rotary, x, cos, sin, y, D=128)
    ok = torch.allclose(y.double(), ref_rotary(x, cos, sin).to(torch.bfloat16).double(), rtol=1.6e-2, atol=1e-5)
    record("rotary strided x", ok)

    # unaligned rows (row stride 4099 bf16 elements) and a column stride of 2: the element path
    base = torch.randn(37, 4099 * 2, generator=g).to(torch.bfloat16).to(dev)
    for name, xx in (("layernorm unaligned rows", base[:, 1:4097]), ("layernorm col stride 2", base[:, ::2][:, :4096])):
        w = torch.randn(4096, generator=g).to(torch.bfloat16).to(dev)
        b = torch.randn(4096, generator=g).to(torch.bfloat16).to(dev)
        y = torch.full(xx.shape, float("nan"), dtype=xx.dtype, device=dev)
        hop.launch(layernorm, xx, w, b, y, 1e-5, NP=4096, **hop.config("layernorm", N=4096))
        try:
            torch.testing.assert_close(y, ref_layernorm(xx, w, b, 1e-5).to(torch.bfloat16))
            record(name, True)
        except AssertionError as e:
            record(name, False, str(e).splitlines()[1:4])

    # attention_bwd_prep: Delta = rowsum(dO * O), against float64 and the interpreter
    for (B, S, H, D), dt in (((1, 1, 1, 64), torch.bfloat16), ((2, 130, 3, 128), torch.bfloat16),
                             ((1, 77, 2, 64), torch.float16)) + ((((4, 4096, 16, 128), torch.bfloat16),) if not small else ()):
        o = torch.randn(B, S, H, D, generator=g).to(dt).to(dev)
        do = torch.randn(B, S, H, D, generator=g).to(dt).to(dev)
        delta = torch.full((B, H, S), float("nan"), device=dev)
        hop.launch(attention_bwd_prep, o, do, delta, D=D)
        ref = (o.double() * do.double()).sum(-1).transpose(1, 2)
        ok = torch.allclose(delta.double(), ref, rtol=1e-5, atol=1e-4 * D ** 0.5)
        if S * H * B <= 1000:
            d2 = torch.full((B, H, S), float("nan"), device=dev)
            interp.launch(attention_bwd_prep, o, do, d2, D=D)
            ok = ok and torch.allclose(delta, d2, rtol=1e-5, atol=1e-5)
        record(f"attention_bwd_prep {(B, S, H, D)} {dt}", ok, None if ok else float((delta.double() - ref).abs().max()))

    # layernorm against the interpreter on one small shape (same rounding points)
    x = torch.randn(9, 300, generator=g).to(torch.bfloat16).to(dev)
    w = torch.randn(300, generator=g).to(torch.bfloat16).to(dev)
    b = torch.randn(300, generator=g).to(torch.bfloat16).to(dev)
    y = tiles.layernorm(x, w, b, backend="hopper")
    yi = tiles.layernorm(x, w, b, backend="interp")
    diff = float((y.float() - yi.float()).abs().max())
    record("layernorm vs interp (9, 300) bf16", diff <= 0.0625, diff)
    torch.cuda.synchronize()
    emit({"phase": "check", "summary": f"{sum(results)}/{len(results)} ok"})
    return all(results)


# ----------------------------------------------------------------------------- timing


def _time(fns, reps=30):
    """Median ms of each fn, interleaved."""
    import torch
    ev = {k: [] for k in fns}
    for f in fns.values():
        f(0)
    torch.cuda.synchronize()
    torch.cuda._sleep(int(1.5e8))  # ~75 ms: the launches below queue behind it, so the events time the GPU only
    for r in range(reps):
        for k, f in fns.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f(r)
            b.record()
            ev[k].append((a, b))
    torch.cuda.synchronize()
    return {k: statistics.median(a.elapsed_time(b) for a, b in v) for k, v in ev.items()}


def _variant(kfn, args, kw, layout):
    """A launcher of kfn's IR lowered with an explicit (TR, TC) layout (bypasses the API)."""
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_simt import SimtLowering
    from tiles.core import ir
    k, bound = kfn.trace(*args, **kw), kfn.bind(*args, **kw)
    lo = SimtLowering(k, layout=layout).lower()
    c = runtime.compile_cuda(lo.source, name=lo.entry + ".cu")
    kern = runtime.load(c.cubin, lo.entry)
    env = kfn.runtime_env(k, bound)
    grid = [int(ir.evaluate(g, env)) for g in k.grid]
    argv = SimtLowering.argv(lo, {p.name: bound.arguments[p.name] for p in k.params}, env)
    return lambda: kern.launch(grid, lo.block, argv)


def phase_variants():
    """Layouts (rows per block, TR x TC) of layernorm 16384x4096 and rotary (4, 4096, 32, 128), GPU time."""
    torch = _setup()
    from tiles.kernels import layernorm, rotary
    dev, dt = "cuda", torch.bfloat16
    M, N = 16384, 4096
    xs = [torch.randn(M, N, device=dev, dtype=dt) for _ in range(2)]
    ys = [torch.empty_like(x) for x in xs]
    w, b = torch.randn(N, device=dev, dtype=dt), torch.randn(N, device=dev, dtype=dt)
    fns = {}
    for BM, lay in ((2, (2, 128)), (2, (2, 256)), (1, (1, 256)), (1, (1, 512)), (4, (4, 128)), (1, (1, 128))):
        ls = [_variant(layernorm, (xs[i], w, b, ys[i], 1e-5), dict(NP=4096, BM=BM), lay) for i in range(2)]
        fns[f"BM{BM} {lay}"] = (lambda ls: lambda r: ls[r % 2]())(ls)
    t = _time(fns)
    for k, v in t.items():
        emit({"phase": "variants", "kernel": "layernorm", "variant": k, "ms": round(v, 4),
              "GBs": round(2 * M * N * 2 / v / 1e6, 1)})
    B, S, H, D = 4, 4096, 32, 128
    xs = [torch.randn(B, S, H, D, device=dev, dtype=dt) for _ in range(2)]
    ys = [torch.empty_like(x) for x in xs]
    ang = torch.randn(S, D // 2, device=dev)
    cos, sin = ang.cos(), ang.sin()
    fns = {}
    for lay in ((32, 8), (16, 8), (64, 8), (8, 8)):
        ls = [_variant(rotary, (xs[i], cos, sin, ys[i]), dict(D=D), lay) for i in range(2)]
        fns[f"{lay}"] = (lambda ls: lambda r: ls[r % 2]())(ls)
    t = _time(fns)
    for k, v in t.items():
        emit({"phase": "variants", "kernel": "rotary", "variant": k, "ms": round(v, 4),
              "GBs": round((4 * B * S * H * D + 2 * S * D * 4) / v / 1e6, 1)})
    # host cost of one API call (small tensors: the GPU is idle, the wall time is Python + launch)
    import tiles
    x = torch.randn(8, 256, device=dev, dtype=dt)
    w, b = torch.randn(256, device=dev, dtype=dt), torch.randn(256, device=dev, dtype=dt)
    for name, f in (("tiles.layernorm", lambda: tiles.layernorm(x, w, b, backend="hopper")),
                    ("F.layer_norm", lambda: torch.nn.functional.layer_norm(x, (256,), w, b))):
        f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            f()
        torch.cuda.synchronize()
        emit({"phase": "variants", "host_us_per_call": name, "us": round((time.perf_counter() - t0) / 200 * 1e6, 1)})


def phase_time():
    torch = _setup()
    import tiles

    dev = "cuda"
    L2 = 60 << 20
    for M, N in ((16384, 4096), (8192, 8192), (32768, 1024), (4096, 16384)):
        dt = torch.bfloat16
        nbytes = 2 * M * N * 2
        sets = max(2, -(-3 * L2 // nbytes))
        xs = [torch.randn(M, N, device=dev, dtype=dt) for _ in range(sets)]
        ys = [torch.empty_like(x) for x in xs]
        w = torch.randn(N, device=dev, dtype=dt)
        b = torch.randn(N, device=dev, dtype=dt)
        F = torch.nn.functional
        t = _time({
            "tiles": lambda r: tiles.layernorm(xs[r % sets], w, b, backend="hopper"),
            "torch": lambda r: F.layer_norm(xs[r % sets], (N,), w, b, 1e-5),
            "copy": lambda r: ys[r % sets].copy_(xs[r % sets]),
        })
        emit({"phase": "time", "kernel": "layernorm", "shape": [M, N], "dtype": "bf16",
              **{f"{k}_ms": round(v, 4) for k, v in t.items()},
              **{f"{k}_GBs": round(nbytes / v / 1e6, 1) for k, v in t.items()}})
    for B, S, H, D in ((4, 4096, 32, 128), (1, 8192, 32, 128), (8, 2048, 8, 64)):
        dt = torch.bfloat16
        xbytes = B * S * H * D * 2
        nbytes = 2 * xbytes + 2 * S * (D // 2) * 4
        sets = max(2, -(-3 * L2 // (2 * xbytes)))
        xs = [torch.randn(B, S, H, D, device=dev, dtype=dt) for _ in range(sets)]
        ys = [torch.empty_like(x) for x in xs]
        ang = torch.randn(S, D // 2, device=dev)
        cos, sin = ang.cos(), ang.sin()
        c4, s4 = cos[None, :, None].to(dt), sin[None, :, None].to(dt)

        def eager(x):
            x1, x2 = x[..., : D // 2], x[..., D // 2:]
            return torch.cat([x1 * c4 - x2 * s4, x2 * c4 + x1 * s4], -1)

        t = _time({
            "tiles": lambda r: tiles.rotary(xs[r % sets], cos, sin, backend="hopper"),
            "torch": lambda r: eager(xs[r % sets]),
            "copy": lambda r: ys[r % sets].copy_(xs[r % sets]),
        })
        emit({"phase": "time", "kernel": "rotary", "shape": [B, S, H, D], "dtype": "bf16",
              **{f"{k}_ms": round(v, 4) for k, v in t.items()},
              **{f"{k}_GBs": round((nbytes if k != "copy" else 2 * xbytes) / v / 1e6, 1) for k, v in t.items()}})


# ----------------------------------------------------------------------------- sanitizers


def _sanitizer():
    cands = [shutil.which("compute-sanitizer")]
    for p in sys.path:
        cands += glob.glob(os.path.join(p, "nvidia", "*", "bin", "compute-sanitizer"))
    cands += glob.glob("/usr/local/cuda*/bin/compute-sanitizer") + glob.glob("/usr/local/cuda*/compute-sanitizer/compute-sanitizer")
    return next((c for c in cands if c and os.path.exists(c)), None)


def phase_sanitize():
    tool = _sanitizer()
    if tool is None:
        emit({"phase": "sanitize", "skipped": "compute-sanitizer not found"})
        return
    for t in ("memcheck", "racecheck"):
        env = dict(os.environ, TILES_POISON="1", OUT=os.path.join(OUT, f"sanitize_{t}"))
        cmd = [tool, "--tool", t, "--report-api-errors", "no", "--kernel-name", "kns=tiles_",
               sys.executable, __file__, "--phase", "small"]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        out = p.stdout + p.stderr
        summary = [l for l in out.splitlines() if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l]
        emit({"phase": "sanitize", "tool": t, "rc": p.returncode, "summary": summary,
              "checks_ok": out.count('"ok": true'), "checks_bad": out.count('"ok": false'),
              "secs": round(time.time() - t0, 1), "tail": out[-1500:] if p.returncode else ""})


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", default="all", choices=["all", "check", "time", "variants", "sanitize", "small"])
    a = ap.parse_args(argv)
    if a.phase == "small":
        return 0 if phase_check(small=True) else 1
    phases = ["check", "time", "variants", "sanitize"] if a.phase == "all" else [a.phase]
    for ph in phases:
        t0 = time.time()
        try:
            {"check": phase_check, "time": phase_time, "variants": phase_variants, "sanitize": phase_sanitize}[ph]()
        except Exception as e:  # one phase failing still lets the next run
            emit({"phase": ph, "error": f"{type(e).__name__}: {e}"})
        print(f"[{ph}] {time.time() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
