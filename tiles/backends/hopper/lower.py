"""IR → Hopper CUDA C++: the GEMM kernel (tiles/kernels/gemm.py) lowered onto templates/gemm.cu.j2.

The lowering recognises a tiled GEMM and checks each assumption the template makes:

* an f32 register accumulator zeroed before ONE pipelined loop from 0 to cdiv(K, BK);
* in the loop, `load_async(a, A[:, :], row=R, col=kb*BK)`, `load_async(b, B[:, :], row=kb*BK, col=C)`,
  one `wait` on both, `mma(acc, a, b)` accumulating without transposes;
* after it, `store(C[:, :], acc, row=R, col=C)` at the same tile origin (R, C);
* (R, C), as functions of the program id over the declared grid, visit every BM x BN tile exactly once
  (checked by evaluating them for a few problem sizes).

Then the template's schedule implements it: the grid becomes persistent CTAs that visit the same tiles
in grouped order (the kernel's `group` constexpr), the pipelined loop becomes the producer warp's TMA
ring, `mma` becomes wgmma on the consumer warpgroups, and `store` the TMA-store epilogue.

Patterns: ProducerConsumer(stages, consumers) maps directly; Pipelined(stages) takes the same
schedule with 2 consumer warpgroups (on Hopper a TMA ring needs a producer anyway). PingPong and
Interleave are attention schedules with no GEMM template here: refused with that reason.
"""
from __future__ import annotations

import itertools
from typing import Dict, Optional

from tiles.core import ir
from tiles.core.lowering import Lowered, Lowering, LoweringError, check_gemm_dtypes, header_files, match_tiled_gemm
from tiles.core.patterns import Interleave, PingPong, Pipelined, ProducerConsumer

from . import gemm_probe, runtime

ARCH = runtime.ARCH
MAX_ACC_REGS = 128  # fp32 accumulators per consumer thread that fit next to addressing in 232 registers
# A CTA's work per tile, relative to a 128 x 256 tile's, over its speed when every SM is busy (H200,
# bench/hopper_gemm_tiles.py at 4096^3, each ring as deep as shared memory allows: 128 x 128 runs at
# 0.94 of 128 x 256's rate, 128 x 64 at 0.61).
TILE_COST = {256: 1.0, 128: 0.5 / 0.94, 64: 0.25 / 0.61}




class HopperLowering(Lowering):
    backend = "hopper"
    template_dir = str(gemm_probe.TEMPLATES)

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, **options):
        super().__init__(kernel, arch or ARCH)
        if self.arch != ARCH:
            raise LoweringError(f"hopper: wgmma and setmaxnreg need arch {ARCH!r}, got {self.arch!r}")
        self.options = options  # gemm template overrides chosen at launch (epilogue, cluster, ...)

    # ---------------------------------------------------------------- recognising the GEMM
    def _fail(self, why: str):
        raise LoweringError(f"hopper: kernel {self.k.name!r} is not the tiled GEMM the Hopper template implements: {why}")

    def match_gemm(self) -> Dict:
        k = self.k
        if isinstance(k.pattern, (PingPong, Interleave)):
            raise LoweringError(f"hopper: {k.pattern.name} has no GEMM schedule on Hopper; declare "
                                "ProducerConsumer(stages, consumers) (or Pipelined(stages))")
        g = match_tiled_gemm(k, self._fail)
        check_gemm_dtypes("hopper", g)
        self._check_tiles_once(g["A"], g["B"], g["BM"], g["BN"], g["row0"], g["col0"])
        return g

    def _check_tiles_once(self, A, B, BM, BN, row0, col0) -> None:
        """The persistent template visits every tile once in its own order; the IR must too."""
        for M, N in ((BM * 3 + 5, BN * 2 + 1), (BM * 9, BN * 5), (BM, BN * 11 + 7)):
            env = {A.dims[0].name: M, A.dims[1].name: 64, B.dims[0].name: 64, B.dims[1].name: N}
            n_pid = int(ir.evaluate(self.k.grid[0], env))
            if any(int(ir.evaluate(g, env)) != 1 for g in self.k.grid[1:]):
                self._fail("the grid must be one-dimensional (program_id(0) over the tiles)")
            seen = {(int(ir.evaluate(row0, {**env, "pid0": p})), int(ir.evaluate(col0, {**env, "pid0": p})))
                    for p in range(n_pid)}
            want = set(itertools.product(range(0, M, BM), range(0, N, BN)))
            if n_pid != len(want) or seen != want:
                self._fail(f"for M={M}, N={N} the programs do not cover the {len(want)} tiles of {BM}x{BN} exactly once")

    @classmethod
    def config(cls, kernel: Optional[str] = None, M: Optional[int] = None, N: Optional[int] = None, **problem) -> dict:
        """The CTA's tile width for an M x N output: a persistent CTA takes ceil(tiles / SMs) tiles in
        turn, so a problem with fewer 128 x 256 tiles than SMs leaves SMs idle (1024^3: 32 tiles for
        132). Narrower tiles fill them at a lower rate per tile (TILE_COST); the width with the least
        waves x cost wins. Measured on the H200 (bench/hopper_notes.md, session 13): 1024^3 0.44 ->
        0.85x cuBLAS with 128 x 64 tiles; the issue's five shapes keep 128 x 256."""
        if kernel != "gemm" or not M or not N:
            return {}
        import torch
        sms = runtime.num_sms() if torch.cuda.is_available() else 132

        def cost(bn):
            tiles = -(-M // 128) * -(-N // bn)
            return -(-tiles // sms) * TILE_COST[bn]
        best = min(TILE_COST, key=lambda bn: (cost(bn), -bn))
        # 128 x 256 tiles visited 16 tile rows at a time: the 132 tiles in flight then span about 16
        # rows x 8 columns, where a 128 x 256 tile's A (16 KB a k-block) and B (32 KB) cost L2 the
        # least unique bytes together (rows = sqrt(2 x 132)). +0.9 to +1.7 % over 8 rows at the
        # suite's eight shapes past one wave (H200, session 18, bench/deferred_store_ab.py --suite)
        return {"group": 16} if best == 256 else {"BN": best}

    # ---------------------------------------------------------------- rendering
    def gemm_config(self, g: Dict) -> dict:
        p = self.k.pattern
        stages, consumers = p.stages, (p.consumers if isinstance(p, ProducerConsumer) else 2)
        if not isinstance(p, (ProducerConsumer, Pipelined)):
            raise LoweringError(f"hopper: no GEMM schedule for pattern {p.describe()}")
        if g["BK"] != 64:
            raise LoweringError(f"hopper: BK must be 64 (one 128-byte swizzle line of 16-bit values), got {g['BK']}")
        if g["BM"] % (64 * consumers):
            raise LoweringError(f"hopper: BM={g['BM']} must split into {consumers} consumer warpgroups of 64-row slices")
        if (g["BM"] // consumers) * g["BN"] // 128 > MAX_ACC_REGS:
            raise LoweringError(f"hopper: a {g['BM'] // consumers}x{g['BN']} fp32 accumulator per warpgroup needs "
                                f"{(g['BM'] // consumers) * g['BN'] // 128} registers a thread (limit {MAX_ACC_REGS}); "
                                f"use more consumers or a smaller tile")
        cfg = dict(BM=g["BM"], BN=g["BN"], BK=g["BK"], stages=stages, consumers=consumers)
        if "group" in self.k.constexprs:
            cfg["group_m"] = int(self.k.constexprs["group"])
        if g["BN"] == 64:  # 128 x 64 tiles (small outputs): stores from registers, 4 pairs of a row a
            # store (ops.h store_wide), 1.09x the TMA store at 1024^3 (H200, session 17, bench/epilogue_ab.py)
            cfg.update(epilogue="regs", wide_stores=4)
        if g["BN"] == 256 and g["C"].dtype.name in ("bf16", "f16"):
            # each tile packed to 16 bits and stored under the next tile's first k-block: +0.1 to +0.5 %
            # at all ten suite shapes alone, +0.1 to +0.4 % over group 16 at eight of nine (H200, session 18)
            cfg["deferred_store"] = True
        cfg.update(self.options)
        cfg = gemm_probe._fit_defaults(cfg, cfg.get("b_kmajor", False))  # e.g. no multicast for 128 x 64 tiles
        if "stages" not in self.options:
            # the ring as deep as shared memory allows (up to 8): narrower tiles take more stages
            # (128 x 128: 6, 128 x 64: 8; 0.51 -> 0.59x and 0.55 -> 0.76x cuBLAS at 1024 x 1024 x 8192)
            while cfg["stages"] < 8:
                try:
                    gemm_probe.gemm_source(g["A"].dtype.name, g["C"].dtype.name, **dict(cfg, stages=cfg["stages"] + 1))
                except ValueError:
                    break
                cfg["stages"] += 1
        return cfg

    def lower(self) -> Lowered:
        g = self.match_gemm()
        A, B, C = g["A"], g["B"], g["C"]
        cfg = self.gemm_config(g)
        name = f"tiles_{self.k.name}_hopper_{A.dtype.name}_{C.dtype.name}_{g['BM']}x{g['BN']}x{g['BK']}"
        try:
            kern = gemm_probe.gemm_source(A.dtype.name, C.dtype.name, template="gemm_ir.cu.j2", name=name,
                                          context=dict(ir_name=self.k.name, ir_text=self.k.text()), **cfg)
        except (ValueError, TypeError) as e:
            raise LoweringError(f"hopper: GEMM {g['BM']}x{g['BN']}x{g['BK']} {cfg}: {e}") from None
        n = self.sym_name
        args = [("tma", A), ("tma", B), ("tma_out", C), ("ptr", C), ("dim", A.dims[0]), ("dim", B.dims[1]),
                ("dim", A.dims[1]), ("stride64", C.strides[0])]
        requires = [f"{p.name}.stride1 == 1" for p in (A, B, C)] + [
            f"{B.name}.shape0 == {A.name}.shape1", f"{C.name}.shape0 == {A.name}.shape0",
            f"{C.name}.shape1 == {B.name}.shape1",
            "A and B rows 16-byte aligned for TMA (else the launcher copies them into padded rows)",
            "C rows 16-byte aligned for the TMA-store epilogue (else the launcher picks epilogue='regs')"]
        return Lowered(kernel=self.k, backend="hopper", arch=self.arch, entry=kern.name, source=kern.source,
                       block=(kern.threads, 1, 1), shared_bytes=kern.smem_bytes, args=args,
                       headers=header_files(str(runtime.INCLUDE_DIR)),
                       notes={"config": kern.cfg, "gemm_kernel": kern, "requires": requires,
                              "grid": "persistent: min(cluster tiles, resident clusters) x cluster",
                              "dims": dict(M=n(A.dims[0]), N=n(B.dims[1]), K=n(A.dims[1])),
                              "template_version": runtime.TEMPLATE_VERSION})
