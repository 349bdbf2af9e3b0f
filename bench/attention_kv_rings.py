"""Session 44: K and V on rings of their own in the D = 128 forward, and wider key blocks with them.

The forward's ring stage holds a key block's K and V under one pair of barriers, so a stage goes back
to the producer only after the block's P V (issued an iteration late, under the next softmax) has
retired in both warpgroups. Session 24's 176- and 192-key blocks (FlashAttention-3's tile at D = 128)
fit only two such stages and lost 13-17 %: the next K could not land until the last P V let its stage
go. Here each tensor gets its own barriers (option `kv_rings`, attention_plans.plan_kv_rings):
- the producer waits for K's stage, loads K, then waits for V's and loads V;
- a consumer waits for K's arrival before S = Q Kᵀ and for V's before the P V that reads it;
- K's stage goes back as soon as the S wgmma has retired (both warpgroups), V's after the P V.
With two stages K then lands a whole iteration before it is read, as FlashAttention-3's separate K
and V pipelines do.

Variants (all `peel`, non-causal, no split tail or ring_store): `plain` / `kv` at 128 keys (3 stages),
`bnN` (shared stages) and `kvN` at N = 160, 176, 192 (2 stages), and `kvk` / `kvkN`, kv_rings with the
producer one V behind (`edit_kfirst`, FlashAttention-3's order), and `kvL` / `kvL192`, the launched
options (the split tail, ring_store up to 4k queries) with kv_rings, beside the launched kernel and
SDPA's cuDNN backend, B·S = 16k tokens, H = 16. Measured on the H200: bench/hopper_notes.md, session 44
(kvL192 0.988 / 1.002 / 1.008x launched at 4k / 8k / 16k in the suite's timing; not launched).

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_kv_rings.py [check | S ... [variant ...]]
"""
import dataclasses
import sys

import attention_split as split

WIDTHS = (128, 160, 176, 192)


def _once(src: str, old: str, new: str) -> str:
    if src.count(old) != 1:
        raise RuntimeError(f"{old!r} is in the source {src.count(old)} times, not once")
    return src.replace(old, new)


def edit_kfirst(src: str) -> str:
    """Option kv_rings' source with the producer one V behind: K of block j + 1 is issued before V of
    block j (FlashAttention-3's order), the last V of a program after the next program's first K."""
    lines = src.split("\n")
    at = [i for i, x in enumerate(lines) if "load_async_4d(S.vt[pos.stage], map_V, S.late.full[pos.stage]" in x]
    if len(at) != 1:
        raise RuntimeError("the V load is not in the producer once")
    i = at[0]
    pad = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    load = (lines[i].strip().replace("pos.", "vpos.").replace(", kb * ", ", vkb * ")
            .replace("pid1 / (Q_shape2 / K_shape2)", "vhk").replace("pid2);", "vb);"))
    issue = ["if (vkb >= 0) {  // the V held back",
             "  wait(S.late.empty[vpos.stage], vpos.phase ^ 1);",
             "  expect_tiles(S.late.full[vpos.stage], S.vt[vpos.stage]);",
             f"  {load}",
             "  vpos.advance();",
             "}"]
    lines[i - 2:i + 1] = [pad + x for x in issue] + [f"{pad}vkb = kb, vhk = pid1 / (Q_shape2 / K_shape2), vb = pid2;"]
    src = "\n".join(lines)
    src = _once(src, "      ring_pos<STAGES> pos;\n      for (int prog",
                "      ring_pos<STAGES> pos, vpos;\n      int vkb = -1, vhk = 0, vb = 0;  // the V load held back\n"
                "      for (int prog")
    tail = "        }\n      }\n    }\n  } else {"
    flush = "\n".join("      " + x for x in issue)
    return _once(src, tail, "        }\n      }\n" + flush + "\n    }\n  } else {") + "\n// session 44: V a load behind\n"


def variants():
    """name -> (BN, option kv_rings, the edit of its source or None)"""
    out = {"plain": (128, False, None), "kv": (128, True, None), "kvk": (128, True, edit_kfirst)}
    for n in WIDTHS[1:]:
        out[f"bn{n}"], out[f"kv{n}"], out[f"kvk{n}"] = (n, False, None), (n, True, None), (n, True, edit_kfirst)
    # the launched options (the split tail; ring_store up to 4k queries) with kv_rings
    out["kvL"], out["kvL192"] = (128, "launched", None), (192, "launched", None)
    return out


def check():
    """CPU: each variant compiles through NVRTC with no spill and no serialized wgmma."""
    import pathlib
    import tempfile
    from test_attention_lower import _lower
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    for name, (bn, kv, fn) in variants().items():
        opts = ({"peel": True, "kv_rings": True, "split_tail": 3, "ring_store": True} if kv == "launched"
                else {"peel": True, "kv_rings": kv})
        low = _lower(D=128, causal=False, options=opts, BM=128, BN=bn)
        src = fn(low.source) if fn else low.source
        c = runtime.compile_cuda(src, name=f"{low.entry}_{name}.cu", cache=False)
        with tempfile.TemporaryDirectory() as d:
            assert_no_spills(c, low.entry, pathlib.Path(d))
        print(name, "compiled:", c.resources.get(low.entry), flush=True)


def launcher(W, attention_fwd, q, k, v, o, lse, bn, kv, fn):
    D = q.shape[-1]
    opts = {"peel": True, "kv_rings": kv}
    if kv == "launched":
        opts = dict(W.schedule("attention_fwd", D, (q, k, v, o, lse, D ** -0.5)) or {})
        opts["kv_rings"] = True
    cfg = {"BM": 128, "BN": bn}
    base = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=opts, **cfg)
    if fn is None:
        return base
    low = dataclasses.replace(base.lowered, source=fn(base.lowered.source))
    key_opts = {**opts, "bound": fn.__name__}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is base.lowered)
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = low
    return W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=key_opts, **cfg)


def main(shapes=(4096, 8192, 16384), names=None):
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    D, H = 128, 16
    table = variants()
    names = names or list(table)
    for S in shapes:
        B = 16384 // S
        sets = split.input_sets(B, S, H, D)
        fns = {"launched": None}
        gl = [split.launcher(W, attention_fwd, *x) for x in sets]
        fns["launched"] = lambda i, g=gl: g[i % 3]()
        for name in names:
            gos = [launcher(W, attention_fwd, *x, *table[name]) for x in sets]
            fns[name] = lambda i, gos=gos: gos[i % 3]()
        # against float64 on set 0's first rows of one head, and each against plain
        q, k, v = (t[0, :, 0].double() for t in sets[0][:3])
        ref = torch.softmax(q @ k.T * D ** -0.5, -1) @ v
        outs = {}
        for name in fns:
            sets[0][3].fill_(float("nan"))
            fns[name](0)
            torch.cuda.synchronize()
            outs[name] = sets[0][3].clone()
            err = (outs[name][0, :, 0].double() - ref).abs().max().item()
            same = "" if name in ("launched", "plain") else (
                " bitwise plain's" if torch.equal(outs[name], outs.get("plain", outs["launched"])) else "")
            print(f"S={S} {name}: max |O - float64| {err:.3g}{same}", flush=True)
        fns["sdpa_cudnn"] = split.cudnn_fn(sets)
        split.report(fns, 4 * B * H * S * S * D, f"D={D} S={S} B={B}", suite=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["check"]:
        check()
    else:
        shapes = tuple(int(a) for a in sys.argv[1:] if a.isdigit()) or (4096, 8192, 16384)
        main(shapes, [a for a in sys.argv[1:] if not a.isdigit()] or None)
