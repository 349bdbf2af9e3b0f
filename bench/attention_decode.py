"""Sessions 41-42: the forward at decode shapes (a few query rows against a long KV cache), where the grid
has fewer programs than the H200 has SMs: the launcher's choice, the key range forced into R parts
(option split_tail; causal with window=False, since one query block a head leaves no pairs to walk),
beside SDPA's backends. With several rows under GQA (speculative decoding), `grouped` is the api's
grouped rows whatever the key count (causal: the keys every row sees grouped, the last Sq - 1 in a second
call, merged), `as_given` the rows as given; the api chooses by GROUPED_CAUSAL_KEYS, which these rows
decide. Each variant's output is checked against float64 (TESTING.md's rule, with the same naive
attention in bf16 as the low-precision reference) before it is timed. The suite's timing (rested
launches, interleaved, medians); the figure of merit is the bytes of K and V over the time.

    PYTHONPATH=.:bench:tests/portability python3 bench/attention_decode.py [--ragged]
"""
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

import hopper_gemm_tiles as ht
import tiles
from reference import attention_ref  # tests/portability
from tiles.api import _grouped_rows
from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.kernels import attention_fwd

# (B, H, H_kv, Sq, Sk, D, causal)
SHAPES = [(1, 32, 8, 1, 32768, 128, True), (8, 32, 8, 1, 8192, 128, True), (16, 32, 8, 1, 4096, 128, False),
          (1, 64, 8, 1, 131072, 128, True), (4, 32, 8, 8, 16384, 128, True), (1, 16, 16, 1, 16384, 64, False),
          (2, 16, 16, 128, 16384, 128, False), (1, 32, 8, 1, 2048, 128, True), (4, 32, 8, 1, 2048, 128, False),
          # several rows under GQA: where grouping pays once the second call and the merge are counted
          (8, 32, 8, 4, 8192, 128, True), (8, 32, 8, 4, 2048, 128, True), (8, 32, 8, 4, 1027, 128, True),
          (32, 32, 8, 2, 1024, 128, True), (8, 64, 8, 16, 4096, 128, True), (8, 32, 8, 4, 8192, 128, False)]
PARTS = (16,)  # session 41's first call also timed 2, 8 and 32


def forced(q, k, v, o, lse, causal, extra, **tile_sizes):
    D, Sq = q.shape[-1], q.shape[1]
    opts = dict(W.schedule("attention_fwd", D, (q, k, v, o, lse), causal) or {})
    opts.update(extra)
    cfg = {**W.config("attention_fwd", D=D, causal=causal, Sq=Sq), **tile_sizes}
    return W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options=opts, **cfg)


def sdpa(backend, q, k, v, causal):
    """SDPA under tiles' bottom-right alignment: is_causal aligns top-left, so one row runs unmasked (it
    sees every key) and several take the lower-right causal bias."""
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    Sq, Sk = q.shape[1], k.shape[1]
    mask = causal_lower_right(Sq, Sk) if causal and Sq > 1 else None
    with torch.nn.attention.sdpa_kernel(backend):
        return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=k.shape[2] != q.shape[2]
                                              ).transpose(1, 2)


def reference(q, k, v, causal, dtype=torch.float64):
    """The portability suite's reference (bottom-right causal alignment, as tiles defines it)."""
    return attention_ref(q, k, v, causal, q.shape[-1] ** -0.5, dtype=dtype)[0]


def main():
    for B, H, Hkv, Sq, Sk, D, causal in SHAPES:
        sets = []
        for i in range(2):
            g = torch.Generator(device="cuda").manual_seed(i)
            q = torch.randn(B, Sq, H, D, device="cuda", generator=g).bfloat16()
            k, v = (torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).bfloat16() for _ in range(2))
            sets.append((q, k, v))
        q, k, v = sets[0]
        ref = reference(q, k, v, causal)
        lowp = reference(q, k, v, causal, torch.bfloat16).double()
        rf = ref.float()
        bound = 2 * (lowp - ref).abs().max().item() + 2 * ((rf + 0.3 - 0.3) - rf).abs().max().item()
        fns, line = {}, []
        fns["api"] = lambda i: tiles.attention(*sets[i % 2], causal=causal)
        # the launcher on the rows as given (before session 41's api: causal kept, one program a query head)
        fns["as_given"] = lambda i: tiles.api._attention_fwd_impl(*sets[i % 2], causal, D ** -0.5, "hopper")
        if 1 < Sq <= tiles.api.GROUPED_ROWS and Hkv < H:
            fns["grouped"] = lambda i: tiles.api._grouped(*sets[i % 2], causal, D ** -0.5, "hopper")[0]
            err = (fns["grouped"](0).double() - ref).abs().max().item()
            line.append(f"grouped: err {err:.2g}{'' if err <= bound else ' FAILS'}")
        if Sq == 1:
            # the grouped rows in 64-row tiles (one consumer warpgroup, half the tensor work of a 128-row
            # tile a block; session 44, not yet measured): `pack_bm64_split16`
            for r, bm in [(r, None) for r in PARTS] + [(r, 64) for r in PARTS]:
                outs = [(torch.empty(B, H // Hkv, Hkv, D, device="cuda", dtype=torch.bfloat16),
                         torch.empty(B, Hkv, H // Hkv, device="cuda")) for _ in sets]
                name = f"pack_split{r}" if bm is None else f"pack_bm{bm}_split{r}"
                try:
                    gos = [forced(_grouped_rows(x[0], Hkv), x[1], x[2], *outs[i], False, {"split_tail": r},
                                  **({} if bm is None else {"BM": bm})) for i, x in enumerate(sets)]
                except Exception as e:  # noqa: BLE001
                    line.append(f"{name}: {type(e).__name__}: {str(e)[:120]}")
                    continue
                fns[name] = lambda i, g=gos: g[i % 2]()
                gos[0]()
                torch.cuda.synchronize()
                err = (outs[0][0].transpose(1, 2).reshape(B, 1, H, D).double() - ref).abs().max().item()
                line.append(f"{name}{gos[0].split}: err {err:.2g}{'' if err <= bound else ' FAILS'}")
        variants = {} if Sq == 1 else {f"split{r}": {"split_tail": r, **({"window": False} if causal else {})}
                                       for r in PARTS}
        for name, extra in variants.items():
            outs = [(torch.empty_like(x[0]), torch.empty(B, H, Sq, device="cuda")) for x in sets]
            try:
                gos = [forced(*x, *outs[i], causal, extra) for i, x in enumerate(sets)]
            except Exception as e:  # noqa: BLE001 - report and go on
                line.append(f"{name}: {type(e).__name__}: {str(e)[:120]}")
                continue
            fns[name] = lambda i, g=gos: g[i % 2]()
            fns[name](0)
            torch.cuda.synchronize()
            err = (outs[0][0].double() - ref).abs().max().item()
            line.append(f"{name}{gos[0].split}: err {err:.2g}{'' if err <= bound else ' FAILS'}")
        for name, be in (("sdpa_flash", torch.nn.attention.SDPBackend.FLASH_ATTENTION),
                         ("sdpa_cudnn", torch.nn.attention.SDPBackend.CUDNN_ATTENTION),
                         ("sdpa_efficient", torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION)):
            try:
                out = sdpa(be, q, k, v, causal)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                line.append(f"{name}: {type(e).__name__}")
                continue
            err = (out.double() - ref).abs().max().item()
            line.append(f"{name}: err {err:.2g}{'' if err <= bound else ' FAILS'}")
            fns[name] = lambda i, be=be: sdpa(be, *sets[i % 2], causal)
        api_err = (tiles.attention(q, k, v, causal=causal).double() - ref).abs().max().item()
        print(f"B={B} H={H} Hkv={Hkv} Sq={Sq} Sk={Sk} D={D} causal={int(causal)} bound {bound:.2g}: "
              f"api err {api_err:.2g}{'' if api_err <= bound else ' FAILS'}; " + "; ".join(line), flush=True)
        ms = ht.suite_timed(fns, 2, reps=15, budget_s=3.0)
        kv_bytes = 2 * B * Sk * Hkv * D * 2
        print("  " + " ".join(f"{n}={t * 1e3:.0f}us/{kv_bytes / (t * 1e-3) / 1e12:.2f}TB/s" for n, t in ms.items())
              + f" | api over flash {ms.get('sdpa_flash', float('nan')) / ms['api']:.3f}", flush=True)
        fns = sets = ref = lowp = None
        torch.cuda.empty_cache()


# (B, H, H_kv, Sq, Sk, D, causal): a cache allocated for Sk keys a sequence, each holding a random count
RAGGED = [(8, 32, 8, 1, 8192, 128, True), (32, 32, 8, 1, 4096, 128, True), (8, 32, 8, 4, 8192, 128, False),
          (4, 32, 8, 4, 16384, 128, True)]


def _graphed(fn):
    """fn captured in a CUDA graph (after a warm-up on a side stream): its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def ragged():
    """Session 43: a cache of ragged lengths. `api` reads each sequence's count in the kernel
    (cache_seqlens); `paged` the same keys in pages of 256 of a shuffled pool (block_table: the producer
    reads each block's page; bitwise `api`'s answer); `per_sequence` is one call a sequence on its slice (what a caller did before);
    `whole_cache` the call over every row of the cache (what the counts save); SDPA's backends with a
    key-padding mask (and the lower-right causal bias for several causal rows). Each checked against
    float64 per sequence first; the bytes are those of the keys the counts cover. `*_graph`: the same
    calls replayed from a CUDA graph (no host check of the counts; a serving loop's form); `api_host` the
    eager call with the counts on the CPU (checked there, copied through pinned memory)."""
    from reference import check_attention_fwd_ragged  # tests/portability

    for B, H, Hkv, Sq, Sk, D, causal in RAGGED:
        g = torch.Generator(device="cuda").manual_seed(7)
        q = torch.randn(B, Sq, H, D, device="cuda", generator=g).bfloat16()
        k, v = (torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).bfloat16() for _ in range(2))
        lens = torch.randint(1, Sk + 1, (B,), device="cuda", generator=g, dtype=torch.int32)
        counts = lens.tolist()
        rows = torch.arange(Sk, device="cuda")
        keep = rows[None, :] < lens[:, None]  # (B, Sk)
        if causal and Sq > 1:
            keep = keep[:, None, :] & (rows[None, None, :] <= (lens[:, None, None] - Sq + torch.arange(Sq, device="cuda")[None, :, None]))
        mask = keep[:, None, None, :] if keep.dim() == 2 else keep[:, None]  # (B, 1, Sq or 1, Sk)
        fns, line = {}, []
        fns["api"] = lambda: tiles.attention(q, k, v, causal=causal, cache_seqlens=lens)
        host_lens = lens.cpu()  # counts where a serving loop's scheduler keeps them: no synchronization
        fns["api_host"] = lambda: tiles.attention(q, k, v, causal=causal, cache_seqlens=host_lens)
        fns["per_sequence"] = lambda: [tiles.attention(q[b:b + 1], k[b:b + 1, :n], v[b:b + 1, :n], causal=causal)
                                       for b, n in enumerate(counts)]
        fns["whole_cache"] = lambda: tiles.attention(q, k, v, causal=causal)
        # the same keys in pages of 256 of a shuffled pool (block_table), and the table's reads with them
        P = 256
        npages = Sk // P
        table = torch.randperm(B * npages, device="cuda", generator=g).view(B, npages).to(torch.int32)
        pk, pv = (torch.empty(B * npages, P, Hkv, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        pk[table.flatten().long()] = k.view(B * npages, P, Hkv, D)
        pv[table.flatten().long()] = v.view(B * npages, P, Hkv, D)
        fns["paged"] = lambda: tiles.attention(q, pk, pv, causal=causal, cache_seqlens=lens, block_table=table)
        if not torch.equal(fns["paged"](), fns["api"]()):
            line.append("paged DIFFERS from the contiguous cache")
        # the same calls replayed from CUDA graphs: a decode loop's form, where the counts are not read on
        # the host (eager, the host check's synchronization keeps the next launch waiting for the host,
        # which the rested timing then counts: session 44 read 321 us eager against 83 us for the whole cache)
        for name in ("api", "paged", "whole_cache"):
            fns[f"{name}_graph"] = _graphed(fns[name])
        try:
            check_attention_fwd_ragged(fns["api"]().cpu(), None, q.cpu(), k.cpu(), v.cpu(), lens.cpu(),
                                       causal and Sq > 1, D ** -0.5)
            line.append("api within the float64 bound")
        except AssertionError as e:
            line.append(f"api FAILS: {e}")
        for name, be in (("sdpa_cudnn", torch.nn.attention.SDPBackend.CUDNN_ATTENTION),
                         ("sdpa_efficient", torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION)):
            def run(be=be):
                with torch.nn.attention.sdpa_kernel(be):
                    return F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), attn_mask=mask,
                                                          enable_gqa=Hkv != H).transpose(1, 2)
            try:
                run()
                torch.cuda.synchronize()
                fns[name] = run
            except Exception as e:  # noqa: BLE001
                line.append(f"{name}: {type(e).__name__}")
        print(f"ragged B={B} H={H} Hkv={Hkv} Sq={Sq} Sk={Sk} D={D} causal={int(causal)} counts "
              f"{min(counts)}-{max(counts)}: " + "; ".join(line), flush=True)
        ms = ht.suite_timed({n: (lambda i, f=f: f()) for n, f in fns.items()}, 2, reps=15, budget_s=3.0)
        used = 2 * sum(counts) * Hkv * D * 2
        print("  " + " ".join(f"{n}={t * 1e3:.0f}us/{used / (t * 1e-3) / 1e12:.2f}TB/s" for n, t in ms.items()),
              flush=True)


if __name__ == "__main__":
    import sys

    ragged() if "--ragged" in sys.argv else main()
