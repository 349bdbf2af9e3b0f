"""Session 33: where a query tile's time goes in the launched D = 128 forward, from SM clocks.

The launched non-causal source (at the shape's own schedule: the split tail from 4k keys) with
clock64() reads at a few points of every tile, by thread 0 of each role: the producer when it
issues the tile's Q load, and each consumer warpgroup at its tile's top (A), when Q has landed (B),
when it has its first turn (C), after the peeled first key block (D), after the loop (E), when it
has the turn for the last P V (F), when that has retired (G) and after the tile's stores (H). The
reads go to a __device__ array read back through the module. A tile's overhead is its time (A to
the next A) less its key blocks at the steady loop's rate ((E - D) / (blocks - 1)), printed in
units of that block time, with the phases that make it up.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_timeline.py [check]

`check` (CPU) compiles the instrumented source and asserts no spill. On the GPU the instrumented
kernel is timed beside the launched one (the reads must not move it by more than a percent or two
for the phases to mean anything) and its output must be the launched kernel's to the bit.
"""
import ctypes
import dataclasses
import statistics
import sys

import attention_split as split

ITS, ROLES, EVENTS = 40, 3, 8
CTAS = 132

HELPERS = f"""
// ---- session 33 instrument (bench/attention_timeline.py): clock64 at points of every tile
constexpr int TL_ITS = {ITS}, TL_ROLES = {ROLES}, TL_EVENTS = {EVENTS};
__device__ long long tl_buf[{CTAS} * TL_ITS * TL_ROLES * TL_EVENTS];
#define TL(role, ev) do {{ if ((threadIdx.x & 127) == 0 && it < TL_ITS && blockIdx.x < {CTAS}) \\
    tl_buf[((blockIdx.x * TL_ITS + it) * TL_ROLES + (role)) * TL_EVENTS + (ev)] = clock64(); }} while (0)
"""


def _once(src, old, new, count=1):
    if src.count(old) != count:
        raise RuntimeError(f"{old!r} is in the launched source {src.count(old)} times, not {count}")
    return src.replace(old, new)


TURN = "arch::bar_sync(1 + cw, 256);  // my turn on the tensor cores\n"


def edit(src: str) -> str:
    src = _once(src, "using namespace tiles;\n", "using namespace tiles;\n" + HELPERS)
    # producer: the Q load's issue
    src = _once(src, "        expect_tiles(S.once[0], S.q);\n", "        TL(0, 0);\n        expect_tiles(S.once[0], S.q);\n")
    # consumers
    src = _once(src, "\n      (void)pid0; (void)pid1; (void)pid2;\n",
                "\n      (void)pid0; (void)pid1; (void)pid2;\n      TL(1 + cw, 0);\n")
    src = _once(src, "      wait(S.once[0], it & 1);\n", "      wait(S.once[0], it & 1);\n      TL(1 + cw, 1);\n")
    head, sep, tail = src.partition("// the first iteration, peeled")
    assert sep
    tail = tail.replace("        " + TURN, "        " + TURN + "        TL(1 + cw, 2);\n", 1)
    src = head + sep + tail
    src = _once(src, "      for (int kb = kb_begin + 1; kb < kb_stop; ++kb) {",
                "      TL(1 + cw, 3);\n      for (int kb = kb_begin + 1; kb < kb_stop; ++kb) {") \
        if "kb_begin + 1" in src else _once(src, "      for (int kb = 1; kb < kb_stop; ++kb) {",
                                              "      TL(1 + cw, 3);\n      for (int kb = 1; kb < kb_stop; ++kb) {")
    src = _once(src, "      " + TURN + "      // mma(o, p, vt, accumulate=True)  [the last",
                "      TL(1 + cw, 4);\n      " + TURN + "      TL(1 + cw, 5);\n      // mma(o, p, vt, accumulate=True)  [the last")
    src = _once(src, "      mma_wait<0>(o);\n      if (held >= 0) release(S.ring.empty[held]), held = -1;  // its last reader retired\n      if (kb_stop",
                "      mma_wait<0>(o);\n      TL(1 + cw, 6);\n      if (held >= 0) release(S.ring.empty[held]), held = -1;  // its last reader retired\n      if (kb_stop")
    src = _once(src, "    }\n    if (cw == 0) arch::bar_sync(1, 256);", "      TL(1 + cw, 7);\n    }\n    if (cw == 0) arch::bar_sync(1, 256);")
    return src


def check():
    import pathlib
    import tempfile
    from test_attention_lower import _lower
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    for extra in ({}, {"split_tail": True}):
        opts = {**(W.SCHEDULES.get(("attention_fwd", 128)) or {}), **extra}
        low = _lower(D=128, causal=False, launched=True, options=opts)
        c = runtime.compile_cuda(edit(low.source), name=low.entry + "_tl.cu", cache=False)
        with tempfile.TemporaryDirectory() as d:
            assert_no_spills(c, low.entry, pathlib.Path(d))
        print(extra, "compiled:", c.resources.get(low.entry), flush=True)


def prepare(W, attention_fwd, q, k, v, o, lse, instrumented, extra):
    import torch
    D, S = q.shape[-1], q.shape[1]
    opts = {**(W.schedule("attention_fwd", D, (q, k, v, o, lse, D ** -0.5)) or {}), **extra}
    opts = {n: x for n, x in opts.items() if x is not None}
    cfg = W.config("attention_fwd", D=D, causal=False, Sq=S)
    base = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=opts, **cfg)
    if not instrumented:
        return base, None
    low = dataclasses.replace(base.lowered, source=edit(base.lowered.source))
    key_opts = {**opts, "bound": "timeline"}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is base.lowered)
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = low
    go = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=key_opts, **cfg)
    kern = W._kernel_cache[(id(go.lowered), torch.cuda.current_device())]
    return go, kern


def read(kern):
    import numpy as np
    from cuda.bindings import driver as cu
    err, ptr, size = cu.cuModuleGetGlobal(kern.module, b"tl_buf")
    assert err == cu.CUresult.CUDA_SUCCESS, err
    buf = np.zeros(size // 8, dtype=np.int64)
    (err,) = cu.cuMemcpyDtoH(buf.ctypes.data, ptr, size)
    assert err == cu.CUresult.CUDA_SUCCESS, err
    return buf.reshape(CTAS, ITS, ROLES, EVENTS)


def zero(kern):
    from cuda.bindings import driver as cu
    err, ptr, size = cu.cuModuleGetGlobal(kern.module, b"tl_buf")
    (err,) = cu.cuMemsetD8(ptr, 0, size)
    assert err == cu.CUresult.CUDA_SUCCESS, err


def analyse(buf, blocks_of, label, ns_per_cycle):
    """blocks_of(cta, it) -> key blocks of that unit (None past the walk's end)."""
    rows = []
    for c in range(buf.shape[0]):
        for it in range(ITS - 1):
            n = blocks_of(c, it)
            if n is None or n < 3:
                continue
            nxt = blocks_of(c, it + 1)
            for wg in (1, 2):
                e = buf[c, it, wg]
                if not e.all():
                    continue
                step = (e[4] - e[3]) / (n - 1)
                total = (buf[c, it + 1, wg, 0] - e[0]) if nxt is not None and buf[c, it + 1, wg, 0] else None
                rows.append(dict(wg=wg, n=n, step=step, q_wait=e[1] - e[0], turn0=e[2] - e[1], first=e[3] - e[2],
                                 last_turn=e[5] - e[4], pv_wait=e[6] - e[5], epilogue=e[7] - e[6],
                                 q_lead=e[1] - buf[c, it, 0, 0] if buf[c, it, 0, 0] else 0,
                                 over=(total - n * step) if total is not None else None))
    for wg in (1, 2):
        r = [x for x in rows if x["wg"] == wg]
        if not r:
            continue
        step = statistics.median(x["step"] for x in r)
        med = {k: statistics.median(x[k] for x in r if x[k] is not None) for k in
               ("q_wait", "turn0", "first", "last_turn", "pv_wait", "epilogue", "q_lead", "over")}
        print(f"{label} warpgroup {wg - 1}: {len(r)} tiles, key blocks {statistics.median(x['n'] for x in r):.0f}, "
              f"steady block {step:.0f} cycles ({step * ns_per_cycle:.0f} ns); in blocks: "
              + " ".join(f"{k}={v / step:.2f}" for k, v in med.items()), flush=True)


def main():
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    import hopper_gemm_tiles as ht
    D, H = 128, 16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert sms == CTAS, sms
    for S, extra in ((4096, {}), (4096, {"split_tail": False}), (16384, {})):
        B = 16384 // S
        sets = []
        for i in range(3):
            g = torch.Generator(device="cuda").manual_seed(i)
            q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
            sets.append((q, k, v, torch.empty_like(q), torch.empty(B, H, S, device="cuda")))
        base = [prepare(W, attention_fwd, *x, False, extra)[0] for x in sets]
        inst = [prepare(W, attention_fwd, *x, True, extra) for x in sets]
        kern = inst[0][1]
        fns = {"launched": lambda i: base[i % 3](), "instrumented": lambda i: inst[i % 3][0]()}
        base[0]()
        torch.cuda.synchronize()
        ref = (sets[0][3].clone(), sets[0][4].clone())
        sets[0][3].zero_()
        zero(kern)
        inst[0][0]()
        torch.cuda.synchronize()
        same = torch.equal(ref[0], sets[0][3]) and torch.equal(ref[1], sets[0][4])
        buf = read(kern)
        ms = ht.timed(fns, rounds=7)
        # clocks per ns from the instrumented run: the walk's span on the slowest CTA against its time
        span = max(int(buf[c, :, 1:, :].max()) - int(buf[c, 0, 1:, 0][buf[c, 0, 1:, 0] > 0].min()) for c in range(CTAS))
        ns_per_cycle = ms["instrumented"] * 1e6 / span
        programs = B * H * S // 128
        whole, parts = getattr(base[0], "split", None) or (programs, 1)
        units = whole + (programs - whole) * parts
        nk = S // 128

        def blocks_of(c, it):
            u = c + it * CTAS
            if u >= units:
                return None
            if u < whole:
                return nk
            p = (u - whole) % parts
            return (p + 1) * nk // parts - p * nk // parts
        print(f"S={S} B={B} {extra or 'launched options'} (whole {whole}, parts {parts}): bitwise {same}; "
              f"launched {ms['launched']:.4f} ms, instrumented {ms['instrumented']:.4f} ms "
              f"({ms['launched'] / ms['instrumented']:.3f}); {1 / ns_per_cycle:.2f} GHz", flush=True)
        analyse(buf, blocks_of, f"S={S}", ns_per_cycle)


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
