"""Session 38: option ring_store at D = 64 (O staged in the last key block's 16 KB K tile, which holds a
128-row tile's O in bf16 exactly), against what the launcher takes at short sequences: 128-row tiles
with option tma_store (staging tiles of their own, the loop not peeled) causal up to 1k and
non-causal up to 1k with 192-row tiles, and at 2k 192-row tiles storing from registers.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_d64_ring.py [S ...]

Variants (B * S = 16k, H = 32, the standard shapes): `launched`; `peel` (128-row tiles, peeled, O
from registers); `ring` (the same with ring_store: its output must be `peel`'s to the bit); `tma128`
(128-row tiles, tma_store). Both timings beside SDPA's cuDNN backend.
"""
import sys

import torch

import attention_split as split

VARIANTS = {"peel": {"peel": True}, "ring": {"peel": True, "ring_store": True}, "tma128": {"tma_store": True}}


def main(shapes=(512, 1024, 2048)):
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    D, H = 64, 32
    for causal in (True, False):
        for S in shapes:
            B = 16384 // S
            sets = split.input_sets(B, S, H, D)
            gos = {}
            for name in ("launched", *VARIANTS):
                launched = W.config("attention_fwd", D=D, causal=causal, Sq=S)
                cfg = launched if name == "launched" else {**launched, "BM": 128}
                gos[name] = [W.prepare(attention_fwd, *x, D ** -0.5, causal=causal, D=D, **cfg,
                                       options=(W.schedule("attention_fwd", D, x, causal) if name == "launched"
                                                else VARIANTS[name])) for x in sets]
            outs = split.first_outputs(gos, sets)
            for name in gos:
                o, l = outs[name]
                ref = outs["peel" if name == "ring" else "launched"]
                same = torch.equal(o, ref[0]) and torch.equal(l, ref[1])
                print(f"causal={causal} S={S} {name} ({gos[name][0].lowered.entry}): "
                      + ("bitwise equal" if same else f"max |dO| {(o.float() - ref[0].float()).abs().nan_to_num(9).max().item():.3g}")
                      + f" against {'peel' if name == 'ring' else 'launched'}", flush=True)
            fns = {n: (lambda i, g=g: g[i % 3]()) for n, g in gos.items()}
            qt = [tuple(t.transpose(1, 2) for t in x[:3]) for x in sets]

            def cudnn(i):
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(*qt[i % 3], is_causal=causal)
            fns["sdpa_cudnn"] = cudnn
            split.report(fns, 4 * B * H * S * S * D // (2 if causal else 1), f"D=64 causal={causal} S={S}",
                         suite=True, rounds=7)


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or (512, 1024, 2048))
