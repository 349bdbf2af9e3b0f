"""Every suite kernel the GPU backend lowers, once, at a small awkward shape: the workload that
compute-sanitizer (memcheck, racecheck, synccheck, initcheck) runs over.

    compute-sanitizer --tool memcheck --report-api-errors no python3 bench/sanitize_suite.py [--only attention]

`--only ring` runs the D = 128 forward with option ring_store (O by TMA from the last key block's ring
stage): walks of more programs than SMs, causal programs that see no key, a short grid, and with the
split tail (whole tiles, then parts; parts only).
`--only decode` runs tiles.attention at decode (session 41-42): grouped query heads on a short grid cut along
the keys (one program in many parts, a grid as long as its units), MHA at D = 64, and four causal rows (the
grouped call, the second call on the last keys, the merge), each again over a cache of ragged lengths
(cache_seqlens: each program reads its count) and in pages of a pool (block_table).
`--only kv` runs the forward with option kv_rings (session 44) at 128 and 192 keys a block, with
ring_store and the split tail among them.
`--only split` runs the forward with option split_tail (every program in parts, causal parts
that see no key, and walks with whole tiles first). `--only fused` runs the backward through
attention_bwd_fused (dQ added by the reducer warp's TMA reduces), D = 64 and 128, causal and not, with GQA and tails, then the split backward at the small
shapes. `--only attention` runs the attention
workloads alone, with one more whose grids hold more programs than the GPU has SMs, so that persistent CTAs walk
several (the causal pairs, the turns that run on across programs, Q released in a program's last
iteration). `--only gemm_fp8` runs the fp8 GEMM (scale loads and scales by TMA, scale rows taken 2 or 4
at a time among them) with
its last tiles split along K (stream-K): at an issue shape where the launcher splits them, and on grids
of a few CTAs, at both tile widths and with 192-row tiles, where tiles split into many shares, also over
2-CTA clusters (and 96-wide tiles in clusters, with a pair's extra tile row past M); twice in the
transposed storage (the K-major copies of transpose.py, both operands in one launch); 128 x 256 tiles with defer_store (each
whole tile stored under the next tile's first burst) on grids of 2-5 CTAs, with and without stream-K.
"""
import sys

import torch

import tiles
from tiles import backends

dev = torch.device("cuda")
be = backends.for_device(dev)
torch.manual_seed(0)
ran = []
only = sys.argv[2] if sys.argv[1:2] == ["--only"] else None
if only not in (None, "attention", "gemm_fp8", "fused", "split", "ring", "decode", "kv"):
    sys.exit(f"--only takes attention, gemm_fp8, fused, split, ring, decode or kv, got {only!r}")


def forward(B, Sq, Sk, H, Hkv, D, causal, options, **tiles_cfg):
    """One launch of the forward with these lowering options (and tile sizes), on fresh random bf16
    inputs (K as V)."""
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd

    q = torch.randn(B, Sq, H, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(B, Sk, Hkv, D, device=dev, dtype=torch.bfloat16)
    o, lse = torch.empty_like(q), torch.empty(B, H, Sq, device=dev)
    cfg = {**W.config("attention_fwd", D=D, causal=causal, Sq=Sq), **tiles_cfg}
    go = W.prepare(attention_fwd, q, k, k, o, lse, D ** -0.5, causal=causal, D=D, options=options, **cfg)
    go()
    return go


if only == "decode":  # the api at decode: grouped rows, short grids cut along the keys, a few causal rows
    for B, Sq, Sk, H, Hkv, D, causal in ((1, 1, 5000, 8, 1, 128, True), (2, 1, 3000, 32, 8, 128, True),
                                         (1, 1, 3000, 4, 4, 64, False), (2, 4, 3000, 32, 8, 128, True)):
        q = torch.randn(B, Sq, H, D, device=dev, dtype=torch.bfloat16)
        k, v = (torch.randn(B, Sk, Hkv, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
        tiles.attention(q, k, v, causal=causal)
        ran.append(f"decode_{B}x{Sq}x{Sk}_h{H}/{Hkv}_d{D}")
        # the same cache of ragged lengths (cache_seqlens): counts of 0, a block's edge, past a part, whole
        lens = torch.tensor([0, 128, 2049, Sk][:B] if B > 1 else [Sk - 1], device=dev, dtype=torch.int32)
        tiles.attention(q, k, v, causal=causal, cache_seqlens=lens)
        ran.append(f"ragged_{B}x{Sq}x{Sk}_h{H}/{Hkv}_d{D}")
        # and in pages of 256 keys of a pool (block_table), entries past a count naming no page (-1)
        npages = -(-Sk // 256)
        table = torch.full((B, npages), -1, dtype=torch.int32, device=dev)
        for b, n in enumerate(lens.tolist()):
            used = -(-n // 256)
            table[b, :used] = torch.arange(b * npages, b * npages + used, device=dev, dtype=torch.int32)
        pool = torch.randn(B * npages, 256, Hkv, D, device=dev, dtype=torch.bfloat16)
        tiles.attention(q, pool, pool, causal=causal, cache_seqlens=lens, block_table=table)
        ran.append(f"paged_{B}x{Sq}x{Sk}_h{H}/{Hkv}_d{D}")
    torch.cuda.synchronize()
    print(f"sanitize_suite: ran tiles.attention {', '.join(ran)}")
    sys.exit(0)
if only == "ring":  # option ring_store (session 37)
    for B, Sq, Sk, H, Hkv, causal in ((4, 1000, 1000, 8, 4, False), (4, 1000, 1000, 8, 4, True),
                                      (3, 700, 300, 8, 2, True), (1, 200, 260, 2, 1, False)):
        forward(B, Sq, Sk, H, Hkv, 128, causal, {"peel": True, "ring_store": True})
        ran.append(f"ring_store_{B}x{Sq}x{Sk}_causal{int(causal)}")
    # with the split tail (session 38): whole tiles first, then parts; and a walk of parts only
    for B, Sq, Sk, H, Hkv in ((2, 2000, 2000, 8, 4), (1, 300, 333, 4, 2)):
        go = forward(B, Sq, Sk, H, Hkv, 128, False, {"peel": True, "ring_store": True, "split_tail": 3})
        assert go.split[1] > 1, go.split
        ran.append(f"ring_store_split{go.split}")
    torch.cuda.synchronize()
    print(f"sanitize_suite: ran attention_fwd ring_store {', '.join(ran)}")
    sys.exit(0)
if only == "kv":  # option kv_rings (session 44): V on barriers of its own, 128 and 192 keys a block
    for B, Sq, Sk, H, Hkv, causal, BN, opts in (
            (4, 1000, 1000, 8, 4, False, 128, {"peel": True}), (4, 1000, 1000, 8, 4, True, 128, {}),
            (3, 700, 300, 8, 2, True, 192, {}), (4, 1000, 1000, 8, 4, False, 192, {"peel": True}),
            (4, 1000, 1000, 8, 4, False, 192, {"peel": True, "ring_store": True}),
            (2, 2000, 2000, 8, 4, False, 192, {"peel": True, "ring_store": True, "split_tail": 3})):
        forward(B, Sq, Sk, H, Hkv, 128, causal, {**opts, "kv_rings": True}, BM=128, BN=BN)
        ran.append(f"kv_rings_{B}x{Sq}x{Sk}_causal{int(causal)}_bn{BN}_{'_'.join(opts)}")
    torch.cuda.synchronize()
    print(f"sanitize_suite: ran attention_fwd kv_rings {', '.join(ran)}")
    sys.exit(0)
if only == "split":  # option split_tail (session 32): every program in parts, and a walk with whole tiles first
    # (2, 2000, 2000, 8, ...): 256 programs at D = 128 (176 at 64), so 132 whole tiles come first
    for B, Sq, Sk, H, Hkv, D, causal, parts in ((1, 300, 333, 4, 2, 128, False, 3), (2, 2000, 2000, 8, 4, 128, False, 3),
                                                (1, 400, 400, 2, 1, 128, True, 3), (1, 500, 640, 3, 1, 64, False, 2),
                                                (2, 2000, 2000, 8, 8, 64, False, 4)):
        opts = {"split_tail": parts, **({"window": False} if causal else {}), **({"peel": True} if D == 128 else {})}
        go = forward(B, Sq, Sk, H, Hkv, D, causal, opts)
        assert go.split[1] > 1, go.split
        ran.append(f"split{go.split}")
    torch.cuda.synchronize()
    print(f"sanitize_suite: ran attention_fwd split_tail {', '.join(ran)}")
    sys.exit(0)
if only == "fused":  # FUSED_OPTIONS=a,b turns those schedule options on for it
    from fused_options import use_fused

    from tiles.backends.hopper.backend import HopperBackend

    def backward(shapes):
        for B, (Sq, Sk), (H, Hkv), causal in shapes:
            for D in (128, 64):
                q = torch.randn(B, Sq, H, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
                k = torch.randn(B, Sk, Hkv, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
                tiles.attention(q, k, k, causal=causal, backend=be.name).float().sum().backward()

    use_fused()
    # the last: 256 programs at D = 64 (8 key blocks x 8 heads x 4), more than the SMs, for a persistent
    # walk; 301 queries: LSE and Delta rows not 16-byte aligned (vec_tma's padded copies)
    small = ((1, (300, 190), (4, 2), True), (1, (200, 333), (4, 2), False), (1, (301, 301), (2, 1), False))
    backward(small + ((1, (700, 700), (4, 2), True), (4, (1000, 1000), (16, 8), False)))
    # and the split kernels (dK/dV takes its vectors by TMA too, session 22)
    HopperBackend.FUSED_BACKWARD, HopperBackend.FUSED_BACKWARD_D = False, {}
    backward(small)
    torch.cuda.synchronize()
    print("sanitize_suite: ran attention_bwd_fused and the split backward")
    sys.exit(0)
only_attention = only == "attention"
if only == "gemm_fp8":
    from tiles.backends.hopper import lower_fp8
    from tiles.bench import fp8

    x = fp8.make_set(1024, 4608, 2048, dev, 0)  # 288 tiles for 132 SMs: the launcher splits the last 156
    assert lower_fp8.choose(1024, 4608, 2048, torch.cuda.get_device_properties(0).multi_processor_count)["stream_k"]
    tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"], backend=be.name)
    for (M, N, K), grid, cfg in (((300, 129, 4096), 4, {}), ((257, 300, 1000), 7, {}),
                                 ((384, 640, 1024), 4, dict(BN=256, stages=4, schedule="pingpong")),
                                 ((450, 300, 1000), 5, dict(BM=192))):  # three consumer warpgroups (session 15)
        x = fp8.make_set(M, N, K, dev, 1)
        go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], stream_k=True, sms=grid, **cfg)
        go()
        # the scales by TMA into the ring stages (session 27): K blocks a multiple of 4 here
        # (the ring as deep as shared memory allows beside the scale boxes: 3 stages at BN=256)
        tma_cfg = {k: v for k, v in cfg.items() if k != "stages"}
        go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], stream_k=True, sms=grid, scales_tma=True, **tma_cfg)
        go()
        if cfg.get("BN", 128) == 128:  # one A-scale box per 4- or 8-block group, in turns (sessions 28-29)
            for blocks in (4, 8):
                go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], stream_k=True, sms=grid, scales_tma=True,
                                           sa_per_group=True, sa_box_blocks=blocks, **tma_cfg)
                go()
        if cfg.get("BM", 128) == 128:  # stream-K over 2-CTA clusters sharing B by multicast (session 35)
            go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], stream_k=True, sms=grid, scales_tma=True,
                                       cluster=2, **tma_cfg)
            go()
    # rows that are not 16-byte aligned, taken 2 (18 K blocks) or 4 (17) at a time (session 28)
    for (M, N, K), grid, cfg in (((384, 768, 2304), 4, dict(BN=256, schedule="pingpong", stream_k=True)),
                                 ((260, 1000, 2100), 5, dict(stream_k=True)),
                                 ((260, 1000, 2100), None, dict(BN=96, epilogue="regs"))):
        x = fp8.make_set(M, N, K, dev, 4)
        sb = x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1])
        form = lower_fp8.scales_tma_form(x["sa"], sb)
        assert form["sa_group"] > 1 and form["sb_group"] > 1, form
        go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], sms=grid, **cfg, **form)
        go()
        if cfg.get("schedule") == "pingpong":  # each whole tile stored under the next one's first burst (session 30)
            go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], sms=grid, **cfg, **form, defer_store=True)
            go()
    for grid, extra in ((3, {}), (5, dict(stream_k=True, scale_index32=True)), (2, dict(epilogue="regs"))):
        x = fp8.make_set(700, 1300, 1024, dev, 5)  # several whole tiles a CTA: the deferred stores
        go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], sms=grid, BN=256, schedule="pingpong",
                                   defer_store=True, **extra)
        go()
    x = fp8.make_set(300, 1000, 4096, dev, 3)  # 128 x 96 tiles on the transposed scales (M- and N-major boxes)
    go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa_km"].t(), x["sb_kn"].t(), BN=96, epilogue="regs", scales_tma=True,
                               sa_major="m", sb_major="n")
    go()
    go, _ = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], BN=96, epilogue="regs", cluster=2)  # a pair per 96-wide B tile
    go()
    for M, N, K in ((200, 300, 1000), (256, 384, 1024)):  # the transposed storage: K-major copies by transpose.py
        x = fp8.make_set(M, N, K, dev, 2)  # (4- and 1-byte rows, then 16-byte ones), both operands in one launch
        tiles.gemm_fp8(x["a_km"].t(), x["b_kn"].t(), x["sa_km"].t(), x["sb_kn"].t(), backend=be.name)
    torch.cuda.synchronize()
    print("sanitize_suite: ran gemm_fp8 stream-K")
    sys.exit(0)
if be.supports("gemm") and not only_attention:
    a = torch.randn(130, 200, device=dev, dtype=torch.bfloat16)
    b = torch.randn(200, 270, device=dev, dtype=torch.bfloat16)
    tiles.gemm(a, b, backend=be.name)
    # 128 x 256 tiles, two a CTA for some (204 tiles), M and N tails, a cluster's extra tile row (17
    # rows): each tile stored under the next one's first k-block
    a = torch.randn(2100, 300, device=dev, dtype=torch.bfloat16)
    b = torch.randn(300, 3000, device=dev, dtype=torch.bfloat16)
    tiles.gemm(a, b, backend=be.name)
    ran.append("gemm")
if be.supports("gemm_fp8") and not only_attention:
    from tiles.bench import fp8

    x = fp8.make_set(200, 300, 1000, dev, 0)  # M, N and K tails, a partial last K block
    tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"], backend=be.name)
    ran.append("gemm_fp8")
if be.supports("attention_fwd"):
    q = torch.randn(1, 300, 4, 64, device=dev, dtype=torch.bfloat16)  # D=64: three consumer warpgroups
    tiles.attention(q, q, q, causal=True, backend=be.name)
    ran.append("attention_fwd_d64")
    bwd = all(be.supports(x) for x in ("attention_bwd_prep", "attention_bwd_dkdv", "attention_bwd_dq"))
    q = torch.randn(1, 100, 4, 128, device=dev, dtype=torch.bfloat16, requires_grad=bwd)
    k = torch.randn(1, 150, 2, 128, device=dev, dtype=torch.bfloat16, requires_grad=bwd)
    o = tiles.attention(q, k, k, causal=True, backend=be.name)
    ran.append("attention_fwd")
    if bwd:
        o.float().sum().backward()
        ran.append("attention_bwd")
if only_attention and be.supports("attention_fwd"):
    for D in (128, 64):  # 16 (D=128) or 11 (D=64) query blocks x 16 heads: more programs than SMs
        q = torch.randn(2, 2000, 8, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(2, 2000, 4, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
        for causal in (True, False):
            o = tiles.attention(q, k, k, causal=causal, backend=be.name)
            o.float().sum().backward()
            ran.append(f"attention_multi_d{D}_causal{int(causal)}")
    # D = 64 up to 1k queries: O leaves through each warpgroup's staging tile and a TMA store, 150-200
    # programs on 132 CTAs (a staging tile reused by the next program), rows past 1000 dropped by TMA
    q = torch.randn(4, 1000, 8, 64, device=dev, dtype=torch.bfloat16)
    k = torch.randn(4, 1000, 4, 64, device=dev, dtype=torch.bfloat16)
    for causal in (True, False):
        tiles.attention(q, k, k, causal=causal, backend=be.name)
        ran.append(f"attention_short_d64_causal{int(causal)}")
if be.supports("layernorm") and not only_attention:
    x = torch.randn(37, 1000, device=dev, dtype=torch.bfloat16)
    tiles.layernorm(x, torch.randn(1000, device=dev, dtype=torch.bfloat16),
                    torch.randn(1000, device=dev, dtype=torch.bfloat16), backend=be.name)
    ran.append("layernorm")
if be.supports("rotary") and not only_attention:
    x = torch.randn(2, 70, 3, 128, device=dev, dtype=torch.bfloat16)
    tiles.rotary(x, torch.randn(70, 64, device=dev), torch.randn(70, 64, device=dev), backend=be.name)
    ran.append("rotary")
torch.cuda.synchronize()
print(f"sanitize_suite: backend {be.name} ran {', '.join(ran)}")
