"""Session 30: 128 x 192 fp8 tiles, one 64 x 192 wgmma burst a K block and warpgroup, in turns.

    PYTHONPATH=.:bench:tests/hopper python3 bench/fp8_bn192.py [check]

The launched 128 x 256 tiles (two consumer warpgroups taking turns, schedule="pingpong") sum a K block
in two 128-wide halves through one 64-register scratch: acc (128) + part (64) leave no room for a
second. A 192-wide tile holds acc (96) and a whole K block's part (96) in the same 192 registers, so
each warpgroup issues one burst of four QGMMA.64x192x32 a K block instead of two of 64x128x32: half as
many turns, and each QGMMA reads 8 KB of shared memory for 393K products where 64x128x32 reads 6 KB
for 262K. A 192-wide tile at column 192 t covers two B scale blocks: with t even, 8-column groups 0-15
are in the first and 16-23 in the second; with t odd, groups 0-7 and 8-23 (`promote_192`).

This is an edit of the launched source (BN=256, pingpong) rather than a lowering option: BN, the part's
width, one burst a K block, and the promotion; the host side (tensor maps, grid, stream-K workspace)
takes BN from the kernel's cfg, which the edit sets to 192. Each output must pass the float64 bound
(tiles.bench.fp8.error_and_bound); it is not bitwise the launched one's where stream-K splits differ.
Timed back to back (hopper_gemm_tiles.timed) beside the launched kernel and row-wise `_scaled_mm`.
"""
import sys

import torch

from tiles.backends.hopper import lower_fp8, runtime
from tiles.bench import fp8

import fp8_ab

PROMOTE_192 = r"""
// ---- session 30 experiment (bench/fp8_bn192.py): a 192-wide tile's promotion. Column group j (pairs
// 2j, 2j + 1) takes block b's scale below SPLIT and b1's from it; SPLIT is 16 for even tiles, 8 for
// odd ones (a tile at column 192 t starts 64 columns into a block when t is odd).
template <int SPLIT>
__device__ __forceinline__ void promote_split(acc_t& acc, const part_t& part, const block_scales& s) {
  const float s0 = s.a0 * s.b, s1 = s.a1 * s.b, t0 = s.a0 * s.b1, t1 = s.a1 * s.b1;
#pragma unroll
  for (int p = 0; p < part.pairs; ++p) {
    const float x = p / 2 < SPLIT ? ((p & 1) ? s1 : s0) : ((p & 1) ? t1 : t0);
    acc.v[0][p].x = fmaf(part.v[0][p].x, x, acc.v[0][p].x);
    acc.v[0][p].y = fmaf(part.v[0][p].y, x, acc.v[0][p].y);
  }
}
__device__ __forceinline__ void promote_192(acc_t& acc, const part_t& part, const block_scales& s, int tn) {
  if (tn & 1) promote_split<8>(acc, part, s);
  else promote_split<16>(acc, part, s);
}
"""

# one K block as the launched ping-pong loop runs it (two halves), and as one 192-wide burst
TWO_HALVES = """        await_turn(cw);
        mma_half<0>(part, S.a[pos.stage], cw * WG_ROWS, S.b[pos.stage]);
        mma_commit();
        pass_turn(cw);
        mma_wait<0>(part);
        promote<0>(acc, part, cur.a0 * cur.b, cur.a1 * cur.b);
        await_turn(cw);
        mma_half<1>(part, S.a[pos.stage], cw * WG_ROWS, S.b[pos.stage]);
        mma_commit();
        pass_turn(cw);
        mma_wait<0>(part);
        release(S.bars.empty[pos.stage]);  // the wgmmas are done reading this stage
        promote<1>(acc, part, cur.a0 * cur.b1, cur.a1 * cur.b1);
"""
ONE_BURST = """        await_turn(cw);
        mma_half<0>(part, S.a[pos.stage], cw * WG_ROWS, S.b[pos.stage]);
        mma_commit();
        pass_turn(cw);
        mma_wait<0>(part);
        release(S.bars.empty[pos.stage]);  // the wgmmas are done reading this stage
        promote_192(acc, part, cur, tn);
"""


def _once(src, old, new, count=1):
    if src.count(old) != count:
        raise RuntimeError(f"{old[:60]!r}... is in the source {src.count(old)} times, not {count}")
    return src.replace(old, new)


def edit192(cfg: dict, stages: int = 4) -> dict:
    """The launched 128 x 256 ping-pong kernel of `cfg` (fp8_ab.launched) edited to 128 x 192 tiles."""
    if cfg.get("BN") != 256 or cfg.get("schedule") != "pingpong":
        raise ValueError(f"edit192 takes the 128 x 256 ping-pong kernel, got {cfg}")
    kern = lower_fp8.fp8_source(torch.bfloat16, **cfg)  # 256-wide tiles fit 3 stages; 192-wide ones 4
    src = kern["source"]
    src = _once(src, f"constexpr int STAGES = {kern['cfg']['stages']};", f"constexpr int STAGES = {stages};")
    src = _once(src, "constexpr int BM = 128, BN = 256, BK = 128;", "constexpr int BM = 128, BN = 192, BK = 128;")
    src = _once(src, "constexpr int PART_N = BN == 96 ? 96 : 128;", "constexpr int PART_N = 192;  // session 30: one burst a K block")
    src = _once(src, 'static_assert(BN == 96 || BN == 128 || BN == 256, "96, 128 or 256 columns a tile");\n', "")
    src = _once(src, "static_assert(CONSUMERS == 2 && HALVES == 2,", "static_assert(CONSUMERS == 2,")
    src = _once(src, "// A consumer warp's release of a ring stage:", PROMOTE_192.lstrip("\n") + "\n// A consumer warp's release of a ring stage:")
    src = _once(src, TWO_HALVES, ONE_BURST, src.count(TWO_HALVES) or 1)
    name = kern["name"].replace("128x256x128", "128x192x128")
    src = src.replace(kern["name"], name + f"_s{stages}")
    c = dict(kern["cfg"], BN=192, stages=stages)
    smem = lower_fp8._smem(c, 128, 192, 128)
    if smem > lower_fp8.SMEM_LIMIT:
        raise ValueError(f"{stages} stages of 128 x 192 need {smem} bytes of shared memory")
    return dict(kern, source=src, name=name + f"_s{stages}", cfg=c, smem=smem)


def check():
    """CPU: each edited kernel compiles through NVRTC; its registers, spills and main loops' QGMMAs."""
    import pathlib
    import tempfile
    import sass
    for M, N, K in ((6144, 7168, 2304), (8192, 8192, 8192)):
        kern = edit192(fp8_ab.launched(M, N, K, 132))
        comp = runtime.compile_cuda(kern["source"], name=kern["name"] + ".cu", cache=False)
        listing = sass.disassemble(comp.cubin, pathlib.Path(tempfile.mkdtemp()))
        loops = sorted(sass.mainloops(listing), key=len)
        qg = sorted({t.split()[0] for body in loops for t in body if t.startswith("QGMMA")})
        print((M, N, K), kern["name"], comp.resources.get(kern["name"]), "smem", kern["smem"],
              "loops", [len(b) for b in loops[:3]], qg,
              [ln for ln in comp.log.splitlines() if "warning" in ln.lower()][:3], flush=True)


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in ((6144, 7168, 2304), (8192, 8192, 8192)):
        sets = fp8_ab.input_sets(M, N, K)
        cfg = fp8_ab.launched(M, N, K, sms)
        vs = {"launched": cfg, "bn192_s4": edit192(cfg, 4), "bn192_s3": edit192(cfg, 3)}
        fns, outs = fp8_ab.launch_all(sets, vs)
        errs = {label: fp8.error_and_bound(o, sets[0]) for label, o in outs.items()}
        print(M, N, K, {label: f"{e:.3g}/{b:.3g}{'' if e <= b else ' OVER'}" for label, (e, b) in errs.items()},
              flush=True)
        fp8_ab.print_speeds(M, N, K, fp8_ab.timings(fns, len(sets)))


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
