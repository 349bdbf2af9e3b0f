"""One device call for the Hopper attention lowering: suite tests, correctness of every variant,
compute-sanitizer, and timing against SDPA (cuDNN and flash backends), in one script.

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 bench/hopper_attention_check.py            # all phases
    ... --phase tests|check|sanitize|time [--quick]

Each phase runs in its own subprocess with a timeout, so a hang (a barrier that never completes) or a
fault ends only that phase. Rows are appended to $OUT/hopper_attention.json as they are measured; the
last lines printed are the summary table.

Correctness: max |O - ref| and max |LSE - ref| against float32 SDPA math of the same inputs, with the
bound max(2 * E(SDPA in the input dtype), 2e-2) on O and 1e-3 relative on the LSE.
Timing: CUDA events around batches of launches, tiles variants / SDPA cuDNN / SDPA flash interleaved
round by round, inputs rotated over 3 sets; the median per-launch time. FLOPs = 4·B·H·Sq·Sk·D, halved
when causal (FlashAttention's convention).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

OUT = os.environ.get("OUT", "/tmp/hopper_out")
JSON = os.path.join(OUT, "hopper_attention.json")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# FlashAttention's standard benchmark: 16k tokens, hidden 2048
FA_SEQS = [512, 1024, 2048, 4096, 8192, 16384]
VARIANTS = {  # name -> (constexpr overrides, lowering options); see bench/hopper_notes.md for runs 1-3
    "auto": ({}, {}),                                           # defaults: persistent, PingPong turns, rotated, deepest ring
    "np": ({}, {"persistent": False}),                          # one CTA per program
    "p0fast": ({}, {"order": "pid0_fastest"}),                  # run 3's persistent order (= auto when not causal)
    "bn176": ({"BN": 176}, {}),                                 # FA3's D=128 key block (wgmma N=176)
    "bn192": ({"BN": 192}, {}),                                 # a wider key block at D=64
    "c3bm192": ({"BM": 192}, {"consumers": 3, "pingpong": False}),  # three consumers of 64 rows at D=64
}
VARIANT_DIMS = {"bn176": (128,), "bn192": (64,), "c3bm192": (64,)}  # head dims a variant is built for


def record(kind, **row):
    row = {"kind": kind, "time": time.strftime("%H:%M:%S"), **row}
    os.makedirs(OUT, exist_ok=True)
    with open(JSON, "a") as f:
        f.write(json.dumps(row) + "\n")
    return row


def _inputs(B, Sq, Sk, H, Hkv, D, dtype, seed=0):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, Sq, H, D, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(B, Sk, Hkv, D, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(B, Sk, Hkv, D, device="cuda", dtype=dtype, generator=g)
    return q, k, v


def _launcher(q, k, v, causal, variant):
    """A zero-argument launch of the tiles forward for these inputs (built once) and its outputs."""
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.kernels import attention_fwd
    B, Sq, H, D = q.shape
    over, opts = VARIANTS[variant]
    o = torch.empty_like(q)
    lse = torch.empty(B, H, Sq, device=q.device, dtype=torch.float32)
    go = WarpSpecializedLowering.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D,
                                         options=opts, **over)
    return go, o, lse


def _ref(q, k, v, causal, dtype=None):
    """SDPA math in float32 (or in `dtype`), FA layout in and out, with the LSE (natural log)."""
    import torch
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    dt = dtype or torch.float32
    qq = q.to(dt).transpose(1, 2)
    kk = k.to(dt).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    vv = v.to(dt).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    s = (qq @ kk.transpose(-1, -2)).float() * D ** -0.5
    if causal:
        r = torch.arange(Sq, device=q.device)[:, None]
        c = torch.arange(Sk, device=q.device)[None, :]
        s = s.masked_fill(c > r + Sk - Sq, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    o = (p.to(dt) @ vv).float()
    return o.transpose(1, 2), lse


# ----------------------------------------------------------------------------- phases
def phase_tests(args):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/portability", "-k",
           "hopper and not backward and not grad and not non_contiguous"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=115)
    tail = (p.stdout + p.stderr).strip().splitlines()[-15:]
    print("\n".join(tail))
    record("tests", rc=p.returncode, tail=tail)


CHECK_SHAPES = [  # (B, Sq, Sk, H, Hkv, D)
    (1, 1000, 1000, 4, 4, 128), (2, 333, 777, 8, 2, 64), (1, 777, 333, 4, 1, 128), (1, 4096, 4096, 2, 2, 64),
    (3, 129, 129, 2, 2, 128),
]


def phase_check(args):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    for shape in CHECK_SHAPES[:2] if args.quick else CHECK_SHAPES:
        D = shape[-1]
        for causal in (False, True):
            q, k, v = _inputs(*shape, torch.bfloat16, seed=sum(shape))
            ro, rl = _ref(q, k, v, causal)
            lo, _ = _ref(q, k, v, causal, torch.bfloat16)
            e_lp = (lo - ro).abs().max().item()
            for variant in VARIANTS:
                if D not in VARIANT_DIMS.get(variant, (D,)):
                    continue
                if args.variants and variant not in args.variants.split(","):
                    continue
                try:
                    go, o, lse = _launcher(q, k, v, causal, variant)
                    go()
                    torch.cuda.synchronize()
                    e_o = (o.float() - ro).abs().max().item()
                    fin = torch.isfinite(rl)
                    e_l = ((lse - rl).abs()[fin].max().item() if fin.any() else 0.0)
                    inf_ok = bool(torch.equal(torch.isinf(lse), torch.isinf(rl)))
                    ok = e_o <= max(2 * e_lp, 2e-2) and e_l <= 1e-3 * max(1.0, rl[fin].abs().max().item()) and inf_ok
                    row = record("check", shape=shape, causal=causal, variant=variant, err_o=e_o, err_lp=e_lp,
                                 err_lse=e_l, ok=ok)
                except Exception as e:  # a lowering/compile error is a result too
                    row = record("check", shape=shape, causal=causal, variant=variant, ok=False, error=repr(e)[:300])
                print(row, flush=True)


DQ_SHAPES = [(1, 333, 333, 4, 2, 64), (2, 200, 300, 4, 4, 128), (1, 1024, 1024, 2, 1, 128)]


def phase_check_dq(args):
    """attention_bwd_dq through the same lowering (one consumer warpgroup: BM = 64), against the
    float32 autograd gradient of SDPA math; L and Delta are the float32 reference's."""
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.kernels import attention_bwd_dq
    torch.backends.cuda.matmul.allow_tf32 = False
    for shape in DQ_SHAPES:
        D = shape[-1]
        for causal in (False, True):
            try:
                q, k, v = _inputs(*shape, torch.bfloat16, seed=7)
                do = torch.randn_like(q)
                q32 = q.float().requires_grad_()
                o32, lse32 = _ref(q32, k.float(), v.float(), causal)
                (dq_ref,) = torch.autograd.grad(o32, q32, do.float())
                delta = (do.float() * o32.detach()).sum(-1).transpose(1, 2).contiguous()
                lse = lse32.detach().contiguous()
                dq = torch.empty_like(q)
                go = WarpSpecializedLowering.prepare(attention_bwd_dq, q, k, v, do, lse, delta, dq, D ** -0.5,
                                                     causal=causal, D=D)
                go()
                torch.cuda.synchronize()
                rel = ((dq.float() - dq_ref).abs().max() / dq_ref.abs().max()).item()
                row = record("check_dq", shape=shape, causal=causal, rel_err=rel, ok=rel < 2e-2,
                             source=go.lowered.entry)
            except Exception as e:
                row = record("check_dq", shape=shape, causal=causal, ok=False, error=repr(e)[:300])
            print(row, flush=True)


def phase_sanitize_child(args):
    import torch
    q, k, v = _inputs(1, 200, 190, 2, 1, 64, torch.bfloat16)
    for causal in (False, True):
        go, o, lse = _launcher(q, k, v, causal, "auto")
        go()
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.kernels import attention_bwd_dq
    delta = torch.randn(1, 2, 200, device="cuda")
    dq = torch.empty_like(q)
    WarpSpecializedLowering.prepare(attention_bwd_dq, q, k, v, q, lse, delta, dq, 0.125, causal=True, D=64)()
    torch.cuda.synchronize()
    print("sanitize child done")


def _sanitizer():
    for c in [shutil.which("compute-sanitizer"), *glob.glob("/usr/local/cuda*/bin/compute-sanitizer"),
              *glob.glob("/usr/local/cuda*/compute-sanitizer/compute-sanitizer"),
              *glob.glob("/opt/nvidia/**/compute-sanitizer", recursive=True)]:
        if c and os.path.exists(c):
            return c
    return None


def phase_sanitize(args):
    tool = _sanitizer()
    if tool is None:
        record("sanitize", tool=None, summary="compute-sanitizer not found")
        print("compute-sanitizer not found")
        return
    # compile (and cache) outside the sanitizer first
    subprocess.run([sys.executable, __file__, "--phase", "sanitize_child"], cwd=ROOT, timeout=40)
    for t in ("memcheck", "racecheck", "synccheck"):
        cmd = [tool, "--tool", t, "--report-api-errors", "no", sys.executable, __file__, "--phase", "sanitize_child"]
        try:
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=45)
            out = (p.stdout + p.stderr).strip().splitlines()
            summ = [l for l in out if "SUMMARY" in l or "rror" in l][-3:] or out[-3:]
        except subprocess.TimeoutExpired:
            summ = ["timeout"]
        print(t, summ, flush=True)
        record("sanitize", tool=t, summary=summ)


def _time_batch(fns, rounds, inner):
    import torch
    times = {n: [] for n in fns}
    names = list(fns)
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            f = fns[n]
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            st.record()
            for i in range(inner):
                f(i)
            en.record()
            en.synchronize()
            times[n].append(st.elapsed_time(en) / inner)
    return {n: statistics.median(t) for n, t in times.items()}


def phase_time(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    seqs = [1024, 4096, 16384] if args.quick else FA_SEQS
    for D in (128, 64):
        for causal in (False, True):
            for S in seqs:
                B, H = 16384 // S, 2048 // D
                sets = [_inputs(B, S, S, H, H, D, torch.bfloat16, seed=i) for i in range(3)]
                flops = 4 * B * H * S * S * D / (2 if causal else 1)
                fns = {}
                for variant in VARIANTS:
                    if D not in VARIANT_DIMS.get(variant, (D,)):
                        continue
                    if args.variants and variant not in args.variants.split(","):
                        continue
                    try:
                        gos = [_launcher(q, k, v, causal, variant)[0] for q, k, v in sets]
                        fns["tiles_" + variant] = lambda i, gos=gos: gos[i % 3]()
                    except Exception as e:
                        print("skip", variant, repr(e)[:200])
                tr = [tuple(x.transpose(1, 2) for x in s) for s in sets]
                for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                    def f(i, be=be):
                        q, k, v = tr[i % 3]
                        with sdpa_kernel([be]):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    try:
                        f(0)
                        fns[name] = f
                    except Exception as e:
                        print("skip", name, repr(e)[:200])
                for f in fns.values():  # warm up (compiles, loads, clocks)
                    for i in range(3):
                        f(i)
                torch.cuda.synchronize()
                ms = _time_batch(fns, rounds=9, inner=max(3, int(20 / (1 + flops / 3e11))))
                tf = {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()}
                row = record("time", D=D, causal=causal, S=S, B=B, H=H, ms=ms, tflops=tf)
                print(f"D={D} causal={int(causal)} S={S:5d} " +
                      " ".join(f"{n}={v:6.1f}" for n, v in tf.items()), flush=True)
                del sets, tr, fns
                torch.cuda.empty_cache()


def summary():
    rows = [json.loads(l) for l in open(JSON)] if os.path.exists(JSON) else []
    checks = [r for r in rows if r["kind"] in ("check", "check_dq")]
    bad = [r for r in checks if not r.get("ok")]
    print(f"\n== check: {len(checks) - len(bad)}/{len(checks)} ok" + "".join(f"\n  FAIL {r}" for r in bad[:8]))
    for r in rows:
        if r["kind"] in ("sanitize", "tests"):
            print(f"== {r['kind']} {r.get('tool', '')}: {r.get('summary', r.get('tail', [''])[-1:])}")
    times = [r for r in rows if r["kind"] == "time"]
    if not times:
        return
    names = sorted({n for r in times for n in r["tflops"]})
    tiles_names = [n for n in names if n.startswith("tiles_")]
    print("\n== TFLOP/s (bf16, 16k tokens, hidden 2048); ratio = best tiles / cudnn")
    print("D   causal S      " + " ".join(f"{n[6:] if n.startswith('tiles_') else n:>9}" for n in names) + "  best/cudnn best/flash")
    ratios_c, ratios_f = [], []
    for r in times:
        t = r["tflops"]
        best = max((t[n] for n in tiles_names if n in t), default=float("nan"))
        rc = best / t["cudnn"] if "cudnn" in t else float("nan")
        rf = best / t["flash"] if "flash" in t else float("nan")
        ratios_c.append(rc)
        ratios_f.append(rf)
        print(f"{r['D']:<3} {int(r['causal']):<6} {r['S']:<6} " + " ".join(f"{t.get(n, float('nan')):9.1f}" for n in names)
              + f"  {rc:10.3f} {rf:10.3f}")
    g = lambda xs: math.exp(statistics.mean(math.log(x) for x in xs if x == x and x > 0)) if xs else float("nan")
    print(f"geomean best/cudnn {g(ratios_c):.3f}  best/flash {g(ratios_f):.3f}")
    for n in tiles_names:
        rs = [r["tflops"][n] / r["tflops"]["cudnn"] for r in times if n in r["tflops"] and "cudnn" in r["tflops"]]
        print(f"  geomean {n}/cudnn {g(rs):.3f} over {len(rs)} shapes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", default="all")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--variants", default="")
    ap.add_argument("--phases", default="tests,check,check_dq,sanitize,time")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    if args.phase != "all":
        return {"tests": phase_tests, "check": phase_check, "check_dq": phase_check_dq, "sanitize": phase_sanitize,
                "sanitize_child": phase_sanitize_child, "time": phase_time}[args.phase](args)
    os.makedirs(OUT, exist_ok=True)
    limits = {"tests": 120, "check": 90, "check_dq": 60, "sanitize": 150, "time": 150}
    for ph in args.phases.split(","):
        t0 = time.time()
        cmd = [sys.executable, __file__, "--phase", ph] + (["--quick"] if args.quick else []) + (
            ["--variants", args.variants] if args.variants else [])
        try:
            rc = subprocess.run(cmd, cwd=ROOT, timeout=limits[ph]).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        print(f"-- phase {ph}: rc={rc} in {time.time() - t0:.0f}s", flush=True)
        record("phase", phase=ph, rc=str(rc), seconds=round(time.time() - t0))
    summary()


if __name__ == "__main__":
    main()
