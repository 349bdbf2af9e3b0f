"""One Hopper lowering option on the attention kernels, alone: each kernel as launched (its config and
schedule) against the same with the option turned on, on the same inputs.

    PYTHONPATH=.:bench python3 bench/option_ab.py
    AB_OPTION=resident        the option, turned on ...
    AB_VALUE=kt               ... or given this value (JSON where it parses, e.g. false or 3; else a string)
    AB_CONFIG='{"BN": 176}'   the variant's tile sizes over the launched ones (then AB_OPTION=none: no option)
    AB_JOBS=fused:64,dq:128   kernel:head dim (fwd, dkdv, dq, fused)
    AB_CASES=0:4096,1:16384   causal:S (B * S = 16k tokens, H * D = 2048)

Each variant's outputs from one launch are compared with the base's: `same` when bitwise equal, else the
largest difference over the largest base value (the fused kernel's dQacc is summed by atomic TMA
reduces in no fixed order, so it is compared with a tolerance). Times: hopper_gemm_tiles.timed
(interleaved rounds, 5 launches behind a sleep, 3 rotating input sets, medians), speed over the base.
"""
import json
import os

import torch

from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_fused, attention_fwd

import hopper_gemm_tiles as ht

KERNELS = {"fwd": attention_fwd, "dkdv": attention_bwd_dkdv, "dq": attention_bwd_dq, "fused": attention_bwd_fused}
OUTS = {"fwd": ("o", "lse_out"), "dkdv": ("dk", "dv"), "dq": ("dq",), "fused": ("dk", "dv", "acc")}


def inputs(seed, B, S, H, D):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
    lse = torch.randn(B, H, S, device="cuda", generator=g) * 0.1 + 9.0  # rows' log-sum-exp about 9
    delta = torch.randn(B, H, S, device="cuda", generator=g) * 0.1
    outs = dict(o=torch.empty_like(q), lse_out=torch.empty(B, H, S, device="cuda"), dk=torch.empty_like(k),
                dv=torch.empty_like(v), dq=torch.empty_like(q), acc=torch.zeros(B, S, H, D, device="cuda"))
    return (q, k, v, do, lse, delta), outs


def args_of(kern, t, o, scale):
    q, k, v, do, lse, delta = t
    return {"fwd": (q, k, v, o["o"], o["lse_out"], scale),
            "dkdv": (q, k, v, do, lse, delta, o["dk"], o["dv"], scale),
            "dq": (q, k, v, do, lse, delta, o["dq"], scale),
            "fused": (q, k, v, do, lse, delta, o["dk"], o["dv"], o["acc"], scale)}[kern]


def main():
    option = os.environ.get("AB_OPTION", "resident")
    value = os.environ.get("AB_VALUE", True)
    try:
        value = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        pass  # a string value, such as a tile name
    config = json.loads(os.environ.get("AB_CONFIG", "{}"))
    jobs = [(j.split(":")[0], int(j.split(":")[1])) for j in os.environ.get("AB_JOBS", "fused:64").split(",")]
    cases = [(bool(int(c)), int(n)) for c, n in (x.split(":") for x in os.environ.get(
        "AB_CASES", "0:1024,0:4096,0:16384,1:4096,1:16384").split(","))]
    for kern, D in jobs:
        name, fn = f"attention_{'fwd' if kern == 'fwd' else 'bwd_' + kern}", KERNELS[kern]
        H = 2048 // D
        for causal, S in cases:
            B = 16384 // S
            sets = [inputs(i, B, S, H, D) for i in range(3)]
            base = W.schedule(name, D, (sets[0][0][0],), causal) or {}
            kw = dict(causal=causal, D=D, **W.config(name, D=D, causal=causal, Sq=S))
            fns, got = {}, {}
            variant_opts = base if option == "none" else {**base, option: value}
            for variant, opts, tiles_kw in (("base", base, kw), (option, variant_opts, {**kw, **config})):
                gos = [W.prepare(fn, *args_of(kern, t, o, D ** -0.5), options=opts, **tiles_kw) for t, o in sets]
                o = sets[0][1]
                o["acc"].zero_()
                gos[0]()
                torch.cuda.synchronize()
                got[variant] = [o[x].float().clone() for x in OUTS[kern]]
                fns[variant] = lambda i, gos=gos: gos[i % 3]()
            diff = []
            for a, b in zip(got["base"], got[option]):
                d = float((a - b).abs().max() / a.abs().max().clamp_min(1e-30))
                diff.append("same" if torch.equal(a, b) else f"{d:.2g}")
            ms = ht.timed(fns, rounds=7, inner=5)
            print(f"{kern} D={D} causal={int(causal)} S={S} B={B}{' ' + json.dumps(config) if config else ''}: base {ms['base']:.3f} ms, {option} "
                  f"{ms[option]:.3f} ms ({ms['base'] / ms[option]:.3f}x); outputs {'/'.join(diff)}", flush=True)


if __name__ == "__main__":
    main()
