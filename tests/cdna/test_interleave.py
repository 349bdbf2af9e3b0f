"""The 4-wave interleave GEMM (templates/gemm_interleave*.hip.j2): one wave per SIMD (256 threads) with the
whole 512-register file, the accumulators pinned in AGPRs (inline-asm MFMAs, arch.h mfma32_agpr), MFMAs /
LDS reads / global loads interleaved one by one in source order (InterleaveConfig.issue_order) as
schedule.interleave_pattern says. Compiled for gfx942 (clang-22, clang-19) and gfx950 (clang-22) and read
back from the ISA; its schedule checked; the kernel -- rendered directly and lowered from the IR of a GEMM
that declares ``Interleave`` -- run on the CPU emulation of arch.h against a float64 reference."""
from __future__ import annotations

import functools
import re

import pytest
import torch

from tiles.backends.cdna import compile as cc
from tiles.backends.cdna import schedule as S
from tiles.backends.cdna.gemm_probe import LDS_LIMIT, interleave_config, render_gemm_interleave
from tiles.backends.cdna.lower import CDNALowering
from tiles.core.patterns import Interleave
from tiles.core.trace import KernelFn
from tiles.kernels import gemm

from .conftest import TOOLCHAINS, build_host, need_clang, run

MFMA = {("gfx942", 32): "v_mfma_f32_32x32x8_{t}", ("gfx942", 16): "v_mfma_f32_16x16x16_{t}",
        ("gfx950", 32): "v_mfma_f32_32x32x16_{t}", ("gfx950", 16): "v_mfma_f32_16x16x32_{t}"}


# the suite's GEMM body, declared with the 4-wave Interleave instead of its own pattern
gemm_il = KernelFn(gemm.fn, Interleave(2))


def meta(*s, d=torch.bfloat16):
    return torch.empty(s, dtype=d, device="meta")


@functools.lru_cache(maxsize=None)
def compiled(arch, clang, mf=32, din="bf16", dout="f32", asm=False):
    src = render_gemm_interleave(arch, din, dout, mf=mf)
    return src, cc.compile_hip(src, arch, clang, asm=asm)


# ---------------------------------------------------------------- schedule


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("mf", [32, 16])
def test_interleave_schedule_passes_the_checker(arch, mf):
    cfg = interleave_config(arch, mf=mf)
    s = cfg.schedule()
    S.check(s)
    assert s.name == "interleave4" and s.threads == cfg.threads == 256 and s.groups == 1
    (mixed, write) = s.body
    S.check_interleave(mixed)
    totals = {}
    for kind, n in mixed.pattern:
        totals[kind] = totals.get(kind, 0) + n
    # the pattern places every MFMA of the K tile, the reads of the second halves and every global load
    assert totals == {"mfma": cfg.mfma_per_cluster, "ds_read": cfg.ds_reads_interleaved, "vmem_read": cfg.a_loads + cfg.b_loads}
    assert mixed.pattern == S.interleave_pattern(cfg.mfma_per_cluster, {"ds_read": cfg.ds_reads_interleaved,
                                                                         "vmem_read": cfg.a_loads + cfg.b_loads})
    assert S.barrier_counts(s, 5) == {0: 1 + 2 * 5}


def test_interleave_config_errors_are_clear():
    with pytest.raises(ValueError, match="multiples of 128"):
        interleave_config("gfx942", bm=192)
    with pytest.raises(ValueError, match="LDS"):
        interleave_config("gfx942", bm=512, bn=256, bk=32)
    with pytest.raises(ValueError, match="unknown"):
        interleave_config("gfx950", direct_a=True)


# ---------------------------------------------------------------- compiled ISA and resources


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("mf", [32, 16])
def test_interleave_isa_and_resources(arch, clang, mf):
    need_clang(clang)
    _, r = compiled(arch, clang, mf)
    cfg = interleave_config(arch, mf=mf)
    mnemonic = MFMA[(arch, mf)].format(t="bf16")
    assert {m for m in r.counts if m.startswith("v_mfma")} == {mnemonic}, r.summary()
    body = cc.loop_body(r.disasm)
    loop = cc.instruction_counts(body)
    assert loop.get(mnemonic) == cfg.mfma_per_cluster, (loop, cfg.mfma_per_cluster)
    assert loop.get("buffer_load_dwordx4", 0) == cfg.a_loads + cfg.b_loads
    assert loop.get("ds_read_b128", 0) == cfg.ds_reads and not any(m.startswith("ds_read") and m != "ds_read_b128" for m in loop)
    assert loop.get(f"ds_write_b{16 * cfg.kr}", 0) == 8 and loop.get("ds_write_b128", 0) == cfg.a_loads
    assert loop.get("s_waitcnt", 0) > 0 and "vmcnt(0)" in body and "lgkmcnt(0)" in body
    # two clusters per K tile, one barrier each; + the prologue's
    assert loop.get("s_barrier") == 2 and r.count("s_barrier") == 3
    # the MFMAs really are interleaved: LDS reads and global loads sit between MFMAs of the loop
    seq = [ln.split()[0] for ln in body.splitlines() if ln.split()]
    first, last = seq.index(mnemonic), len(seq) - 1 - seq[::-1].index(mnemonic)
    between = seq[first:last]
    assert between.count("buffer_load_dwordx4") >= (cfg.a_loads + cfg.b_loads) // 2, between
    assert between.count("ds_read_b128") >= cfg.ds_reads_interleaved // 2
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0 and res["sgpr_spill"] == 0, r.summary()
    assert r.notes["private_segment_fixed_size"] == 0 and r.notes["vgpr_spill_count"] == 0
    # one wave per SIMD with the whole file: VGPR + AGPR <= 512, more than a 2-wave budget would allow
    assert 256 < r.vgpr_total <= 512 and res["occupancy"] == 1, r.summary()
    # every accumulator register in AGPRs (arch.h mfma32_agpr), on both compilers
    assert res["agpr"] >= 4 * (cfg.bm // 4) * (cfg.bn // 4) // 64, r.summary()
    assert res["lds"] == cfg.lds_bytes <= LDS_LIMIT[arch] and r.notes["group_segment_fixed_size"] == cfg.lds_bytes
    assert r.notes["max_flat_workgroup_size"] == 256


def _kinds(lines):
    """hardware MFMAs, ds_read_b128 and buffer loads among assembly lines"""
    ops = [ln.split()[0] for ln in lines if ln.strip() and not ln.lstrip().startswith((";", "."))]
    return (sum(o.startswith("v_mfma") for o in ops), ops.count("ds_read_b128"), ops.count("buffer_load_dwordx4"))


def test_issue_order_follows_the_pattern_and_the_data():
    """InterleaveConfig.issue_order spells the schedule's pattern out instruction by instruction: every
    MFMA, second-half read and global load exactly once, MFMA groups of the pattern's sizes (in hardware
    MFMAs; gfx942: two per logical chunk), and no MFMA before the reads of its operands."""
    for arch in ("gfx942", "gfx950"):
        for mf in (32, 16):
            cfg = interleave_config(arch, mf=mf)
            groups = cfg.issue_order()
            items = [it for g in groups for it in g]
            assert len(items) == len(set(items))
            n = {k: sum(it[0] == k for it in items) for k in ("mfma", "ds_read", "vmem")}
            assert n == {"mfma": cfg.mfma_per_cluster // cfg.mfma_per_logical, "ds_read": cfg.ds_reads_interleaved,
                         "vmem": cfg.a_loads + cfg.b_loads}
            read = set()
            for it in items:
                if it[0] == "ds_read":
                    read.add(it)
                elif it[0] == "mfma":
                    _, h0, h1, i, j, s_ = it
                    assert (not h1 or ("ds_read", "B", i, s_) in read) and (not h0 or ("ds_read", "A", j, s_) in read), it
            pat = [n for kind, n in cfg.schedule().body[0].pattern if kind == "mfma"]
            got = [sum(it[0] == "mfma" for it in g) * cfg.mfma_per_logical for g in groups if any(it[0] == "mfma" for it in g)]
            if arch == "gfx950":
                assert got == pat


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
def test_interleave_order_in_assembly(arch, clang):
    """The K loop's instructions between consecutive sched_barriers of the -S output are exactly the
    groups of issue_order: the hand interleave survives the compiler (the scheduler cannot move MFMAs,
    reads or loads across a sched_barrier)."""
    need_clang(clang)
    _, r = compiled(arch, clang, asm=True)
    cfg = interleave_config(arch)
    assert "sched_group_barrier" not in r.asm  # the inline-asm MFMAs are placed by source order instead
    segs = re.split(r"; sched_barrier mask\(0x00000000\)", r.asm)
    got = [_kinds(seg.splitlines()) for seg in segs]
    want = [(sum(it[0] == "mfma" for it in g) * cfg.mfma_per_logical, sum(it[0] == "ds_read" for it in g),
             sum(it[0] == "vmem" for it in g)) for g in cfg.issue_order()]
    # find the run of segments of the loop's mixed cluster
    runs = [k for k in range(len(got) - len(want) + 1) if got[k:k + len(want)] == want]
    assert runs, (got, want)


# ---------------------------------------------------------------- accumulators pinned in AGPRs

_REG = re.compile(r"\b([va])(?:\[(\d+):(\d+)\]|(\d+))")


def _regs(operand):
    m = _REG.search(operand)
    if not m:
        return set()
    lo, hi = (int(m.group(2)), int(m.group(3))) if m.group(2) else (int(m.group(4)), int(m.group(4)))
    return {(m.group(1), r) for r in range(lo, hi + 1)}


def _insts(disasm):
    out = []
    for ln in disasm.splitlines():
        code = ln.split("//")[0].strip()
        if code and not code.endswith(":") and not code.startswith("<"):
            op, _, rest = code.partition(" ")
            out.append((op, [x.strip() for x in rest.split(",")] if rest else []))
    return out


def mfma_hazards(disasm):
    """The MFMA hazards the compiler cannot see through inline asm, checked on the ISA:
    * every MFMA accumulates in place in AGPRs (vDst == SrcC, an a[..] range): back-to-back MFMAs on the same
      accumulator need no wait states, and nothing else touches the accumulator between them;
    * no VALU instruction writes an MFMA's SrcA / SrcB VGPRs within the 2 wait states before it;
    * no VALU reads or writes an accumulator AGPR (v_accvgpr_read/write) within 20 wait states after an MFMA
      that wrote it (16 passes + 4)."""
    errs = []
    ins = _insts(disasm)
    for k, (op, ops) in enumerate(ins):
        if not op.startswith("v_mfma"):
            continue
        if not (ops[0].startswith("a[") and ops[0] == ops[3]):
            errs.append(f"{k}: {op} {ops}: not accumulating in place in AGPRs")
        src = _regs(ops[1]) | _regs(ops[2])
        ws = 0
        for op2, ops2 in reversed(ins[max(0, k - 4):k]):
            if ws >= 2:
                break
            if op2 == "s_nop":
                ws += int(ops2[0], 0) + 1
                continue
            if op2.startswith("v_") and not op2.startswith("v_mfma") and ops2 and _regs(ops2[0]) & src:
                errs.append(f"{k}: {op2} {ops2} writes a source of {op} {ops} {ws} wait states before it")
            ws += 1
        dst, ws = _regs(ops[0]), 0
        for op2, ops2 in ins[k + 1:k + 24]:
            if ws >= 20:
                break
            if op2 == "s_nop":
                ws += int(ops2[0], 0) + 1
                continue
            if op2.startswith("v_accvgpr") and any(_regs(o) & dst for o in ops2):
                errs.append(f"{k}: {op2} {ops2} touches the result of {op} {ops} {ws} wait states after it")
            ws += 1
    return errs


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("mf", [32, 16])
def test_interleave_accumulators_stay_in_agprs(arch, clang, mf):
    """The issue's "explicit register ranges": with mfma32_agpr / pin_agpr the K loop holds every accumulator
    in AGPRs with no v_accvgpr copy (clang-22 with the builtins: ~30 reads/writes per K tile), no spill and
    no scratch, on clang-19 and clang-22; the hidden MFMA hazards are covered (mfma_hazards)."""
    need_clang(clang)
    _, r = compiled(arch, clang, mf)
    body = cc.loop_body(r.disasm)
    loop = cc.instruction_counts(body)
    copies = {m: n for m, n in loop.items() if m.startswith("v_accvgpr")}
    assert copies == {}, (copies, r.summary())
    assert not any(m.startswith(("scratch_", "buffer_store")) for m in loop), loop
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0 and res["sgpr_spill"] == 0, r.summary()
    assert r.notes["private_segment_fixed_size"] == 0 and r.notes["vgpr_spill_count"] == 0
    cfg = interleave_config(arch, mf=mf)
    assert res["agpr"] == 4 * (cfg.bm // 4) * (cfg.bn // 4) // 64 and res["vgpr"] <= 256, r.summary()
    assert mfma_hazards(r.disasm) == []


def test_hazard_checker_sees_hazards():
    dis = "\n".join(["v_add_u32_e32 v4, v1, v2", "v_mfma_f32_32x32x16_bf16 a[0:15], v[4:7], v[8:11], a[0:15]",
                     "s_nop 7", "v_accvgpr_read_b32 v0, a3", "v_mfma_f32_32x32x16_bf16 v[0:15], v[4:7], v[8:11], v[0:15]"])
    errs = mfma_hazards(dis)
    assert len(errs) == 3 and "writes a source" in errs[0] and "touches the result" in errs[1] and "in place" in errs[2]
    ok = "\n".join(["v_add_u32_e32 v4, v1, v2", "s_nop 1", "v_mfma_f32_32x32x16_bf16 a[0:15], v[4:7], v[8:11], a[0:15]",
                    "s_nop 7", "s_nop 7", "s_nop 7", "v_accvgpr_read_b32 v0, a3"])
    assert mfma_hazards(ok) == []


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("din,dout", [("f16", "f32"), ("bf16", "bf16"), ("f16", "f16")])
def test_interleave_dtypes(arch, clang, din, dout):
    need_clang(clang)
    _, r = compiled(arch, clang, 32, din, dout)
    assert r.count(MFMA[(arch, 32)].format(t=din)) > 0
    assert r.resources["scratch"] == 0 and r.resources["vgpr_spill"] == 0 and r.vgpr_total <= 512
    assert r.count("buffer_store_dwordx4" if dout == "f32" else "buffer_store_dwordx2") > 0


# ---------------------------------------------------------------- lowering from the IR


def lowered(arch, din=torch.bfloat16, dout=torch.float32, M=1000, N=768, K=512, **options):
    k = gemm_il.trace(meta(M, K, d=din), meta(K, N, d=din), meta(M, N, d=dout), BM=256, BN=256, BK=32, group=2)
    return CDNALowering(k, arch, **options).lower()


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
def test_interleave_kernel_lowers_and_compiles(arch, clang):
    need_clang(clang)
    low = lowered(arch)
    assert low.block == (256, 1, 1) and low.notes["schedule"] == "interleave4" and "interleave" in low.entry
    assert "kernel gemm(" in low.source and "_agpr<T_IN>(" in low.source and "load_op_chunk<" in low.source
    r = cc.compile_hip(low.source, arch, clang)
    cfg = low.notes["config"]
    assert r.count(MFMA[(arch, 32)].format(t="bf16")) == cfg.mfma_per_cluster
    assert r.resources["scratch"] == 0 and r.resources["vgpr_spill"] == 0
    assert r.vgpr_total <= 512 and r.resources["occupancy"] == 1 and r.resources["lds"] == low.notes["lds_bytes"]


def test_interleave_lowering_refuses_unfit_tiles_clearly():
    from tiles.core.lowering import LoweringError

    k = gemm_il.trace(meta(512, 64), meta(64, 512), meta(512, 512, d=torch.float32), BM=192, BN=256, BK=32)
    with pytest.raises(LoweringError, match="Interleave"):
        CDNALowering(k, "gfx942").lower()


# ---------------------------------------------------------------- CPU emulation vs float64

# gemm_driver.cpp's scheme for 256-thread blocks, also reporting E(lp): the error of a low-precision
# reference (fp32 accumulation in k order of the same rounded inputs, then the output rounding)
DRIVER = r'''
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include KERNEL_SRC
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand() { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return ((rng >> 40) / 16777216.0f) * 2.0f - 1.0f; }
static uint16_t to16(float f) { return EMU_IN_BF16 ? tiles::arch::f32_to_bf16(f) : tiles::arch::f32_to_f16(f); }
static float from16(uint16_t h) { return EMU_IN_BF16 ? tiles::arch::bf16_to_f32(h) : tiles::arch::f16_to_f32(h); }
static double out_round(float x) {
  if (EMU_OUT_BYTES == 4) return x;
  return EMU_OUT_BF16 ? tiles::arch::bf16_to_f32(tiles::arch::f32_to_bf16(x)) : tiles::arch::f16_to_f32(tiles::arch::f32_to_f16(x));
}
static int M, N, K, lda, ldb, ldc;
static std::vector<uint16_t> A, B;
static std::vector<unsigned char> C;
#if defined(EMU_IR_ARGS)
static void body() { KERNEL_NAME(A.data(), B.data(), C.data(), M, K, lda, 1, K, N, ldb, 1, M, N, ldc, 1); }
#else
static void body() { KERNEL_NAME(A.data(), B.data(), C.data(), M, N, K, lda, ldb, ldc); }
#endif
int main(int argc, char** argv) {
  M = atoi(argv[1]); N = atoi(argv[2]); K = atoi(argv[3]); lda = atoi(argv[4]); ldb = atoi(argv[5]); ldc = atoi(argv[6]);
  const int grid = atoi(argv[7]);
  A.assign((size_t)M * lda, 0); B.assign((size_t)K * ldb, 0);
  for (auto& x : A) x = to16(urand());
  for (auto& x : B) x = to16(urand());
  C.assign((size_t)M * ldc * EMU_OUT_BYTES, 0xFF);
  long long barriers = 0;
  for (int b = 0; b < grid; ++b) barriers += tiles::emu::run_block((unsigned)b, 256, body);
  double maxerr = 0, lperr = 0, scale = 0;
  long long bad_pad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < ldc; ++j) {
      const unsigned char* p = &C[((size_t)i * ldc + j) * EMU_OUT_BYTES];
      if (j >= N) { for (int q = 0; q < EMU_OUT_BYTES; ++q) bad_pad += p[q] != 0xFF; continue; }
      double ref = 0; float lp = 0;
      for (int k = 0; k < K; ++k) {
        const float a = from16(A[(size_t)i * lda + k]), b = from16(B[(size_t)k * ldb + j]);
        ref += (double)a * b; lp = fmaf(a, b, lp);
      }
      double got;
      if (EMU_OUT_BYTES == 4) { float f; memcpy(&f, p, 4); got = f; }
      else { uint16_t h; memcpy(&h, p, 2); got = EMU_OUT_BF16 ? tiles::arch::bf16_to_f32(h) : tiles::arch::f16_to_f32(h); }
      const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
      if (e > maxerr) maxerr = e;
      lperr = std::fmax(lperr, std::fabs(out_round(lp) - ref));
      scale = std::fmax(scale, std::fabs(ref));
    }
  printf("maxerr %.6g lperr %.6g ref_scale %.6g bad_pad %lld barriers %lld\n", maxerr, lperr, scale, bad_pad, barriers);
  return 0;
}
'''


def emulate(tmp_path, source, arch, din, dout, M, N, K, lda, ldb, ldc, grid, ir_args=False):
    drv = tmp_path / "interleave_driver.cpp"
    drv.write_text(DRIVER)
    defines = ["KERNEL_NAME=kern", f"EMU_IN_BF16={int(din == 'bf16')}", f"EMU_OUT_BYTES={4 if dout == 'f32' else 2}",
               f"EMU_OUT_BF16={int(dout == 'bf16')}"] + (["EMU_IR_ARGS"] if ir_args else [])
    exe = build_host(source, 950 if arch == "gfx950" else 942, defines, main=str(drv))
    out = run(exe, M, N, K, lda, ldb, ldc, grid)
    m = re.match(r"maxerr (\S+) lperr (\S+) ref_scale (\S+) bad_pad (\d+) barriers (\d+)", out)
    assert m, out
    return float(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4)), int(m.group(5))


def bound(lperr, scale):
    # E <= 2 E(lp) + fl: twice the low-precision reference's error plus a floor of a few fp32 ulps of the result
    return 2 * lperr + 4 * 2.0**-24 * max(scale, 1.0)


CASES = [
    # arch, mf, din, dout, M, N, K, lda, ldb, ldc: M, N, K not multiples of the 256x256x32 tile
    ("gfx942", 32, "bf16", "f32", 300, 520, 200, 208, 520, 524),
    ("gfx950", 32, "bf16", "f32", 300, 264, 72, 72, 272, 264),
    ("gfx942", 16, "f16", "bf16", 270, 264, 40, 40, 264, 264),
    ("gfx950", 16, "f16", "f16", 130, 296, 136, 136, 296, 304),
    ("gfx942", 32, "bf16", "bf16", 1, 8, 8, 8, 8, 8),  # one row, one 8-vector, K below one tile
]


@pytest.mark.parametrize("arch,mf,din,dout,M,N,K,lda,ldb,ldc", CASES)
def test_emulated_interleave_gemm_matches_float64(tmp_path, arch, mf, din, dout, M, N, K, lda, ldb, ldc):
    cfg = interleave_config(arch, din, dout, mf=mf)
    src = render_gemm_interleave(arch, din, dout, name="kern", mf=mf)
    grid = cfg.grid(M, N)
    err, lperr, scale, bad_pad, barriers = emulate(tmp_path, src, arch, din, dout, M, N, K, lda, ldb, ldc, grid)
    assert bad_pad == 0, "the kernel wrote into C's padding columns"
    assert err <= bound(lperr, scale), (err, lperr, scale)
    nk = -(-K // cfg.bk)
    assert barriers == grid * 256 * S.barrier_counts(cfg.schedule(), nk)[0]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_lowered_interleave_kernel_runs_in_emulation(tmp_path, arch):
    """the GEMM declared Interleave(2) -> IR -> lower.py -> source, with the chiplet remap active (chunk 1), end to end."""
    M, N, K = 600, 520, 104
    low = lowered(arch, M=M, N=N, K=K, chunk=1)
    src = low.source.replace(low.entry, "kern")
    grid = -(-M // 256) * -(-N // 256)
    err, lperr, scale, bad, _ = emulate(tmp_path, src, arch, "bf16", "f32", M, N, K, K, N, N, grid, ir_args=True)
    assert bad == 0 and err <= bound(lperr, scale), (err, lperr, scale)
