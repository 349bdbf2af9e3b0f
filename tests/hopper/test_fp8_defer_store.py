"""The fp8 GEMM's `defer_store` option (128 x 256 tiles in turns): a whole tile's accumulators are
stored once the next tile's first burst of wgmmas is issued, so the store runs under that burst
instead of leaving the tensor cores idle between tiles. The next tile's first K block is peeled out
of the loop for it; its accumulators are zeroed after the store.

On the CPU: the option renders and compiles with no spills for both epilogues, both scale paths and
with stream-K; in the SASS the first store of the peeled block comes after its QGMMAs are issued and
before the wait that drains them; bad values are named errors. On an sm_90 GPU: the output is the
same bits as without the option (each element sees the same fmaf sequence), on grids that give every
CTA several tiles, with tails, stream-K shares and both epilogues, and within the float64 bound."""
from __future__ import annotations

import re

import pytest
import torch

import needs  # tests/hopper is on sys.path
import sass
from test_compile import assert_no_spills
from tiles.backends.hopper import lower_fp8, runtime

PP = dict(BN=256, schedule="pingpong")
CONFIGS = {"tma": {}, "regs": dict(epilogue="regs", wide_stores=4), "sk": dict(stream_k=True, scale_index32=True),
           "scales_tma_sk": dict(stream_k=True, scales_tma=True), "regs_scales_tma": dict(epilogue="regs", scales_tma=True)}


def _source(cfg, **over):
    return lower_fp8.fp8_source("bf16", **PP, **CONFIGS[cfg], **over)


@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_renders_and_compiles_with_the_store_under_the_first_burst(cfg, tmp_path):
    k = _source(cfg, defer_store=True)
    assert k["name"].endswith("_ds") and k["source"].count("if (pending >= 0) {") == 2
    comp = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
    assert_no_spills(comp, k["name"], tmp_path)
    listing = sass.disassemble(comp.cubin, tmp_path)
    ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([\w.]+)", listing)]
    store = "STS" if CONFIGS[cfg].get("epilogue", "tma") == "tma" else "STG"
    first = next(i for i, op in enumerate(ops) if op.startswith(store))
    before = ops[:first]
    # the peeled block's burst is issued, and not yet waited for, when the stored tile's first store goes out
    assert "QGMMA" in " ".join(before), "the first store comes before any QGMMA"
    last_issue = max(i for i, op in enumerate(before) if op.startswith("QGMMA"))
    assert not any(op.startswith("WARPGROUP.DEPBAR") for op in before[last_issue:]), \
        "ptxas waits for the burst before the store: the store would not run under it"


def test_off_by_default_and_bad_values_are_named():
    assert _source("tma")["source"] == _source("tma", defer_store=False)["source"]
    assert "int pending" not in _source("tma")["source"]
    with pytest.raises(TypeError, match="defer_store"):
        _source("tma", defer_store=1)
    with pytest.raises(ValueError, match="defer_store.*pingpong"):
        lower_fp8.fp8_source("bf16", defer_store=True)
    with pytest.raises(ValueError, match="defer_store.*pingpong"):
        lower_fp8.fp8_source("bf16", BN=256, defer_store=True)


# every shape has M or N tails; the grids give each CTA several whole tiles (the deferred stores) and,
# with stream-K, shares of split ones after them
@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("mnk,grid", [((1000, 1000, 1024), 4), ((700, 1300, 512), 7), ((1000, 2000, 2304), None),
                                      ((128, 256, 128), 1)])
def test_stores_the_same_bits_on_the_gpu(cfg, mnk, grid):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), M + 3 * N + K)
    opts = dict(PP, **CONFIGS[cfg])
    if opts.get("scales_tma"):
        form = lower_fp8.scales_tma_form(x["sa"], x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1]))
        if form is None:
            pytest.skip("these scales take no tensor map (K / 128 rows not 16-byte aligned)")
        opts.update(form)
    outs = {}
    for defer in (False, True):
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        go, out = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], out=out, sms=grid, **opts, defer_store=defer)
        go()
        outs[defer] = out
    torch.cuda.synchronize()
    assert not torch.isnan(outs[True]).any()
    assert torch.equal(outs[True], outs[False])
    err, bound = fp8.error_and_bound(outs[True], x)
    assert err <= bound, (err, bound)


def test_the_launcher_defers_where_the_k_loop_is_short():
    """defer_store_pays: with turns (128 x 256 tiles) and up to 32 K blocks, where the scale path leaves
    the registers for it. Of the issue's five shapes, 6144 x 7168 x 2304 only (18 K blocks; 8192^3 has 64)."""
    picks = {}
    for M, N, K in [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]:
        opts = lower_fp8.launch_options(M, N, K, 132)
        kb = -(-K // 128)  # the standard scales, K-contiguous: (M, K/128) and (N/128, K/128)
        sa, sb = torch.empty(M, kb, device="meta"), torch.empty(-(-N // 128), kb, device="meta")
        opts.update(lower_fp8.tma_scale_options(opts, lower_fp8.scales_tma_form(sa, sb.unsqueeze(1).expand(-1, 128, kb))))
        picks[(M, N, K)] = lower_fp8.defer_store_pays(opts, K)
    assert [k for k, v in picks.items() if v] == [(6144, 7168, 2304)]
    pp = dict(BN=256, schedule="pingpong")
    assert lower_fp8.defer_store_pays(dict(pp, stream_k=True, scale_index32=True), 4096)
    assert not lower_fp8.defer_store_pays(dict(pp, stream_k=True), 4096)  # 64-bit offsets: the 8-byte spill
    assert not lower_fp8.defer_store_pays(dict(pp, scales_tma=True), 4224)  # 33 K blocks
    assert not lower_fp8.defer_store_pays(dict(BN=128, scales_tma=True), 1024)


def test_tiles_gemm_fp8_defers_and_stores_the_same_bits_on_the_gpu():
    """Through tiles.gemm_fp8 at a shape where the launcher takes defer_store (6144 x 7168 x 2304, 128 x 256
    tiles with stream-K): the same bits as the same kernel without it, within the float64 bound."""
    needs.hopper_gpu()
    import tiles
    from tiles.bench import fp8

    M, N, K = 6144, 7168, 2304
    x = fp8.make_set(M, N, K, torch.device("cuda"), 30)
    got = tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"])
    opts = lower_fp8.launch_options(M, N, K, torch.cuda.get_device_properties(0).multi_processor_count)
    form = lower_fp8.scales_tma_form(x["sa"], x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1]))
    opts.update(lower_fp8.tma_scale_options(opts, form))
    assert lower_fp8.defer_store_pays(opts, K)
    go, plain = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], **opts, defer_store=False)
    go()
    torch.cuda.synchronize()
    assert torch.equal(got, plain)
    err, bound = fp8.error_and_bound(got, x)
    assert err <= bound, (err, bound)
