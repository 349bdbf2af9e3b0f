"""Session 33: the forward's O tile stored through TMA from the last key block's K stage.

bench/attention_timeline.py found the D = 128 forward's tile epilogue at 1.0-1.2 key-block times,
0.67 of them the O store from registers (16 STG.64 a thread with their quad exchanges), not memory:
the same stores kept in L2 cost the same, and staggering the CTAs changed nothing. The launched
kernel cannot take option tma_store at D = 128: its staging tiles cost a ring stage (0.70-0.92x,
session 19). Here (`ostage`, an edit of the launched source) each warpgroup writes its 64 rows of O
into half of the last block's K tile (32 KB, read by both warpgroups' last S, which nothing reads
after) and one thread stores it with TMA. Named barrier 8 + w orders it: the other warpgroup
arrives on it once its last S has retired. The ring stage goes back to the producer once this
warpgroup's store has read it (every thread arrives on the stage's empty barrier as before, after
the issuing thread's wait for the read): `ostage` at the tile's end, `ostage_late` under the next
tile's first S. The O tensor map lives in a __device__ variable set through the module (so every
input set here shares one O). The output must be the launched kernel's to the bit.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_ostage.py [check]
"""
import ctypes
import dataclasses
import re
import sys

import attention_split as split
import attention_timeline as tl

HELPERS = r"""
// ---- session 33 experiment (bench/attention_ostage.py): O staged in the last block's K tile
__device__ tma_map map_O_g;  // set through the module before the launches
__device__ __forceinline__ st<bf16, WG_ROWS, 128>& o_staging(st<bf16, 128, 128>& kt, int cw) {
  return *reinterpret_cast<st<bf16, WG_ROWS, 128>*>(reinterpret_cast<unsigned char*>(&kt) + cw * sizeof(st<bf16, WG_ROWS, 128>));
}
"""


def _sub(src, pattern, repl, count=1, first=False):
    new, n = re.subn(pattern, repl, src, count=1 if first else 0)
    if n != count:
        raise RuntimeError(f"{pattern!r} matched {n} times, not {count}")
    return new


def _as_split_form(src: str) -> str:
    """The kernel without the split tail, its O and L stores written as the split form's (part -1
    always), so that one set of edits serves both."""
    src = _sub(src, r"(      const int kb_stop = ceil_div\(K_shape1, 128\);\n)",
               lambda m: "      constexpr int part = -1;  // no split tail: every unit a whole tile\n" + m.group(1))
    for t in ("O", "L"):
        src = _sub(src, rf"      (store\({t} \+ pid2[^\n]*\n)",
                   lambda m: "      if (part < 0) {\n        " + m.group(1) + "      } else {  // no parts\n        (void)0;\n      }\n")
    return src


def edit(src: str, late: bool = False) -> str:
    if "split_unit(" not in src:
        src = _as_split_form(src)
    src = _sub(src, r"constexpr int WG_ROWS = [^\n]*\n", lambda m: m.group(0) + HELPERS)
    # the other warpgroup's last S has read the stage's K: arrive on my partner's barrier
    src = _sub(src, r"( *)if \(kb \+ 1 == kb_stop\) release\(S\.once_empty\[0\]\);[^\n]*\n",
               lambda m: m.group(0) + f"{m.group(1)}if (kb + 1 == kb_stop) arch::bar_arrive(8 + (1 - cw), 256);  "
                                      "// my last S has read kt: the other warpgroup may stage O there\n", count=2)
    # the tile's end: keep the stage, stage O in its K tile, TMA store
    src = _sub(src, r"(      mma_wait<0>\(o\);\n(?:      TL\(1 \+ cw, 6\);\n)?)"
                    r"      if \(held >= 0\) release\(S\.ring\.empty\[held\]\), held = -1;[^\n]*\n",
               lambda m: m.group(1) + "      const int o_stage = held;  // O's staging: this stage's K tile\n"
                                      "      held = -1;\n")
    src = _sub(src, r"      if \(part < 0\) \{\n        store\(O \+ pid2 \* O_stride0[^\n]*\n",
               "      arch::bar_sync(8 + cw, 256);  // the other warpgroup's last S has read kt[o_stage]\n"
               "      if (part < 0) {\n"
               "        auto& o_st = o_staging(S.kt[o_stage], cw);\n"
               "        store(o_st, o, 0);  // registers -> swizzled shared, as bf16\n"
               "        arch::fence_proxy_async();  // generic-proxy stores, visible to the TMA unit\n"
               "        arch::bar_sync(4 + cw, 128);\n"
               "        if (wg_thread() == 0) {\n"
               "          store_async_4d(map_O_g, o_st, 0, pid1, pid0 * 128 + wg_row0, pid2);\n"
               "          arch::tma_store_commit();\n"
               "        }\n")
    give_back = ("if (wg_thread() == 0) arch::tma_store_wait_read<0>();  // the store has read the staging tile\n"
                 "{pad}arch::bar_sync(4 + cw, 128);\n"
                 "{pad}release(S.ring.empty[{stage}]);\n")
    if not late:
        src = _sub(src, r"(        store\(L \+ pid2[^\n]*\n      \} else \{[^\n]*\n[^\n]*\n      \}\n)",
                   lambda m: m.group(1) + "      " + give_back.format(pad="      ", stage="o_stage"))
    else:
        src = _sub(src, r"(        store\(L \+ pid2[^\n]*\n      \} else \{[^\n]*\n[^\n]*\n      \}\n)",
                   lambda m: m.group(1) + "      staged = o_stage;  // given back under the next tile's first S\n")
        src = _sub(src, r"(    int held = -1;[^\n]*\n)", lambda m: m.group(1) + "    int staged = -1;  // a ring stage an O store may still read\n")
        head, sep, tail = src.partition("// the first iteration, peeled")
        tail = _sub(tail, r"(        arch::bar_arrive\(2 - cw, 256\);[^\n]*\n)",
                    lambda m: m.group(1) + "        if (staged >= 0) {\n          "
                    + give_back.format(pad="          ", stage="staged") + "          staged = -1;\n        }\n", first=True)
        src = head + sep + tail
        src = _sub(src, r"(\n    \}\n)(    if \(cw == 0\) arch::bar_sync\(1, 256\);)",
                   lambda m: m.group(1) + "    if (staged >= 0) {\n      " + give_back.format(pad="      ", stage="staged")
                   + "    }\n" + m.group(2))
    src = _sub(src, r"(    if \(cw == 0\) arch::bar_sync\(1, 256\);[^\n]*\n)",
               lambda m: m.group(1) + "    if (wg_thread() == 0) arch::tma_store_wait<0>();  // this warpgroup's TMA stores are done\n")
    return src


VARIANTS = {"ostage": edit, "ostage_late": lambda s: edit(s, late=True)}


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
            for inst in (False, True):
                src = fn(tl.edit(low.source) if inst else low.source)
                c = runtime.compile_cuda(src, name=f"{low.entry}_{name}{int(inst)}.cu", cache=False)
                with tempfile.TemporaryDirectory() as d:
                    assert_no_spills(c, low.entry, pathlib.Path(d))
                print(extra, name, "instrumented" if inst else "", "compiled:", c.resources.get(low.entry), flush=True)


def set_map(kern, o):
    from cuda.bindings import driver as cu
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.attention_launch import rank4
    box = [64, 1, 64, 1]  # 64 columns (one 128-byte swizzle line) x 64 rows (a warpgroup's)
    m = runtime.tensor_map(o, box, 128, *rank4(o, 8))
    err, ptr, size = cu.cuModuleGetGlobal(kern.module, b"map_O_g")
    assert err == cu.CUresult.CUDA_SUCCESS and size == 128, (err, size)
    (err,) = cu.cuMemcpyHtoD(ptr, ctypes.addressof(m), 128)
    assert err == cu.CUresult.CUDA_SUCCESS, err


def prepare(W, attention_fwd, q, k, v, o, lse, variant, instrumented):
    import torch
    D, S = q.shape[-1], q.shape[1]
    opts = W.schedule("attention_fwd", D, (q, k, v, o, lse, D ** -0.5)) or {}
    cfg = W.config("attention_fwd", D=D, causal=False, Sq=S)
    base = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=opts, **cfg)
    if variant == "launched" and not instrumented:
        return base, None
    src = tl.edit(base.lowered.source) if instrumented else base.lowered.source
    if variant != "launched":
        src = VARIANTS[variant](src)
    low = dataclasses.replace(base.lowered, source=src)
    key_opts = {**opts, "bound": f"ostage_{variant}_{int(instrumented)}"}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is base.lowered)
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = low
    go = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=key_opts, **cfg)
    kern = W._kernel_cache[(id(go.lowered), torch.cuda.current_device())]
    if variant != "launched":
        set_map(kern, o)
    return go, kern


def main(shapes=(4096, 8192, 16384), timeline=True):
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    D, H = 128, 16
    names = ("launched", *VARIANTS)
    for S in shapes:
        B = 16384 // S
        o = torch.empty(B, S, H, D, device="cuda", dtype=torch.bfloat16)
        sets = split.input_sets(B, S, H, D, o=o)
        plain = {n: [prepare(W, attention_fwd, *x, n, False)[0] for x in sets] for n in names}
        inst = {n: prepare(W, attention_fwd, *sets[0], n, True) for n in names}
        ref = None
        for n in names:
            for go in (plain[n][0], inst[n][0]):
                o.zero_(), sets[0][4].zero_()
                go()
                torch.cuda.synchronize()
                got = (o.clone(), sets[0][4].clone())
                if ref is None:
                    ref = got
                elif not (torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])):
                    print(f"S={S} {n}: NOT bitwise equal to launched: max |dO| "
                          f"{(got[0].float() - ref[0].float()).abs().max().item():.3g}", flush=True)
        print(f"S={S}: outputs checked", flush=True)
        fns = {n: (lambda i, g=g: g[i % 3]()) for n, g in plain.items()}
        fns["sdpa_cudnn"] = split.cudnn_fn(sets)
        split.report(fns, 4 * B * H * S * S * D, f"S={S} B={B}", suite=True, rounds=7)
        if S > 8192 or not timeline:
            continue
        programs = B * H * S // 128
        whole, parts = getattr(plain["launched"][0], "split", None) or (programs, 1)
        units = whole + (programs - whole) * parts
        nk = S // 128

        def blocks_of(c, it):
            u = c + it * tl.CTAS
            if u >= units:
                return None
            if u < whole:
                return nk
            p = (u - whole) % parts
            return (p + 1) * nk // parts - p * nk // parts
        for n, (go, kern) in inst.items():
            tl.analyse(*tl.record(go, kern), blocks_of, f"S={S} {n}")


if __name__ == "__main__":
    if sys.argv[1:] == ["check"]:
        check()
    elif sys.argv[1:]:  # S values: timed only, no timeline
        main(tuple(int(a) for a in sys.argv[1:]), timeline=False)
    else:
        main()
