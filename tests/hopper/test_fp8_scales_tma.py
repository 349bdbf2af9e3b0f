"""The fp8 GEMM's `scales_tma` option: each K block's A row scales and B block scales come into its ring
stage by TMA beside the A and B tiles (the producer's copies, counted on the stage's full barrier), and the
consumers read them from shared memory in place of loads from global memory in the loop.

On the CPU: the option renders and compiles for every tile and schedule, with no spills and fewer
global loads; the launcher's layout check (`scales_tma_form`) takes the standard and the transposed
scales where TMA can describe them (rows that are not 16-byte aligned two or four at a time) and refuses
the rest; bad options are named errors. On an sm_90 GPU: the output is bitwise what the global loads give
(each element sees the same fmaf sequence, and rows past M, whose scales read TMA's zeros, are never
stored), within the float64 bound, in both layouts and with grouped rows."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.backends.hopper import lower_fp8

CONFIGS = {"bn128": {}, "bn128_regs": dict(epilogue="regs", wide_stores=4),
           "bn128_sk": dict(stream_k=True), "bn96": dict(BN=96, epilogue="regs", wide_stores=4),
           "bn256_pingpong_sk": dict(BN=256, schedule="pingpong", stream_k=True),
           "bn256_pingpong_regs": dict(BN=256, schedule="pingpong", epilogue="regs"),
           "bn256": dict(BN=256), "bm192": dict(BM=192, epilogue="regs", wide_stores=4),
           "bm192_sk": dict(BM=192, stream_k=True), "cluster2": dict(cluster=2),
           "cluster2_sk": dict(cluster=2, stream_k=True), "bn96_cluster2": dict(BN=96, epilogue="regs", cluster=2)}


def _meta(shape, strides):
    return torch.empty_strided(shape, strides, dtype=torch.float32, device="meta")


def test_layouts_the_tensor_maps_take():
    """The standard scales (a_scale (M, K/128), b_scale (N/128, K/128), both K-contiguous) and the
    transposed ones (M- and N-contiguous) where the other axis's stride is a multiple of 16 bytes."""
    def sb(nb, kb, strides):  # bind's 3-D per-column view of b_scale
        return _meta((nb, 128, kb), (strides[0], 0, strides[1]))

    def form(sa_major, sb_major, sa_group=1, sb_group=1):
        return dict(scales_tma=True, sa_major=sa_major, sb_major=sb_major, sa_group=sa_group, sb_group=sb_group)

    assert lower_fp8.scales_tma_form(_meta((1024, 56), (56, 1)), sb(12, 56, (56, 1))) == form("k", "k")
    assert lower_fp8.scales_tma_form(_meta((1024, 56), (1, 1024)), sb(12, 56, (1, 12))) == form("m", "n")
    # rows that are not 16-byte aligned: 72-byte rows two at a time, 68-byte ones four at a time, a
    # 76-byte stride (rows padded to 19 floats) four at a time
    assert lower_fp8.scales_tma_form(_meta((6144, 18), (18, 1)), sb(56, 18, (18, 1))) == form("k", "k", 2, 2)
    assert lower_fp8.scales_tma_form(_meta((1000, 17), (17, 1)), sb(8, 17, (17, 1))) == form("k", "k", 4, 4)
    assert lower_fp8.scales_tma_form(_meta((1000, 18), (19, 1)), sb(8, 18, (18, 1))) == form("k", "k", 4, 2)
    # ... but not where the row count does not divide by the group (the view's last row would reach
    # past the tensor)
    assert lower_fp8.scales_tma_form(_meta((1001, 18), (18, 1)), sb(8, 18, (18, 1))) is None
    assert lower_fp8.scales_tma_form(_meta((1000, 18), (18, 1)), sb(3, 18, (18, 1))) is None
    assert lower_fp8.scales_tma_form(_meta((1024, 56), (56, 1)), sb(3, 56, (1, 3))) is None  # 12-byte K stride
    assert lower_fp8.scales_tma_form(_meta((1024, 56), (112, 2)), sb(12, 56, (56, 1))) is None  # no contiguous axis


def test_the_launcher_takes_the_scales_by_tma_where_they_pay():
    """Every tile takes the scales by TMA; per stage, boxes of 128 rows of 16 bytes lost with 128 x 128
    tiles split by stream-K and K-contiguous scales (H200, sessions 27-28), so that tile and the 192-row
    one copy an 8-block box once per 8-block group (session 29); M-contiguous scales go per stage."""
    by_k = dict(scales_tma=True, sa_major="k", sb_major="k", sa_group=1, sb_group=1)
    by_m = dict(by_k, sa_major="m", sb_major="n")
    split = dict(BM=128, BN=128, stream_k=True)
    assert not lower_fp8.stage_scales_pay(split, by_k)
    assert lower_fp8.stage_scales_pay(split, by_m)
    assert lower_fp8.stage_scales_pay(dict(split, stream_k=False), by_k)
    for shape in ((1024, 1536, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)):
        assert lower_fp8.stage_scales_pay(lower_fp8.launch_options(*shape, 132), by_k), shape
    assert not lower_fp8.stage_scales_pay(lower_fp8.launch_options(1024, 4608, 7168, 132), by_k)
    # what the launcher adds: one 8-block A-scale box per 8-block group with 128 x 128 stream-K and
    # 192-row tiles
    pick = {shape: lower_fp8.tma_scale_options(lower_fp8.launch_options(*shape, 132), by_k)
            for shape in ((1024, 1536, 7168), (1024, 4608, 7168), (6144, 1536, 7168), (8192, 8192, 8192))}
    assert [p.get("sa_per_group", False) for p in pick.values()] == [False, True, True, False]
    assert [p.get("sa_box_blocks", 4) for p in pick.values()] == [4, 8, 8, 4]
    assert all(p["scales_tma"] for p in pick.values())
    assert lower_fp8.tma_scale_options(split, dict(by_k, sa_group=2)) == {}  # rows two at a time: the loads
    assert lower_fp8.tma_scale_options(split, by_m) == by_m


def test_bad_options_are_named():
    with pytest.raises(TypeError, match="scales_tma must be True or False"):
        lower_fp8.fp8_source("bf16", scales_tma=1)
    with pytest.raises(ValueError, match="sa_major is 'k' or 'm'"):
        lower_fp8.fp8_source("bf16", scales_tma=True, sa_major="n")
    with pytest.raises(ValueError, match="scale_index32 sizes the scale loads from global memory"):
        lower_fp8.fp8_source("bf16", scales_tma=True, scale_index32=True)
    with pytest.raises(ValueError, match="sa_group is 1, 2 or 4"):
        lower_fp8.fp8_source("bf16", scales_tma=True, sa_group=3)
    with pytest.raises(ValueError, match="sa_group=2 takes K-contiguous scales by TMA"):
        lower_fp8.fp8_source("bf16", sa_group=2)
    with pytest.raises(ValueError, match="sb_group=4 takes K-contiguous scales by TMA"):
        lower_fp8.fp8_source("bf16", scales_tma=True, sb_major="n", sb_group=4)


@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_option_renders_and_compiles(cfg, tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills  # tests/hopper is on sys.path
    from sass import disassemble

    loads = {}
    for tma in (False, True):
        k = lower_fp8.fp8_source("bf16", scales_tma=tma, **CONFIGS[cfg])
        assert ("load_async(S.sa[pos.stage], map_sa" in k["source"]) == tma
        assert ("scales.at(S.sa[pos.stage], S.sb[pos.stage], kb)" in k["source"]) == tma
        c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
        assert_no_spills(c, k["name"], tmp_path)
        sass = disassemble(c.cubin, tmp_path)
        assert "serialized" not in c.log
        loads[tma] = (sass.count("LDG"), sass.count("UTMALDG"))
    assert loads[True][0] < loads[False][0], loads  # the scale loads left the consumers' loop
    assert loads[True][1] > loads[False][1], loads  # and became TMA copies


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("groups", [(2, 2), (4, 1), (1, 4)])
def test_grouped_rows_render_and_compile(cfg, groups, tmp_path):
    """Rows taken 2 or 4 at a time: one box per row phase of A and one per B block, still no spills,
    no serialized wgmmas, and no scale loads from global memory in the loop."""
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills  # tests/hopper is on sys.path
    from sass import disassemble

    k = lower_fp8.fp8_source("bf16", scales_tma=True, sa_group=groups[0], sb_group=groups[1], **CONFIGS[cfg])
    assert ("for (int r = 0; r < SA_GROUP; ++r)" in k["source"]) == (groups[0] > 1)
    assert ("for (int j = 0; j < SB_BLOCKS; ++j)" in k["source"]) == (groups[1] > 1)
    c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
    assert_no_spills(c, k["name"], tmp_path)
    assert "serialized" not in c.log
    plain = lower_fp8.fp8_source("bf16", scales_tma=True, **CONFIGS[cfg])
    sass = disassemble(c.cubin, tmp_path)
    plain_sass = disassemble(runtime.compile_cuda(plain["source"], name=plain["name"] + ".cu").cubin, tmp_path)
    def global_loads(text):  # LDG, not counting the UTMALDG copies
        return text.count("LDG") - text.count("UTMALDG")
    assert global_loads(sass) == global_loads(plain_sass)
    more_boxes = groups[0] > 1 or (groups[1] > 1 and CONFIGS[cfg].get("BN", 128) != 128)  # one B block: one box
    assert (sass.count("UTMALDG") > plain_sass.count("UTMALDG")) == more_boxes


def _same_bits_both_ways(x, sa, sb, cfg, form, grid):
    """The kernel with the scales by TMA (form) stores what the global loads store, bit for bit (every
    output poisoned first), and within the float64 bound."""
    from tiles.bench import fp8

    M, N = x["a"].shape[0], x["b"].shape[0]
    outs = {}
    for tma in (False, True):
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        go, out = lower_fp8.launcher(x["a"], x["b"], sa, sb, out=out, sms=grid, **dict(cfg, **(form if tma else {})))
        go()
        outs[tma] = out
    torch.cuda.synchronize()
    assert not torch.isnan(outs[True]).any()
    assert torch.equal(outs[True], outs[False])
    err, bound = fp8.error_and_bound(outs[True], x)
    assert err <= bound, (err, bound)


def _layouts(x, transposed):
    if transposed:  # a_scale (K/128) x M and b_scale (K/128) x (N/128) in memory, passed as views
        return x["sa_km"].t(), x["sb_kn"].t()
    return x["sa"], x["sb"]


# M, N, K and the layouts; every shape has M and N tails (or a partial B scale block) and K blocks
# along K a multiple of 4 (the standard layout's 16-byte rows); grid caps split tiles into many shares
@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("mnk,grid,transposed", [((257, 300, 1000), 7, False), ((300, 1000, 4096), 4, True),
                                                 ((1000, 1000, 2048), None, False), ((1000, 1000, 2048), None, True)])
def test_stage_scales_store_the_same_bits_on_the_gpu(cfg, mnk, grid, transposed):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), M + 5 * N + K)
    sa, sb = _layouts(x, transposed)
    form = lower_fp8.scales_tma_form(sa, sb.unsqueeze(1).expand(sb.shape[0], 128, sb.shape[1]))
    assert form is not None and form["sa_major"] == ("m" if transposed else "k")
    _same_bits_both_ways(x, sa, sb, CONFIGS[cfg], form, grid)


def _padded(t, width):
    """t's values in the first columns of a wider tensor: rows `width` floats apart."""
    wide = torch.zeros(t.shape[0], width, dtype=t.dtype, device=t.device)
    wide[:, :t.shape[1]] = t
    return wide[:, :t.shape[1]]


# M, N, K with K/128 not a multiple of 4 (scale rows not 16-byte aligned), and the row stride they get
# (None: packed; else padded to that many floats): 18 blocks two rows at a time, 17 and 5 four at a
# time, 17 blocks in rows padded to 18 floats, and one block (K <= 128: rows one float apart, four at a
# time); M, N and K tails; grid caps split tiles into shares
@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("mnk,grid,stride", [((1000, 1024, 2304), None, None), ((1000, 1000, 2100), 7, None),
                                             ((260, 1536, 600), 5, None), ((512, 768, 2176), None, 18),
                                             ((256, 512, 100), None, None)])
def test_grouped_rows_store_the_same_bits_on_the_gpu(cfg, mnk, grid, stride):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), M + 3 * N + K)
    sa, sb = (x["sa"], x["sb"]) if stride is None else (_padded(x["sa"], stride), _padded(x["sb"], stride))
    form = lower_fp8.scales_tma_form(sa, sb.unsqueeze(1).expand(sb.shape[0], 128, sb.shape[1]))
    assert form is not None and (form["sa_group"], form["sb_group"]) != (1, 1), form
    _same_bits_both_ways(x, sa, sb, CONFIGS[cfg], form, grid)


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("blocks", [4, 8])
def test_per_group_boxes_render_and_compile(cfg, blocks, tmp_path):
    """sa_per_group: one A-scale box per 4-block (or, sa_box_blocks=8, 8-block) group; no spills, no
    serialized wgmmas."""
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills  # tests/hopper is on sys.path

    k = lower_fp8.fp8_source("bf16", scales_tma=True, sa_per_group=True, sa_box_blocks=blocks, **CONFIGS[cfg])
    assert "if (new_group)" in k["source"] and "scales.at(S.sa[next_sa_box(sa_at, kb, " in k["source"]
    assert f"(kb & {blocks - 1}) == 0 || kb == " in k["source"] and f"kb & -{blocks}, a_row);" in k["source"]
    assert "using sa_box = sv<BM * SA_STEP>;" in k["source"] and f"SA_STEP = {blocks};" in k["source"]
    c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
    assert_no_spills(c, k["name"], tmp_path)
    assert "serialized" not in c.log
    with pytest.raises(ValueError, match="sa_per_group copies one A-scale box"):
        lower_fp8.fp8_source("bf16", scales_tma=True, sa_major="m", sb_major="n", sa_per_group=True, **CONFIGS[cfg])
    with pytest.raises(ValueError, match="sa_box_blocks is 4, or 8 with sa_per_group=True"):
        lower_fp8.fp8_source("bf16", scales_tma=True, sa_box_blocks=8, **CONFIGS[cfg])
    with pytest.raises(ValueError, match="sa_box_blocks is 4, or 8"):
        lower_fp8.fp8_source("bf16", scales_tma=True, sa_per_group=True, sa_box_blocks=16, **CONFIGS[cfg])


# K blocks per unit from 1 up (stream-K shares on 4-7 CTAs start and end inside 4- and 8-block groups);
# 12 and 4 blocks: the last 8-block box reaches past the scales' rows (TMA fills zeros there, never read)
@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("mnk,grid", [((257, 300, 1000), 7), ((300, 1000, 4096), 4), ((1000, 1000, 2048), None),
                                      ((260, 700, 1536), 5), ((200, 300, 512), 3)])
@pytest.mark.parametrize("blocks", [4, 8])
def test_per_group_boxes_store_the_same_bits_on_the_gpu(cfg, mnk, grid, blocks):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), M + 7 * N + K)
    form = lower_fp8.scales_tma_form(x["sa"], x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1]))
    _same_bits_both_ways(x, x["sa"], x["sb"], CONFIGS[cfg], dict(form, sa_per_group=True, sa_box_blocks=blocks), grid)


def test_a_layout_the_kernel_was_not_rendered_for_is_refused():
    """bind checks the scales against the kernel's sa_major / sb_major before any launch."""
    needs.hopper_gpu()
    from tiles.bench import fp8

    x = fp8.make_set(256, 256, 512, torch.device("cuda"), 1)
    with pytest.raises(ValueError, match="scales_tma with sa_major='m'"):
        lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], scales_tma=True, sa_major="m", sb_major="n")
    y = fp8.make_set(256, 256, 2304, torch.device("cuda"), 2)  # 18 blocks: rows two at a time
    with pytest.raises(ValueError, match="sa_group=1, sb_group=1: the scales"):
        lower_fp8.launcher(y["a"], y["b"], y["sa"], y["sb"], scales_tma=True)


def test_a_kernel_whose_boxes_differ_from_the_hosts_does_not_compile(monkeypatch):
    """The bytes a stage's full barrier expects come from the kernel's sv boxes, the bytes TMA brings
    from the host's tensor maps (lower_fp8._scale_boxes): a static_assert ties the two, so a mismatch
    is a compile error, not a kernel waiting forever on its barrier."""
    runtime = needs.nvrtc()
    host = lower_fp8._scale_boxes
    monkeypatch.setattr(lower_fp8, "_scale_boxes", lambda cfg, BM, BN: ((8, BM), host(cfg, BM, BN)[1]))
    k = lower_fp8.fp8_source("bf16", scales_tma=True, epilogue="regs")
    with pytest.raises(Exception, match="scale boxes"):
        runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
