"""On a Hopper GPU: real wgmmas agree with layouts.py, smem.h and the descriptors; the GEMM is right
on a few tail shapes. Skipped (with the reason) anywhere else."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cuda.bindings.driver", reason="cuda-python is not installed")

if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the layout probe runs on a Hopper GPU only", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip(f"needs compute capability 9.0 (sm_90a), found {torch.cuda.get_device_capability()}",
                allow_module_level=True)

from tiles.backends.hopper import gemm_probe, probe  # noqa: E402


@pytest.fixture(scope="module")
def probe_results():
    return probe.run_layout_probe()


@pytest.mark.parametrize("check", ["acc_ids", "acc_rand", "acc_rand_bt", "a_regs"])
def test_probe(probe_results, check):
    r = probe_results[check]
    assert r["ok"], f"{check}: {r['mismatches']} mismatches, e.g. {r['detail']}"


@pytest.mark.parametrize("shape", [(129, 257, 65), (1000, 1000, 1000), (256, 512, 64)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_gemm_matches_reference(shape, out_dtype):
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g)
    ref = a.double() @ b.double()
    c = gemm_probe.run_gemm(a, b, out_dtype)
    lp = torch.matmul(a, b)
    e = (c.double() - ref).abs().max().item()
    e_lp = (lp.double() - ref).abs().max().item()
    r32 = ref.float()
    fl = 2 * ((r32 + 0.3 - 0.3) - r32).abs().max().item()
    assert e <= 2 * e_lp + fl, (e, e_lp, fl)


@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (4097, 4095, 1031), (256, 512, 64)])
@pytest.mark.parametrize("out_dtype", [None, torch.float32])
def test_ir_lowered_gemm_through_the_public_api(shape, out_dtype):
    """tiles.gemm(backend='hopper'): trace → lower.py → NVRTC → launch, against float64."""
    import tiles
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(2)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g)
    c = tiles.gemm(a, b, out_dtype, backend="hopper")
    ref = a.double() @ b.double()
    e = (c.double() - ref).abs().max().item()
    e_lp = ((a @ b).double() - ref).abs().max().item()
    r32 = ref.float()
    fl = 2 * ((r32 + 0.3 - 0.3) - r32).abs().max().item()
    assert c.dtype == (out_dtype or torch.bfloat16) and e <= 2 * e_lp + fl, (e, e_lp, fl)


@pytest.mark.parametrize("shape,over", [
    ((4097, 4095, 1031), {}),                 # 4 tiles a CTA, M and N tails, a cluster's extra tile row
    ((4096, 4096, 64), {}),                   # one k-block: the first, peeled k-block is the whole loop
    ((300, 520, 8), {}),                      # one partial k-block, zero-filled by TMA
    ((2048, 1000, 200), dict(BN=64, stages=8, epilogue="regs", wide_stores=4)),  # the narrow tiles' form
    ((1000, 1000, 1000), dict(BN=128, stages=6)),
])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_deferred_store_is_the_same_gemm(shape, over, dtype):
    """deferred_store stores each tile under the next tile's first k-block: the same sums, so the same
    bits as the launched form, tails and the last tile included."""
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(M, K, device="cuda", generator=g).to(dtype)
    b = torch.randn(K, N, device="cuda", generator=g).to(dtype)
    plain = gemm_probe.run_gemm(a, b, dtype, **over)
    deferred = gemm_probe.run_gemm(a, b, dtype, deferred_store=True, **over)
    assert torch.equal(plain, deferred)
    ref = a.double() @ b.double()
    e = (deferred.double() - ref).abs().max().item()
    e_lp = ((a @ b).double() - ref).abs().max().item()
    r32 = ref.float()
    fl = 2 * ((r32 + 0.3 - 0.3) - r32).abs().max().item()
    assert e <= 2 * e_lp + fl, (e, e_lp, fl)
