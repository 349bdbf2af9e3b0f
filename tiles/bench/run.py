"""python -m tiles.bench run: time tiles and the vendor baselines in one process, interleaved.

Rules (TESTING.md): every impl is checked on the exact inputs before it is timed and reported
`correct: false` (with no time) otherwise; device events on the launch stream after warm-up; medians
with p20/p80; inputs rotated through enough sets to defeat the L2; baselines interleaved rep by rep.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import re
import platform
import subprocess
import sys
import time

import torch

from tiles.core.backend import BackendUnavailable

from . import baselines, peaks, shapes


# ----------------------------------------------------------------------------- environment


def _git_commit() -> str:
    if os.environ.get("TILES_COMMIT"):  # a copy of the tree without .git (the device machine) says it here
        return os.environ["TILES_COMMIT"]
    try:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _smi(query: str) -> str:
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=10)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(device: torch.device) -> dict:
    import tiles

    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tiles": tiles.__version__, "tiles_commit": _git_commit(), "torch": torch.__version__,
        "python": platform.python_version(), "host": platform.node(),
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(device=p.name, device_key=peaks.device_key(p.name), sms=p.multi_processor_count,
                   memory_gib=round(p.total_memory / 2**30, 1))
        if torch.version.hip:
            env.update(rocm=torch.version.hip, arch=getattr(p, "gcnArchName", ""))
        else:
            env.update(cuda=torch.version.cuda, arch=f"sm_{p.major}{p.minor}", driver=_smi("driver_version"),
                       clocks_mhz=_smi("clocks.sm,clocks.max.sm,clocks.mem"), power=_smi("power.draw,power.limit"))
    else:
        env.update(device=f"CPU ({platform.processor() or platform.machine()})", device_key="CPU")
    return env


# ----------------------------------------------------------------------------- timing


class Timer:
    """Device-event timing on the current stream (wall clock with a sync on the CPU)."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn) -> float:
        if self.cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # Keep the GPU busy (~5 ms at 1.98 GHz) while the host issues the call, so the events
            # bracket the kernels' time, not Python's. It must outlast the longest issue: an autograd
            # forward + backward takes 0.5-1.4 ms of host time, and with 1 ms here the small-S
            # backward rows measured Python (bench/hopper_notes.md, session 12).
            torch.cuda._sleep(10_000_000)
            s.record()
            fn()
            e.record()
            e.synchronize()
            return s.elapsed_time(e)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


def _quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def time_interleaved(impls: dict, sets: list, device, reps: int, budget_s: float) -> dict:
    """Rep by rep, every impl once; returns {impl: [ms, ...]}. Each launch takes the next input set, so
    no launch finds the last one's inputs in L2. (Until session 18 a rep gave all impls the same set:
    the first, tiles, read it from memory and the baselines after it found it in L2 wherever the
    inputs fit there, e.g. the fp8 GEMM's 1024 x 1536 x 7168, 18 MB.)"""
    timer = Timer(device)
    for fn in impls.values():  # warm-up: compile, autotune, caches
        for x in sets[:2]:
            fn(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    times = {n: [] for n in impls}
    t_end = time.perf_counter() + budget_s
    launch = 0
    for r in range(reps):
        for n, fn in impls.items():
            x = sets[launch % len(sets)]
            launch += 1
            times[n].append(timer(lambda: fn(x)))
        if r >= 4 and time.perf_counter() > t_end:
            break
    return times


def _n_sets(bytes_per_set: int, device) -> int:
    """Enough input sets that consecutive reps miss in L2 (3x its size), within a memory budget."""
    if device.type != "cuda":
        return 1
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
    return max(2, min(8, math.ceil(3 * l2 / max(1, bytes_per_set)), int(16e9 // max(1, bytes_per_set))))


# ----------------------------------------------------------------------------- correctness


def _errors(x, ref):
    d = (x.float() - ref.float()).abs()
    return (math.inf if torch.isnan(d).any() else d.max().item()), d.mean().item()


def _fl(ref):
    return 2 * ((ref + 0.3 - 0.3) - ref).abs().max().item()


def _attention_ref(x, causal, backward, do=None):
    """f32 reference (TF32 off), chunked over heads so 16k-token problems fit."""
    q, k, v = (t.float() for t in (x["q_bhsd"], x["k_bhsd"], x["v_bhsd"]))
    H, Hkv, Sq, Sk = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    g = H // Hkv
    step = max(g, (max(1, int(4e9 // (Sq * Sk * 4 * q.shape[0]))) // g) * g)
    outs, grads = [], []
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for h0 in range(0, H, step):
            qs = q[:, h0:h0 + step].detach().requires_grad_(backward)
            ks = k[:, h0 // g:(h0 + step) // g].detach().requires_grad_(backward)
            vs = v[:, h0 // g:(h0 + step) // g].detach().requires_grad_(backward)
            kk, vv = ks.repeat_interleave(g, 1), vs.repeat_interleave(g, 1)
            s = (qs @ kk.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
            if causal:
                keep = torch.ones(Sq, Sk, dtype=torch.bool, device=q.device).tril(Sk - Sq)
                s = s.masked_fill(~keep, -math.inf)
            o = torch.softmax(s, -1).nan_to_num(0) @ vv
            if backward:
                o.backward(do[:, h0:h0 + step].float())
                grads.append((qs.grad, ks.grad, vs.grad))
            outs.append(o.detach())
            del s
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    out = torch.cat(outs, 1)
    if not backward:
        return out
    return [torch.cat([gr[i] for gr in grads], 1) for i in range(3)]


# ----------------------------------------------------------------------------- kernels


def _attention_sets(s, device, n):
    sets = []
    for i in range(n):
        g = torch.Generator(device=device).manual_seed(1000 + i)
        mk = lambda h, S: torch.randn(s["B"], h, S, s["D"], generator=g, device=device, dtype=torch.bfloat16)
        qb, kb, vb = mk(s["H"], s["S"]), mk(s["H_kv"], s["S_k"]), mk(s["H_kv"], s["S_k"])
        # tiles takes FlashAttention's (B, S, H, D); SDPA gets its preferred contiguous (B, H, S, D).
        sets.append(dict(q=qb.transpose(1, 2).contiguous(), k=kb.transpose(1, 2).contiguous(),
                         v=vb.transpose(1, 2).contiguous(), q_bhsd=qb, k_bhsd=kb, v_bhsd=vb,
                         do=torch.randn(s["B"], s["S"], s["H"], s["D"], generator=g, device=device,
                                        dtype=torch.bfloat16)))
    return sets


def bench_attention(s, device, backend, backward, reps, budget, progress, suite="standard") -> list:
    causal = s["causal"]
    per_set = 2 * (s["B"] * s["S"] * s["H"] * s["D"] * 2 + 2 * s["B"] * s["S_k"] * s["H_kv"] * s["D"])
    sets = _attention_sets(s, device, _n_sets(per_set, device))
    skipped, failed = {}, {}
    impls = baselines.attention_impls(device, backend, backward, skipped, s, suite)
    kernel = "attention_bwd" if backward else "attention_fwd"
    x0 = sets[0]
    rows, ok_impls = [], {}
    ref = _attention_ref(x0, causal, backward, do=x0["do"].transpose(1, 2) if backward else None)
    results = {}
    for name, fn in impls.items():
        try:
            if backward:
                xs = {**x0}
                for key in ("q", "k", "v", "q_bhsd", "k_bhsd", "v_bhsd"):
                    xs[key] = x0[key].detach().requires_grad_()
                o = fn(xs, causal)
                o.backward(x0["do"].transpose(1, 2))
                use_bhsd = name != "tiles"
                got = [(xs[f"{t}_bhsd"] if use_bhsd else xs[t]).grad for t in "qkv"]
                got = [gr if use_bhsd else gr.transpose(1, 2) for gr in got]
                results[name] = got
            else:
                results[name] = [fn(x0, causal)]
        except Exception as e:  # noqa: BLE001 - a baseline that cannot run this shape is recorded, not fatal
            why = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            if name.startswith("tiles") and not isinstance(e, BackendUnavailable):
                failed[name] = why  # tiles failing is a wrong result, never a skip
            else:
                skipped[name] = why
    refs = ref if backward else [ref]
    vendor = [n for n in results if n in baselines.VENDOR_BASELINES]
    bound = [max(_errors(results[n][i], refs[i])[0] for n in vendor) if vendor else 0.0 for i in range(len(refs))]
    factor = 3 if backward else 2
    for name, got in results.items():
        errs = [_errors(g, r)[0] for g, r in zip(got, refs)]
        correct = all(e <= factor * b + _fl(r) + 1e-6 for e, b, r in zip(errs, bound, refs))
        ok_impls[name] = impls[name] if correct else None
        rows.append(dict(kernel=kernel, shape=s, impl=name, correct=correct, max_err=max(errs)))
    del results, ref, refs

    def fwd(fn):
        return lambda x: fn(x, causal)

    def fwd_bwd(fn, name):
        def run(x):
            xs = {**x}
            keys = ("q", "k", "v") if name == "tiles" else ("q_bhsd", "k_bhsd", "v_bhsd")
            for key in keys:
                xs[key] = x[key].detach().requires_grad_()
            o = fn(xs, causal)
            o.backward(x["do"].transpose(1, 2))
        return run

    timed = {n: (fwd_bwd(fn, n) if backward else fwd(fn)) for n, fn in ok_impls.items() if fn is not None}
    times = time_interleaved(timed, sets, device, reps, budget)
    if backward:  # backward time = (forward + backward) - forward, as FlashAttention reports it
        ftimes = time_interleaved({n: fwd(impls[n]) for n in timed}, sets, device, reps, budget)
    flops = shapes.attention_flops(s, backward)
    for row in rows:
        t = times.get(row["impl"])
        if not t:
            continue
        if backward:
            f = ftimes[row["impl"]]
            t = [max(1e-6, a - statistics_median(f)) for a in t]
        _fill_times(row, t, flops, device)
    for n, why in skipped.items():
        rows.append(dict(kernel=kernel, shape=s, impl=n, correct=None, skipped=why))
    for n, why in failed.items():
        rows.append(dict(kernel=kernel, shape=s, impl=n, correct=False, failed=why))
    progress(rows)
    return rows


def statistics_median(xs):
    return _quantile(xs, 0.5)


def _fill_times(row, t, flops, device):
    row["ms"] = _quantile(t, 0.5)
    row["p20_ms"], row["p80_ms"] = _quantile(t, 0.2), _quantile(t, 0.8)
    row["reps"] = len(t)
    row["tflops"] = flops / (row["ms"] * 1e-3) / 1e12
    kind = peaks.KERNEL_KIND.get(row.get("kernel"), "bf16")
    pk = peaks.peak(torch.cuda.get_device_name(device), kind) if device.type == "cuda" else None
    row["pct_peak"] = 100 * row["tflops"] / pk if pk else None


def bench_gemm(s, device, backend, reps, budget, progress) -> list:
    M, N, K = s["M"], s["N"], s["K"]
    n = _n_sets(2 * (M * K + K * N + M * N), device)
    sets = []
    for i in range(n):
        g = torch.Generator(device=device).manual_seed(2000 + i)
        a = torch.randn(M, K, generator=g, device=device, dtype=torch.bfloat16)
        if shapes.gemm_layout(s) == "nt":  # a weight stored (N, K), passed as w.t(): every impl takes the view
            b = torch.randn(N, K, generator=g, device=device, dtype=torch.bfloat16).t()
        else:
            b = torch.randn(K, N, generator=g, device=device, dtype=torch.bfloat16)
        sets.append(dict(a=a, b=b))
    skipped = {}
    impls = baselines.gemm_impls(device, backend, skipped)
    x0 = sets[0]
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = x0["a"].float() @ x0["b"].float()
    torch.backends.cuda.matmul.allow_tf32 = prev
    outs = {name: fn(x0) for name, fn in impls.items()}
    vendor = [n for n in outs if n in baselines.VENDOR_BASELINES]
    bound = max(_errors(outs[n], ref)[0] for n in vendor)
    rows, ok = [], {}
    for name, c in outs.items():
        e = _errors(c, ref)[0]
        correct = e <= 2 * bound + _fl(ref) + 1e-6
        rows.append(dict(kernel="gemm", shape=s, impl=name, correct=correct, max_err=e))
        if correct:
            ok[name] = impls[name]
    del outs, ref
    times = time_interleaved(ok, sets, device, reps, budget)
    for row in rows:
        if times.get(row["impl"]):
            _fill_times(row, times[row["impl"]], shapes.gemm_flops(s), device)
    progress(rows)
    return rows


def compile_times(device, backend) -> list:
    """Per kernel: the first call in a new process with an empty kernel cache (compile + load), and
    the first call in another new process once the cache holds it (load only)."""
    rows = []
    if device.type != "cuda":
        return rows
    # The process's first tiles call also pays once for importing the backend and torch's custom-op
    # machinery (torch._dynamo); an empty gemm (no kernel runs) takes that cost so each kernel's own
    # first call is measured alone.
    code = ("import time,torch,tiles;a=torch.randn(256,256,device='cuda',dtype=torch.bfloat16);"
            "q=torch.randn(1,256,4,128,device='cuda',dtype=torch.bfloat16);torch.cuda.synchronize();"
            "t0=time.perf_counter();tiles.gemm(a[:0],a);torch.cuda.synchronize();"
            "t=time.perf_counter();tiles.gemm(a,a);torch.cuda.synchronize();t1=time.perf_counter();"
            "tiles.attention(q,q,q,causal=True);torch.cuda.synchronize();t2=time.perf_counter();"
            "print(t1-t,t2-t1,t-t0)")
    import tempfile

    # a cache of its own, empty: the first process compiles, the second loads what the first wrote
    env = dict(os.environ, TILES_CACHE_DIR=tempfile.mkdtemp(prefix="tiles-compile-times-"))
    times = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != 0:
            rows.append(dict(kernel="compile", impl="tiles", error=r.stderr.strip().splitlines()[-1:]))
            return rows
        times.append([float(v) for v in re.findall(r"\d+\.\d+(?:e-?\d+)?", r.stdout)][-3:])
    for i, k in enumerate(("gemm", "attention_fwd")):
        rows.append(dict(kernel=k, impl="tiles", measure="first_call_s", value=times[0][i]))
        rows.append(dict(kernel=k, impl="tiles", measure="cached_first_call_new_process_s", value=times[1][i]))
    # the process's own first call (an empty gemm: imports, no kernel), cold cache and warm
    rows.append(dict(kernel="process", impl="tiles", measure="first_tiles_call_s", value=times[1][2]))
    rows.append(dict(kernel="process", impl="tiles", measure="first_tiles_call_cold_cache_s", value=times[0][2]))
    # proof the first process compiled: what it left in the (initially empty) cache
    rows.append(dict(kernel="compile", impl="tiles", measure="cache_entries_written",
                     value=len(os.listdir(env["TILES_CACHE_DIR"]))))
    return rows


def run(suite="quick", kernels=("gemm", "attention_fwd", "attention_bwd"), out=None, backend=None,
        reps=30, budget=1.0, quiet=False) -> dict:
    if suite == "decode" and "attention_fwd" not in kernels:
        raise ValueError(f"the decode suite times attention_fwd only, not {', '.join(kernels)}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":  # the interpreter is the reference semantics: time only toy shapes
        if not quiet:
            print(f"no GPU here: the {suite!r} suite becomes 'tiny', timed on the CPU interpreter against torch "
                  "on the CPU (a check of the harness, not a benchmark)", file=sys.stderr)
        suite = "tiny"
    env = environment(device)
    work = []
    if "gemm" in kernels:
        work += [("gemm", s) for s in shapes.gemm_shapes(suite)]
    if "gemm_fp8" in kernels:
        from .fp8 import fp8_shapes
        work += [("gemm_fp8", s) for s in fp8_shapes(suite)]
    for k in ("attention_fwd", "attention_bwd"):
        if k in kernels:
            work += [(k, s) for s in shapes.attention_shapes(suite, k == "attention_bwd")]
    rows = []
    t0 = time.perf_counter()

    def progress(new):
        if quiet:
            return
        i = len({(r["kernel"], json.dumps(r["shape"], sort_keys=True)) for r in rows if "shape" in r})
        for r in new:
            if r.get("ms") is not None:
                line = f"{r['tflops']:8.1f} TFLOP/s  {r['ms']:9.3f} ms"
            else:
                line = f"  {'wrong' if r.get('correct') is False else 'skipped'}: {(r.get('failed') or r.get('skipped') or '')[:60]}"
            print(f"[{i:3d}/{len(work)} {time.perf_counter() - t0:6.0f}s] {r['kernel']:14} "
                  f"{_shape_str(r['shape']):38} {r['impl']:11} {line}", flush=True)

    result = {"schema": 1, "suite": suite, "environment": env, "rows": rows}
    if out is None:
        out = fresh_path(os.path.join("bench", "results"), f"{env['device_key'].replace(' ', '_')}-{env['date'][:10]}")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)

    def save():  # after every shape, so a run cut short keeps what it measured
        with open(out + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(out + ".tmp", out)

    for k, s in work:
        if k == "gemm":
            rows += bench_gemm(s, device, backend, reps, budget, progress)
        elif k == "gemm_fp8":
            from .fp8 import bench_gemm_fp8
            rows += bench_gemm_fp8(s, device, backend, reps, budget, progress)
        else:
            rows += bench_attention(s, device, backend, k == "attention_bwd", reps, budget, progress, suite)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        save()
    if device.type == "cuda":
        rows += compile_times(device, backend)
    save()
    if not quiet:
        print(f"wrote {out}")
    return result


def fresh_path(folder: str, stem: str) -> str:
    """folder/stem.json, or the first of stem + b, c, ..., z, zb, ... that no file has taken: a second
    run on the same day never replaces the first (the naming of bench/results)."""
    suffix = ""
    while os.path.exists(os.path.join(folder, f"{stem}{suffix}.json")):
        last = suffix[-1:] or "a"
        suffix = suffix + "b" if last == "z" else suffix[:-1] + chr(ord(last) + 1)
    return os.path.join(folder, f"{stem}{suffix}.json")


def _shape_str(s: dict) -> str:
    if "M" in s:
        return f"M={s['M']} N={s['N']} K={s['K']}" + (" x @ w.T" if shapes.gemm_layout(s) == "nt" else "")
    return (f"B={s['B']} H={s['H']}/{s['H_kv']} S={s['S']}" + (f"/{s['S_k']}" if s['S_k'] != s['S'] else "")
            + f" D={s['D']}{' causal' if s['causal'] else ''}")
