"""Session 37: option ring_store (the D = 128 forward's O stored by TMA from the last key block's ring
stage) against what the launcher took before it, at the standard shapes' short and middle sequences.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_ring_store.py [S ...] [causal | non-causal]

Session 33's source edit (attention_ostage.py, `ostage_late`) ran 1.07-1.09x at S = 512 and 1.05-1.06x
at 1k in session 36's call, 0.98-1.00x from 4k. Here the lowering's option, causal and not: `before`
is the launcher's choice without it (stores from registers; causal S <= 512: option tma_store, not
peeled), `ring` the launcher's choice now (or the option forced past RING_STORE_QUERIES). Outputs must
be bitwise `before`'s; then both timings beside SDPA's cuDNN backend (B * S = 16k, H = 16).
"""
import sys

import torch

import attention_split as split


def options(W, x, causal, ring):
    q = x[0]
    opts = dict(W.schedule("attention_fwd", 128, x, causal) or {})
    if not ring:  # the choice before session 37
        if opts.pop("ring_store", None):
            if causal and q.shape[1] <= 512:
                opts["tma_store"] = True
                opts.pop("peel", None)
    elif not opts.get("ring_store"):  # forced past the launcher's choice (the split tail gives way)
        for other in ("tma_store", "split_tail"):
            opts.pop(other, None)
        opts.update(peel=True, ring_store=True)
    return opts


def main(shapes=(512, 1024, 2048, 4096), causals=(False, True)):
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    D, H = 128, 16
    for causal in causals:
        for S in shapes:
            B = 16384 // S
            sets = split.input_sets(B, S, H, D)
            gos = {}
            for name in ("before", "ring"):
                gos[name] = []
                for x in sets:
                    cfg = W.config("attention_fwd", D=D, causal=causal, Sq=S)
                    gos[name].append(W.prepare(attention_fwd, *x, D ** -0.5, causal=causal, D=D,
                                               options=options(W, x, causal, name == "ring"), **cfg))
            outs = split.first_outputs(gos, sets)
            same = torch.equal(outs["before"][0], outs["ring"][0]) and torch.equal(outs["before"][1], outs["ring"][1])
            print(f"causal={causal} S={S}: {gos['before'][0].lowered.entry} / {gos['ring'][0].lowered.entry}: "
                  f"{'bitwise equal' if same else 'DIFFERENT'}", flush=True)
            fns = {"launched": lambda i, g=gos["before"]: g[i % 3](), "ring": lambda i, g=gos["ring"]: g[i % 3]()}
            qt = [tuple(t.transpose(1, 2) for t in x[:3]) for x in sets]

            def cudnn(i):
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(*qt[i % 3], is_causal=causal)
            fns["sdpa_cudnn"] = cudnn
            flops = 4 * B * H * S * S * D // (2 if causal else 1)
            split.report(fns, flops, f"causal={causal} S={S} B={B}", suite=True, rounds=7)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("causal", "non-causal")]
    causals = tuple(c for c, w in ((False, "non-causal"), (True, "causal")) if w in sys.argv[1:]) or (False, True)
    main(tuple(int(a) for a in args) or (512, 1024, 2048, 4096), causals)
