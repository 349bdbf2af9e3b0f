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

`check` (CPU) compiles the instrumented sources and asserts no spill. On the GPU, at S = 4k and 8k,
every variant (VARIANTS: the launched source; two bounds, the O store left out and every CTA's O
stored over its own rows, so in L2; odd CTAs walking their units last first) is timed beside the
launched kernel, its instrumented twin and cuDNN, and each instrumented variant's phases are
printed. The reads must not move the kernel by more than a percent or two for the phases to mean
anything. Outputs must be the launched kernel's to the bit, except the bounds'. Measured:
bench/hopper_notes.md, session 33.
"""
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


def no_ostore(src: str) -> str:
    """A bound (wrong output): the tile's O store left out, the LSE's kept."""
    n = src.count("store(O + pid2 * O_stride0")
    assert n == 1, n
    return src.replace("store(O + pid2 * O_stride0", "if (O_shape3 < 0) store(O + pid2 * O_stride0")


def o_l2(src: str) -> str:
    """A bound (wrong output): every tile of a CTA stores its O over the same rows (the CTA's own),
    so the stores stay in L2 and never wait for memory."""
    old = "store(O + pid2 * O_stride0 + pid1 * O_stride2, O_stride1, O_shape1, O_shape3, o, pid0 * 128 + wg_row0, 0);"
    assert src.count(old) == 1
    return src.replace(old, "store(O + (blockIdx.x / grid0) * O_stride2, O_stride1, O_shape1, O_shape3, o, "
                            "(blockIdx.x % grid0) * 128 + wg_row0, 0);")


def stagger(src: str) -> str:
    """Odd CTAs walk their units last first (split parts first): the CTAs' tile ends no longer fall
    at the same moment on every SM. The producer and the consumers walk the same order."""
    old = "for (int prog = blockIdx.x, it = 0; prog < units; prog += gridDim.x, ++it) {"
    assert src.count(old) == 2
    new = ("for (int it = 0, n_it = (units - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x; it < n_it; ++it) {\n"
           "        const int prog = blockIdx.x + ((blockIdx.x & 1) ? n_it - 1 - it : it) * gridDim.x;")
    return src.replace(old, new)


VARIANTS = {"launched": lambda s: s, "no_ostore": no_ostore, "o_l2": o_l2, "stagger": stagger,
            "stagger_no_ostore": lambda s: stagger(no_ostore(s))}


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
        for name, fn in VARIANTS.items():
            if name.startswith("stagger") and not extra:
                continue
            c = runtime.compile_cuda(edit(fn(low.source)), name=f"{low.entry}_{name}_tl.cu", cache=False)
            with tempfile.TemporaryDirectory() as d:
                assert_no_spills(c, low.entry, pathlib.Path(d))
            print(extra, name, "compiled:", c.resources.get(low.entry), flush=True)


def prepare(W, attention_fwd, q, k, v, o, lse, instrumented, extra, variant="launched"):
    import torch
    D, S = q.shape[-1], q.shape[1]
    opts = {**(W.schedule("attention_fwd", D, (q, k, v, o, lse, D ** -0.5)) or {}), **extra}
    opts = {n: x for n, x in opts.items() if x is not None}
    cfg = W.config("attention_fwd", D=D, causal=False, Sq=S)
    base = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=opts, **cfg)
    if not instrumented and variant == "launched":
        return base, None
    src = VARIANTS[variant](base.lowered.source)
    low = dataclasses.replace(base.lowered, source=edit(src) if instrumented else src)
    key_opts = {**opts, "bound": f"timeline_{variant}_{int(instrumented)}"}
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


def record(go, kern):
    """One instrumented launch: its clock reads, and ns per SM cycle (the launch's event time over the
    slowest CTA's span, so a rough rate that includes the launch)."""
    import torch
    zero(kern)
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    st.record()
    go()
    en.record()
    torch.cuda.synchronize()
    buf = read(kern)
    span = max(int(buf[c, :, 1:, :].max()) - int(buf[c, 0, 1:, 0][buf[c, 0, 1:, 0] > 0].min()) for c in range(CTAS))
    return buf, st.elapsed_time(en) * 1e6 / span


def analyse(buf, ns_per_cycle, blocks_of, label):
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
    D, H = 128, 16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert sms == CTAS, sms
    for S in (4096, 8192):
        B = 16384 // S
        sets = split.input_sets(B, S, H, D)
        plain = {n: [prepare(W, attention_fwd, *x, False, {}, n)[0] for x in sets] for n in VARIANTS}
        inst = {n: prepare(W, attention_fwd, *sets[0], True, {}, n) for n in VARIANTS}
        programs = B * H * S // 128
        whole, parts = getattr(plain["launched"][0], "split", None) or (programs, 1)
        units = whole + (programs - whole) * parts
        nk = S // 128
        ref = None
        for n in VARIANTS:
            for go in (plain[n][0], inst[n][0]):
                sets[0][3].zero_(), sets[0][4].zero_()
                go()
                torch.cuda.synchronize()
                got = (sets[0][3].clone(), sets[0][4].clone())
                if ref is None:
                    ref = got
                elif "no_ostore" not in n and n != "o_l2" and not (torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])):
                    print(f"S={S} {n}: NOT bitwise equal to launched", flush=True)
        fns = {n: (lambda i, g=g: g[i % 3]()) for n, g in plain.items()}
        fns["instrumented"] = lambda i: inst["launched"][0]()
        fns["sdpa_cudnn"] = split.cudnn_fn(sets)
        split.report(fns, 4 * B * H * S * S * D, f"S={S} B={B} (whole {whole}, parts {parts})", suite=True, rounds=7)
        for n, (go, kern) in inst.items():
            buf, ns_per_cycle = record(go, kern)
            rev = n.startswith("stagger")

            def blocks_of(c, it, rev=rev):
                n_it = (units - c + CTAS - 1) // CTAS
                if it >= n_it:
                    return None
                u = c + ((n_it - 1 - it) if rev and c % 2 else it) * CTAS
                if u < whole:
                    return nk
                p = (u - whole) % parts
                return (p + 1) * nk // parts - p * nk // parts
            analyse(buf, ns_per_cycle, blocks_of, f"S={S} {n}")


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
