"""The block-scaled fp8 GEMM's Hopper lowering on a CPU machine: the tile program lowers onto
templates/gemm_fp8.cu.j2, NVRTC compiles it for sm_90a, the SASS has the fp8 wgmma (QGMMA) and the
TMA/setmaxnreg machinery, ptxas spills nothing and does not serialize the wgmmas."""
from __future__ import annotations

import pytest

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-python (cuda.bindings.nvrtc) is not installed")

from tiles import backends  # noqa: E402
from tiles.__main__ import _examples  # noqa: E402
from tiles.backends.hopper import lower_fp8, runtime  # noqa: E402
from tiles.core.lowering import LoweringError  # noqa: E402
from tiles.kernels import gemm_fp8  # noqa: E402
from test_compile import assert_no_spills  # noqa: E402  (tests/hopper is on sys.path)
from sass import disassemble  # noqa: E402



try:
    runtime.nvrtc_version()
except Exception as e:  # the bindings import but libnvrtc is missing
    pytest.skip(f"NVRTC is not loadable: {e}", allow_module_level=True)


def _lowered(**options):
    a, kw = _examples()["gemm_fp8"]
    return backends.get("hopper").lower(gemm_fp8, *a, options=options, **kw)


@pytest.mark.parametrize("options", [{}, {"overlap": False, "epilogue": "regs"}, {"BN": 256}, {"cluster": 2},
                                     {"BN": 256, "cluster": 2, "epilogue": "regs"},
                                     {"BN": 256, "schedule": "pingpong"},
                                     {"BN": 256, "schedule": "pingpong", "epilogue": "regs"},
                                     {"BN": 256, "schedule": "pingpong", "cluster": 2},
                                     {"BM": 192}, {"BM": 192, "stream_k": True}, {"BM": 192, "epilogue": "regs"},
                                     {"clamp_scales": False}, {"epilogue": "regs", "wide_stores": 2},
                                     {"BN": 256, "schedule": "pingpong", "epilogue": "regs", "wide_stores": 4},
                                     {"epilogue": "regs", "wide_stores": 4, "scale_index32": True},
                                     {"BN": 256, "schedule": "pingpong", "stream_k": True, "scale_index32": True},
                                     {"BN": 96, "epilogue": "regs", "wide_stores": 4, "scale_index32": True},
                                     {"BN": 96, "epilogue": "regs", "overlap": False},
                                     # the scales by TMA as the launcher takes them (tma_scale_options)
                                     {"stream_k": True, "scales_tma": True, "sa_per_group": True},
                                     {"stream_k": True, "scales_tma": True, "sa_per_group": True, "sa_box_blocks": 8},
                                     {"BM": 192, "scales_tma": True, "sa_per_group": True},
                                     {"BN": 256, "schedule": "pingpong", "stream_k": True, "scales_tma": True,
                                      "sa_group": 2, "sb_group": 2}])
def test_lowers_and_compiles_with_qgmma(options, tmp_path):
    low = _lowered(**options)
    assert "mma(part, a, b, tb=True, accumulate=False)" in low.source  # the tile program, quoted
    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    assert f"QGMMA.64x{96 if options.get('BN') == 96 else 128}x32.F32.E4M3.E4M3" in sass
    assert "HGMMA" not in sass and "HMMA" not in sass
    for needle in ("UTMALDG.2D", "SYNCS", "USETMAXREG"):
        assert needle in sass, needle
    assert "LDL" not in sass and "STL" not in sass
    if options.get("wide_stores"):  # ops.h store_wide: 2 or 4 pairs of a row a store
        assert {2: "STG.E.64", 4: "STG.E.128"}[options["wide_stores"]] in sass


def test_scale_offsets_in_32_bits_only_where_they_fit(tmp_path):
    """scale_index32 takes the scale loads' K offsets (K block x K stride) in 32 bits: one multiply a K
    block in place of a 64-bit product. The launcher turns it on where the last block's offset stays
    below 2^31 elements, and bind refuses it, before any launch, where it would not."""
    import torch

    def meta(shape, strides):
        return torch.empty_strided(shape, strides, dtype=torch.float32, device="meta")

    a = torch.empty(64, 4096, dtype=torch.float8_e4m3fn, device="meta")  # 32 K blocks
    sa, sb = meta((64, 32), (32, 1)), meta((1, 128, 32), (32, 0, 1))
    assert lower_fp8.scale_offsets_fit(a, sa, sb)
    wide = meta((64, 32), (1, 2 ** 26))  # the K stride of a (K/128, huge M) view: 31 x 2^26 < 2^31
    assert lower_fp8.scale_offsets_fit(a, wide, sb)
    huge = meta((64, 32), (1, 2 ** 27))  # 31 x 2^27 > 2^31
    assert not lower_fp8.scale_offsets_fit(a, huge, sb)
    assert not lower_fp8.scale_offsets_fit(a, sa, meta((1, 128, 32), (32, 0, 2 ** 27)))
    kern = lower_fp8.fp8_source("bf16", scale_index32=True)
    b = torch.empty(128, 4096, dtype=torch.float8_e4m3fn, device="meta")
    with pytest.raises(ValueError, match="scale_index32: the scales' K offsets pass 2"):
        lower_fp8.bind(kern, a, b, huge, sb, torch.empty(64, 128, dtype=torch.bfloat16, device="meta"))
    # fewer instructions in the main loop than the 64-bit form
    from sass import mainloops
    loops = {}
    for i32 in (False, True):
        k = lower_fp8.fp8_source("bf16", epilogue="regs", wide_stores=4, scale_index32=i32)
        c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
        loops[i32] = min(len(body) for body in mainloops(disassemble(c.cubin, tmp_path)))
    assert loops[True] < loops[False] - 8, loops
    with pytest.raises(TypeError, match="scale_index32"):
        lower_fp8.fp8_source("bf16", scale_index32=1)


def test_narrow_tiles_where_128_wide_ones_leave_sms_idle():
    """128 x 96 tiles: 1024 x 1536 has 96 tiles of 128 x 128 for 132 SMs and 128 of 128 x 96. They store
    from registers (96 columns are not whole 64-column TMA boxes), take clamped scales and no stream-K;
    the promotion picks each 8-column group's B scale at one of three splits."""
    assert lower_fp8.choose(1024, 1536, 7168, 132) == dict(BM=128, BN=96, stream_k=False)
    assert lower_fp8.choose(8192, 8192, 8192, 132)["BN"] == 256
    # what the launcher (and the benchmarks' "launched") takes: stores from registers with the narrower
    # tiles, turns with BN = 256
    assert lower_fp8.launch_options(1024, 1536, 7168, 132) == dict(BM=128, BN=96, stream_k=False, epilogue="regs",
                                                                   wide_stores=4)
    assert lower_fp8.launch_options(8192, 8192, 8192, 132) == dict(BM=128, BN=256, stream_k=True, schedule="pingpong")
    src = lower_fp8.fp8_source("bf16", BN=96, epilogue="regs")["source"]
    assert all(f"promote_split<{n}>(acc, part, s)" in src for n in (4, 8, 12))
    assert "split((BN * tn + BN - 1) / 128 == BN * tn / 128 ? 12" in src
    for bad in (dict(epilogue="tma"), dict(epilogue="regs", stream_k=True), dict(epilogue="regs", clamp_scales=False)):
        with pytest.raises(ValueError, match="BN=96 takes"):
            lower_fp8.fp8_source("bf16", BN=96, **bad)
    low = _lowered(BN=96, epilogue="regs")
    assert "_128x96x128_" in low.entry


def test_f32_output_compiles(tmp_path):
    k = lower_fp8.fp8_source("float32")
    c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
    assert_no_spills(c, k["name"], tmp_path)  # (the cubin's own table where the log lacks ptxas' lines)


def test_refuses_other_shapes_and_formats():
    import torch

    a, kw = _examples()["gemm_fp8"]
    with pytest.raises(LoweringError, match="BK must be 128 and BN 128"):
        backends.get("hopper").lower(gemm_fp8, *a, BN=64)
    fnuz = torch.empty(64, 64, dtype=torch.float8_e4m3fnuz, device="meta")
    with pytest.raises(LoweringError, match="gfx942"):
        backends.get("hopper").lower(gemm_fp8, fnuz, fnuz, *a[2:])
    with pytest.raises(ValueError, match="shared memory"):
        lower_fp8.fp8_source("bf16", stages=7)


def test_wide_tiles_and_clusters():
    """BN=256 (two of the program's 128-wide tiles per CTA) fits shared memory with the ring shortened to 4
    stages, and is picked only where the tile count keeps the SMs busy (bench/hopper_fp8_notes.md)."""
    low = _lowered(BN=256)
    assert low.notes["config"]["stages"] == 4 and low.notes["config"]["overlap"] is False
    assert "mma_half<1>" in low.source and "128x256x128" in low.entry
    low = _lowered(cluster=2)
    assert "__cluster_dims__(CLUSTER, 1, 1)" in low.source and "tma_load_2d_multicast" in low.source
    with pytest.raises(LoweringError, match="BN=128 or 256"):
        _lowered(BN=192)
    # 192 rows in three consumer warpgroups: 160 registers each, one scratch, the ring as deep as fits
    low = _lowered(BM=192)
    cfg = low.notes["config"]
    assert (cfg["consumers"], cfg["consumer_regs"], cfg["producer_regs"], cfg["overlap"], cfg["stages"]) == \
        (3, 160, 24, False, 4)
    assert low.block == (512, 1, 1) and "192x128x128" in low.entry
    with pytest.raises(LoweringError, match="BM=256"):
        _lowered(BM=256)
    with pytest.raises(ValueError, match="cluster"):
        lower_fp8.fp8_source("bf16", cluster=4)
    # the five issue-#9 shapes on the H200's 132 SMs: each shape's measured best (sessions 14 and 15,
    # bench/hopper_fp8_notes.md): stream-K wherever the last wave is short, except with fewer tiles than SMs,
    # and 192-row tiles where their 384 tiles fill three waves (6144 x 1536); 128 x 96 tiles where 128 x 128
    # ones leave SMs idle (1024 x 1536: 128 tiles against 96, session 18)
    picks = {(m, n, k): tuple(lower_fp8.choose(m, n, k, 132).values()) for m, n, k in
             [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]}
    assert picks == {(1024, 1536, 7168): (128, 96, False), (1024, 4608, 7168): (128, 128, True),
                     (6144, 7168, 2304): (128, 256, True), (6144, 1536, 7168): (192, 128, False),
                     (8192, 8192, 8192): (128, 256, True)}
    assert lower_fp8.choose(1024, 4224, 4096, 132) == dict(BM=128, BN=128, stream_k=False)  # 264 tiles: two whole waves


def test_clusters_where_128_wide_split_tiles_pay():
    """2-CTA clusters sharing B by multicast: the launcher's choice with 128 x 128 tiles split by stream-K
    (1024 x 4608 x 7168 of the five issue shapes, session 35), not for the row-wise kernel, and not where
    a pair would compute a whole tile row past M in a short column of tiles."""
    clustered = {shape: lower_fp8.launch_options(*shape, 132).get("cluster", 1) for shape in
                 [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]}
    assert clustered == {(1024, 1536, 7168): 1, (1024, 4608, 7168): 2, (6144, 7168, 2304): 1, (6144, 1536, 7168): 1,
                         (8192, 8192, 8192): 1}
    assert "cluster" not in lower_fp8.launch_options(1024, 4608, 7168, 132, rowwise=True)
    split = dict(BM=128, BN=128, stream_k=True)
    assert [lower_fp8.cluster_pays(split, m) for m in (128, 256, 384, 640, 896, 1024, 1025)] == \
        [False, True, False, False, False, True, True]  # 1, 2, 3, 5, 7, 8, 9 tile rows
    assert not lower_fp8.cluster_pays(dict(split, stream_k=False), 1024)
    assert not lower_fp8.cluster_pays(dict(split, BN=256), 1024)
    # the launched kernel's source: multicast B boxes and the clusters' shares
    src = lower_fp8.fp8_source("bf16", **lower_fp8.launch_options(1024, 4608, 7168, 132))["source"]
    assert "__cluster_dims__(CLUSTER, 1, 1)" in src and "tma_load_2d_multicast" in src and "split_share<CLUSTER>" in src


def test_pingpong_option():
    """schedule="pingpong" is an option of the lowering, off unless asked for (the launcher asks for it
    with BN=256, measured in bench/hopper_fp8_notes.md, session 12): the default source is byte-identical
    to the one rendered with the option set to its default explicitly, and the ping-pong source takes
    turns through named barriers in both the lowering and fp8_source."""
    for options in ({}, {"BN": 256}, {"overlap": False, "epilogue": "regs"}, {"cluster": 2}):
        assert _lowered(**options).source == _lowered(**options, schedule="cooperative").source
        fp8 = dict(options, stages=4) if options.get("BN") == 256 else options
        assert lower_fp8.fp8_source("bf16", **fp8)["source"] == \
            lower_fp8.fp8_source("bf16", **fp8, schedule="cooperative")["source"]
        assert "await_turn" not in _lowered(**options).source
    low = _lowered(BN=256, schedule="pingpong")
    assert low.entry.endswith("_pp") and low.notes["config"]["schedule"] == "pingpong"
    assert low.source.count("await_turn(cw);") == 3 and low.source.count("pass_turn(cw);") == 3
    with pytest.raises(LoweringError, match="pingpong"):
        _lowered(schedule="pingpong")  # BN=128
    with pytest.raises(ValueError, match="schedule must be"):
        lower_fp8.fp8_source("bf16", schedule="alternating")
