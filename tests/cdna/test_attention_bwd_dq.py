"""attention_bwd_dq and attention_bwd_dkdv lowered to CDNA (lower_attention.CDNAAttentionBwdDqLowering,
CDNAAttentionBwdDkdvLowering): compiled for gfx942 (clang-22, clang-19) and gfx950 (clang-22) with no scratch /
spills and the expected MFMA and LDS traffic, and the generated kernels run on the CPU through the emulated arch
layer (tests/cdna/emu) against the float64 reference by TESTING.md's backward rule (max error <= 3 E(lp) + fl)
on tails, causal Sq != Sk both ways, GQA / MQA, D 64 and 128, bf16 and f16."""
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
from tiles.backends.cdna.lower_attention import (CDNAAttentionBwdDkdvLowering, CDNAAttentionBwdDqLowering,
                                                 default_tiles_bwd, default_tiles_dkdv)
from tiles.core.lowering import LoweringError
from tiles.kernels import SUITE

from .conftest import TOOLCHAINS, build_host, need_clang, run


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


KERNELS = ("attention_bwd_dq", "attention_bwd_dkdv")


def lower_meta(arch, D, causal, out=torch.float32, H=8, Hkv=2, kernel="attention_bwd_dq", dtype=torch.bfloat16, **tiles):
    q, kv = meta(2, 1000, H, D, dtype=dtype), meta(2, 1500, Hkv, D, dtype=dtype)
    lse = meta(2, H, 1000, dtype=torch.float32)
    cfg = {**backends.get("cdna").config(kernel, arch=arch, D=D), **tiles}
    outs = (meta(2, 1000, H, D, dtype=out),) if kernel == "attention_bwd_dq" else (meta(2, 1500, Hkv, D, dtype=out),) * 2
    return backends.get("cdna").lower(SUITE[kernel], q, kv, kv, q, lse, lse, *outs, 0.1, causal=causal, D=D, arch=arch, **cfg)


@functools.lru_cache(maxsize=None)
def compiled(kernel, arch, clang, D, causal, dtype=torch.bfloat16):
    low = lower_meta(arch, D, causal, kernel=kernel, dtype=dtype)
    return low, cc.compile_hip(low.source, arch, clang)


@pytest.mark.parametrize("kernel,dtype", [(k, torch.bfloat16) for k in KERNELS] + [("attention_bwd_dkdv", torch.float16)])
@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_bwd_compiles_without_spills(kernel, dtype, arch, clang, D, causal):
    need_clang(clang)
    low, r = compiled(kernel, arch, clang, D, causal, dtype)
    res = r.resources
    assert res.get("scratch", 0) == 0 and res.get("vgpr_spill", 0) == 0 and res.get("sgpr_spill", 0) == 0, r.summary()
    assert r.vgpr_total <= 256 and res.get("occupancy", 0) >= 2, r.summary()
    assert r.notes["private_segment_fixed_size"] == 0
    cfg = low.notes["config"]
    assert res.get("lds") == cfg.lds_bytes <= (64 << 10)
    per = cfg.mfma_per_tile
    mn = cfg.mfma.mnemonic(cfg.dtype)
    assert {m for m in r.counts if m.startswith("v_mfma")} == {mn}, r.summary()  # the arch's MFMA, nothing else
    assert r.count(mn) == sum(per.values()), r.summary()  # the loop body is emitted once
    assert r.count("s_barrier") == 2, r.summary()
    assert r.count("buffer_load_dwordx4") > 0 and r.count("ds_write_b128") > 0, r.summary()
    if kernel == "attention_bwd_dq":
        assert r.count("ds_read_b128") == 3 * cfg.BN * cfg.D // 512, r.summary()  # K, V (key_perm rows), K^T: 16 B per lane
    else:  # Q, dO (key_perm rows) for S, dP; dO^T, Q^T for dV^T, dK^T: the whole tile once each, 16 B per lane
        assert r.count("ds_read_b128") == 4 * cfg.BM * cfg.D // 512, r.summary()
        assert r.count("ds_write_b32") == 8 * cfg.loads // cfg.kr, r.summary()  # the transposed stage writes
        assert r.count("ds_bpermute_b32") == 2 * cfg.BM // 4, r.summary()  # LSE, Delta: one shuffle per query register
        # the lowering's stage wait (schedule.waitcnt_for); the chunks' lgkmcnt may merge with the compiler's own
        assert f"vmcnt({low.notes['waits']['Q']})" in r.disasm


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx950", 22)])
def test_bwd_hiprtc_style_compile(kernel, arch, clang):
    need_clang(clang)
    hdr, why = cc.hiprtc_header()
    if hdr is None:
        pytest.skip(f"hiprtc_runtime.h unavailable: {why}")
    low = lower_meta(arch, 128, True, kernel=kernel)
    r = cc.compile_hip(low.source, arch, clang, hiprtc=True)
    assert r.count("v_mfma") > 0 and r.resources["scratch"] == 0


def test_bwd_dq_source_is_the_ir_op_by_op():
    low = lower_meta("gfx942", 128, True)
    for op in ("// mma(s, q, kt, tb=True, accumulate=False)", "// mma(dp, do, vt, tb=True, accumulate=False)",
               "// mma(dq, dsp, kt, accumulate=True)", "// sub_row(dp, dp, delta)", "// mul(ds, dp, s)",
               "// cast(dsp, ds)", "// mask_rows(s,", "// load(lse, L[", "// store(dQ["):
        assert op in low.source, op
    assert "rt_op<MF, D, MF> do_;" in low.source  # `do` is a C++ keyword


def test_bwd_dkdv_source_is_the_ir_op_by_op():
    low = lower_meta("gfx950", 64, True, kernel="attention_bwd_dkdv")
    for op in ("// mma(s, q, kt, tb=True, accumulate=False)", "// mma(dv, p, do, ta=True, accumulate=True)",
               "// mma(dp, do, vt, tb=True, accumulate=False)", "// mma(dk, dsp, q, ta=True, accumulate=True)",
               "// sub_row(dp, dp, delta)", "// mul(ds, dp, s)", "// cast(dsp, ds)", "// mask_causal(s,", "// load(lse, L[",
               "// store(dK[", "// store(dV[", "// mul(dk, dk, scale)"):
        assert op in low.source, op
    cfg = low.notes["config"]
    (cr, ck), lgkm = cfg.chunk(cfg.BM), cfg.lgkm_chunk(cfg.BM)
    assert (cr, ck, lgkm) == (64, 32, 4)  # 64 x 32 chunks: 4 ds_read_b128, the next chunk's in flight
    assert f"mma_ABt_lds<SQ, true, {cr}, {ck}, {lgkm}, T_IN>(dp, lds_do, vt_op);" in low.source
    assert "rt_rp<BM, MF, MF> s;" in low.source and "rv_lane<BM, MF> lse;" in low.source
    w = low.notes["waits"]
    assert f"arch::wait_vmcnt<{w['Q']}>();" in low.source and w == {"Q": 0, "dO": 0}


@pytest.mark.parametrize("kernel", KERNELS)
def test_bwd_rejects_what_it_does_not_lower(kernel):
    with pytest.raises(LoweringError):
        lower_meta("gfx942", 96, False, kernel=kernel, BN=64)
    with pytest.raises(LoweringError):
        lower_meta("gfx942", 128, False, kernel=kernel, BM=96 if kernel == "attention_bwd_dkdv" else 64)
    assert backends.get("cdna").supports(kernel)
    if kernel == "attention_bwd_dkdv":
        with pytest.raises(LoweringError, match="BN must be"):
            lower_meta("gfx942", 128, False, kernel=kernel, BN=64)
        with pytest.raises(LoweringError, match="registers"):
            lower_meta("gfx942", 64, False, kernel=kernel, BM=128)  # spills: S, dP and the stage grow with BM
        with pytest.raises(LoweringError, match="attention shape"):  # dkdv's lowering refuses the dq kernel
            q, lse = meta(1, 128, 4, 64), meta(1, 4, 128, dtype=torch.float32)
            CDNAAttentionBwdDkdvLowering(SUITE["attention_bwd_dq"].trace(q, q, q, q, lse, lse, q, 0.125, causal=True, D=64),
                                         "gfx942").lower()


DRIVER = r"""
#include <cstdio>
#include <cstdint>
#include <vector>
#include KERNEL_SRC
static std::vector<uint16_t> Qh, Kh, Vh, dOh;
static std::vector<float> Lh, Dh;
static std::vector<unsigned char> Out0, Out1;
static void body() { CALL; }
static void readf(const char* p, void* d, size_t n) { FILE* f = fopen(p, "rb"); if (!f || fread(d, 1, n, f) != n) { fprintf(stderr, "read %s\n", p); exit(2); } fclose(f); }
int main(int argc, char** argv) {
  Qh.resize(NQ); dOh.resize(NQ); Kh.resize(NK); Vh.resize(NK); Lh.resize(NL); Dh.resize(NL);
  Out0.assign(NOUT0, 0xFF); Out1.assign(NOUT1, 0xFF);  // never-written elements read as NaN
  readf(argv[1], Qh.data(), NQ * 2); readf(argv[2], Kh.data(), NK * 2); readf(argv[3], Vh.data(), NK * 2);
  readf(argv[4], dOh.data(), NQ * 2); readf(argv[5], Lh.data(), NL * 4); readf(argv[6], Dh.data(), NL * 4);
  long long barriers = 0;
  for (int b = 0; b < GRID; ++b) barriers += tiles::emu::run_block((unsigned)b, 512, body);
  FILE* f = fopen(argv[7], "wb"); fwrite(Out0.data(), 1, NOUT0, f); fwrite(Out1.data(), 1, NOUT1, f); fclose(f);
  printf("barriers %lld\n", barriers);
  return 0;
}
"""
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
LOWERING = {"attention_bwd_dq": (CDNAAttentionBwdDqLowering, default_tiles_bwd),
            "attention_bwd_dkdv": (CDNAAttentionBwdDkdvLowering, default_tiles_dkdv)}


def emulate_bwd(tmp, kernel, arch, dtype, out_dtype, B, Sq, Sk, H, Hkv, D, causal, seed=0, window=(-1, -1)):
    """Run the lowered kernel on every work-group of its grid; returns the inputs, its outputs (dQ, or dK and
    dV), the Lowered and the s_barrier count. `window`: a sliding window (left, right), -1 for none."""
    g = torch.Generator().manual_seed(seed)
    dt = TORCH[dtype]
    q = torch.randn(B, Sq, H, D, generator=g).to(dt)
    k = torch.randn(B, Sk, Hkv, D, generator=g).to(dt)
    v = torch.randn(B, Sk, Hkv, D, generator=g).to(dt)
    do = torch.randn(B, Sq, H, D, generator=g).to(dt)
    scale = 0.7 / math.sqrt(D)
    # L and Delta as the forward and bwd_prep give them (f32; L = +inf on rows that see no key)
    o_ref, lse_ref = attention_ref(q, k, v, causal, scale, window=window)
    lse = lse_ref.float().masked_fill(~torch.isfinite(lse_ref), math.inf).contiguous()
    delta = (do.double() * o_ref.to(dt).double()).sum(-1).transpose(1, 2).float().contiguous()
    if kernel == "attention_bwd_dq":
        outs = {"dQ": torch.empty(B, Sq, H, D, dtype=TORCH[out_dtype])}
    else:
        outs = {"dK": torch.empty(B, Sk, Hkv, D, dtype=TORCH[out_dtype]), "dV": torch.empty(B, Sk, Hkv, D, dtype=TORCH[out_dtype])}
    lowering, tiles = LOWERING[kernel]
    cfg = tiles(arch, D)
    edges = {n: x for n, x in zip(("left", "right"), window) if x >= 0 and not (n == "right" and causal)}
    kern = SUITE[kernel].trace(q, k, v, do, lse, delta, *outs.values(), scale, causal=causal, D=D, **cfg, **edges)
    low = lowering(kern, arch).lower()
    tensors = {"Q": q, "K": k, "V": v, "dO": do, "L": lse, "Delta": delta, **outs}
    ctype = "float" if out_dtype == "f32" else "u16"
    names = {"Q": "Qh.data()", "K": "Kh.data()", "V": "Vh.data()", "dO": "dOh.data()", "L": "Lh.data()", "Delta": "Dh.data()",
             **{n: f"({ctype}*)Out{i}.data()" for i, n in enumerate(outs)}}
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
    grid = -(-Sq // cfg["BM"]) * H * B if kernel == "attention_bwd_dq" else -(-Sk // cfg["BN"]) * Hkv * B
    drv = os.path.join(tmp, "driver.cpp")
    with open(drv, "w") as f:
        f.write(DRIVER)
    nbytes = [t.numel() * t.element_size() for t in outs.values()] + [0]
    defines = [f"CALL=kern({', '.join(call)})", f"NQ={q.numel()}", f"NK={k.numel()}", f"NL={lse.numel()}", f"GRID={grid}",
               f"NOUT0={nbytes[0]}", f"NOUT1={nbytes[1]}"]
    exe = build_host(low.source.replace(low.entry, "kern"), 950 if arch == "gfx950" else 942, defines, main=drv)
    paths = [os.path.join(tmp, n) for n in ("q.bin", "k.bin", "v.bin", "do.bin", "l.bin", "d.bin", "out.bin")]
    for t, p in zip((q, k, v, do), paths):
        t.contiguous().view(torch.int16).numpy().tofile(p)
    lse.numpy().tofile(paths[4])
    delta.numpy().tofile(paths[5])
    out = run(exe, *paths)
    raw = torch.from_numpy(np.fromfile(paths[6], dtype=np.uint8).copy())
    got, at = {}, 0
    for (n, t), nb in zip(outs.items(), nbytes):
        x = raw[at:at + nb]
        got[n] = (x.view(torch.int16).view(torch.bfloat16) if out_dtype == "bf16" else x.view(TORCH[out_dtype])).view(t.shape)
        at += nb
    return (q, k, v, do, scale), got, low, int(out.split()[1])


def grads_reference(q, k, v, do, causal, scale, window=(-1, -1)):
    """dQ, dK, dV in float64 and in the inputs' dtype (the low-precision PyTorch computation of the rule)"""
    grads = {}
    for kind, dt in (("ref", torch.float64), ("lp", q.dtype)):
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        attention_ref(*xs, causal, scale, dtype=dt, window=window)[0].backward(do.to(dt))
        grads[kind] = {"dQ": xs[0].grad, "dK": xs[1].grad, "dV": xs[2].grad}
    return grads["ref"], grads["lp"]


CASES = [
    # arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal
    ("gfx942", "bf16", "f32", 1, 200, 300, 4, 2, 64, True),     # GQA, causal Sq < Sk, tails in both
    ("gfx942", "bf16", "bf16", 2, 130, 70, 2, 1, 128, False),   # MQA, key tail inside the first tile
    ("gfx950", "f16", "f16", 1, 150, 100, 2, 2, 128, True),     # causal Sq > Sk: first rows see no key (dq = 0)
    ("gfx950", "bf16", "f32", 1, 64, 129, 3, 1, 64, False),     # one key past a tile, MQA
]
DKDV_CASES = [
    # arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal
    ("gfx942", "bf16", "f32", 1, 200, 260, 4, 2, 64, True),     # GQA, causal Sq < Sk: key blocks 1, 2 start at `first` 1, 3
    ("gfx942", "f16", "f16", 1, 70, 40, 2, 1, 128, False),      # MQA, Sk inside the first key block, query tail
    ("gfx950", "f16", "f16", 1, 100, 40, 2, 2, 128, True),     # causal Sq > Sk: queries 0-59 see no key (first = 1)
    ("gfx950", "bf16", "f32", 2, 33, 130, 2, 1, 64, False),     # one key past a block, one query past a tile
]


def _check_grads(got, q, k, v, do, causal, scale, window=(-1, -1)):
    ref, lp = grads_reference(q, k, v, do, causal, scale, window)
    for n, x in got.items():
        assert torch.isfinite(x.float()).all(), f"a {n} element was never written or is not finite"
        e, e_lp = max_err(x, ref[n]), max_err(lp[n], ref[n])
        print(f"{n} max error {e:.3e}, bound 3·{e_lp:.3e} + {fl(ref[n]):.1e}")
        assert e <= 3 * e_lp + fl(ref[n]), f"{n}: max error {e:.3e} > 3·{e_lp:.3e} + fl"


@pytest.mark.parametrize("arch,dtype,out,B,Sq,Sk,H,Hkv,D,causal", CASES)
def test_emulated_bwd_dq_matches_reference(tmp_path, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal):
    (q, k, v, do, scale), got, low, barriers = emulate_bwd(str(tmp_path), "attention_bwd_dq", arch, dtype, out, B, Sq, Sk, H,
                                                           Hkv, D, causal)
    _check_grads(got, q, k, v, do, causal, scale)
    dq = got["dQ"]
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


@pytest.mark.parametrize("arch,dtype,out,B,Sq,Sk,H,Hkv,D,causal", DKDV_CASES)
def test_emulated_bwd_dkdv_matches_reference(tmp_path, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal):
    (q, k, v, do, scale), got, low, barriers = emulate_bwd(str(tmp_path), "attention_bwd_dkdv", arch, dtype, out, B, Sq, Sk,
                                                           H, Hkv, D, causal)
    _check_grads(got, q, k, v, do, causal, scale)
    # two barriers per (query head of the group, query block that can see the key block): the kernel's `first`
    BM, BN = low.notes["config"].BM, low.notes["config"].BN
    want = 0
    for kb in range(-(-Sk // BN)):
        first = max(kb * BN - (Sk - Sq), 0) // BM if causal else 0
        want += 2 * max(-(-Sq // BM) - first, 0) * (H // Hkv)
    assert barriers == 512 * want * Hkv * B


WINDOWS = [
    # kernel, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal, (left, right)
    ("attention_bwd_dq", "gfx942", "bf16", "f32", 1, 300, 300, 2, 1, 64, True, (100, -1)),  # dQ's loop from kb_begin
    ("attention_bwd_dq", "gfx950", "f16", "f16", 1, 200, 350, 2, 2, 128, False, (64, 30)),
    ("attention_bwd_dkdv", "gfx942", "bf16", "f32", 1, 300, 300, 4, 2, 64, True, (100, -1)),  # its query loop's stop
    ("attention_bwd_dkdv", "gfx950", "bf16", "f32", 1, 200, 350, 2, 1, 128, False, (64, 30)),
]


@pytest.mark.parametrize("kernel,arch,dtype,out,B,Sq,Sk,H,Hkv,D,causal,window", WINDOWS)
def test_emulated_bwd_sliding_window_matches_reference(tmp_path, kernel, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal,
                                                       window):
    """The backward of a sliding window: dQ's key loop from the block of its first row's first key, dK / dV's
    query loop from the first row whose diagonal reaches the key block to the last whose window does, the
    forward's mask_window on the scores, against float64 autograd through the windowed attention."""
    (q, k, v, do, scale), got, low, _ = emulate_bwd(str(tmp_path), kernel, arch, dtype, out, B, Sq, Sk, H, Hkv, D,
                                                    causal, window=window)
    assert "mask_window(" in low.source
    _check_grads(got, q, k, v, do, causal, scale, window)


def lower_packed(arch, D, causal, kernel):
    """The packed backward (tiles.attention_varlen): three sequences in 1000 query / 1500 key rows, the
    longest 512; dQ reads a table of 20 query blocks, dK / dV one of 20 key blocks (api._blocks)."""
    q, kv = meta(1, 1000, 8, D), meta(1, 1500, 2, D)
    L, delta = meta(3, 8, 512, dtype=torch.float32), meta(1, 8, 1000, dtype=torch.float32)
    cfg = backends.get("cdna").config(kernel, arch=arch, D=D)
    if kernel == "attention_bwd_dq":
        args = (q, kv, kv, q, L, delta, meta(1, 1000, 8, D, dtype=torch.float32), 0.1, meta(20, 6, dtype=torch.int32))
    else:
        out = meta(1, 1500, 2, D, dtype=torch.float32)
        args = (q, kv, kv, q, L, delta, out, out, 0.1, meta(20, 6, dtype=torch.int32))
    return backends.get("cdna").lower(SUITE[kernel], *args, causal=causal, D=D, arch=arch, **cfg)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx950", 22)])
@pytest.mark.parametrize("D,causal", [(128, True), (64, False)])
def test_packed_backward_keeps_the_plain_kernels_resources(kernel, arch, clang, D, causal):
    """Packed sequences: each program's block (its row of the table of query blocks, dQ, or key blocks, dK /
    dV) is read once, after the program ids; the stopped windows end at the sequence's last row (the streamed
    K / V of dQ, the Q / dO of dK / dV, the stored dQ, dK, dV). No scratch or spill, the plain kernel's LDS
    and MFMAs, at most 16 more VGPRs."""
    need_clang(clang)
    low = lower_packed(arch, D, causal, kernel)
    src = low.source
    assert all(src.count(f"Blocks[pid0 * Blocks_stride0 + {c} * Blocks_stride1]") == 1 for c in range(6))
    if kernel == "attention_bwd_dq":
        assert "imin(k0 + seq_k, K_shape1)" in src and "imin(q0 + seq_q, dQ_shape1)" in src
    else:
        assert "imin(q0 + seq_q, Q_shape1)" in src and "imin(k0 + seq_k, dK_shape1)" in src
        assert "mask_rows(ds, " in src  # the rows past the sequence's queries: Delta there is the next one's
    r = cc.compile_hip(src, arch, clang)
    _, plain = compiled(kernel, arch, clang, D, causal)
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0 and res["sgpr_spill"] == 0, r.summary()
    assert res["lds"] == plain.resources["lds"] and r.vgpr_total <= plain.vgpr_total + 16, (r.summary(), plain.summary())
    assert {m: n for m, n in r.counts.items() if m.startswith("v_mfma")} == {
        m: n for m, n in plain.counts.items() if m.startswith("v_mfma")}
