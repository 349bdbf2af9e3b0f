"""References and the error rule of TESTING.md."""
import math

import torch


def fl(ref: torch.Tensor) -> float:
    """Twice one rounding of the reference: 2·max|(ref + 0.3 − 0.3) − ref| in the reference's precision."""
    r = ref[torch.isfinite(ref)]
    if r.numel() == 0:
        return 0.0
    return 2 * ((r + 0.3 - 0.3) - r).abs().max().item()


def f32_sum_bound(a: torch.Tensor, b: torch.Tensor) -> float:
    """A bound on the error of a @ b summed in f32, in any order, from exact products (16-bit inputs):
    K·2u·max (|a| @ |b|), u = 2^-24, the 2 for adders that truncate (tensor cores may). A result that
    went through 16 bits on the way misses it (by 2x at K = 512, by far at small K)."""
    K = a.shape[-1]
    return K * 2.0 ** -23 * (a.double().abs() @ b.double().abs()).max().item()


def max_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    d = (x.double() - ref.double()).abs()
    if torch.isnan(d).any():
        return math.inf
    return d.max().item() if d.numel() else 0.0


def mean_err(x, ref) -> float:
    d = (x.double() - ref.double()).abs()
    return d.mean().item() if d.numel() else 0.0


def check_grads_rule(names, got, ref, lp, where=""):
    """Each gradient within 3·E(lp) + fl of the float64 one (TESTING.md): got, ref and lp in the order of
    names (lp: the same naive computation in the inputs' dtype)."""
    for n, g, r, x in zip(names, got, ref, lp):
        e, e_lp = max_err(g, r), max_err(x, r)
        assert e <= 3 * e_lp + fl(r), f"{where}d{n}: max error {e:.3e} > 3·{e_lp:.3e} + fl"


def attention_ref(q, k, v, causal, scale, dtype=torch.float64, window=(-1, -1), sinks=None):
    """Attention in `dtype` on (B, S, H, D) inputs, the naive way: the float64 reference, or (with the
    inputs' own dtype) the low-precision PyTorch computation the rule compares against. `window`:
    FlashAttention's window_size (left, right), -1 for none: row i sees key j where
    i + Sk - Sq - left <= j <= i + Sk - Sq + right. `sinks` (H,): one more softmax term a row, exp(sink),
    whose value is zero (attention sinks)."""
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    Q = q.to(dtype).transpose(1, 2)
    K = k.to(dtype).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    V = v.to(dtype).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    s = (Q @ K.transpose(-1, -2)) * scale
    left, right = window
    right = 0 if causal else right
    if right >= 0 or left >= 0:
        diag = (torch.arange(Sq, device=q.device)[:, None] + Sk - Sq)
        j = torch.arange(Sk, device=q.device)[None, :]
        keep = torch.ones(Sq, Sk, dtype=torch.bool, device=q.device)
        if right >= 0:
            keep &= j <= diag + right
        if left >= 0:
            keep &= j >= diag - left
        s = s.masked_fill(~keep, -math.inf)
    if sinks is not None:  # a column of the sink's logit, whose value row is zero
        s = torch.cat([s, sinks.to(dtype)[None, :, None, None].expand(B, H, Sq, 1)], -1)
        V = torch.cat([V, V.new_zeros(B, H, 1, D)], -2)
    lse = torch.logsumexp(s.double(), -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)  # rows with no key give zeros
    return (p @ V).transpose(1, 2), lse


def check_attention_fwd(out, lse, q, k, v, causal, scale, window=(-1, -1)):
    ref, ref_lse = attention_ref(q, k, v, causal, scale, window=window)
    lp, _ = attention_ref(q, k, v, causal, scale, dtype=q.dtype, window=window)
    e, e_lp = max_err(out, ref), max_err(lp, ref)
    assert e <= 2 * e_lp + fl(ref), f"max error {e:.3e} > 2·{e_lp:.3e} + fl"
    assert mean_err(out, ref) <= 1.5 * mean_err(lp, ref) + 1e-12, (
        f"mean error {mean_err(out, ref):.3e} > 1.5·{mean_err(lp, ref):.3e}")
    if lse is not None:
        fin = torch.isfinite(ref_lse)
        assert torch.equal(torch.isinf(lse) & (lse > 0), ~fin), "rows with no key must have LSE = +inf"
        if fin.any():
            rel = ((lse.double()[fin] - ref_lse[fin]).abs() / ref_lse[fin].abs().clamp_min(1.0)).max().item()
            assert rel <= 1e-3, f"LSE relative error {rel:.2e}"


def check_attention_fwd_ragged(out, lse, q, k, v, lens, causal, scale, window=(-1, -1)):
    """check_attention_fwd for each sequence b on its first lens[b] keys (clamped to the cache's rows):
    the causal mask aligned bottom-right to them, a sequence with no key all zeros and LSE = +inf."""
    for b, n in enumerate(lens.tolist()):
        n = max(0, min(int(n), k.shape[1]))
        if n == 0:
            assert torch.equal(out[b].float(), torch.zeros_like(out[b].float())), f"sequence {b} has no key: zeros"
            if lse is not None:
                assert torch.isinf(lse[b]).all() and (lse[b] > 0).all(), f"sequence {b} has no key: LSE = +inf"
            continue
        check_attention_fwd(out[b:b + 1], None if lse is None else lse[b:b + 1], q[b:b + 1], k[b:b + 1, :n],
                            v[b:b + 1, :n], causal, scale, window)
