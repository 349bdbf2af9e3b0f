"""Session 38: the SM clock inside the D = 128 forward, from the kernel itself.

Each CTA's first consumer thread reads %globaltimer (ns) and clock64 (this SM's cycles) at the top of
every unit of its walk and once after it. Between two reads of one CTA, cycles over nanoseconds is that
SM's clock over the interval. Per launch this prints the clock over the whole launch (every CTA's
cycles over its nanoseconds), the kernel's span by the global timer, and the clock in 100 us windows
from the first CTA's start (the median over the intervals whose midpoint falls in the window). Two
ways of launching:
- `rested`: behind the ~5 ms sleep kernel, as the standard suite times (tiles.bench.run.Timer);
- `b2b`: the last of 30 launches back to back, where the board runs at its power limit.

Sessions 33-37 shortened the tile boundary of the forward in several ways (O staged in a K tile, the
last P V carried into the next tile, phase offsets); at 4k and longer none of them showed in the
kernel's time. If the clock falls as the cycles fall, the forward is held by the board's power, and a
shorter boundary in cycles cannot show in time. (Measured: the clock stays near 1.70 GHz and moves
little; cycles count. bench/hopper_notes.md, session 38.) The variants at S = 4k: the launched
source, and the unsplit forward with and without `ring_store` (O staged in the last K tile). The
launched source there was the split tail until `device_session38c.sh`, and is now the split tail with
ring_store; variant `split` is the one before.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_clock.py [check [module:name ...] | S ... | ab S ... [variant ...]]

`ab`: rested launches of the instrumented variants interleaved, with each one's time, clock and cycles
(medians, quartiles). Variants `idle1` / `idle2` are the launched source with every consumer asleep
for 1 / 2 us at each unit's top: if the boundary's idle cycles are free under the power ceiling, they
cost less time than they add (measured: they are not; `device_session38b.sh`). `split_ring`: the
split tail with ring_store's whole tiles (`device_session38c.sh`). A variant `module:name` is
VARIANTS[name] of bench/module.py applied to the launched source (attention_carry:carry, ...);
`partsN` the launched options with the split tail's parts forced to N.
"""
import dataclasses
import statistics
import sys

import attention_split as split

ITS, CTAS = 64, 132

HELPERS = f"""
// ---- session 38 instrument (bench/attention_clock.py): globaltimer and clock64 at each unit's top
constexpr int CK_ITS = {ITS};
__device__ long long ck_buf[{CTAS} * (CK_ITS + 1) * 2];
__device__ __forceinline__ void ck_read(int slot) {{
  if (threadIdx.x != 128 || blockIdx.x >= {CTAS} || slot > CK_ITS) return;
  long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  ck_buf[(blockIdx.x * (CK_ITS + 1) + slot) * 2] = ns;
  ck_buf[(blockIdx.x * (CK_ITS + 1) + slot) * 2 + 1] = clock64();
}}
"""

TOP = "\n      (void)pid0; (void)pid1; (void)pid2;\n"
END = "    if (cw == 0) arch::bar_sync(1, 256);"


def edit(src: str, idle_ns: int = 0) -> str:
    """The reads; with idle_ns, every consumer thread also sleeps that long at each unit's top (a
    boundary made longer by idle time alone)."""
    for old in ("using namespace tiles;\n", TOP, END):
        if src.count(old) != 1:
            raise RuntimeError(f"{old!r} is in the source {src.count(old)} times, not once")
    src = src.replace("using namespace tiles;\n", "using namespace tiles;\n" + HELPERS)
    idle = f"      __nanosleep({idle_ns});\n" if idle_ns else ""
    src = src.replace(TOP, TOP + "      if (it < CK_ITS) ck_read(it);\n" + idle)
    return src.replace(END, "    ck_read(CK_ITS);\n" + END)


IDLE = {"idle1": 1000, "idle2": 2000}  # variants of the launched source


def source_edit(variant):
    """`module:name`: VARIANTS[name] of bench/module.py, an edit of the launched source (or None)."""
    if ":" not in variant:
        return None
    import importlib
    mod, name = variant.split(":")
    return importlib.import_module(mod).VARIANTS[name]


def options(W, x, variant):
    opts = dict(W.schedule("attention_fwd", 128, x, False) or {})
    if variant in IDLE or ":" in variant or variant == "split":  # the launched source before session 38 (the edits know it)
        opts.pop("ring_store", None)
        return {n: v for n, v in opts.items() if v is not None}
    if variant == "plain":
        for name in ("split_tail", "ring_store", "tma_store"):
            opts.pop(name, None)
        opts["peel"] = True
    elif variant == "split_ring":  # the split tail with ring_store's whole tiles (launched from session 38)
        opts.pop("tma_store", None)
        opts.update(peel=True, ring_store=True)
    elif variant.startswith("parts"):  # the launched choice with the split tail's parts forced
        opts["split_tail"] = int(variant[5:])
    elif variant == "ring":
        for name in ("split_tail", "tma_store"):
            opts.pop(name, None)
        opts.update(peel=True, ring_store=True)
    return {n: v for n, v in opts.items() if v is not None}


def prepare(W, attention_fwd, x, variant, instrumented):
    import torch
    q = x[0]
    D, S = q.shape[-1], q.shape[1]
    opts = options(W, x, variant)
    cfg = W.config("attention_fwd", D=D, causal=False, Sq=S)
    base = W.prepare(attention_fwd, *x, D ** -0.5, causal=False, D=D, options=opts, **cfg)
    if not instrumented:
        return base, None
    src = (source_edit(variant) or (lambda x: x))(base.lowered.source)
    low = dataclasses.replace(base.lowered, source=edit(src, IDLE.get(variant, 0)))
    key_opts = {**opts, "bound": f"clock_{variant}"}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is base.lowered)
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = low
    go = W.prepare(attention_fwd, *x, D ** -0.5, causal=False, D=D, options=key_opts, **cfg)
    return go, W._kernel_cache[(id(go.lowered), torch.cuda.current_device())]


def _buf(kern, zero=False):
    import numpy as np
    from cuda.bindings import driver as cu
    err, ptr, size = cu.cuModuleGetGlobal(kern.module, b"ck_buf")
    assert err == cu.CUresult.CUDA_SUCCESS, err
    if zero:
        (err,) = cu.cuMemsetD8(ptr, 0, size)
        assert err == cu.CUresult.CUDA_SUCCESS, err
        return None
    buf = np.zeros(size // 8, dtype=np.int64)
    (err,) = cu.cuMemcpyDtoH(buf.ctypes.data, ptr, size)
    assert err == cu.CUresult.CUDA_SUCCESS, err
    return buf.reshape(CTAS, ITS + 1, 2)


def launch(go, kern, how):
    import torch
    _buf(kern, zero=True)
    if how == "rested":
        torch.cuda._sleep(10_000_000)
        go()
    else:
        for _ in range(30):
            go()
    torch.cuda.synchronize()
    return _buf(kern)


def clocks(buf, window_ns=100_000):
    """(GHz over the launch, span in us, [(window start us, GHz)])."""
    starts = [int(buf[c, 0, 0]) for c in range(CTAS) if buf[c, 0, 0]]
    t0 = min(starts)
    ends = [int(buf[c, ITS, 0]) for c in range(CTAS) if buf[c, ITS, 0]]
    cyc = ns = 0
    wins = {}
    for c in range(CTAS):
        pts = [(int(buf[c, i, 0]), int(buf[c, i, 1])) for i in range(ITS + 1) if buf[c, i, 0]]
        pts.sort()
        for (n0, c0), (n1, c1) in zip(pts, pts[1:]):
            if n1 <= n0:
                continue
            cyc, ns = cyc + (c1 - c0), ns + (n1 - n0)
            wins.setdefault(((n0 + n1) // 2 - t0) // window_ns, []).append((c1 - c0) / (n1 - n0))
    series = [(w * window_ns / 1e3, statistics.median(v)) for w, v in sorted(wins.items())]
    return cyc / ns, (max(ends) - t0) / 1e3, series


def ab(S=4096, variants=("launched", "plain", "ring", "idle1", "idle2"), rounds=12):
    """Rested launches of the instrumented variants, interleaved round by round: each one's event time,
    its clock over the launch and its cycles (the clock times the span), medians and quartiles."""
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    D, H = 128, 16
    B = 16384 // S
    sets = split.input_sets(B, S, H, D)
    inst = {v: [prepare(W, attention_fwd, x, v, True) for x in sets] for v in variants}
    ref = None
    for v in variants:  # each one's output against the first one's
        sets[0][3].zero_(), sets[0][4].zero_()
        inst[v][0][0]()
        torch.cuda.synchronize()
        got = (sets[0][3].clone(), sets[0][4].clone())
        if ref is None:
            ref = got
        elif torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1]):
            print(f"S={S} {v}: bitwise equal to {variants[0]}", flush=True)
        else:
            print(f"S={S} {v}: against {variants[0]}, max |dO| {(got[0].float() - ref[0].float()).abs().max().item():.3g}, "
                  f"max |dLSE| {(got[1] - ref[1]).abs().max().item():.3g}", flush=True)
    cudnn = split.cudnn_fn(sets)
    rows = {v: [] for v in (*variants, "sdpa_cudnn")}
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]) + ("sdpa_cudnn",):
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if v != "sdpa_cudnn":
                _buf(inst[v][0][1], zero=True)
            torch.cuda._sleep(10_000_000)
            st.record()
            inst[v][r % 3][0]() if v != "sdpa_cudnn" else cudnn(r)
            en.record()
            en.synchronize()
            ms = st.elapsed_time(en)
            if v == "sdpa_cudnn":
                rows[v].append((ms, 0.0, 0.0))
                continue
            ghz, span, _ = clocks(_buf(inst[v][0][1]))
            rows[v].append((ms, ghz, ghz * span / 1e3))
    flops = 4 * B * H * S * S * D
    base = statistics.median(x[0] for x in rows[variants[0]])
    for v, xs in rows.items():
        q = [statistics.quantiles([x[i] for x in xs], n=4) for i in range(3)]
        print(f"S={S} {v}: {flops / (q[0][1] * 1e-3) / 1e12:.0f} TFLOP/s ({base / q[0][1]:.3f} of {variants[0]}), "
              f"{q[0][1] * 1e3:.0f} us [{q[0][0] * 1e3:.0f}-{q[0][2] * 1e3:.0f}]"
              + (f", {q[1][1]:.3f} GHz [{q[1][0]:.3f}-{q[1][2]:.3f}], {q[2][1]:.4f} M cycles "
                 f"[{q[2][0]:.4f}-{q[2][2]:.4f}]" if v != "sdpa_cudnn" else ""), flush=True)


def check():
    import pathlib
    import tempfile
    from test_attention_lower import _lower
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    base = W.SCHEDULES.get(("attention_fwd", 128)) or {}
    for name in sys.argv[2:]:  # check module:name ...: those edits under the reads
        low = _lower(D=128, causal=False, launched=True, options={**base, "split_tail": True})
        c = runtime.compile_cuda(edit(source_edit(name)(low.source)), name=f"{low.entry}_{name}_clock.cu", cache=False)
        with tempfile.TemporaryDirectory() as d:
            assert_no_spills(c, low.entry, pathlib.Path(d))
        print(name, "compiled:", c.resources.get(low.entry), flush=True)
    for extra in ({"split_tail": True}, {"ring_store": True}, {}) if len(sys.argv) <= 2 else ():
        low = _lower(D=128, causal=False, launched=True, options={**base, **extra})
        for idle in (0, 1000) if "split_tail" in extra else (0,):
            c = runtime.compile_cuda(edit(low.source, idle), name=f"{low.entry}_clock{idle}.cu", cache=False)
            with tempfile.TemporaryDirectory() as d:
                assert_no_spills(c, low.entry, pathlib.Path(d))
            print(extra, idle, "compiled:", c.resources.get(low.entry), flush=True)


def main(shapes=(2048, 4096, 8192, 16384)):
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    D, H = 128, 16
    assert torch.cuda.get_device_properties(0).multi_processor_count == CTAS
    for S in shapes:
        B = 16384 // S
        sets = split.input_sets(B, S, H, D)
        variants = ("launched", "plain", "ring") if S == 4096 else ("launched",)
        fns, inst = {}, {}
        for v in variants:
            gos = [prepare(W, attention_fwd, x, v, False)[0] for x in sets]
            fns[v] = lambda i, gos=gos: gos[i % 3]()
            inst[v] = prepare(W, attention_fwd, sets[0], v, True)
        ref = None
        for v in variants:  # every variant and its instrumented twin: the launched output to the bit
            for go in (fns[v], lambda i, g=inst[v][0]: g()):
                sets[0][3].zero_(), sets[0][4].zero_()
                go(0)
                torch.cuda.synchronize()
                got = (sets[0][3].clone(), sets[0][4].clone())
                if ref is None:
                    ref = got
                elif not (torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])):
                    print(f"S={S} {v}: NOT bitwise equal to launched", flush=True)
        fns["clock_" + variants[0]] = lambda i: inst[variants[0]][0]()
        fns["sdpa_cudnn"] = split.cudnn_fn(sets)
        if len(variants) > 1:
            fns = {"launched": fns["launched"], **{n: f for n, f in fns.items() if n != "launched"}}
        split.report(fns, 4 * B * H * S * S * D, f"S={S} B={B}", suite=True, rounds=7)
        for v in variants:
            for how in ("rested", "b2b"):
                runs = [clocks(launch(*inst[v], how)) for _ in range(5 if how == "rested" else 2)]
                ghz = statistics.median(r[0] for r in runs)
                span = statistics.median(r[1] for r in runs)
                cycles_m = statistics.median(r[0] * r[1] for r in runs) / 1e3
                series = runs[len(runs) // 2][2]
                step = max(1, len(series) // 16)
                print(f"S={S} {v} {how}: {ghz:.3f} GHz over the launch, span {span:.0f} us "
                      f"({cycles_m:.3f} M cycles); by 100 us: "
                      + " ".join(f"{t:.0f}:{g:.2f}" for t, g in series[::step]), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"]:
        check()
    elif sys.argv[1:2] == ["ab"]:  # ab S ... [variant ...]
        shapes = [int(a) for a in sys.argv[2:] if a.isdigit()] or [4096]
        named = tuple(a for a in sys.argv[2:] if not a.isdigit())
        for S in shapes:
            ab(S, ("launched", *named) if named else
               ("launched", "split_ring", "plain", "ring") if S == 4096 else ("launched", "split_ring"))
    else:
        main(tuple(int(a) for a in sys.argv[1:]) or (2048, 4096, 8192, 16384))
