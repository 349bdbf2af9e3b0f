"""The fp8 GEMM's `smem_scales` option: a producer warp copies each ring stage's scales (the tile's A row
scales and its B block scales) into shared memory with cp.async, arriving on the stage's full barrier
once they have landed, and the consumers read them there after the wait they already make for the
operands. Each element is then summed with the same fmaf sequence as with the consumers' own global
loads, so the output must be the same bits.

On the CPU: the option renders, is refused where it does not apply, and compiles with no spills; the
SASS copies with LDGSTS and the consumers' main loops read scales with LDS and load nothing from global
memory. On an sm_90 GPU: bitwise equality with the global loads at shapes with M, N and K tails, every
tile form (96, 128 and 256 wide, 192 rows, turns, stream-K), transposed scale storage, and the float64
bound."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.backends.hopper import lower_fp8

CONFIGS = {"bn96": dict(BN=96, epilogue="regs"), "bn128": {}, "bn128_sk": dict(stream_k=True),
           "bn128_regs": dict(epilogue="regs", wide_stores=4),
           "bn256_pingpong": dict(BN=256, stages=3, schedule="pingpong"),
           "bn256_pingpong_regs_sk": dict(BN=256, stages=4, schedule="pingpong", epilogue="regs", stream_k=True),
           "bm192": dict(BM=192, stages=4, epilogue="regs"), "bm192_sk": dict(BM=192, stages=4, stream_k=True)}


def test_option_is_checked():
    assert lower_fp8.DEFAULTS["smem_scales"] is False
    with pytest.raises(TypeError, match="smem_scales"):
        lower_fp8.fp8_source("bf16", smem_scales=1)
    with pytest.raises(ValueError, match="smem_scales.*cluster=1"):
        lower_fp8.fp8_source("bf16", smem_scales=True, cluster=2)
    with pytest.raises(ValueError, match="clamp_scales=True"):
        lower_fp8.fp8_source("bf16", smem_scales=True, clamp_scales=False)
    plain, ss = lower_fp8.fp8_source("bf16", stages=5), lower_fp8.fp8_source("bf16", stages=5, smem_scales=True)
    assert ss["name"] == plain["name"] + "_ss"
    assert "cp_async" not in plain["source"] and "copy_async(" in ss["source"]
    assert ss["smem"] == plain["smem"] + plain["cfg"]["stages"] * (128 + 2) * 4


@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_compiles_with_copies_and_no_global_loads_in_the_loop(cfg, tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills  # tests/hopper is on sys.path
    from sass import disassemble, mainloops

    k = lower_fp8.fp8_source("bf16", smem_scales=True, **CONFIGS[cfg])
    c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
    assert_no_spills(c, k["name"], tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    assert "LDGSTS" in sass
    # the scales' read-only loads (ld.global.nc) are gone; what LDGs are left are TMA and stream-K's
    assert "LDG.E.CONSTANT" not in sass
    loop = min(mainloops(sass), key=len)  # the K loop
    assert any(t.startswith("LDS") for t in loop), loop


def _launch(x, M, N, grid, transposed, **cfg):
    sa, sb = (x["sa_km"].t(), x["sb_kn"].t()) if transposed else (x["sa"], x["sb"])
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    go, out = lower_fp8.launcher(x["a"], x["b"], sa, sb, out=out, sms=grid, **cfg)
    go()
    return out


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("mnk,grid,transposed", [((7, 130, 200), None, False), ((257, 300, 1000), 7, True),
                                                 ((300, 129, 4096), 4, False), ((1000, 1000, 2048), None, True)])
def test_same_bits_as_global_scale_loads_on_the_gpu(cfg, mnk, grid, transposed):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), 5 * M + N + K)
    outs = {ss: _launch(x, M, N, grid, transposed, smem_scales=ss, **CONFIGS[cfg]) for ss in (False, True)}
    torch.cuda.synchronize()
    assert not torch.isnan(outs[True]).any()
    assert torch.equal(outs[True], outs[False])
    err, bound = fp8.error_and_bound(outs[True], x)
    assert err <= bound, (err, bound)
