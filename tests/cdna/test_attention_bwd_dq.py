"""attention_bwd_dq lowered to CDNA (lower_attention.CDNAAttentionBwdDqLowering): compiled for gfx942 (clang-22,
clang-19) and gfx950 (clang-22) with no scratch / spills and the expected MFMA and LDS traffic, and the generated
kernel run on the CPU through the emulated arch layer (tests/cdna/emu) against the float64 reference by
TESTING.md's backward rule (dq max error <= 3 E(lp) + fl) on tails, causal Sq != Sk both ways, GQA / MQA."""
from __future__ import annotations

import functools
import math
import os

import numpy as np
import pytest
import torch

from tests.portability.reference import attention_ref, fl, max_err
from tiles import backends
from tiles.backends.cdna import compile as cc
from tiles.backends.cdna.lower_attention import CDNAAttentionBwdDqLowering, default_tiles_bwd
from tiles.core.lowering import LoweringError
from tiles.kernels import SUITE

from .conftest import TOOLCHAINS, build_host, need_clang, run


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def lower_meta(arch, D, causal, out=torch.float32, H=8, Hkv=2, **tiles):
    q, kv = meta(2, 1000, H, D), meta(2, 1500, Hkv, D)
    lse = meta(2, H, 1000, dtype=torch.float32)
    cfg = {**backends.get("cdna").config("attention_bwd_dq", arch=arch, D=D), **tiles}
    return backends.get("cdna").lower(SUITE["attention_bwd_dq"], q, kv, kv, q, lse, lse, meta(2, 1000, H, D, dtype=out),
                                      0.1, causal=causal, D=D, arch=arch, **cfg)


@functools.lru_cache(maxsize=None)
def compiled(arch, clang, D, causal):
    low = lower_meta(arch, D, causal)
    return low, cc.compile_hip(low.source, arch, clang)


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_bwd_dq_compiles_without_spills(arch, clang, D, causal):
    need_clang(clang)
    low, r = compiled(arch, clang, D, causal)
    res = r.resources
    assert res.get("scratch", 0) == 0 and res.get("vgpr_spill", 0) == 0 and res.get("sgpr_spill", 0) == 0, r.summary()
    assert r.vgpr_total <= 256 and res.get("occupancy", 0) >= 2, r.summary()
    cfg = low.notes["config"]
    assert res.get("lds") == cfg.lds_bytes <= (64 << 10)
    per = cfg.mfma_per_tile
    mn = cfg.mfma.mnemonic(cfg.dtype)
    assert r.count(mn) == per["S"] + per["dP"] + per["dQ"], r.summary()  # the loop body is emitted once
    assert r.count("s_barrier") == 2, r.summary()
    assert r.count("ds_read_b128") == 3 * cfg.BN * cfg.D // 512, r.summary()  # K, V (key_perm rows), K^T: 16 B per lane


@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx950", 22)])
def test_bwd_dq_hiprtc_style_compile(arch, clang):
    need_clang(clang)
    hdr, why = cc.hiprtc_header()
    if hdr is None:
        pytest.skip(f"hiprtc_runtime.h unavailable: {why}")
    low = lower_meta(arch, 128, True)
    r = cc.compile_hip(low.source, arch, clang, hiprtc=True)
    assert r.count("v_mfma") > 0 and r.resources["scratch"] == 0


def test_bwd_dq_source_is_the_ir_op_by_op():
    low = lower_meta("gfx942", 128, True)
    for op in ("// mma(s, q, kt, tb=True, accumulate=False)", "// mma(dp, do, vt, tb=True, accumulate=False)",
               "// mma(dq, dsp, kt, accumulate=True)", "// sub_row(dp, dp, delta)", "// mul(ds, dp, s)",
               "// cast(dsp, ds)", "// mask_rows(s,", "// load(lse, L[", "// store(dQ["):
        assert op in low.source, op
    assert "rt_op<MF, D, MF> do_;" in low.source  # `do` is a C++ keyword


def test_bwd_dq_rejects_what_it_does_not_lower():
    with pytest.raises(LoweringError):
        lower_meta("gfx942", 96, False, BN=64)
    with pytest.raises(LoweringError):
        lower_meta("gfx942", 128, False, BM=64)
    assert backends.get("cdna").supports("attention_bwd_dq")


DRIVER = r'''
#include <cstdio>
#include <cstdint>
#include <vector>
#include KERNEL_SRC
static std::vector<uint16_t> Qh, Kh, Vh, dOh;
static std::vector<float> Lh, Dh;
static std::vector<unsigned char> dQh;
static void body() { CALL; }
static void readf(const char* p, void* d, size_t n) { FILE* f = fopen(p, "rb"); if (!f || fread(d, 1, n, f) != n) { fprintf(stderr, "read %s\n", p); exit(2); } fclose(f); }
int main(int argc, char** argv) {
  Qh.resize(NQ); dOh.resize(NQ); Kh.resize(NK); Vh.resize(NK); Lh.resize(NL); Dh.resize(NL); dQh.assign(NQ * OUT_BYTES, 0xFF);
  readf(argv[1], Qh.data(), NQ * 2); readf(argv[2], Kh.data(), NK * 2); readf(argv[3], Vh.data(), NK * 2);
  readf(argv[4], dOh.data(), NQ * 2); readf(argv[5], Lh.data(), NL * 4); readf(argv[6], Dh.data(), NL * 4);
  long long barriers = 0;
  for (int b = 0; b < GRID; ++b) barriers += tiles::emu::run_block((unsigned)b, 512, body);
  FILE* f = fopen(argv[7], "wb"); fwrite(dQh.data(), 1, NQ * OUT_BYTES, f); fclose(f);
  printf("barriers %lld\n", barriers);
  return 0;
}
'''
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def emulate_bwd_dq(tmp, arch, dtype, out_dtype, B, Sq, Sk, H, Hkv, D, causal, seed=0):
    g = torch.Generator().manual_seed(seed)
    dt = TORCH[dtype]
    q = torch.randn(B, Sq, H, D, generator=g).to(dt)
    k = torch.randn(B, Sk, Hkv, D, generator=g).to(dt)
    v = torch.randn(B, Sk, Hkv, D, generator=g).to(dt)
    do = torch.randn(B, Sq, H, D, generator=g).to(dt)
    scale = 0.7 / math.sqrt(D)
    # L and Delta as the forward and bwd_prep give them (f32; L = +inf on rows that see no key)
    o_ref, lse_ref = attention_ref(q, k, v, causal, scale)
    lse = lse_ref.float().masked_fill(~torch.isfinite(lse_ref), math.inf).contiguous()
    delta = (do.double() * o_ref.to(dt).double()).sum(-1).transpose(1, 2).float().contiguous()
    dq = torch.empty(B, Sq, H, D, dtype=TORCH[out_dtype])
    cfg = default_tiles_bwd(arch, D)
    kern = SUITE["attention_bwd_dq"].trace(q, k, v, do, lse, delta, dq, scale, causal=causal, D=D, **cfg)
    low = CDNAAttentionBwdDqLowering(kern, arch).lower()
    tensors = {"Q": q, "K": k, "V": v, "dO": do, "L": lse, "Delta": delta, "dQ": dq}
    names = {"Q": "Qh.data()", "K": "Kh.data()", "V": "Vh.data()", "dO": "dOh.data()", "L": "Lh.data()", "Delta": "Dh.data()",
             "dQ": f"({'float' if out_dtype == 'f32' else 'u16'}*)dQh.data()"}
    call = []
    for kind, x in low.args:
        if kind == "ptr":
            call.append(names[x.name])
        elif kind in ("dim", "stride"):
            pname, attr = x.name.split(".")
            t = tensors[pname]
            call.append(str(t.shape[int(attr[5:])] if attr.startswith("shape") else t.stride(int(attr[6:]))))
        else:
            call.append(repr(float(scale)) + "f")
    grid = -(-Sq // cfg["BM"]) * H * B
    drv = os.path.join(tmp, "driver.cpp")
    with open(drv, "w") as f:
        f.write(DRIVER)
    defines = [f"CALL=kern({', '.join(call)})", f"NQ={q.numel()}", f"NK={k.numel()}", f"NL={lse.numel()}", f"GRID={grid}",
               f"OUT_BYTES={dq.element_size()}"]
    exe = build_host(low.source.replace(low.entry, "kern"), 950 if arch == "gfx950" else 942, defines, main=drv)
    paths = [os.path.join(tmp, n) for n in ("q.bin", "k.bin", "v.bin", "do.bin", "l.bin", "d.bin", "dq.bin")]
    for t, p in zip((q, k, v, do), paths):
        t.contiguous().view(torch.int16).numpy().tofile(p)
    lse.numpy().tofile(paths[4])
    delta.numpy().tofile(paths[5])
    out = run(exe, *paths)
    raw = np.fromfile(paths[6], dtype=np.uint8)
    got = torch.from_numpy(raw.copy()).view(TORCH[out_dtype] if out_dtype != "bf16" else torch.int16)
    if out_dtype == "bf16":
        got = got.view(torch.bfloat16)
    return q, k, v, do, scale, got.view(dq.shape), low, int(out.split()[1])


def dq_reference(q, k, v, do, causal, scale):
    grads = {}
    for kind, dt in (("ref", torch.float64), ("lp", q.dtype)):
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        attention_ref(*xs, causal, scale, dtype=dt)[0].backward(do.to(dt))
        grads[kind] = xs[0].grad
    return grads["ref"], grads["lp"]


CASES = [
    # arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal
    ("gfx942", "bf16", "f32", 1, 200, 300, 4, 2, 64, True),     # GQA, causal Sq < Sk, tails in both
    ("gfx942", "bf16", "bf16", 2, 130, 70, 2, 1, 128, False),   # MQA, key tail inside the first tile
    ("gfx950", "f16", "f16", 1, 150, 100, 2, 2, 128, True),     # causal Sq > Sk: first rows see no key (dq = 0)
    ("gfx950", "bf16", "f32", 1, 64, 129, 3, 1, 64, False),     # one key past a tile, MQA
]


@pytest.mark.parametrize("arch,dtype,out,B,Sq,Sk,H,Hkv,D,causal", CASES)
def test_emulated_bwd_dq_matches_reference(tmp_path, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal):
    q, k, v, do, scale, dq, low, barriers = emulate_bwd_dq(str(tmp_path), arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal)
    assert torch.isfinite(dq.float()).all(), "a dq element was never written or is not finite"
    ref, lp = dq_reference(q, k, v, do, causal, scale)
    e, e_lp = max_err(dq, ref), max_err(lp, ref)
    print(f"dq max error {e:.3e}, bound 3·{e_lp:.3e} + {fl(ref):.1e}")
    assert e <= 3 * e_lp + fl(ref), f"dq: max error {e:.3e} > 3·{e_lp:.3e} + fl"
    if causal and Sq > Sk:
        assert torch.all(dq[:, :Sq - Sk] == 0), "rows that see no key have dq = 0"
    BM, BN = low.notes["config"].BM, low.notes["config"].BN
    want = 0
    for qb in range(-(-Sq // BM)):
        n = -(-Sk // BN)
        if causal:
            n = max(min(n, -(-(qb * BM + BM + Sk - Sq) // BN)), 0)
        want += 2 * n
    assert barriers == 512 * want * H * B
