"""One device call for the Hopper attention backward (attention_bwd_dkdv lowered with its score tiles
held transposed): compile everything in parallel, the portability attention tests on hopper,
correctness of dQ/dK/dV on more shapes, compute-sanitizer on a small shape, and timing of the whole
backward (autograd) against SDPA's cuDNN and flash backends, in one script.

    PYTHONUNBUFFERED=1 PYTHONPATH=. TILES_CACHE_DIR=/tmp/tc python3 bench/hopper_attention_bwd_check.py
    ... --phases precompile,tests,check,sanitize,time

Each phase runs in its own subprocess with a timeout (a hang ends only that phase). Rows go to
$OUT/hopper_attention_bwd.json; the summary table is printed last.

Correctness (TESTING.md): each of dq, dk, dv within 3·E(lp) + fl of a float64 reference, where lp is
the same math in bf16 through PyTorch. Timing: the backward of tiles.attention (autograd: prep, dK/dV,
dQ kernels) vs SDPA's backward with the cuDNN / flash backends, the same upstream gradient, interleaved
round by round over 3 input sets, median of CUDA-event times; FLOPs = 2.5 · 4·B·H·S²·D, halved causal.
dK/dV alone is also timed per lowering variant.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

OUT = os.environ.get("OUT", "/tmp/hopper_out")
JSON = os.path.join(OUT, "hopper_attention_bwd.json")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(ROOT, "tests", "portability")]
from hopper_attention_check import _sanitizer, _time_batch  # noqa: E402

SEQS = [1024, 4096]
DKDV_VARIANTS = {"auto": {}, "norot": {"rotate": False}, "nohoist": {"hoist": False},
                 "np": {"persistent": False}}


def record(kind, **row):
    row = {"kind": kind, "time": time.strftime("%H:%M:%S"), **row}
    os.makedirs(OUT, exist_ok=True)
    with open(JSON, "a") as f:
        f.write(json.dumps(row) + "\n")
    return row


# ----------------------------------------------------------------------------- precompile
def _sources():
    """Every lowering the later phases launch, traced on meta tensors (no CUDA needed)."""
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.backends.hopper.lower_simt import SimtLowering
    from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_prep, attention_fwd
    out = []
    m = lambda *s, dt=torch.bfloat16: torch.empty(s, dtype=dt, device="meta")
    for dt in (torch.bfloat16, torch.float16):
        for D in (64, 128):
            q, l = m(1, 64, 2, D, dt=dt), m(1, 2, 64, dt=torch.float32)
            out.append(SimtLowering(attention_bwd_prep.trace(q, q, l, D=D)).lower())
            for causal in (False, True):
                out.append(WarpSpecializedLowering(attention_fwd.trace(q, q, q, q, l, 0.1, causal=causal, D=D)).lower())
                if dt is not torch.bfloat16:
                    continue
                k = attention_bwd_dkdv.trace(q, q, q, q, l, l, q, q, 0.1, causal=causal, D=D)
                for opts in DKDV_VARIANTS.values():
                    try:
                        out.append(WarpSpecializedLowering(k, **opts).lower())
                    except Exception as e:
                        print("variant", opts, repr(e)[:200])
                kq = attention_bwd_dq.trace(q, q, q, q, l, l, q, 0.1, causal=causal, D=D)
                for opts in ({}, {"hoist": False}, {"hoist": True}):
                    out.append(WarpSpecializedLowering(kq, **opts).lower())
    uniq = {}
    for low in out:
        uniq.setdefault(low.source, low.entry)
    return list(uniq.items())


def _compile_one(item):
    from tiles.backends.hopper import runtime
    src, entry = item
    t = time.time()
    c = runtime.compile_cuda(src, name=entry + ".cu")
    r = c.resources.get(entry) or {}
    return entry, round(time.time() - t, 1), r.get("spill_stores"), r.get("registers")


def phase_precompile(args):
    from concurrent.futures import ProcessPoolExecutor
    items = _sources()
    with ProcessPoolExecutor(max_workers=min(14, os.cpu_count() or 4)) as ex:
        for res in ex.map(_compile_one, items):
            print("compiled", *res, flush=True)
    record("precompile", n=len(items))


# ----------------------------------------------------------------------------- tests
def phase_tests(args):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/portability/test_attention.py",
           "-k", "hopper"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=62)
    tail = (p.stdout + p.stderr).strip().splitlines()[-12:]
    print("\n".join(tail))
    record("tests", rc=p.returncode, tail=tail)


# ----------------------------------------------------------------------------- correctness
CHECK = [  # (B, Sq, Sk, H, Hkv, D)
    (1, 1000, 1000, 4, 2, 128), (2, 333, 777, 8, 2, 64), (1, 777, 333, 4, 1, 128), (1, 1, 300, 2, 2, 64),
    (3, 129, 129, 6, 6, 64), (1, 2048, 2048, 8, 1, 128), (1, 300, 300, 16, 2, 128),
]


def _grads(q, k, v, do, causal, kind):
    """dq, dk, dv through autograd: tiles on hopper, or the suite's reference in float64 ("ref") or in
    the inputs' dtype ("lp")."""
    import torch
    import tiles
    from reference import attention_ref
    dt = torch.float64 if kind == "ref" else q.dtype
    xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
    scale = q.shape[-1] ** -0.5
    if kind == "tiles":
        o = tiles.attention(*xs, causal=causal, scale=scale, backend="hopper")
    else:
        o = attention_ref(*xs, causal, scale, dtype=dt)[0]
    return torch.autograd.grad(o, xs, do.to(dt))


def phase_check(args):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    for shape in CHECK:
        for causal in (False, True):
            try:
                B, Sq, Sk, H, Hkv, D = shape
                g = torch.Generator(device="cuda").manual_seed(sum(shape) + causal)
                q = torch.randn(B, Sq, H, D, device="cuda", generator=g).bfloat16()
                k = torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).bfloat16()
                v = torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).bfloat16()
                do = torch.randn(B, Sq, H, D, device="cuda", generator=g).bfloat16()
                ref = _grads(q, k, v, do, causal, "ref")
                lp = _grads(q, k, v, do, causal, "lp")
                got = _grads(q, k, v, do, causal, "tiles")
                errs, ok = {}, True
                for n, a, r, l in zip("qkv", got, ref, lp):
                    e, e_lp = (a.double() - r).abs().max().item(), (l.double() - r).abs().max().item()
                    fl = 2 * ((r + 0.3 - 0.3) - r).abs().max().item()
                    errs["d" + n] = (e, e_lp)
                    ok &= bool(e <= 3 * e_lp + fl) and bool(torch.isfinite(a).all())
                row = record("check", shape=shape, causal=causal, errs=errs, ok=ok)
            except Exception as e:
                row = record("check", shape=shape, causal=causal, ok=False, error=repr(e)[:300])
            print(row, flush=True)


# ----------------------------------------------------------------------------- sanitizer
def phase_sanitize_child(args):
    import torch
    import tiles
    g = torch.Generator(device="cuda").manual_seed(0)
    for causal in (False, True):
        q = torch.randn(1, 200, 2, 64, device="cuda", generator=g).bfloat16().requires_grad_()
        k = torch.randn(1, 190, 1, 64, device="cuda", generator=g).bfloat16().requires_grad_()
        v = torch.randn(1, 190, 1, 64, device="cuda", generator=g).bfloat16().requires_grad_()
        tiles.attention(q, k, v, causal=causal, backend="hopper").float().sum().backward()
    torch.cuda.synchronize()
    print("sanitize child done")


def phase_sanitize(args):
    tool = _sanitizer()
    if tool is None:
        record("sanitize", tool=None, summary="compute-sanitizer not found")
        return
    subprocess.run([sys.executable, __file__, "--phase", "sanitize_child"], cwd=ROOT, timeout=40)
    for t in ("memcheck", "racecheck", "synccheck"):
        cmd = [tool, "--tool", t, "--report-api-errors", "no", sys.executable, __file__, "--phase", "sanitize_child"]
        try:
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=40)
            out = (p.stdout + p.stderr).strip().splitlines()
            summ = [l for l in out if "SUMMARY" in l or "rror" in l][-3:] or out[-3:]
        except subprocess.TimeoutExpired:
            summ = ["timeout"]
        print(t, summ, flush=True)
        record("sanitize", tool=t, summary=summ)


# ----------------------------------------------------------------------------- timing
def phase_time(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import tiles
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.kernels import attention_bwd_dkdv
    for D in (128, 64):
        for causal in (False, True):
            for S in SEQS:
                B, H = 16384 // S, 2048 // D
                flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
                sets = []
                for i in range(3):
                    g = torch.Generator(device="cuda").manual_seed(i)
                    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
                    sets.append((q, k, v, do))
                fns = {}
                # tiles: the autograd backward of tiles.attention (prep + dK/dV + dQ kernels)
                tl = []
                for q, k, v, do in sets:
                    xs = [x.detach().requires_grad_() for x in (q, k, v)]
                    tl.append((tiles.attention(*xs, causal=causal, backend="hopper"), xs, do))
                fns["tiles"] = lambda i: torch.autograd.grad(tl[i % 3][0], tl[i % 3][1], tl[i % 3][2], retain_graph=True)
                for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                    try:
                        ss = []
                        for q, k, v, do in sets:
                            xs = [x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v)]
                            with sdpa_kernel([be]):
                                ss.append((F.scaled_dot_product_attention(*xs, is_causal=causal), xs, do.transpose(1, 2)))
                        fns[name] = lambda i, ss=ss: torch.autograd.grad(ss[i % 3][0], ss[i % 3][1], ss[i % 3][2],
                                                                         retain_graph=True)
                    except Exception as e:
                        print("skip", name, repr(e)[:200])
                # dK/dV alone, per lowering variant (L and Delta from the tiles forward are stand-ins)
                dk = torch.empty_like(sets[0][1])
                dv = torch.empty_like(sets[0][2])
                lse = torch.randn(B, H, S, device="cuda").abs()
                delta = torch.randn(B, H, S, device="cuda")
                for vn, opts in DKDV_VARIANTS.items():
                    if vn != "auto" and not args.variants:
                        continue
                    try:
                        gos = [WarpSpecializedLowering.prepare(attention_bwd_dkdv, q, k, v, do, lse, delta, dk, dv,
                                                               D ** -0.5, causal=causal, D=D, options=opts)
                               for q, k, v, do in sets]
                        fns["dkdv_" + vn] = lambda i, gos=gos: gos[i % 3]()
                    except Exception as e:
                        print("skip dkdv", vn, repr(e)[:200])
                for f in fns.values():
                    for i in range(3):
                        f(i)
                torch.cuda.synchronize()
                ms = _time_batch(fns, rounds=7, inner=max(2, int(10 / (1 + flops / 1e12))))
                dkdv_flops = flops * 4 / 5  # dK/dV: 4 of the backward's 5 GEMMs
                tf = {n: (dkdv_flops if n.startswith("dkdv") else flops) / (t * 1e-3) / 1e12 for n, t in ms.items()}
                record("time", D=D, causal=causal, S=S, B=B, H=H, ms=ms, tflops=tf)
                print(f"D={D} causal={int(causal)} S={S:5d} " + " ".join(f"{n}={v:6.1f}" for n, v in tf.items()),
                      flush=True)
                del sets, tl, fns
                torch.cuda.empty_cache()


def phase_breakdown(args):
    """Where the backward's time goes: each kernel alone (launched from prepared arguments), the
    autograd backward on the GPU, and the host time to issue one backward (no sync in between)."""
    import torch
    import tiles
    from tiles import backends
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_prep
    hop = backends.get("hopper")
    for D in (128, 64):
        for causal in (False, True):
            for S in SEQS:
                B, H = 16384 // S, 2048 // D
                flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
                g = torch.Generator(device="cuda").manual_seed(0)
                q, k, v, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
                xs = [x.detach().requires_grad_() for x in (q, k, v)]
                out, lse = tiles.attention(*xs, causal=causal, backend="hopper", return_lse=True)
                delta = torch.empty(B, H, S, device="cuda")
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                o = out.detach()
                fns = {"bwd": lambda i: torch.autograd.grad(out, xs, do, retain_graph=True),
                       "prep": lambda i: hop.launch(attention_bwd_prep, o, do, delta, D=D)}
                fns["prep"](0)
                fns["dkdv"] = WarpSpecializedLowering.prepare(attention_bwd_dkdv, q, k, v, do, lse, delta, dk, dv,
                                                              D ** -0.5, causal=causal, D=D)
                for vn, opts in (("dq", {}), ("dq_hoist", {"hoist": True}), ("dq_nohoist", {"hoist": False})):
                    go = WarpSpecializedLowering.prepare(attention_bwd_dq, q, k, v, do, lse, delta, dq, D ** -0.5,
                                                         causal=causal, D=D, options=opts)
                    fns[vn] = lambda i, go=go: go()
                fns["dkdv"] = (lambda go: lambda i: go())(fns["dkdv"])
                for f in fns.values():
                    f(0)
                torch.cuda.synchronize()
                ms = _time_batch(fns, rounds=5, inner=5)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for i in range(10):
                    fns["bwd"](i)
                host = (time.perf_counter() - t0) / 10 * 1e3
                torch.cuda.synchronize()
                row = record("breakdown", D=D, causal=causal, S=S, ms=ms, host_ms=host,
                             bwd_tflops=flops / (ms["bwd"] * 1e-3) / 1e12)
                print(f"D={D} causal={int(causal)} S={S:5d} " + " ".join(f"{n}={v:.3f}" for n, v in ms.items())
                      + f" host_issue={host:.3f} ms  bwd={row['bwd_tflops']:.0f} TF/s", flush=True)
                del fns, out, lse, xs
                torch.cuda.empty_cache()


def summary():
    rows = [json.loads(l) for l in open(JSON)] if os.path.exists(JSON) else []
    checks = [r for r in rows if r["kind"] == "check"]
    bad = [r for r in checks if not r.get("ok")]
    print(f"\n== check: {len(checks) - len(bad)}/{len(checks)} ok" + "".join(f"\n  FAIL {r}" for r in bad[:6]))
    for r in rows:
        if r["kind"] in ("sanitize", "tests"):
            print(f"== {r['kind']} {r.get('tool', '')}: {r.get('summary', r.get('tail', [''])[-1:])}")
    times = [r for r in rows if r["kind"] == "time"]
    if times:
        names = sorted({n for r in times for n in r["tflops"]})
        print("\n== backward TFLOP/s (bf16, 16k tokens, hidden 2048; dkdv_*: that kernel alone, 4/5 of the FLOPs)")
        print("D   causal S     " + " ".join(f"{n:>12}" for n in names) + "  tiles/cudnn tiles/flash")
        for r in times:
            t = r["tflops"]
            print(f"{r['D']:<3} {int(r['causal']):<6} {r['S']:<5} " + " ".join(f"{t.get(n, float('nan')):12.1f}" for n in names)
                  + f"  {t['tiles'] / t.get('cudnn', float('nan')):11.3f} {t['tiles'] / t.get('flash', float('nan')):11.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", default="all")
    ap.add_argument("--variants", action="store_true", help="also time dK/dV's lowering variants")
    ap.add_argument("--phases", default="precompile,tests,check,sanitize,time")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    phases = {"precompile": phase_precompile, "tests": phase_tests, "check": phase_check,
              "sanitize": phase_sanitize, "sanitize_child": phase_sanitize_child, "time": phase_time,
              "breakdown": phase_breakdown}
    if args.phase != "all":
        return phases[args.phase](args)
    os.makedirs(OUT, exist_ok=True)
    limits = {"precompile": 45, "tests": 65, "check": 40, "sanitize": 100, "time": 70, "breakdown": 60}
    for ph in args.phases.split(","):
        t0 = time.time()
        cmd = [sys.executable, __file__, "--phase", ph] + (["--variants"] if args.variants else [])
        try:
            rc = subprocess.run(cmd, cwd=ROOT, timeout=limits[ph]).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        print(f"-- phase {ph}: rc={rc} in {time.time() - t0:.0f}s", flush=True)
        record("phase", phase=ph, rc=rc, seconds=round(time.time() - t0))
    summary()


if __name__ == "__main__":
    main()
