"""The scaled fp8 GEMMs' CDNA lowering (block scales, and row-wise ones: gemm_fp8_rowwise) (lower_fp8.py, templates/gemm_fp8.hip.j2, include/tiles/fp8.h):
compiled with clang for gfx942 (clang-22, clang-19) and gfx950 (clang-22) and read back (the arch's fp8 MFMA,
buffer loads, ds_read/ds_write, no scratch, registers and LDS within budget), compiled as hiprtc receives it,
its LDS swizzle checked under the bank model, and run on the CPU through the emulated arch layer
(tests/cdna/emu: the fp8 MFMA and the e4m3fnuz / e4m3fn decoding written from the ISA and format definitions)
against the float64 dequantized reference, with tails in M, N and K (a partial last K block)."""
from __future__ import annotations

import functools
import os

import pytest
import torch

from tiles.backends.cdna import compile as cc
from tiles.backends.cdna import layouts as L
from tiles.backends.cdna.backend import CDNABackend
from tiles.backends.cdna.lower_fp8 import CDNAFp8GemmLowering, accesses, check_fp8, fp8_config, fp8_mfma, operands
from tiles.core.lowering import LoweringError
from tiles.kernels import SUITE

from .conftest import TOOLCHAINS, build_host, need_clang, run

FORMAT = {"gfx942": torch.float8_e4m3fnuz, "gfx950": torch.float8_e4m3fn}
FP8_MAX = {"gfx942": 240.0, "gfx950": 448.0}


def _meta(M, N, K, arch, out=torch.bfloat16, rowwise=False):
    t = lambda *s, d=FORMAT[arch]: torch.empty(s, dtype=d, device="meta")  # noqa: E731
    if rowwise:
        return t(M, K), t(N, K), t(M, 1, d=torch.float32), t(1, N, d=torch.float32), t(M, N, d=out)
    kb, nb = -(-K // 128), -(-N // 128)
    sb = torch.empty(nb, 1, kb, device="meta").expand(nb, 128, kb)
    return t(M, K), t(N, K), t(M, kb, d=torch.float32), sb, t(M, N, d=out)


def _kernel(rowwise: bool):
    return SUITE["gemm_fp8_rowwise" if rowwise else "gemm_fp8"]


@functools.lru_cache(maxsize=None)
def lowered(arch: str, out: str = "bf16", rowwise: bool = False, **options):
    meta = _meta(4096, 4096, 4096, arch, {"bf16": torch.bfloat16, "f32": torch.float32}[out], rowwise)
    return CDNAFp8GemmLowering(_kernel(rowwise).trace(*meta), arch, **dict(options)).lower()


@functools.lru_cache(maxsize=None)
def compiled(arch: str, clang: int, out: str = "bf16", mf: int = 32, hiprtc: bool = False, rowwise: bool = False):
    low = lowered(arch, out, rowwise, mf=mf)
    return low, cc.compile_hip(low.source, arch, clang, hiprtc=hiprtc)


# ---------------------------------------------------------------- ISA and resources


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("mf", [32, 16])
@pytest.mark.parametrize("rowwise", [False, True])
def test_fp8_isa_and_resources(arch, clang, mf, rowwise):
    need_clang(clang)
    low, r = compiled(arch, clang, mf=mf, rowwise=rowwise)
    cfg = low.notes["config"]
    mnemonic = fp8_mfma(arch, mf)
    # the arch's fp8 MFMA and no other: per wave and K block, mfma_per_block of them
    assert {m for m in r.counts if m.startswith("v_mfma")} == {mnemonic}, r.summary()
    assert r.count("buffer_load_dwordx4") >= cfg.loads_per_block and r.count("ds_read_b128") > 0
    assert r.count("ds_write_b128") >= 2 * cfg.loads_per_block // 2 and r.count("s_barrier") >= 2
    assert not any(m.startswith("ds_read") and m != "ds_read_b128" for m in r.counts), r.counts
    # clang-22 closes the K loop with a backward conditional branch, clang-19 with an s_branch
    body = cc.loop_body(r.disasm) or cc.loop_body(r.disasm, outermost=True)
    loop = cc.instruction_counts(body)
    assert loop, "no K loop found in the disassembly"
    assert loop.get(mnemonic) == cfg.mfma_per_block, (loop, cfg.mfma_per_block)
    assert loop.get("buffer_load_dwordx4") == cfg.loads_per_block
    assert loop.get("ds_read_b128") == (cfg.wm + cfg.wn) // mf * (cfg.bk // (16 * 64 // mf))  # one per row block and k-slab
    assert loop.get("s_barrier") == 1 and loop.get("ds_write_b128", 0) >= cfg.loads_per_block
    # block scales: A's row scales and B's block scale each K block; row-wise ones once, after the loop
    assert loop.get("buffer_load_dword", 0) == (0 if rowwise else cfg.wm // mf + 1), loop
    if rowwise:
        scalar = r.count("buffer_load_dword") - r.count("buffer_load_dwordx4")  # count() matches prefixes
        assert scalar == cfg.wm // mf + cfg.wn // mf * (16 if mf == 32 else 4)  # rv_col sa, rv_row sb
    # the order the pipeline needs: stage loads issued, MFMAs, then the wait for the loads, then the LDS writes
    ops = [ln.split()[0] + (" " + ln.split()[1] if ln.split()[0] == "s_waitcnt" else "")
           for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("/")]
    last_load = max(i for i, o in enumerate(ops) if o == "buffer_load_dwordx4")
    mfmas = [i for i, o in enumerate(ops) if o == mnemonic]
    wait = ops.index("s_waitcnt vmcnt(0)")
    assert last_load < mfmas[0] and mfmas[-1] < wait < min(i for i, o in enumerate(ops) if o == "ds_write_b128" and i > wait)
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0 and res["sgpr_spill"] == 0, r.summary()
    assert r.vgpr_total <= 512 and res["vgpr"] <= 256, r.summary()  # 4 waves: one per SIMD, 512 registers
    assert res["lds"] == cfg.lds_bytes <= {"gfx942": 65536, "gfx950": 163840}[arch]
    assert r.notes["private_segment_fixed_size"] == 0 and r.notes["vgpr_spill_count"] == 0
    assert r.notes["group_segment_fixed_size"] == cfg.lds_bytes


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_fp8_f32_output(arch):
    need_clang(22)
    _, r = compiled(arch, 22, "f32")
    assert r.count("buffer_store_dwordx4") > 0 and r.resources["scratch"] == 0


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
def test_fp8_hiprtc_style_compile(arch, clang):
    need_clang(clang)
    hdr, why = cc.hiprtc_header()
    if hdr is None:
        pytest.skip(f"hiprtc_runtime.h unavailable: {why}")
    low, plain = compiled(arch, clang)
    r = cc.compile_hip(low.source, arch, clang, hiprtc=True)
    assert r.counts == plain.counts and r.resources == plain.resources


def test_gfx950_fp8_builtins_rejected_for_gfx942():
    need_clang(22)
    src = ('typedef int v8 __attribute__((ext_vector_type(8))); typedef float v16 __attribute__((ext_vector_type(16)));\n'
           'extern "C" __attribute__((global)) void k(v16* c, v8 a) {\n'
           '  *c = __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(a, a, *c, 0, 0, 0, 127, 0, 127); }\n')
    r = cc.compile_hip(src, "gfx950", 22)
    assert r.count("v_mfma_scale_f32_32x32x64_f8f6f4") == 1
    with pytest.raises(cc.CompileError, match="gfx950-insts"):
        cc.compile_hip(src, "gfx942", 22)


def test_clang19_rejects_gfx950_fp8():
    need_clang(19)
    with pytest.raises(cc.CompileError, match="invalid target ID 'gfx950'"):
        cc.compile_hip(lowered("gfx950").source, "gfx950", 19)


# ---------------------------------------------------------------- LDS swizzle and configuration


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("mf", [32, 16])
def test_fp8_lds_swizzle_is_conflict_free(arch, mf):
    cfg = fp8_config(arch, mf=mf)
    assert cfg.conflicts == {"read_b128": 0, "write_b128": 0}
    for rows in (cfg.bm, cfg.bn):
        assert L.swizzle_is_permutation(cfg.swizzle, rows, cfg.bk)
    # the identity layout does conflict: the swizzle is doing something
    assert sum(L.access_conflicts(arch, accesses(mf, cfg.bm, cfg.bn, cfg.bk, cfg.threads), L.Swizzle()).values()) > 0


def test_fp8_config_errors_are_clear():
    with pytest.raises(ValueError, match="scale block"):
        fp8_config("gfx942", bk=64)
    with pytest.raises(ValueError, match="LDS"):
        fp8_config("gfx942", bm=256)  # (256 + 128) x 128 double-buffered: 96 KiB on a 64 KiB CU
    fp8_config("gfx950", bm=256)
    with pytest.raises(ValueError, match="unknown fp8 GEMM option"):
        fp8_config("gfx950", tile=1)
    with pytest.raises(ValueError, match="arch"):
        fp8_config("gfx90a")


def test_fp8_lowering_refuses_other_programs():
    k = SUITE["gemm"].trace(*(torch.empty(256, 256, dtype=torch.bfloat16, device="meta") for _ in range(3)))
    with pytest.raises(LoweringError, match="scaled fp8 GEMM \\(block or row-wise scales\\)"):
        CDNAFp8GemmLowering(k, "gfx942").lower()


# ---------------------------------------------------------------- formats and the launch contract


def test_other_vendors_format_is_a_type_error():
    with pytest.raises(TypeError, match="a has dtype float8_e4m3fn; .* gfx942 takes float8_e4m3fnuz"):
        check_fp8("a", torch.float8_e4m3fn, "gfx942")
    with pytest.raises(TypeError, match="b has dtype float8_e4m3fnuz; .* gfx950 takes float8_e4m3fn"):
        check_fp8("b", torch.float8_e4m3fnuz, "gfx950")
    check_fp8("a", torch.float8_e4m3fnuz, "gfx942")
    check_fp8("a", torch.float8_e4m3fn, "gfx950")


def _cpu_args(M, N, K, arch, a_dtype=None):
    dt = a_dtype or FORMAT[arch]
    kb, nb = -(-K // 128), -(-N // 128)
    a, b = torch.zeros(M, K, dtype=dt), torch.zeros(N, K, dtype=dt)
    return a, b, torch.ones(M, kb), torch.ones(nb, 1, kb).expand(nb, 128, kb), torch.empty(M, N, dtype=torch.bfloat16)


def test_prepare_checks_and_binds():
    be = CDNABackend()
    low, grid, argv = be.prepare(SUITE["gemm_fp8"], *_cpu_args(300, 200, 200, "gfx942"), arch="gfx942")
    assert grid == (3 * 2, 1, 1) and low.block == (256, 1, 1) and len(argv) == len(low.args)
    a, b, _, _, c = _cpu_args(300, 200, 200, "gfx942")  # row-wise scales take the same path
    low, grid, argv = be.prepare(SUITE["gemm_fp8_rowwise"], a, b, torch.ones(300, 1), torch.ones(1, 200), c, arch="gfx942")
    assert grid == (3 * 2, 1, 1) and "load_col_scales" in low.source and len(argv) == len(low.args)
    with pytest.raises(TypeError, match="a has dtype float8_e4m3fn"):
        be.prepare(SUITE["gemm_fp8"], *_cpu_args(64, 64, 128, "gfx942", torch.float8_e4m3fn), arch="gfx942")
    # odd K: the rows of A and B are copied to 16-byte boundaries and the copies outlive the pointers
    a, b, sa, sb, c = _cpu_args(5, 7, 33, "gfx950")
    _, _, argv = be.prepare(SUITE["gemm_fp8"], a, b, sa, sb, c, arch="gfx950")
    assert argv.keep[0].stride(0) == 48 and argv[0].value == argv.keep[0].data_ptr()


# ---------------------------------------------------------------- CPU emulation against the float64 reference

DRIVER = r'''
// emulation driver: reads A, B (bytes), SA, SB (f32), runs every work-group, writes C
#include <cstdio>
#include <cstdint>
#include <vector>
#include KERNEL_SRC
static std::vector<unsigned char> Ah, Bh, Ch;
static std::vector<float> SAh, SBh;
static void body() { CALL; }
static void readf(const char* p, void* d, size_t n) { FILE* f = fopen(p, "rb"); if (!f || fread(d, 1, n, f) != n) { fprintf(stderr, "read %s\n", p); exit(2); } fclose(f); }
int main(int argc, char** argv) {
  Ah.resize(NA); Bh.resize(NB); SAh.resize(NSA); SBh.resize(NSB); Ch.assign(NC, 0xFF);  // C poisoned: NaN where unwritten
  readf(argv[1], Ah.data(), NA); readf(argv[2], Bh.data(), NB); readf(argv[3], SAh.data(), NSA * 4); readf(argv[4], SBh.data(), NSB * 4);
  long long barriers = 0;
  for (int b = 0; b < GRID; ++b) barriers += tiles::emu::run_block((unsigned)b, 256, body);
  FILE* f = fopen(argv[5], "wb"); fwrite(Ch.data(), 1, NC, f); fclose(f);
  printf("barriers %lld\n", barriers);
  return 0;
}
'''


def make_problem(M, N, K, arch, seed, lda=None, ldb=None, rowwise=False):
    """fp8 A (M, K), B (N, K) in the arch's format (rows padded to lda / ldb with junk that must not count),
    scales of varied magnitude (block scales, or with `rowwise` sa (M, 1) and sb (1, N)); the float64
    dequantized reference."""
    g = torch.Generator().manual_seed(seed)
    fmax = FP8_MAX[arch]
    kb, nb = -(-K // 128), -(-N // 128)

    def q(rows, ld):
        x = (torch.randn(rows, ld, generator=g) * fmax / 4).clamp(-fmax, fmax).to(FORMAT[arch])
        x[:, K:] = torch.full((rows, ld - K), 100.0).to(FORMAT[arch])  # padding past K: must be masked
        return x

    a, b = q(M, lda or K), q(N, ldb or K)
    if rowwise:
        sa = torch.rand(M, 1, generator=g) * 2 ** torch.randint(-8, 0, (M, 1), generator=g).float() + 1e-3
        sb = torch.rand(1, N, generator=g) * 2 ** torch.randint(-8, 0, (1, N), generator=g).float() + 1e-3
        return a, b, sa, sb, (a[:, :K].double() * sa.double()) @ (b[:, :K].double() * sb.double().T).T
    sa = torch.rand(M, kb, generator=g) * 2 ** torch.randint(-8, 0, (M, kb), generator=g).float() + 1e-3
    sb = torch.rand(nb, kb, generator=g) * 2 ** torch.randint(-8, 0, (nb, kb), generator=g).float() + 1e-3
    ea = sa.double().repeat_interleave(128, 1)[:, :K]
    eb = sb.double().repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
    ref = (a[:, :K].double() * ea) @ (b[:, :K].double() * eb).T
    return a, b, sa, sb, ref


def emulate(tmp_path, arch, M, N, K, out=torch.bfloat16, seed=0, lda=None, ldb=None, mf=32, rowwise=False):
    a, b, sa, sb, ref = make_problem(M, N, K, arch, seed, lda, ldb, rowwise)
    av, bv = operands(a[:, :K], b[:, :K])  # as the backend hands them over (a padded copy where rows are not)
    a, b = (t.as_strided((t.shape[0], t.stride(0)), (t.stride(0), 1)) for t in (av, bv))  # the whole rows
    sbv = sb if rowwise else sb.unsqueeze(1).expand(sb.shape[0], 128, sb.shape[1])
    c = torch.empty(M, N, dtype=out)
    k = _kernel(rowwise).trace(av, bv, sa, sbv, c)
    low = CDNAFp8GemmLowering(k, arch, mf=mf).lower()
    tensors = {"A": av, "B": bv, "SA": sa, "SB": sbv, "C": c}
    call = []
    for kind, x in low.args:
        if kind == "ptr":
            call.append({"A": "Ah.data()", "B": "Bh.data()", "SA": "SAh.data()", "SB": "SBh.data()", "C": "(void*)Ch.data()"}[x.name])
        else:
            pname, attr = x.name.split(".")
            t = tensors[pname]
            call.append(str(t.shape[int(attr[5:])] if attr.startswith("shape") else t.stride(int(attr[6:]))))
    grid = low.notes["config"].grid(M, N)
    drv = os.path.join(tmp_path, "driver.cpp")
    with open(drv, "w") as f:
        f.write(DRIVER)
    defines = [f"CALL={low.entry}({', '.join(call)})", f"NA={a.numel()}", f"NB={b.numel()}", f"NSA={sa.numel()}",
               f"NSB={sb.numel()}", f"NC={c.numel() * c.element_size()}", f"GRID={grid}"]
    exe = build_host(low.source, 950 if arch == "gfx950" else 942, defines, main=drv)
    paths = [os.path.join(tmp_path, n) for n in ("a.bin", "b.bin", "sa.bin", "sb.bin", "c.bin")]
    a.view(torch.uint8).numpy().tofile(paths[0])
    b.view(torch.uint8).numpy().tofile(paths[1])
    sa.numpy().tofile(paths[2])
    sb.numpy().tofile(paths[3])
    outp = run(exe, *paths)
    raw = torch.frombuffer(bytearray(open(paths[4], "rb").read()), dtype=torch.uint8)
    got = raw.view(out).reshape(M, N)
    barriers = int(outp.split()[1])
    return got, ref, barriers, low


def check_error(got, ref):
    """TESTING.md's rule: E(C) <= 2 E(C_lp) + fl, C_lp the result rounded to the output dtype (the fp8
    products are exact; what remains is f32 summation and the final rounding)."""
    lp = ref.to(got.dtype).double()
    fl = 2 * ((ref + 0.3 - 0.3) - ref).abs().max().item()
    f32 = 4 * ref.abs().max().item() * 2.0 ** -24 * 8  # f32 accumulation over the K blocks
    err = (got.double() - ref).abs().max().item()
    assert not torch.isnan(got).any(), "unwritten or NaN elements"
    assert err <= 2 * (lp - ref).abs().max().item() + fl + f32, err


CASES = [
    # arch, M, N, K, lda, ldb, mf, out
    ("gfx942", 130, 136, 200, 208, 224, 32, torch.bfloat16),  # tails in M and N, a partial 2nd K block, padded rows
    ("gfx950", 70, 200, 300, 304, 304, 32, torch.float32),  # three K blocks, the last 44 wide
    ("gfx942", 64, 129, 128, 128, 128, 16, torch.float32),  # one full K block, one column past the first tile
    ("gfx950", 1, 1, 1, 16, 16, 16, torch.bfloat16),  # one element
    ("gfx942", 1, 3, 5, None, None, 32, torch.float32),  # one row of 5 bytes, as a caller's tensor holds it
]


@pytest.mark.parametrize("arch,M,N,K,lda,ldb,mf,out", CASES)
def test_emulated_fp8_gemm_matches_float64(tmp_path, arch, M, N, K, lda, ldb, mf, out):
    got, ref, barriers, low = emulate(tmp_path, arch, M, N, K, out, seed=M + N + K, lda=lda, ldb=ldb, mf=mf)
    check_error(got, ref)
    # every work-item: one barrier in the prologue and one per K block
    assert barriers == low.notes["config"].grid(M, N) * 256 * (1 + -(-K // 128))


@pytest.mark.parametrize("arch,M,N,K,lda,ldb,mf,out", CASES)
def test_emulated_rowwise_fp8_gemm_matches_float64(tmp_path, arch, M, N, K, lda, ldb, mf, out):
    got, ref, barriers, low = emulate(tmp_path, arch, M, N, K, out, seed=3 * M + N + K, lda=lda, ldb=ldb, mf=mf,
                                      rowwise=True)
    assert "load_col_scales" in low.source and "promote(" not in low.source
    check_error(got, ref)
    assert barriers == low.notes["config"].grid(M, N) * 256 * (1 + -(-K // 128))
