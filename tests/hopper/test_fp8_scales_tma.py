"""The fp8 GEMM's `scales_tma` option: each K block's A row scales and B block scales come into its ring
stage by TMA beside the A and B tiles (the producer's copies, counted on the stage's full barrier), and the
consumers read them from shared memory in place of loads from global memory in the loop.

On the CPU: the option renders and compiles for every tile and schedule, with no spills and fewer
global loads; the launcher's layout check (`scales_tma_form`) takes the standard and the transposed
scales where TMA can describe them and refuses the rest; bad options are named errors. On an sm_90 GPU:
the output is bitwise what the global loads give (each element sees the same fmaf sequence, and rows
past M, whose scales read TMA's zeros, are never stored), within the float64 bound, in both layouts."""
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
           "bm192_sk": dict(BM=192, stream_k=True), "cluster2": dict(cluster=2)}


def _meta(shape, strides):
    return torch.empty_strided(shape, strides, dtype=torch.float32, device="meta")


def test_layouts_the_tensor_maps_take():
    """The standard scales (a_scale (M, K/128), b_scale (N/128, K/128), both K-contiguous) and the
    transposed ones (M- and N-contiguous) where the other axis's stride is a multiple of 16 bytes."""
    def sb(nb, kb, strides):  # bind's 3-D per-column view of b_scale
        return _meta((nb, 128, kb), (strides[0], 0, strides[1]))

    assert lower_fp8.scales_tma_form(_meta((1024, 56), (56, 1)), sb(12, 56, (56, 1))) == dict(
        scales_tma=True, sa_major="k", sb_major="k")
    assert lower_fp8.scales_tma_form(_meta((1024, 56), (1, 1024)), sb(12, 56, (1, 12))) == dict(
        scales_tma=True, sa_major="m", sb_major="n")
    assert lower_fp8.scales_tma_form(_meta((6144, 18), (18, 1)), sb(56, 18, (18, 1))) is None  # 72-byte rows
    assert lower_fp8.scales_tma_form(_meta((1024, 56), (56, 1)), sb(3, 56, (1, 3))) is None  # 12-byte K stride
    assert lower_fp8.scales_tma_form(_meta((1024, 56), (112, 2)), sb(12, 56, (56, 1))) is None  # no contiguous axis


def test_bad_options_are_named():
    with pytest.raises(TypeError, match="scales_tma must be True or False"):
        lower_fp8.fp8_source("bf16", scales_tma=1)
    with pytest.raises(ValueError, match="sa_major is 'k' or 'm'"):
        lower_fp8.fp8_source("bf16", scales_tma=True, sa_major="n")
    with pytest.raises(ValueError, match="scale_index32 sizes the scale loads from global memory"):
        lower_fp8.fp8_source("bf16", scales_tma=True, scale_index32=True)


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
    outs = {}
    for tma in (False, True):
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        opts = dict(CONFIGS[cfg], **(form if tma else {}))
        go, out = lower_fp8.launcher(x["a"], x["b"], sa, sb, out=out, sms=grid, **opts)
        go()
        outs[tma] = out
    torch.cuda.synchronize()
    assert not torch.isnan(outs[True]).any()
    assert torch.equal(outs[True], outs[False])
    err, bound = fp8.error_and_bound(outs[True], x)
    assert err <= bound, (err, bound)


def test_a_layout_the_kernel_was_not_rendered_for_is_refused():
    """bind checks the scales against the kernel's sa_major / sb_major before any launch."""
    needs.hopper_gpu()
    from tiles.bench import fp8

    x = fp8.make_set(256, 256, 512, torch.device("cuda"), 1)
    with pytest.raises(ValueError, match="scales_tma with sa_major='m'"):
        lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], scales_tma=True, sa_major="m", sb_major="n")


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
