"""Session 31: does the D = 128 forward's last, partial wave cost time? Every standard shape with
H = 16 has 2048 query tiles of 128 rows (16k tokens a batch): 15.5 waves on 132 SMs. Timed beside a
shape with 16 whole waves (33 or 132 key blocks a head: 2112 tiles) and cuDNN at both, in the suite's
timing (one launch after a rest) and back to back (20 launches: the power limit's steady state).
If the half wave costs its share (3 %), TFLOP/s at 2112 tiles would be ~3 % above 2048's.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_waves.py
"""
import torch

import attention_split as split
import hopper_gemm_tiles as ht
from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.kernels import attention_fwd

D, H = 128, 16
SHAPES = [(4, 4096), (4, 4224), (1, 16384), (1, 16896)]  # (B, S): 2048, 2112, 2048, 2112 tiles


def main():
    fns, flops = {}, {}
    for B, S in SHAPES:
        sets = []
        for i in range(3):
            g = torch.Generator(device="cuda").manual_seed(i)
            q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
            sets.append((q, k, v, torch.empty_like(q), torch.empty(B, H, S, device="cuda")))
        gos = [split.launcher(W, attention_fwd, *x) for x in sets]
        qt = [tuple(t.transpose(1, 2) for t in x[:3]) for x in sets]
        gos[0]()
        ref = torch.nn.functional.scaled_dot_product_attention(*qt[0]).transpose(1, 2)
        err = (sets[0][3].float() - ref.float()).abs().max().item()
        print(f"B={B} S={S} tiles={B * H * S // 128}: max |O - cuDNN's| {err:.3g}", flush=True)

        def cudnn(i, qt=qt):
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(*qt[i % 3])
        fns[f"tiles_{S}"] = lambda i, gos=gos: gos[i % 3]()
        fns[f"cudnn_{S}"] = cudnn
        flops[f"tiles_{S}"] = flops[f"cudnn_{S}"] = 4 * B * H * S * S * D
    for regime, ms in (("back to back", ht.timed(fns, rounds=9)), ("suite", ht.suite_timed(fns, 3, reps=25, budget_s=8.0))):
        print(regime, " ".join(f"{n}={flops[n] / (t * 1e-3) / 1e12:.0f}" for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main()
