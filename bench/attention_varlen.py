"""Session 45: packed sequences of different lengths (tiles.attention_varlen) against PyTorch's own
varlen path, SDPA on nested jagged tensors (flash backend: FlashAttention-2's varlen kernel; cuDNN where
it takes them), and against tiles.attention over the same sequences padded to the longest (the work a
padded batch wastes). Lengths are uniform in [S/4, S] (seeded), sequences enough for about 16k query
tokens, H = 16, lengths equal for queries and keys (causal aligns the same way top-left and bottom-right
then). Each impl's output is checked against tiles' own (within 2e-2; the portability tests hold tiles' to
float64), and the
suite's timing is used (rested launches interleaved over rotated input sets, medians). TFLOP/s counts
each sequence's visible query-key pairs.

    PYTHONPATH=.:bench:tests/portability python3 bench/attention_varlen.py [--backward]

--backward (session 46): the training step, forward and backward (one upstream gradient on the output),
of tiles.attention_varlen against the same batch padded to S through tiles.attention and SDPA on nested
jagged tensors (where a backend differentiates them). Float32 autograd on each sequence alone checks
the packed gradients (within 2e-2 of their largest); TFLOP/s count 3.5x the forward's (the forward
again, and the backward's 2.5x).
"""
import sys
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import tiles
from tiles import api
from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.bench.run import time_interleaved
from tiles.kernels import attention_fwd

CASES = [(512, 128, False), (2048, 128, False), (2048, 128, True), (4096, 128, True), (1024, 64, True), (8192, 128, False)]
TOKENS, H = 16384, 16


def lengths(S, seed):
    g = torch.Generator().manual_seed(seed)
    out, total = [], 0
    while total < TOKENS:
        n = int(torch.randint(S // 4, S + 1, (1,), generator=g))
        out.append(n)
        total += n
    return out


def flops(ls, D, causal):
    pairs = sum(n * (n + 1) // 2 if causal else n * n for n in ls)
    return 4 * pairs * D * H


def report(rows: list, times: dict, flop: float, case: dict) -> None:
    """Each impl's median into rows (with the case's fields), and one line of them printed."""
    line = []
    for n, ts in times.items():
        ms = sorted(ts)[len(ts) // 2]
        rows.append(dict(case, impl=n, ms=ms, tflops=flop / ms / 1e9))
        line.append(f"{n}={ms * 1e3:.0f}us/{flop / ms / 1e9:.0f}")
    print(f"{case.get('step', 'fwd')} S<={case['S']} D={case['D']} causal={int(case['causal'])} B={case['B']} "
          f"tokens={case['total']}: " + " ".join(line), flush=True)


def main():
    dev = torch.device("cuda")
    rows = []
    for S, D, causal in CASES:
        ls = lengths(S, S + D + causal)
        cu = torch.tensor([0] + torch.tensor(ls).cumsum(0).tolist(), dtype=torch.int32, device=dev)
        total, B = sum(ls), len(ls)
        sets = []
        for i in range(3):
            q, k, v = (torch.randn(total, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
            sets.append((q, k, v))

        cu_host = cu.cpu()

        def varlen(x):  # the offsets on the host: checked there, copied over with no synchronization
            return tiles.attention_varlen(*x, cu_host, cu_host, S, S, causal=causal)

        out = torch.empty(1, total, H, D, device=dev, dtype=torch.bfloat16)
        lse = torch.empty(B, H, S, device=dev)
        kernels = {}

        def kernel(x):  # the prepared launch alone (the API's checks, allocations and table left out)
            if id(x) not in kernels:
                blocks = api._blocks(cu, cu, W.config("attention_fwd", D=D, causal=causal, Sq=S).get("BM", 128),
                                     total, causal)
                args = tuple(t[None] for t in x) + (out, lse, D ** -0.5, None, None, blocks)
                opts = W.schedule("attention_fwd", D, args, causal)
                go = W.prepare(attention_fwd, *args, causal=causal, D=D, options=opts,
                               **W.config("attention_fwd", D=D, causal=causal, Sq=S))
                kernels[id(x)] = go, blocks  # a prepared launch keeps no tensor alive: the table is kept here
            kernels[id(x)][0]()
            return out[0]

        def nested(backend):
            def run(x):
                q, k, v = (torch.nested.nested_tensor_from_jagged(t, cu.long()).transpose(1, 2) for t in x)
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2).values()
            return run

        # the batch padded to S: rows past a sequence computed and thrown away
        pads = [tuple(torch.zeros(B, S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3)) for _ in range(3)]
        want = varlen(sets[0])
        assert torch.equal(kernel(sets[0]), want)
        impls = {"tiles_varlen": varlen, "tiles_varlen_kernel": kernel}
        for name, be in (("sdpa_nested_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_nested_cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("sdpa_nested_efficient", SDPBackend.EFFICIENT_ATTENTION)):
            try:
                got = nested(be)(sets[0])
                err = (got.float() - want.float()).abs().max().item()
                if err > 2e-2:
                    print(f"  {name}: differs from tiles by {err:.3e}: not timed")
                    continue
                impls[name] = nested(be)
            except Exception as e:  # a backend that does not take nested tensors here
                print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        times = time_interleaved(impls, sets, dev, reps=30, budget_s=6)
        pt = time_interleaved({"tiles_padded": lambda x: tiles.attention(*x, causal=causal)}, pads, dev, reps=20, budget_s=4)
        times.update(pt)
        f = flops(ls, D, causal)
        report(rows, times, f, dict(S=S, D=D, causal=causal, B=B, total=total))
    print(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows)))


def reference_grads(x, ls, causal):
    """dq, dk, dv of each sequence alone by float32 SDPA autograd, packed as the inputs (the padded batch
    is no reference: non-causal, its rows attend the padding's zero keys)."""
    q, k, v, do = x
    out, at = [[], [], []], 0
    for n in ls:
        xs = [t[at:at + n].detach().float().transpose(0, 1).requires_grad_() for t in (q, k, v)]
        o = F.scaled_dot_product_attention(*xs, is_causal=causal)
        for acc, g in zip(out, torch.autograd.grad(o, xs, do[at:at + n].float().transpose(0, 1))):
            acc.append(g.transpose(0, 1))
        at += n
    return [torch.cat(g) for g in out]


def main_backward():
    dev = torch.device("cuda")
    rows = []
    for S, D, causal in CASES:
        ls = lengths(S, S + D + causal)
        cu_host = torch.tensor([0] + torch.tensor(ls).cumsum(0).tolist(), dtype=torch.int32)
        cu = cu_host.to(dev)
        total, B = sum(ls), len(ls)
        g = torch.Generator(device=dev).manual_seed(S + D)
        sets = [tuple(torch.randn(total, H, D, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
                      for _ in range(3)) + (torch.randn(total, H, D, device=dev, dtype=torch.bfloat16, generator=g),)
                for _ in range(3)]

        def packed_step(x):
            q, k, v, do = x
            out = tiles.attention_varlen(q, k, v, cu_host, cu_host, S, S, causal=causal)
            return torch.autograd.grad(out, (q, k, v), do)

        # the batch padded to S: each sequence's rows at the start of its row of the batch
        rows_of = torch.cat([torch.arange(n, device=dev) + b * S for b, n in enumerate(ls)])

        def pad(t):
            out = t.new_zeros(B * S, *t.shape[1:])
            out[rows_of] = t.detach()
            return out.view(B, S, *t.shape[1:]).requires_grad_(t.requires_grad)

        pads = [tuple(pad(t) for t in x) for x in sets]

        def padded_step(x):
            q, k, v, do = x
            return torch.autograd.grad(tiles.attention(q, k, v, causal=causal), (q, k, v), do)

        def nested(backend):
            def run(x):
                q, k, v, do = x
                qn, kn, vn = (torch.nested.nested_tensor_from_jagged(t, cu.long()).transpose(1, 2) for t in (q, k, v))
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(qn, kn, vn, is_causal=causal).transpose(1, 2).values()
                return torch.autograd.grad(o, (q, k, v), do)
            return run

        want = packed_step(sets[0])
        for n, a, ref in zip("qkv", want, reference_grads(sets[0], ls, causal)):
            err = (a.float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
            assert err < 2e-2, f"d{n} of the packed call differs from float32 autograd by {err:.2e} (relative)"
        impls = {"tiles_varlen": packed_step}
        for name, be in (("sdpa_nested_flash", SDPBackend.FLASH_ATTENTION),
                         ("sdpa_nested_efficient", SDPBackend.EFFICIENT_ATTENTION)):
            try:
                other = nested(be)(sets[0])
                err = max((a.float() - b_.float()).abs().max().item() for a, b_ in zip(want, other))
                if err > 5e-2:
                    print(f"  {name}: differs from tiles by {err:.3e}: not timed")
                    continue
                impls[name] = nested(be)
            except Exception as e:  # a backend that does not differentiate nested tensors here
                print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        times = time_interleaved(impls, sets, dev, reps=20, budget_s=6)
        times.update(time_interleaved({"tiles_padded": padded_step}, pads, dev, reps=15, budget_s=4))
        f = 3.5 * flops(ls, D, causal)
        report(rows, times, f, dict(S=S, D=D, causal=causal, B=B, total=total, step="fwd+bwd"))
    print(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows)))


if __name__ == "__main__":
    main_backward() if "--backward" in sys.argv[1:] else main()
