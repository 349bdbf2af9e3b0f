"""IR -> CDNA HIP: flash attention forward (tiles/kernels/attention.py ``attention_fwd``) and backward dQ
(``attention_bwd_dq``, ``CDNAAttentionBwdDqLowering`` at the end of this file) for gfx942 / gfx950.

A real translation: the lowering recognises the *structure* the CDNA mapping needs (Q tile loaded once,
one pipelined loop over K/V tiles with ``load_async(kt)``, ``load_async(vt)``, ``wait``, a score ``mma``
and a value ``mma``), then emits every other IR op one by one as a call into ops.h, with the IR op quoted
above it. How the IR maps onto CDNA:

* 8 waves, each owns MF = BM / 8 query rows (MF = 32 -> 32x32 MFMAs, MF = 16 -> 16x16).
* S^T formulation: the score tile ``s`` (BM x BN) is held as the accumulator of S^T = K Q^T (rt.h ``rt_t``):
  each lane holds one query's scores in its registers, so ``row_max`` / ``row_sum`` are in-lane reductions
  plus one xor-32 shuffle (MF = 32). Its key order is permuted (``key_perm``) so that the f32 registers,
  rounded in place, are the B operand of O^T += V^T P^T: ``cast(p, s)`` is register-only.
  ``o`` is held as O^T (rows d, columns queries); per-row vectors (``m``, ``l``, ...) are one float per lane.
* Q: read once from global straight into MFMA operand registers (the IR's shared ``q`` is only ever the
  B operand of the score mma). K: k-contiguous LDS tile (gfx950: buffer_load ... lds, no registers).
  V: written transposed into LDS (keys contiguous) from registers. Both double-buffered; swizzles are
  chosen by the bank model (layouts.py) for the exact read / write patterns below.
* PingPong -> the 8-wave ping-pong of schedule.py: memory clusters (LDS reads, buffer loads, softmax VALU,
  LDS writes) alternate with MFMA clusters under s_setprio(1); group 1 starts one barrier late and
  group 0 catches up after the loop. The schedule is data (``attention_schedule``), checked by
  ``schedule.check``; its vmcnt waits come from ``schedule.waitcnt_for``.
* Tails: buffer resources bound every view (out-of-range loads read 0, stores dropped); the IR's masks
  remove the padded keys. GQA: the grid is flattened and chiplet-remapped so that the query blocks of all
  query heads sharing one KV head run on one XCD (one L2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

from tiles.core import ir
from tiles.core.cpp_text import cast_i64
from tiles.core.lowering import Lowered, Lowering, LoweringError, header_files

from . import layouts
from . import schedule as sch
from .gemm_probe import INCLUDE_DIR, LDS_LIMIT, TEMPLATE_DIR

TEMPLATE_VERSION = "cdna-attention-1"
THREADS = 512
WAVES = 8
DEFAULT_ARCH = "gfx942"
CMP = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
UNARY = ("exp2", "log2", "copy", "neg", "exp", "log", "abs", "rsqrt")
BINARY = ("add", "sub", "mul", "div", "max", "min")
BCAST = ("add_row", "sub_row", "mul_row", "div_row")


# A split launch's arguments after the IR's (split.h): the parts a program is cut into, and the element
# offsets between two parts' slices of the workspace's O and L.
SPLIT_ARGS = ("parts", "o_parts_stride", "l_parts_stride")
MERGE_THREADS = 256  # the merge kernel's work-group: one thread an element of O


def default_tiles(arch: str, D: int) -> Dict[str, int]:
    """BM = 8 waves x 16 query rows (16x16 MFMAs: 32x32 ones spill at D = 128, see check_config); BN so that
    the K + V double buffer is 64 KiB (fits gfx942's LDS; gfx950 has room to spare)."""
    return {"BM": 128, "BN": 64 if D >= 128 else 128}


# ----------------------------------------------------------------------------- LDS swizzles from the bank model


def k_read_addrs(mf: int, row_bytes: int, sw: layouts.Swizzle, rb: int, slab: int) -> List[int]:
    """ds_read_b128 of the permuted K operand (load.h load_op_perm): lane l reads row key_perm(rb*mf + l%mf)."""
    lg = layouts.Logical(mf)
    out = []
    for lane in range(layouts.WAVE):
        row, k = lg.operand(lane, 0)
        out.append(sw.offset(key_perm(mf, rb * mf + row), slab * lg.kslab + k, row_bytes))
    return out


def key_perm(mf: int, r: int) -> int:
    """rt.h key_perm: the key held by accumulator row r of the permuted S^T tile."""
    base, x = r & ~31, r & 31
    if mf == 32:
        return base | (x & 0x13) | ((x & 4) << 1) | ((x & 8) >> 1)
    return base | (x & 3) | ((x & 16) >> 2) | ((x & 12) << 1)


# Access families (layouts.Access) of every LDS instruction issued on each attention tile: the swizzle of a
# tile is the simplest candidate under which all of them are conflict-free (layouts.best_swizzle).

def perm_tile_accesses(mf: int, rows: int, D: int, writes: str, kr: int = 0, threads: int = THREADS) -> List[layouts.Access]:
    """A rows x D tile (d contiguous) read as a key_perm-ordered A operand (load_op_perm / mma_ABt_lds PERM),
    written by ``writes``: "stage" (store_stage, ds_write_b128), "rows" (store_stage_t_rows) or "direct"
    (gfx950 buffer_load ... lds: a wave fills 1 KiB contiguously, no register-side pattern)."""
    perm = lambda r: key_perm(mf, r)
    acc = [("read_b128", "ds_read_b128", lambda sw: layouts.operand_read_patterns(sw, mf, rows, 2 * D, perm))]
    if writes == "stage":
        acc.append(("write_b128", "ds_write_b128", lambda sw: layouts.stage_write_patterns(sw, rows, 2 * D, threads)))
    elif writes == "rows":
        acc.append(("write_b128", "ds_write_b128", lambda sw: layouts.stage_t_rows_write_patterns(sw, rows, D, kr, threads)))
    return acc


def t_tile_accesses(mf: int, D: int, keys: int, kr: int, threads: int = THREADS) -> List[layouts.Access]:
    """A D x keys tile (keys contiguous): plain operand reads, store_stage_t's transposed writes."""
    return [("read_b128", "ds_read_b128", lambda sw: layouts.operand_read_patterns(sw, mf, D, 2 * keys)),
            (f"write_b{16 * kr}_T", layouts.transposed_write_instr(kr),
             lambda sw: layouts.stage_t_write_patterns(sw, keys, D, kr, threads))]


@lru_cache(maxsize=None)
def tile_swizzle(arch: str, kind: str, *args) -> layouts.Swizzle:
    acc, shape = _tile(kind, *args)
    return layouts.best_swizzle(arch, acc, (shape,))


@lru_cache(maxsize=None)
def tile_conflicts(arch: str, kind: str, *args) -> Dict[str, int]:
    acc, _ = _tile(kind, *args)
    return layouts.access_conflicts(arch, acc, tile_swizzle(arch, kind, *args))


def _tile(kind: str, *args):
    """(accesses, (rows, row_bytes)) of a tile: ("perm", mf, rows, D, writes, kr, threads) or
    ("t", mf, D, keys, kr, threads)."""
    if kind == "perm":
        mf, rows, D = args[:3]
        return perm_tile_accesses(*args), (rows, 2 * D)
    mf, D, keys = args[:3]
    return t_tile_accesses(*args), (D, 2 * keys)


def k_conflicts(arch: str, mf: int, D: int, BN: int, sw: layouts.Swizzle, direct: bool) -> Dict[str, int]:
    return layouts.access_conflicts(arch, perm_tile_accesses(mf, BN, D, "direct" if direct else "stage"), sw)


def v_conflicts(arch: str, mf: int, BN: int, sw: layouts.Swizzle, kr: int, D: int = 0) -> Dict[str, int]:
    # V^T tile: D rows (d) x BN keys; reads are plain operand reads, writes store_stage_t's transposed ones
    D = D or 8 * THREADS * kr // BN
    return layouts.access_conflicts(arch, t_tile_accesses(mf, D, BN, kr), sw)


@dataclass(frozen=True)
class _AttnTiles:
    """What the forward and the backward tile configs share: the problem, the tile, the MFMA."""

    arch: str
    dtype: str  # Q/K/V
    out_dtype: str
    D: int
    BM: int
    BN: int
    causal: bool

    @property
    def mf(self) -> int:
        return self.BM // WAVES

    @property
    def kr(self) -> int:  # k (key) rows per thread of a transposed stage
        return self.BN * self.D // (8 * THREADS)

    @property
    def mfma(self) -> layouts.Mfma:
        return layouts.MFMA[(self.arch, self.mf)]

    def _mfmas(self, rows: int, k: int) -> int:
        """hardware MFMAs per wave for a (rows x ...) output slab over a k-deep contraction."""
        return (rows // self.mf) * (k // layouts.Logical(self.mf).kslab) * (8 // self.mfma.a.elems)


@dataclass(frozen=True)
class AttnConfig(_AttnTiles):
    @property
    def direct_k(self) -> bool:
        return self.arch == "gfx950"

    @property
    def k_loads(self) -> int:
        return self.BN * self.D // (8 * THREADS)

    @property
    def v_loads(self) -> int:
        return self.kr

    @property
    def lds_bytes(self) -> int:
        return 2 * 2 * (2 * self.BN * self.D)

    @property
    def _k(self) -> tuple:
        return ("perm", self.mf, self.BN, self.D, "direct" if self.direct_k else "stage", 0, THREADS)

    @property
    def _v(self) -> tuple:
        return ("t", self.mf, self.D, self.BN, self.kr, THREADS)

    @property
    def swizzle_k(self) -> layouts.Swizzle:
        return tile_swizzle(self.arch, *self._k)

    @property
    def swizzle_v(self) -> layouts.Swizzle:
        return tile_swizzle(self.arch, *self._v)

    def conflicts(self) -> Dict[str, int]:
        """Extra LDS cycles per access family (worst instruction of the whole tile) under the bank model."""
        k, v = tile_conflicts(self.arch, *self._k), tile_conflicts(self.arch, *self._v)
        return {**{"K_" + a: b for a, b in k.items()}, **{"V_" + a: b for a, b in v.items()}}

    @property
    def mfma_per_tile(self) -> Dict[str, int]:
        """hardware MFMAs per wave per K/V tile: S^T = K Q^T and O^T += V^T P^T."""
        return {"S": self._mfmas(self.BN, self.D), "O": self._mfmas(self.D, self.BN)}

    def schedule(self) -> sch.Schedule:
        return attention_schedule(self.k_loads, self.v_loads, self.direct_k)


def check_config(c: AttnConfig, registers: bool = True) -> None:
    if c.arch not in layouts.ARCHS:
        raise LoweringError(f"cdna attention: arch {c.arch!r}; supported {layouts.ARCHS}")
    if c.BM not in (128, 256):
        raise LoweringError(f"cdna attention: BM must be 8 waves x 16 or x 32 query rows (128 or 256), got {c.BM}")
    if c.D not in (64, 128):
        raise LoweringError(f"cdna attention: D must be 64 or 128, got {c.D}")
    if c.BN % 32 or c.BN * c.D % (8 * THREADS) or c.kr not in (2, 4, 8):
        raise LoweringError(f"cdna attention: BN must be a multiple of 32 with BN*D = 8*512*kr, kr in 2, 4, 8 "
                            f"(one transposed V vector per thread); got BN={c.BN}, D={c.D}")
    if c.lds_bytes > LDS_LIMIT[c.arch]:
        raise LoweringError(f"cdna attention: LDS: K+V tiles {c.BN}x{c.D} double-buffered need {c.lds_bytes} bytes; "
                            f"{c.arch} has {LDS_LIMIT[c.arch]} (use BN={default_tiles(c.arch, c.D)['BN']})")
    # register estimate per wave (VGPR+AGPR <= 256 at 2 waves/SIMD): O^T + S^T + Q + the K operand + staging
    # + the loop-invariant LDS addresses the compiler keeps; measured: above ~200 clang spills
    mf = c.mf
    regs = c.D * mf // 64 + c.BN * mf // 64 + mf * c.D // 128 + c.BN * c.D // 128 + 4 * (c.k_loads + c.v_loads) + 16
    if registers and regs > 200:
        raise LoweringError(f"cdna attention: BM={c.BM}, BN={c.BN}, D={c.D} needs ~{regs} registers per wave (spills "
                            f"past ~200 of the 256 a wave has at 8 waves); use {default_tiles(c.arch, c.D)}")


# ----------------------------------------------------------------------------- the ping-pong schedule


def attention_schedule(k_loads: int, v_loads: int, direct_k: bool) -> sch.Schedule:
    """8-wave ping-pong of one K/V tile (iteration t computes tile t, fetches tile t+1):

    M0 memory : K(t) LDS -> operand registers; issue the buffer loads of K(t+1) (gfx950: straight into
                LDS) and V(t+1)
    C0 compute: S^T = K Q^T                                  (s_setprio 1)
    M1 memory : softmax (the IR ops between the two mmas); wait for K(t+1) and write it (gfx942), wait
                for V(t+1) and write it transposed; lgkmcnt(0); V^T(t) LDS -> operand registers (last, so the
                staging registers are free before the operand registers fill)
    C1 compute: O^T += V^T P^T                               (s_setprio 1)
    """
    S = sch.Step
    order = [f"K{i}" for i in range(k_loads)] + [f"V{i}" for i in range(v_loads)]
    wait_k = sch.waitcnt_for(order, [x for x in order if x.startswith("K")]) or 0
    wait_v = sch.waitcnt_for(order, [x for x in order if x.startswith("V")]) or 0
    k_load = S("gload_lds", "K", n=k_loads) if direct_k else S("gload", "K", n=k_loads)
    k_write = (S("wait_vm", n=wait_k),) if direct_k else (S("wait_vm", n=wait_k), S("lds_write", "K"))
    body = (
        sch.Cluster("M0", "memory", (S("lds_read", "K", (0,)), k_load, S("gload", "V", n=v_loads))),
        sch.Cluster("C0", "compute", (S("prio", n=1), S("mma", "S", (0, 0)), S("prio", n=0))),
        sch.Cluster("M1", "memory", (S("softmax", "S"),) + k_write
                    + (S("wait_vm", n=wait_v), S("lds_write", "V"), S("wait_lgkm", n=0), S("lds_read", "V", (0,)))),
        sch.Cluster("C1", "compute", (S("prio", n=1), S("mma", "O", (0, 0)), S("prio", n=0))),
    )
    if direct_k:
        prologue = (S("gload_lds", "K", n=k_loads), S("gload", "V", n=v_loads), S("wait_vm", n=0), S("lds_write", "V"),
                    S("wait_lgkm", n=0))
    else:
        prologue = (S("gload", "K", n=k_loads), S("gload", "V", n=v_loads), S("wait_vm", n=0), S("lds_write", "K"),
                    S("lds_write", "V"), S("wait_lgkm", n=0))
    return sch.Schedule("pingpong8-attention", 2, 4, prologue, body, {1: 1}, {0: 1}, {"K": k_loads, "V": v_loads})


# ----------------------------------------------------------------------------- the lowering


def _float(v) -> str:
    v = ir.as_expr(v)
    if isinstance(v, ir.Const):
        x = float(v.value)
        if math.isinf(x):
            return "__builtin_inff()" if x > 0 else "(-__builtin_inff())"
        return repr(x) + "f"
    return None  # not a constant


# names attention.hip.j2 declares in the kernel's scope: a value k.let names (declared there) must differ
TEMPLATE_NAMES = frozenset("smem tid w g wrow lds0 n_kv kb_next cur nxt kb_begin kb_end part parts k_stage v_stage "
                           "pid0 pid1 pid2 gQ gK gV gO gL".split())


class CDNAAttentionLowering(Lowering):
    backend = "cdna"
    template_dir = TEMPLATE_DIR
    int_call = {"min": "imin({a}, {b})", "max": "imax({a}, {b})", "cdiv": "cdiv({a}, {b})"}
    reads_tensors = True  # each program reads its own sizes from a tensor (k.read: ragged key lengths)
    stopped_windows = True  # the buffer views end at a stop (view)

    def arg_decls(self, args, ptr_type) -> list:
        """C++ parameter declarations for the launch arguments; `ptr_type(param)` spells a pointer's type."""
        out = []
        for kind, x in args:
            if kind == "ptr":
                out.append(f"{ptr_type(x)}* __restrict__ {x.name}")
            elif kind == "f32":
                out.append(f"float {self.sym_name(x)}")
            else:
                out.append(f"int {self.sym_name(x)}")
        return out

    def entry_name(self, cfg) -> str:
        return (f"tiles_{self.k.name}_{self.arch}_{cfg.dtype}_{cfg.out_dtype}_d{cfg.D}_{cfg.BM}x{cfg.BN}"
                f"{'_causal' if cfg.causal else ''}{'_split' if self.split else ''}")

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, check_registers: bool = True,
                 split: Optional[str] = None):
        super().__init__(kernel, arch or DEFAULT_ARCH)
        self.subst: Dict[str, str] = {}
        self.check_registers = check_registers  # False: tiles that may spill (emulation of other shapes)
        # split: the output dtype of a grid cut along the keys (split.h). The kernel's O and L are then
        # the f32 workspace, a slice a part, and <entry>_merge writes the real O (of this dtype) and L.
        if split is not None and split not in ("bf16", "f16", "f32"):
            raise ValueError(f"cdna attention: split names the merged output's dtype (bf16, f16 or f32), got {split!r}")
        self.split = split

    def _fail(self, why: str):
        raise LoweringError(f"cdna: kernel {self.k.name!r} does not have the attention shape the CDNA lowering "
                            f"implements: {why}")

    def sym_name(self, s: ir.Sym) -> str:
        return self.subst.get(s.name, s.name.replace(".", "_"))

    def expr(self, e) -> str:
        # a loop index spelled as a number (the prologue's tile 0) is folded: `0`, not `0 * 64`
        ints = {k: int(v) for k, v in self.subst.items() if v.lstrip("-").isdigit()}
        return super().expr(ir.fold(ir.as_expr(e), ints, keep=self.declared) if ints else e)

    def fexpr(self, e) -> str:
        c = _float(e)
        return c if c is not None else f"(float)({self.expr(e)})"

    # ------------------------------------------------------------ recognition
    def match(self) -> Dict:
        k = self.k
        tensors = [p for p in k.params if p not in k.reads]  # what the program reads elements of comes apart
        if len(tensors) != 5 or [p.rank for p in tensors] != [4, 4, 4, 4, 3] or len(k.scalars) != 1:
            self._fail("expected Q, K, V, O (B, S, H, D), L (B, H, S) and one float scale")
        Q, K, V, O, L = tensors
        if Q.dtype.name not in ("bf16", "f16") or K.dtype != Q.dtype or V.dtype != Q.dtype:
            raise LoweringError(f"cdna attention: Q, K, V must all be bf16 or all f16, got {Q.dtype}, {K.dtype}, {V.dtype}")
        if O.dtype.name not in ("bf16", "f16", "f32") or L.dtype.name != "f32":
            raise LoweringError(f"cdna attention: O must be bf16/f16/f32 and L f32, got {O.dtype}, {L.dtype}")
        loops = [n for n in k.body if isinstance(n, ir.Loop)]
        if len(loops) != 1 or not loops[0].pipelined:
            self._fail("expected exactly one k.pipeline loop at the top level")
        loop = loops[0]
        pre = k.body[:k.body.index(loop)]
        post = k.body[k.body.index(loop) + 1:]
        if len(pre) < 2 or pre[0].name != "load_async" or pre[1].name != "wait" or pre[1].attrs["tokens"] != (pre[0].attrs["token"],):
            self._fail("the kernel must start with wait(load_async(q, Q[...]))")
        q = pre[0].outs[0]
        body = list(loop.body)
        if any(isinstance(n, ir.Loop) for n in body) or [n.name for n in body[:3]] != ["load_async", "load_async", "wait"]:
            self._fail("the loop body must start with load_async(kt), load_async(vt), wait(both)")
        lk, lv, w = body[:3]
        if set(w.attrs["tokens"]) != {lk.attrs["token"], lv.attrs["token"]}:
            self._fail("the wait must cover both K/V loads")
        kt, vt = lk.outs[0], lv.outs[0]
        if lk.ins[0].param is not K or lv.ins[0].param is not V:
            self._fail("the loop loads kt from K and vt from V")
        rest = body[3:]
        mmas = [i for i, n in enumerate(rest) if n.name == "mma"]
        if len(mmas) != 2:
            self._fail("the loop body must have two mmas (scores, values)")
        m1, m2 = rest[mmas[0]], rest[mmas[1]]
        s = m1.outs[0]
        if m1.ins != [q, kt] or not m1.attrs.get("tb") or m1.attrs.get("ta") or m1.attrs.get("accumulate", True):
            self._fail("the first mma must be mma(s, q, kt, tb=True, accumulate=False)")
        p, o = m2.ins[0], m2.outs[0]
        if m2.ins[1] is not vt or m2.attrs.get("ta") or m2.attrs.get("tb") or not m2.attrs.get("accumulate", True):
            self._fail("the second mma must be mma(o, p, vt) accumulating")
        pre_ops = rest[:mmas[0]]
        mid = rest[mmas[0] + 1:mmas[1]]
        tail = rest[mmas[1] + 1:]
        for n in tail:  # hoisted above the value mma: must not touch its operands
            touched = set(map(id, n.outs)) | set(id(x) for x in n.ins if isinstance(x, ir.Tile))
            if touched & {id(o), id(p), id(vt)} or n.name in ("load_async", "wait", "mma", "store"):
                self._fail(f"{n.name} after the value mma depends on it; the ping-pong runs it before the mma")
        if any(n.name in ("load_async", "wait", "mma", "store", "load") for n in pre_ops + mid):
            self._fail("between the loads and the mmas only register ops may appear")
        if any(n.name in ("load_async", "wait", "mma", "load") for n in post) or [n for n in pre[2:] if n.name in ("load_async", "wait", "mma", "load", "store")]:
            self._fail("before/after the loop only register ops and stores may appear")
        D = k.constexprs.get("D")
        BM, BN = q.rows, kt.rows
        if q.shape != (BM, D) or kt.shape != (BN, D) or vt.shape != (BN, D) or s.shape != (BM, BN) or p.shape != (BM, BN) or o.shape != (BM, D):
            self._fail(f"tile shapes disagree: q {q.shape}, kt {kt.shape}, vt {vt.shape}, s {s.shape}, p {p.shape}, o {o.shape}")
        for t in k.tiles:
            if t.kind == "reg" and t.rows != BM or t.kind == "vec" and (t.shape[0] != BM or t.axis != "row"):
                self._fail(f"register tile {t.name} must have the query block's {BM} rows")
            if t.kind == "shared" and t not in (q, kt, vt):
                self._fail(f"unexpected shared tile {t.name}")
        return dict(Q=Q, K=K, V=V, O=O, L=L, q=q, kt=kt, vt=vt, s=s, p=p, o=o, loop=loop, lk=lk, lv=lv, m1=m1, m2=m2,
                    pre=pre[2:], pre_ops=pre_ops, mid=mid, tail=tail, post=post, D=D, BM=BM, BN=BN, lq=pre[0])

    # ------------------------------------------------------------ views
    def view(self, v: ir.View, eb: int) -> str:
        p = v.param
        kept = v.kept
        off = " + ".join(f"{cast_i64(self.expr(x))} * {self.sym_name(p.strides[i])}"
                         for i, x in enumerate(v.index) if x is not None)
        base = f"{p.name} + {off}" if off else p.name
        if len(kept) == 2:  # (a window stopped short ends at its stop: Lowering.extent)
            r, c = kept
            return f"make_view<{eb}>({base}, {self.extent(v, r)}, {self.extent(v, c)}, {self.sym_name(p.strides[r])})"
        (c,) = kept
        return f"make_view<{eb}>({base}, 1, {self.extent(v, c)}, {self.sym_name(p.dims[c])})"

    def view_decl(self, nm: str, v: ir.View, eb: int, note: str = "") -> List[str]:
        """The IR's window as a comment line, then the gview that reads it."""
        return [f"// {v.text()}{note}", f"const gview<{eb}> {nm} = {self.view(v, eb)};"]

    # ------------------------------------------------------------ op translation (one IR op -> ops.h calls)
    def rows(self, e) -> str:
        """a row origin of the IR's BM-row block, for this wave's MF rows"""
        return f"{self.expr(e)} + wrow"

    def cols(self, e) -> str:
        """a column origin of a (rows x BN) register tile, for the columns this wave holds (all of them)"""
        return self.expr(e)

    def op(self, n: ir.Op) -> List[str]:
        c = f"// {ir.format_op(n)}"
        name = n.name
        out = lambda *xs: [c] + list(xs)
        if name == "fill":
            return out(f"fill({n.outs[0].name}, {self.fexpr(n.attrs['value'])});")
        if name in UNARY:
            return out(f"{name}({n.outs[0].name}, {n.ins[0].name});")
        if name in BINARY:
            b = n.ins[1]
            bt = b.name if isinstance(b, ir.Tile) else self.fexpr(b)
            return out(f"{name}({n.outs[0].name}, {n.ins[0].name}, {bt});")
        if name in ("row_max", "row_sum"):
            init = f", &{n.ins[1].name}" if len(n.ins) > 1 else ""
            return out(f"{name}({n.outs[0].name}, {n.ins[0].name}{init});")
        if name in BCAST:
            return out(f"{name}({n.outs[0].name}, {n.ins[0].name}, {n.ins[1].name});")
        if name == "mask_cols":
            a = n.attrs
            return out(f"mask_cols({n.outs[0].name}, {self.cols(a['col0'])}, {self.expr(a['limit'])}, {self.fexpr(a['value'])});")
        if name == "mask_rows":
            a = n.attrs
            return out(f"mask_rows({n.outs[0].name}, {self.rows(a['row0'])}, {self.expr(a['limit'])}, {self.fexpr(a['value'])});")
        if name in ("mask_causal", "mask_window"):
            a = n.attrs
            return out(f"{name}({n.outs[0].name}, {self.rows(a['row0'])}, {self.cols(a['col0'])}, {self.expr(a['offset'])}, "
                       f"{self.fexpr(a['value'])});")
        if name == "fill_where":
            a = n.attrs
            return out(f"fill_where<{CMP[a['cmp']]}>({n.outs[0].name}, {n.ins[0].name}, {self.fexpr(a['rhs'])}, {self.fexpr(a['value'])});  // cmp {a['cmp']}")
        if name == "cast":
            d, s = n.outs[0], n.ins[0]
            if d is not self.g["p"] or s is not self.g["s"]:
                raise LoweringError(f"cdna attention: cast({d.name}, {s.name}) at {n.loc}: only the P = cast(S) feeding the value mma is supported")
            return out(f"cast<T_IN>({d.name}, {s.name});  // registers only: S^T's permuted key order is P's k order")
        if name == "store":
            src, v = n.ins
            if src.kind == "vec":
                return out(f"store_vec({self.viewname[id(v)]}, {src.name}, {self.rows(n.attrs['row'])});")
            if src is not self.g["o"]:
                raise LoweringError(f"cdna attention: store of {src.name}: only o and row vectors are stored")
            return out(f"store<T_OUT>({self.viewname[id(v)]}, {src.name}, {self.rows(n.attrs['row'])}, {self.expr(n.attrs['col'])});")
        raise LoweringError(f"cdna attention: op {name!r} is not supported (at {n.loc})")

    def ops(self, nodes) -> List[str]:
        out = []
        for n in nodes:
            out += self.op(n)
        return out

    # ------------------------------------------------------------ declarations
    def decls(self) -> List[str]:
        g = self.g
        mf, BN = self.cfg.mf, g["BN"]
        lines = []
        for t in self.k.tiles:
            if t is g["q"]:
                lines.append(f"rt_op<MF, D, MF> {t.name};  // {t.name}: {t.type_str()} -> this wave's {mf} query rows as the "
                             f"B operand of S^T = K Q^T, in registers for the whole loop")
            elif t is g["kt"]:
                lines.append(f"rt_op<BN, D, MF> {t.name}_op;  // {t.name}: {t.type_str()} -> LDS tile SK (x2 buffers); "
                             f"{t.name}_op: A operand of S^T (rows in key_perm order)")
            elif t is g["vt"]:
                lines.append(f"rt_op<D, BN, MF> {t.name}_op;  // {t.name}: {t.type_str()} -> LDS tile SV = V^T (x2 buffers); "
                             f"{t.name}_op: A operand of O^T")
            elif t is g["s"]:
                lines.append(f"rt_t<MF, BN, MF, true> {t.name};  // {t.name}: {t.type_str()} -> S^T accumulator "
                             f"({BN} keys x {mf} queries), keys in key_perm order")
            elif t is g["p"]:
                lines.append(f"rt_op<MF, BN, MF> {t.name};  // {t.name}: {t.type_str()} -> B operand of O^T += V^T P^T")
            elif t.kind == "reg":
                if t.dtype.name != "f32":
                    raise LoweringError(f"cdna attention: register tile {t.name} must be f32")
                perm = "true" if t.cols == BN and t is not g["o"] else "false"
                if t is not g["o"] and perm == "false":
                    raise LoweringError(f"cdna attention: register tile {t.name} {t.shape} has no CDNA layout here")
                lines.append(f"rt_t<MF, {t.cols}, MF, {perm}> {t.name};  // {t.name}: {t.type_str()} -> transposed "
                             f"accumulator ({t.cols} x {mf} queries)")
            elif t.kind == "vec":
                lines.append(f"rv_col<MF, MF> {t.name};  // {t.name}: {t.type_str()} -> one float per lane (its query)")
        return lines

    # ------------------------------------------------------------ main
    def lower(self) -> Lowered:
        g = self.g = self.match()
        Q, K, V, O, L = g["Q"], g["K"], g["V"], g["O"], g["L"]
        cfg = self.cfg = AttnConfig(self.arch, Q.dtype.name, O.dtype.name, g["D"], g["BM"], g["BN"],
                                    bool(self.k.constexprs.get("causal")))
        check_config(cfg, self.check_registers)
        sched = cfg.schedule()
        sch.check(sched)
        loop = g["loop"]
        kv = (g["lk"].ins[0], g["lv"].ins[0])
        # K / V views that move with the key block (a paged cache: each block's page of the pool) are
        # declared where the block's loads are: before the prologue, and for the next block in the loop
        moving = any(s.kind == "loop" for v in kv for x in v.index + v.stops if x is not None for s in ir.symbols(x))
        if self.expr(g["lk"].attrs["col"]) != "0" or self.expr(g["lv"].attrs["col"]) != "0" or self.expr(g["lq"].attrs["col"]) != "0":
            self._fail("tiles span the whole head dimension (col=0)")
        # views, named by role
        self.viewname = {}
        views = []
        for nm, v, eb in (("gQ", g["lq"].ins[0], 2), ("gK", kv[0], 2), ("gV", kv[1], 2)):
            self.viewname[id(v)] = nm
            if not (moving and v in kv):
                views += self.view_decl(nm, v, eb)
        ob = {"f32": 4, "bf16": 2, "f16": 2}[O.dtype.name]
        for n in g["post"]:
            if n.name == "store":
                v = n.ins[1]
                if id(v) in self.viewname:
                    continue
                nm = "gO" if v.param is O else "gL" if v.param is L else None
                if nm is None:
                    self._fail(f"store to {v.text()}")
                eb = ob if nm == "gO" else 4
                self.viewname[id(v)] = nm
                views += self.view_decl(nm, v, eb)
        if set(self.viewname.values()) != {"gQ", "gK", "gV", "gO", "gL"}:
            self._fail("expected stores to O[...] and L[...] after the loop")

        if self.split:
            m = loop.merge
            if m is None or m.out is not O or m.lse is not L:
                self._fail("a split launch needs the loop's merge=k.lse_merge(O, L)")
            if O.dtype.name != "f32":
                raise LoweringError(f"cdna attention: a split launch writes its parts into an f32 workspace as O, got {O.dtype}")
        start = self.expr(loop.start)
        # the prologue's K / V tile: the part's first, or the first block of a loop that starts later (a
        # sliding window's)
        first = "kb_begin" if self.split or start != "0" else "0"
        idx = loop.index.name
        row_k = lambda which: self._with({idx: which}, lambda: self.expr(g["lk"].attrs["row"]))
        row_v = lambda which: self._with({idx: which}, lambda: self.expr(g["lv"].attrs["row"]))
        m1, m2 = g["m1"], g["m2"]
        s, q, kt, vt, p, o = (g[x].name for x in ("s", "q", "kt", "vt", "p", "o"))
        steps = {
            ("lds_read", "K"): [f"load_op_perm<SK>({kt}_op, cur, 0, 0);  // K(t) -> registers: {cfg.BN // cfg.mf * cfg.D // layouts.Logical(cfg.mf).kslab} x ds_read_b128, rows in key_perm order"],
            ("lds_read", "V"): [f"load_op<SV>({vt}_op, cur + SK::bytes, 0, 0);  // V^T(t) -> registers (ds_read_b128)"],
            ("gload", "K"): [f"load_stage(k_stage, gK, {{row}}, 0, tid);  // {cfg.k_loads} x buffer_load_dwordx4 of K"],
            ("gload_lds", "K"): [f"load_lds_direct<SK, THREADS>({{buf}}, gK, {{row}}, 0, tid);  // {cfg.k_loads} x buffer_load_dwordx4 ... lds (gfx950)"],
            ("gload", "V"): [f"load_stage_t(v_stage, gV, {{rowv}}, 0, tid);  // {cfg.v_loads} x buffer_load_dwordx4 of V"],
            ("lds_write", "K"): ["store_stage<SK>({buf}, k_stage, tid);  // ds_write_b128, swizzled"],
            ("lds_write", "V"): [f"store_stage_t<SV>({{buf}} + SK::bytes, v_stage, tid);  // transposed: ds_write_b{16 * cfg.kr}"],
        }

        def declaring(lines, fn):  # fn() rendered where `lines` declared the values k.let named
            names = {ln.split()[2] for ln in lines if ln.startswith("const int ")}
            saved = self.declared
            self.declared = saved | {id(e) for e in self.k.lets if e.label in names}
            try:
                return fn()
            finally:
                self.declared = saved

        def render_steps(seq, phase, views=()):
            """The steps' lines; the loads' rows in terms of what `views` declared (the values of the
            block they fetch, which no other op of the body may take for its own block's)."""
            lines = []
            for st in seq:
                row = declaring(views, lambda: row_k(first) if phase == "prologue" else row_k("kb_next"))
                rowv = declaring(views, lambda: row_v(first) if phase == "prologue" else row_v("kb_next"))
                buf = "lds0" if phase == "prologue" else "nxt"
                if st.kind == "wait_vm":
                    what = f"the last {st.n} loads may stay in flight" if st.n else "every load issued so far has landed"
                    lines.append(f"arch::wait_vmcnt<{st.n}>();  // schedule.waitcnt_for: {what}")
                elif st.kind == "wait_lgkm":
                    lines.append(f"arch::wait_lgkmcnt<{st.n}>();  // LDS writes done before the barrier publishes them")
                elif st.kind == "prio":
                    lines.append(f"arch::setprio<{st.n}>();")
                elif st.kind == "mma" and st.operand == "S":
                    lines += [f"// {ir.format_op(m1)}", f"zero({s});",
                              f"mma_ABt<T_IN>({s}, {kt}_op, {q});  // S^T = K Q^T: {cfg.mfma_per_tile['S']} x {cfg.mfma.mnemonic(cfg.dtype)}"]
                elif st.kind == "mma" and st.operand == "O":
                    lines += [f"// {ir.format_op(m2)}",
                              f"mma_ABt<T_IN>({o}, {vt}_op, {p});  // O^T += V^T P^T: {cfg.mfma_per_tile['O']} x {cfg.mfma.mnemonic(cfg.dtype)}"]
                elif st.kind == "softmax":
                    lines += ["// ---- the IR ops between the two mmas (softmax), one by one"]
                    lines += self.ops(g["pre_ops"] + g["mid"])
                    if g["tail"]:
                        lines += ["// ---- hoisted from after the value mma (independent of it)"]
                        lines += self.ops(g["tail"])
                else:
                    lines += [x.format(row=row, rowv=rowv, buf=buf) for x in steps[(st.kind, st.operand)]]
            return lines

        pro_views, loop_views = [], []
        if moving:  # gK, gV of the block the loads fetch: the first one's, then in the loop the next one's
            def block_views(which, note):
                return self._with({idx: which}, lambda: self.with_loop_lets(loop, "", lambda: [
                    line for nm, v in (("gK", kv[0]), ("gV", kv[1])) for line in self.view_decl(nm, v, 2, note)],
                    TEMPLATE_NAMES | {idx}))
            pro_views = block_views(first, f" at {idx} = {first}")
            loop_views = block_views("kb_next", f" at {idx} = kb_next (the block this iteration fetches)")

        prologue = pro_views + render_steps(sched.prologue, "prologue", pro_views)
        clusters = [(c.name, c.kind, render_steps(c.steps, "loop", loop_views)) for c in sched.body]
        stop = self.expr(loop.stop)
        args = self.launch_args()
        arg_decls = self.arg_decls(
            args, lambda x: "float" if x is L or (x is O and O.dtype.name == "f32") else "u16" if x is O
            else "const int" if x in self.k.reads else "const u16")
        if self.split:  # after the IR's arguments: the launcher appends them (SPLIT_ARGS)
            arg_decls += [f"int {a}" for a in SPLIT_ARGS]
        dt = cfg.dtype
        name = self.entry_name(cfg)
        G = self.k.grid
        grid_text = [self.expr(x) for x in G]
        pre_ops = self.ops(g["pre"])
        post_ops = self.ops(g["post"])
        source = self.env.get_template("attention.hip.j2").render(
            cfg=cfg, name=name, ir_text=self.k.text(), schedule_text=sched.describe(), template_version=TEMPLATE_VERSION,
            arg_decls=arg_decls, grid=grid_text, views=views, decls=self.decls(), pre_ops=pre_ops, post_ops=post_ops,
            let_lines=self.declarations(TEMPLATE_NAMES),
            prologue=prologue, clusters=clusters, start=start, stop=stop, loop_index=self.sym_name(loop.index),
            q_row=self.rows(g["lq"].attrs["row"]), q_name=q, H=self.sym_name(Q.dims[2]), Hkv=self.sym_name(K.dims[2]),
            conflicts=cfg.conflicts(), swk=cfg.swizzle_k, swv=cfg.swizzle_v, mfma=cfg.mfma.mnemonic(dt),
            split=bool(self.split), merge_out=self.split, merge_out_t="float" if self.split == "f32" else "u16",
            merge_threads=MERGE_THREADS, o_name=O.name, l_name=L.name, loop_views=loop_views)
        split = None if not self.split else {"merge": name + "_merge", "out": self.split, "block": MERGE_THREADS}
        return self._lowered(cfg, source, TEMPLATE_VERSION, sched.name, [Q, K, V], [O, L], schedule_obj=sched,
                             split=split)

    def _lowered(self, cfg, source: str, template_version: str, schedule: str, inputs, outputs, **notes) -> Lowered:
        """The Lowered of an attention kernel: 512 threads, the IR grid flattened to x (the template remaps it),
        and the run-time contract (``requires``; check_attention*_args raise it as ValueErrors)."""
        G = self.k.grid
        flat = ir.Bin("*", ir.Bin("*", ir.as_expr(G[0]), ir.as_expr(G[1])), ir.as_expr(G[2]))
        Q, K = inputs[0], inputs[1]
        tiles = [p for p in inputs + outputs if p.rank == 4]
        requires = [f"{p.name}.stride{p.rank - 1} == 1" for p in inputs + outputs] + [
            f"head dims of {', '.join(p.name for p in tiles)} == D ({cfg.D})",
            f"row strides (stride1) of {', '.join(p.name for p in inputs if p.rank == 4)} multiples of 8 elements; "
            f"16-byte aligned",
            f"{Q.name}.shape2 % {K.name}.shape2 == 0 (GQA groups)",
            "each (batch, head) view spans < 2 GiB (32-bit buffer offsets)"]
        return Lowered(kernel=self.k, backend="cdna", arch=self.arch, entry=self.entry_name(cfg), source=source,
                       block=(THREADS, 1, 1), shared_bytes=0, args=self.launch_args(), headers=header_files(INCLUDE_DIR),
                       notes={"config": cfg, "schedule": schedule, "lds_bytes": cfg.lds_bytes,
                              "launch_grid": (flat, ir.Const(1), ir.Const(1)), "requires": requires,
                              "template_version": template_version, "conflicts": cfg.conflicts(), **notes})

    def _with(self, subst: Dict[str, str], fn):
        old = self.subst
        self.subst = {**old, **subst}
        try:
            return fn()
        finally:
            self.subst = old


def check_attention_args(q, k, v, o, lse, D: int) -> None:
    """The run-time contract of the lowered kernel (Lowered.notes['requires']), as ValueErrors."""
    for name, t in (("q", q), ("k", k), ("v", v), ("out", o)):
        if t.stride(-1) != 1:
            raise ValueError(f"cdna attention: {name} must have a contiguous head dimension")
        if t.shape[-1] != D:
            raise ValueError(f"cdna attention: {name} head dim {t.shape[-1]} != D={D}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(1) % 8 or t.data_ptr() % 16:
            raise ValueError(f"cdna attention: {name} rows must be 16-byte aligned (stride(1) % 8 == 0, aligned base)")
        if t.shape[1] * t.stride(1) * t.element_size() >= 2**31:
            raise ValueError(f"cdna attention: one head of {name} spans >= 2 GiB (buffer offsets are 32-bit)")
    if q.shape[2] % k.shape[2]:
        raise ValueError(f"cdna attention: {q.shape[2]} query heads are not a multiple of {k.shape[2]} KV heads")
    if lse.stride(-1) != 1:
        raise ValueError("cdna attention: lse must be contiguous in the sequence dimension")


# ============================================================================= backward: dQ
# ``attention_bwd_dq`` has the forward's loop (key blocks j of one query block) with three mmas:
#   mma(s, q, kt, tb=True)   -> S^T  = K  Q^T   (kt read from LDS tile SK in key_perm row order; q in registers)
#   mma(dp, do, vt, tb=True) -> dP^T = V  dO^T  (vt read the same way from an SK-shaped tile SVK; dO in registers)
#   mma(dq, dsp, kt)         -> dQ^T += K^T dS^T (K^T from a transposed LDS tile SKT; dS^T, the cast of the
#                               permuted ds, is the B operand straight from registers, as P is in the forward)
# s, dp, ds are permuted S^T-style tiles (one query per lane: sub_row / mul_row are per-lane), dq is held as
# dQ^T. Overlap is the kernel's Pipelined(stages=2): tile j+1's buffer loads are in flight in registers while
# tile j is computed from a single LDS buffer (K, V, K^T: 3 x BN x D x 2 bytes), two barriers per tile.

BWD_TEMPLATE_VERSION = "cdna-attention-bwd-dq-1"


def default_tiles_bwd(arch: str, D: int) -> Dict[str, int]:
    """BM = 8 waves x 16 query rows; BN the smallest key block with one transposed K vector per thread."""
    return {"BM": 128, "BN": 64 if D >= 128 else 128}


@dataclass(frozen=True)
class BwdDqConfig(_AttnTiles):
    @property
    def lds_bytes(self) -> int:
        return 3 * 2 * self.BN * self.D

    @property
    def _k(self) -> tuple:  # K and V tiles (the same shape and accesses)
        return ("perm", self.mf, self.BN, self.D, "stage", 0, THREADS)

    @property
    def _kt(self) -> tuple:
        return ("t", self.mf, self.D, self.BN, self.kr, THREADS)

    @property
    def swizzle_k(self) -> layouts.Swizzle:
        return tile_swizzle(self.arch, *self._k)

    @property
    def swizzle_kt(self) -> layouts.Swizzle:
        return tile_swizzle(self.arch, *self._kt)

    def conflicts(self) -> Dict[str, int]:
        """Extra LDS cycles per access family (worst instruction of the whole tile) under the bank model."""
        k, t = tile_conflicts(self.arch, *self._k), tile_conflicts(self.arch, *self._kt)
        return {**{"K_" + a: b for a, b in k.items()}, **{"KT_" + a: b for a, b in t.items()}}

    @property
    def mfma_per_tile(self) -> Dict[str, int]:
        s = self._mfmas(self.BN, self.D)
        return {"S": s, "dP": s, "dQ": self._mfmas(self.D, self.BN)}


def check_bwd_config(c: BwdDqConfig, registers: bool = True) -> None:
    if c.arch not in layouts.ARCHS:
        raise LoweringError(f"cdna attention_bwd_dq: arch {c.arch!r}; supported {layouts.ARCHS}")
    if c.BM != 128:
        raise LoweringError(f"cdna attention_bwd_dq: BM must be 8 waves x 16 query rows (128), got {c.BM}")
    if c.D not in (64, 128):
        raise LoweringError(f"cdna attention_bwd_dq: D must be 64 or 128, got {c.D}")
    if c.BN % 32 or c.BN * c.D % (8 * THREADS) or c.kr not in (2, 4, 8):
        raise LoweringError(f"cdna attention_bwd_dq: BN must be a multiple of 32 with BN*D = 8*512*kr, kr in 2, 4, 8; "
                            f"got BN={c.BN}, D={c.D}")
    if c.lds_bytes > LDS_LIMIT[c.arch]:
        raise LoweringError(f"cdna attention_bwd_dq: LDS {c.lds_bytes} bytes > {LDS_LIMIT[c.arch]}")
    if registers and (c.BN, c.D) not in ((64, 128), (128, 64)):
        raise LoweringError(f"cdna attention_bwd_dq: BN={c.BN}, D={c.D} is not a measured spill-free tile; use "
                            f"{default_tiles_bwd(c.arch, c.D)}")


_CXX_KEYWORDS = ("do", "for", "if", "else", "while", "int", "float", "char", "long", "short", "double", "auto", "case",
                 "const", "new", "delete", "default", "this", "switch", "return", "break", "continue", "goto", "static")


def _cxx_names(lines: List[str], names=("do",)) -> List[str]:
    """IR tile names that are C++ keywords (``do``) get a trailing underscore, in the code part of each line."""
    import re
    names = [n for n in names if n in _CXX_KEYWORDS]
    if not names:
        return list(lines)
    pat = re.compile(r"\b(" + "|".join(names) + r")\b")
    out = []
    for ln in lines:
        if ln.lstrip().startswith("//"):
            out.append(ln)
            continue
        code, sep, com = ln.partition("  //")
        out.append(pat.sub(lambda m: m.group(1) + "_", code) + sep + com)
    return out


# names attention_bwd_dq.hip.j2 and attention_bwd_dkdv.hip.j2 declare in the kernel's scope
BWD_TEMPLATE_NAMES = frozenset("smem tid w wrow wkey grid0 grid1 grid2 wg pid0 pid1 pid2 lds_k lds_v lds_kt lds_q lds_do "
                               "lds_qt lds_dot k_stage v_stage kt_stage kb_begin n_kv kb_next half htid stage q_first nq1 "
                               "n_t t t_next gQ gdO gK gV gL gDelta gdQ gdK gdV gQ_next gdO_next".split())


def _tensor_params(lowering, n: int, ranks: List[int], expect: str) -> List[ir.Param]:
    """The kernel's n tensor parameters of these ranks, after which only tensors the programs read their
    sizes from may follow (k.read: packed sequences' table of blocks)."""
    k = lowering.k
    core, extra = k.params[:n], k.params[n:]
    if [p.rank for p in core] != ranks or len(k.scalars) != 1 or any(p not in k.reads for p in extra):
        lowering._fail(f"expected {expect} and one float scale (then only int32 tensors the programs read with k.read)")
    return core


class CDNAAttentionBwdDqLowering(CDNAAttentionLowering):
    """IR -> HIP for ``attention_bwd_dq``; the non-mma IR ops go through the forward's ``op`` one by one.
    Packed sequences (a row of the table of query blocks, read with k.read) are declared once a program,
    after its program ids."""

    def ops(self, nodes) -> List[str]:
        return _cxx_names(super().ops(nodes))

    def match(self) -> Dict:
        k = self.k
        Q, K, V, dO, L, Delta, dQ = _tensor_params(self, 7, [4, 4, 4, 4, 3, 3, 4],
                                                   "Q, K, V, dO, dQ (B, S, H, D), L, Delta (B, H, S)")
        if Q.dtype.name not in ("bf16", "f16") or any(x.dtype != Q.dtype for x in (K, V, dO)):
            raise LoweringError("cdna attention_bwd_dq: Q, K, V, dO must share bf16 or f16")
        if dQ.dtype.name not in ("bf16", "f16", "f32") or L.dtype.name != "f32" or Delta.dtype.name != "f32":
            raise LoweringError("cdna attention_bwd_dq: dQ must be bf16/f16/f32, L and Delta f32")
        loops = [n for n in k.body if isinstance(n, ir.Loop)]
        if len(loops) != 1 or not loops[0].pipelined:
            self._fail("expected exactly one k.pipeline loop at the top level")
        loop = loops[0]
        pre = k.body[:k.body.index(loop)]
        post = k.body[k.body.index(loop) + 1:]
        if len(pre) < 3 or [n.name for n in pre[:3]] != ["load_async", "load_async", "wait"] or \
                set(pre[2].attrs["tokens"]) != {pre[0].attrs["token"], pre[1].attrs["token"]}:
            self._fail("the kernel must start with wait(load_async(q, Q[...]), load_async(do, dO[...]))")
        lq, ldo = pre[0], pre[1]
        if lq.ins[0].param is not Q or ldo.ins[0].param is not dO:
            self._fail("q must come from Q and do from dO")
        q, do = lq.outs[0], ldo.outs[0]
        body = list(loop.body)
        if any(isinstance(n, ir.Loop) for n in body) or [n.name for n in body[:3]] != ["load_async", "load_async", "wait"]:
            self._fail("the loop body must start with load_async(kt), load_async(vt), wait(both)")
        lk, lv, w = body[:3]
        if set(w.attrs["tokens"]) != {lk.attrs["token"], lv.attrs["token"]} or lk.ins[0].param is not K or lv.ins[0].param is not V:
            self._fail("the loop loads kt from K and vt from V and waits for both")
        kt, vt = lk.outs[0], lv.outs[0]
        rest = body[3:]
        mm = [n for n in rest if n.name == "mma"]
        if len(mm) != 3:
            self._fail("the loop body must have three mmas (scores, dP, dQ)")
        m1, m2, m3 = mm
        if m1.ins != [q, kt] or not m1.attrs.get("tb") or m1.attrs.get("ta") or m1.attrs.get("accumulate", True):
            self._fail("the first mma must be mma(s, q, kt, tb=True, accumulate=False)")
        if m2.ins != [do, vt] or not m2.attrs.get("tb") or m2.attrs.get("ta") or m2.attrs.get("accumulate", True):
            self._fail("the second mma must be mma(dp, do, vt, tb=True, accumulate=False)")
        if m3.ins[1] is not kt or m3.attrs.get("ta") or m3.attrs.get("tb") or not m3.attrs.get("accumulate", True):
            self._fail("the third mma must be mma(dq, dsp, kt) accumulating")
        if rest[-1] is not m3:
            self._fail("the dq mma must end the loop body")
        s, dp, dsp, dq = m1.outs[0], m2.outs[0], m3.ins[0], m3.outs[0]
        if any(n.name in ("load_async", "wait", "load", "store") for n in rest):
            self._fail("between the loads and the mmas only register ops may appear")
        if any(n.name in ("load_async", "wait", "mma", "load") for n in post) or \
                any(n.name in ("load_async", "wait", "mma", "store") for n in pre[3:]):
            self._fail("before/after the loop only register ops, row-vector loads and stores may appear")
        for n in pre[3:]:
            if n.name == "load" and (n.outs[0].kind != "vec" or n.ins[0].param not in (L, Delta)):
                self._fail("before the loop only the row vectors L[...] and Delta[...] are loaded")
        D = k.constexprs.get("D")
        BM, BN = q.rows, kt.rows
        for t, shp in ((q, (BM, D)), (do, (BM, D)), (kt, (BN, D)), (vt, (BN, D)), (s, (BM, BN)), (dp, (BM, BN)),
                       (dsp, (BM, BN)), (dq, (BM, D))):
            if t.shape != shp:
                self._fail(f"tile {t.name} is {t.shape}, expected {shp}")
        casts = [n for n in rest if n.name == "cast"]
        for n in casts:  # cast(x16, x32): register-only when x32 is a permuted (BM x BN) tile
            if n.ins[0].kind != "reg" or n.ins[0].shape != (BM, BN) or n.outs[0].shape != (BM, BN):
                self._fail(f"cast({n.outs[0].name}, {n.ins[0].name}) has no register-only CDNA form")
        if not any(n.outs[0] is dsp for n in casts):
            self._fail("dsp (the dq mma's A operand) must be a cast of a register tile")
        for t in k.tiles:
            if t.kind == "reg" and t.rows != BM or t.kind == "vec" and (t.shape[0] != BM or t.axis != "row"):
                self._fail(f"register tile {t.name} must have the query block's {BM} rows")
            if t.kind == "shared" and t not in (q, do, kt, vt):
                self._fail(f"unexpected shared tile {t.name}")
        return dict(Q=Q, K=K, V=V, dO=dO, L=L, Delta=Delta, dQ=dQ, q=q, do=do, kt=kt, vt=vt, s=s, dp=dp, dsp=dsp, dq=dq,
                    loop=loop, lk=lk, lv=lv, lq=lq, ldo=ldo, m1=m1, m2=m2, m3=m3, pre=pre[3:], rest=rest, post=post,
                    D=D, BM=BM, BN=BN, p=None, o=dq)

    def op(self, n: ir.Op) -> List[str]:
        c = f"// {ir.format_op(n)}"
        g = self.g
        if n.name == "cast":
            d, s = n.outs[0], n.ins[0]
            return [c, f"cast<T_IN>({d.name}, {s.name});  // registers only: the permuted S^T-style key order is the B operand's k order"]
        if n.name == "load":
            return [c, f"load_vec({n.outs[0].name}, {self.viewname[id(n.ins[0])]}, {self.rows(n.attrs['row'])});"]
        if n.name == "store":
            src, v = n.ins
            if src is not g["dq"]:
                raise LoweringError(f"cdna attention_bwd_dq: store of {src.name}: only dq is stored")
            return [c, f"store<T_OUT>({self.viewname[id(v)]}, {src.name}, {self.rows(n.attrs['row'])}, {self.expr(n.attrs['col'])});"]
        if n.name == "mma":
            cfg = self.cfg
            mn = cfg.mfma.mnemonic(cfg.dtype)
            if n is g["m1"]:
                return [c, "arch::sched_barrier<0>();  // the operand reads stay here: no hoisting past the softmax (registers)", f"load_op_perm<SK>({g['kt'].name}_op, lds_k, 0, 0);  // K(j) -> A operand, rows in key_perm order",
                        "arch::wait_lgkmcnt<0>();", f"zero({n.outs[0].name});",
                        f"mma_ABt<T_IN>({n.outs[0].name}, {g['kt'].name}_op, {g['q'].name});  // S^T = K Q^T: {cfg.mfma_per_tile['S']} x {mn}"]
            if n is g["m2"]:
                return [c, "arch::sched_barrier<0>();  // the operand reads stay here: no hoisting past the softmax (registers)", f"load_op_perm<SK>({g['vt'].name}_op, lds_v, 0, 0);  // V(j) -> A operand, rows in key_perm order",
                        "arch::wait_lgkmcnt<0>();", f"zero({n.outs[0].name});",
                        f"mma_ABt<T_IN>({n.outs[0].name}, {g['vt'].name}_op, {g['do'].name});  // dP^T = V dO^T: {cfg.mfma_per_tile['dP']} x {mn}"]
            if n is g["m3"]:
                return [c, "arch::sched_barrier<0>();  // the operand reads stay here: no hoisting past the softmax (registers)", f"load_op<SKT>({g['kt'].name}_t_op, lds_kt, 0, 0);  // K^T(j) -> A operand (ds_read_b128)",
                        "arch::wait_lgkmcnt<0>();",
                        f"mma_ABt<T_IN>({n.outs[0].name}, {g['kt'].name}_t_op, {n.ins[0].name});  // dQ^T += K^T dS^T: {cfg.mfma_per_tile['dQ']} x {mn}"]
        return super().op(n)

    def decls(self) -> List[str]:
        g = self.g
        mf, BN = self.cfg.mf, g["BN"]
        lines = []
        casts = {id(n.outs[0]) for n in g["rest"] if n.name == "cast"}
        for t in self.k.tiles:
            if t is g["q"] or t is g["do"]:
                lines.append(f"rt_op<MF, D, MF> {t.name};  // {t.name}: {t.type_str()} -> this wave's {mf} query rows, B operand, "
                             f"in registers for the whole loop")
            elif t is g["kt"]:
                lines.append(f"rt_op<BN, D, MF> {t.name}_op;  // {t.name}: {t.type_str()} -> LDS tiles SK and SKT = K^T; "
                             f"{t.name}_op: A operand of S^T (key_perm rows)")
                lines.append(f"rt_op<D, BN, MF> {t.name}_t_op;  // A operand of dQ^T += K^T dS^T")
            elif t is g["vt"]:
                lines.append(f"rt_op<BN, D, MF> {t.name}_op;  // {t.name}: {t.type_str()} -> LDS tile SVK; A operand of dP^T (key_perm rows)")
            elif t.kind == "reg" and id(t) in casts:
                if t.dtype.name == "f32":
                    raise LoweringError(f"cdna attention_bwd_dq: cast target {t.name} must be 16-bit")
                lines.append(f"rt_op<MF, BN, MF> {t.name};  // {t.name}: {t.type_str()} -> B operand (k = keys)")
            elif t.kind == "reg":
                if t.dtype.name != "f32":
                    raise LoweringError(f"cdna attention_bwd_dq: register tile {t.name} must be f32")
                if t is g["dq"]:
                    lines.append(f"rt_t<MF, D, MF, false> {t.name};  // {t.name}: {t.type_str()} -> dQ^T accumulator (D x {mf} queries)")
                elif t.cols == BN:
                    lines.append(f"rt_t<MF, BN, MF, true> {t.name};  // {t.name}: {t.type_str()} -> transposed accumulator "
                                 f"({BN} keys x {mf} queries), keys in key_perm order")
                else:
                    raise LoweringError(f"cdna attention_bwd_dq: register tile {t.name} {t.shape} has no CDNA layout here")
            elif t.kind == "vec":
                lines.append(f"rv_col<MF, MF> {t.name};  // {t.name}: {t.type_str()} -> one float per lane (its query)")
        return lines

    def lower(self) -> Lowered:
        g = self.g = self.match()
        Q, K, V, dO, L, Delta, dQ = (g[x] for x in ("Q", "K", "V", "dO", "L", "Delta", "dQ"))
        cfg = self.cfg = BwdDqConfig(self.arch, Q.dtype.name, dQ.dtype.name, g["D"], g["BM"], g["BN"],
                                     bool(self.k.constexprs.get("causal")))
        check_bwd_config(cfg, self.check_registers)
        loop = g["loop"]
        for v in (g["lk"].ins[0], g["lv"].ins[0]):
            if any(s.kind == "loop" for x in v.index if x is not None for s in ir.symbols(x)):
                self._fail("the K/V views may not depend on the loop index")
        for n in (g["lk"], g["lv"], g["lq"], g["ldo"]):
            if self.expr(n.attrs["col"]) != "0":
                self._fail("tiles span the whole head dimension (col=0)")
        self.viewname = {}
        views = []
        for nm, v, eb in (("gQ", g["lq"].ins[0], 2), ("gdO", g["ldo"].ins[0], 2), ("gK", g["lk"].ins[0], 2), ("gV", g["lv"].ins[0], 2)):
            self.viewname[id(v)] = nm
            views += self.view_decl(nm, v, eb)
        for n in g["pre"]:
            if n.name == "load":
                v = n.ins[0]
                nm = "gL" if v.param is L else "gDelta"
                self.viewname[id(v)] = nm
                views += self.view_decl(nm, v, 4)
        ob = {"f32": 4, "bf16": 2, "f16": 2}[dQ.dtype.name]
        for n in g["post"]:
            if n.name == "store":
                v = n.ins[1]
                if v.param is not dQ:
                    self._fail(f"store to {v.text()}")
                self.viewname[id(v)] = "gdQ"
                views += self.view_decl("gdQ", v, ob)
        if "gdQ" not in self.viewname.values():
            self._fail("expected a store to dQ[...] after the loop")
        idx = loop.index.name
        row_k = lambda which: self._with({idx: which}, lambda: self.expr(g["lk"].attrs["row"]))
        row_v = lambda which: self._with({idx: which}, lambda: self.expr(g["lv"].attrs["row"]))
        args = self.launch_args()
        arg_decls = self.arg_decls(
            args, lambda x: "const float" if x is L or x is Delta else "float" if (x is dQ and dQ.dtype.name == "f32")
            else "u16" if x is dQ else "const int" if x in self.k.reads else "const u16")
        dt = cfg.dtype
        name = self.entry_name(cfg)
        G = self.k.grid
        start = self.expr(loop.start)
        first = "kb_begin" if start != "0" else "0"  # a sliding window's first key block, declared before the prologue
        source = self.env.get_template("attention_bwd_dq.hip.j2").render(
            cfg=cfg, name=name, ir_text=self.k.text(), template_version=BWD_TEMPLATE_VERSION, arg_decls=arg_decls,
            let_lines=self.declarations(BWD_TEMPLATE_NAMES),
            grid=[self.expr(x) for x in G], views=views, decls=_cxx_names(self.decls()), pre_ops=self.ops(g["pre"]),
            body_ops=self.ops(g["rest"]), post_ops=self.ops(g["post"]), start=start, stop=self.expr(loop.stop),
            loop_index=self.sym_name(loop.index), row_k0=row_k(first), row_v0=row_v(first), row_kn=row_k("kb_next"),
            row_vn=row_v("kb_next"), q_row=self.rows(g["lq"].attrs["row"]), do_row=self.rows(g["ldo"].attrs["row"]),
            q_name=_cxx_names([g["q"].name])[0], do_name=_cxx_names([g["do"].name])[0], H=self.sym_name(Q.dims[2]), Hkv=self.sym_name(K.dims[2]),
            conflicts=cfg.conflicts(), swk=cfg.swizzle_k, swkt=cfg.swizzle_kt, mfma=cfg.mfma.mnemonic(dt))
        return self._lowered(cfg, source, BWD_TEMPLATE_VERSION, "pipelined2-register-prefetch", [Q, K, V, dO, L, Delta], [dQ])


def check_attention_bwd_dq_args(q, k, v, do, lse, delta, dq, D: int) -> None:
    """The run-time contract of the lowered attention_bwd_dq (Lowered.notes['requires']), as ValueErrors."""
    check_attention_args(q, k, v, dq, lse, D)
    if do.stride(-1) != 1 or do.shape[-1] != D or do.stride(1) % 8 or do.data_ptr() % 16:
        raise ValueError("cdna attention_bwd_dq: do must have a contiguous head dimension D and 16-byte aligned rows")
    if do.shape[1] * do.stride(1) * do.element_size() >= 2**31:
        raise ValueError("cdna attention_bwd_dq: one head of do spans >= 2 GiB (buffer offsets are 32-bit)")
    if delta.stride(-1) != 1:
        raise ValueError("cdna attention_bwd_dq: delta must be contiguous in the sequence dimension")


# ============================================================================= backward: dK, dV
# ``attention_bwd_dkdv``: one key block (BN keys) of one KV head per work-group; it loops over the query heads
# of its GQA group and, inside, over the query blocks that can see it (causal: from the kernel's `first`).
# The two loops are flattened into one (t -> group member t / nq, query block first + t % nq) so that the
# register prefetch of Pipelined(stages=2) runs across the head boundary too.
# The 8 waves split the KEYS: wave w owns keys [w*MF, w*MF + MF) of the block (MF = BN / 8 = 16), keeps
# them as MFMA operands in registers (K and V read once, straight from global) and accumulates its rows
# of dK and dV; every wave reads the whole query block from LDS. The contraction of dV += P^T dO and
# dK += dS^T Q runs over the queries, so P^T and dS^T must have the queries in the MFMA's k position:
#   mma(s, q, kt, tb=True)   -> S  = Q K_w^T  (Q read from LDS in key_perm row order: A operand; K_w: B)
#                               s is an rt_rp: queries in the accumulator's registers (permuted), one key
#                               per lane, so cast(p, s) is register-only and gives P^T as an operand with
#                               k = queries; L and Delta are lane-spread vectors (rv_lane: one value per
#                               lane; sub_row fetches each register's value with a shuffle)
#   mma(dv, p, do, ta=True)  -> dV^T += dO^T P   (dO^T from a transposed LDS tile; P^T the B operand)
#   mma(dp, do, vt, tb=True) -> dP = dO V_w^T   (dO in key_perm row order, like Q)
#   mma(dk, dsp, q, ta=True) -> dK^T += Q^T dS   (Q^T from a transposed LDS tile)
# dk, dv are held as dK^T, dV^T (rt_t<MF, D, MF, false>): stores are 8/16-byte row vectors of dK, dV.
# LDS (one buffer): Q and dO as loaded (BM x D) and transposed (D x BM), all four written from ONE
# transposing stage per tensor (store_stage_t and store_stage_t_rows); 4 x BM x D x 2 bytes.

BWD_DKDV_TEMPLATE_VERSION = "cdna-attention-bwd-dkdv-1"


def default_tiles_dkdv(arch: str, D: int) -> Dict[str, int]:
    """BN = 8 waves x 16 keys; BM the query block whose Q (and dO) tile is one transposed 2-row vector pair per
    thread of one wave half (BM x D = 4096): 32 at D = 128, 64 at D = 64. Registers: K, V, dK, dV of the
    wave's keys stay resident (3 D / 4 per lane: 96 at D = 128), which leaves room for only this much of S,
    dP and the staged loads at 2 waves per SIMD (measured: 174-244 VGPRs, no spills). LDS: 32 KiB."""
    return {"BM": 32 if D >= 128 else 64, "BN": 128}


STAGE_THREADS = THREADS // 2  # the Q stage is loaded by waves 0-3, the dO stage by waves 4-7


def q_conflicts(arch: str, mf: int, BM: int, D: int, kr: int, sw: layouts.Swizzle) -> Dict[str, int]:
    """The BM x D Q / dO tiles: key_perm operand reads (as K's in the forward) and the stage-rows writes."""
    return layouts.access_conflicts(arch, perm_tile_accesses(mf, BM, D, "rows", kr, STAGE_THREADS), sw)


def qt_conflicts(arch: str, mf: int, BM: int, D: int, kr: int, sw: layouts.Swizzle) -> Dict[str, int]:
    """The D x BM Q^T / dO^T tiles: operand reads (rows = d) and store_stage_t's transposed writes."""
    return layouts.access_conflicts(arch, t_tile_accesses(mf, D, BM, kr, STAGE_THREADS), sw)


@dataclass(frozen=True)
class BwdDkdvConfig(_AttnTiles):
    """mf: keys per wave (BN / 8); kr: rows per thread of the transposing Q / dO stage."""

    @property
    def mf(self) -> int:
        return self.BN // WAVES

    @property
    def kr(self) -> int:
        return self.BM * self.D // (8 * STAGE_THREADS)

    @property
    def loads(self) -> int:  # buffer_load_dwordx4 per thread per query tile (Q in waves 0-3, dO in waves 4-7)
        return self.kr

    @property
    def lds_bytes(self) -> int:
        return 4 * 2 * self.BM * self.D

    @property
    def _q(self) -> tuple:  # Q and dO tiles
        return ("perm", self.mf, self.BM, self.D, "rows", self.kr, STAGE_THREADS)

    @property
    def _qt(self) -> tuple:
        return ("t", self.mf, self.D, self.BM, self.kr, STAGE_THREADS)

    @property
    def swizzle_q(self) -> layouts.Swizzle:
        return tile_swizzle(self.arch, *self._q)

    @property
    def swizzle_qt(self) -> layouts.Swizzle:
        return tile_swizzle(self.arch, *self._qt)

    def conflicts(self) -> Dict[str, int]:
        """Extra LDS cycles per access family (worst instruction of the whole tile) under the bank model."""
        q, t = tile_conflicts(self.arch, *self._q), tile_conflicts(self.arch, *self._qt)
        return {**{"Q_" + a: b for a, b in q.items()}, **{"QT_" + a: b for a, b in t.items()}}

    @property
    def mfma_per_tile(self) -> Dict[str, int]:
        """hardware MFMAs per wave per query tile"""
        s, t = self._mfmas(self.BM, self.D), self._mfmas(self.D, self.BM)
        return {"S": s, "dP": s, "dV": t, "dK": t}

    def chunk(self, rows: int) -> Tuple[int, int]:
        """an A operand of `rows` rows streams from LDS in (up to 64 rows x one k-slab) chunks"""
        return min(rows, 64), layouts.Logical(self.mf).kslab

    def lgkm_chunk(self, rows: int) -> int:
        """lgkmcnt that retires chunk c while chunk c+1's reads (one ds_read_b128 per MF rows) stay in flight"""
        reads = self.chunk(rows)[0] // self.mf
        order = [f"c{c}.{r}" for c in (0, 1) for r in range(reads)]
        return sch.waitcnt_for(order, order[:reads])

    def load_order(self, half: int) -> List[str]:
        """the buffer loads in flight at the top of an iteration in wave half 0 (Q) / 1 (dO), oldest first"""
        return [f"{('Q', 'dO')[half]}{i}" for i in range(self.loads)]

    def waits(self) -> Dict[str, int]:
        """vmcnt before writing each tensor's tiles to LDS (schedule.waitcnt_for over load_order)"""
        return {x: sch.waitcnt_for(self.load_order(h), self.load_order(h)) for h, x in enumerate(("Q", "dO"))}


def check_dkdv_config(c: BwdDkdvConfig, registers: bool = True) -> None:
    what = "cdna attention_bwd_dkdv"
    if c.arch not in layouts.ARCHS:
        raise LoweringError(f"{what}: arch {c.arch!r}; supported {layouts.ARCHS}")
    if c.BN != 128:
        raise LoweringError(f"{what}: BN must be 8 waves x 16 keys (128), got {c.BN}")
    if c.D not in (64, 128):
        raise LoweringError(f"{what}: D must be 64 or 128, got {c.D}")
    if c.BM % 32 or c.BM * c.D % (8 * STAGE_THREADS) or c.kr not in (2, 4):
        raise LoweringError(f"{what}: BM must be a multiple of 32 with BM*D = 8*256*kr, kr in 2, 4 (one transposed "
                            f"vector group per thread of a wave half); got BM={c.BM}, D={c.D}")
    if c.lds_bytes > LDS_LIMIT[c.arch]:
        raise LoweringError(f"{what}: LDS: Q, dO and their transposes ({c.BM}x{c.D}) need {c.lds_bytes} bytes; "
                            f"{c.arch} has {LDS_LIMIT[c.arch]} (use {default_tiles_dkdv(c.arch, c.D)})")
    if registers and (c.BM, c.D) not in ((32, 128), (64, 64)):
        raise LoweringError(f"{what}: BM={c.BM}, D={c.D} is not a measured spill-free tile (registers); use "
                            f"{default_tiles_dkdv(c.arch, c.D)}")


class CDNAAttentionBwdDkdvLowering(CDNAAttentionBwdDqLowering):
    """IR -> HIP for ``attention_bwd_dkdv``; the non-mma IR ops go through the forward's ``op`` one by one,
    with this kernel's wave split (rows: all BM queries; columns: the wave's MF keys)."""

    def rows(self, e) -> str:
        return self.expr(e)

    def cols(self, e) -> str:
        return f"{self.expr(e)} + wkey"

    def match(self) -> Dict:
        k = self.k
        Q, K, V, dO, L, Delta, dK, dV = _tensor_params(
            self, 8, [4, 4, 4, 4, 3, 3, 4, 4], "Q, K, V, dO (B, S, H, D), L, Delta (B, H, S), dK, dV (B, S, Hkv, D)")
        if Q.dtype.name not in ("bf16", "f16") or any(x.dtype != Q.dtype for x in (K, V, dO)):
            raise LoweringError("cdna attention_bwd_dkdv: Q, K, V, dO must share bf16 or f16")
        if any(x.dtype.name not in ("bf16", "f16", "f32") for x in (dK, dV)) or dK.dtype != dV.dtype or \
                L.dtype.name != "f32" or Delta.dtype.name != "f32":
            raise LoweringError("cdna attention_bwd_dkdv: dK, dV must both be bf16, f16 or f32; L and Delta f32")
        loops = [n for n in k.body if isinstance(n, ir.Loop)]
        if len(loops) != 1 or loops[0].pipelined or len(loops[0].body) != 1 or not isinstance(loops[0].body[0], ir.Loop) \
                or not loops[0].body[0].pipelined or self.expr(loops[0].start) != "0":
            self._fail("expected one k.range loop (the query heads of the group) around one k.pipeline loop")
        gloop, loop = loops[0], loops[0].body[0]
        pre, post = k.body[:k.body.index(gloop)], k.body[k.body.index(gloop) + 1:]
        if len(pre) < 3 or [n.name for n in pre[:3]] != ["load_async", "load_async", "wait"] or \
                set(pre[2].attrs["tokens"]) != {pre[0].attrs["token"], pre[1].attrs["token"]}:
            self._fail("the kernel must start with wait(load_async(kt, K[...]), load_async(vt, V[...]))")
        lk, lv = pre[0], pre[1]
        if lk.ins[0].param is not K or lv.ins[0].param is not V:
            self._fail("kt must come from K and vt from V")
        kt, vt = lk.outs[0], lv.outs[0]
        body = list(loop.body)
        if any(isinstance(n, ir.Loop) for n in body) or [n.name for n in body[:3]] != ["load_async", "load_async", "wait"]:
            self._fail("the query loop body must start with load_async(q), load_async(do), wait(both)")
        lq, ldo, w = body[:3]
        if set(w.attrs["tokens"]) != {lq.attrs["token"], ldo.attrs["token"]} or lq.ins[0].param is not Q or \
                ldo.ins[0].param is not dO:
            self._fail("the query loop loads q from Q and do from dO and waits for both")
        q, do = lq.outs[0], ldo.outs[0]
        rest = body[3:]
        nload = next((i for i, n in enumerate(rest) if n.name != "load"), len(rest))
        vloads, rest = rest[:nload], rest[nload:]
        for n in vloads:
            if n.outs[0].kind != "vec" or n.ins[0].param not in (L, Delta):
                self._fail("the query loop body loads only the row vectors L[...] and Delta[...], right after its wait")
        if any(n.name in ("load_async", "wait", "load", "store") for n in rest):
            self._fail("between the loads and the mmas only register ops may appear")
        mm = [n for n in rest if n.name == "mma"]
        if len(mm) != 4:
            self._fail("the query loop body must have four mmas (S, dV, dP, dK)")
        role = {}
        for n in mm:
            b, at = n.ins[1], n.attrs
            if n.ins == [q, kt] and at.get("tb") and not at.get("ta") and not at.get("accumulate", True):
                role["S"] = n
            elif n.ins == [do, vt] and at.get("tb") and not at.get("ta") and not at.get("accumulate", True):
                role["dP"] = n
            elif b is do and at.get("ta") and not at.get("tb") and at.get("accumulate", True):
                role["dV"] = n
            elif b is q and at.get("ta") and not at.get("tb") and at.get("accumulate", True):
                role["dK"] = n
        if set(role) != {"S", "dP", "dV", "dK"}:
            self._fail("the mmas must be mma(s, q, kt, tb=True, accumulate=False), mma(dv, p, do, ta=True), "
                       "mma(dp, do, vt, tb=True, accumulate=False) and mma(dk, dsp, q, ta=True)")
        s, dp = role["S"].outs[0], role["dP"].outs[0]
        p, dv, dsp, dk = role["dV"].ins[0], role["dV"].outs[0], role["dK"].ins[0], role["dK"].outs[0]
        if any(n.name in ("load_async", "wait", "mma", "load") for n in post) or \
                any(n.name in ("load_async", "wait", "mma", "load", "store") for n in pre[3:]):
            self._fail("before/after the loops only register ops and stores may appear")
        D = k.constexprs.get("D")
        BM, BN = q.rows, kt.rows
        for t, shp in ((q, (BM, D)), (do, (BM, D)), (kt, (BN, D)), (vt, (BN, D)), (s, (BM, BN)), (dp, (BM, BN)),
                       (p, (BM, BN)), (dsp, (BM, BN)), (dk, (BN, D)), (dv, (BN, D))):
            if t.shape != shp:
                self._fail(f"tile {t.name} is {t.shape}, expected {shp}")
        casts = [n for n in rest if n.name == "cast"]
        for n in casts:
            if n.ins[0].kind != "reg" or n.ins[0].shape != (BM, BN) or n.outs[0].shape != (BM, BN):
                self._fail(f"cast({n.outs[0].name}, {n.ins[0].name}) has no register-only CDNA form")
        if {id(n.outs[0]) for n in casts} != {id(p), id(dsp)}:
            self._fail("p and dsp (the dV and dK mmas' operands) must be casts of register tiles")
        for t in k.tiles:
            if t.kind == "reg" and t not in (dk, dv) and t.shape != (BM, BN):
                self._fail(f"register tile {t.name} must be a (query block x key block) tile")
            if t.kind == "vec" and (t.shape[0] != BM or t.axis != "row"):
                self._fail(f"vector {t.name} must have one value per query of the block")
            if t.kind == "shared" and t not in (q, do, kt, vt):
                self._fail(f"unexpected shared tile {t.name}")
        return dict(Q=Q, K=K, V=V, dO=dO, L=L, Delta=Delta, dK=dK, dV=dV, q=q, do=do, kt=kt, vt=vt, s=s, dp=dp, p=p,
                    dsp=dsp, dk=dk, dv=dv, gloop=gloop, loop=loop, lk=lk, lv=lv, lq=lq, ldo=ldo, vloads=vloads,
                    role=role, pre=pre[3:], rest=rest, post=post, D=D, BM=BM, BN=BN, o=None)

    # ------------------------------------------------------------ op translation
    def op(self, n: ir.Op) -> List[str]:
        c = f"// {ir.format_op(n)}"
        g = self.g
        if n.name == "cast":
            return [c, f"cast<T_IN>({n.outs[0].name}, {n.ins[0].name});  // registers only: the key_perm query order of "
                       f"the accumulator is the operand's k order"]
        if n.name == "load":
            return [c, f"load_vec({n.outs[0].name}, {self.viewname[id(n.ins[0])]}, {self.expr(n.attrs['row'])});"
                       f"  // lane l: query row + l (one buffer_load_dword per 64 queries)"]
        if n.name == "store":
            src, v = n.ins
            if src is not g["dk"] and src is not g["dv"]:
                raise LoweringError(f"cdna attention_bwd_dkdv: store of {src.name}: only dk and dv are stored")
            return [c, f"store<T_OUT>({self.viewname[id(v)]}, {src.name}, {self.expr(n.attrs['row'])} + wkey, "
                       f"{self.expr(n.attrs['col'])});  // this wave's {self.cfg.mf} keys: row vectors of dK / dV"]
        if n.name == "mma":
            cfg = self.cfg
            mn, per = cfg.mfma.mnemonic(cfg.dtype), cfg.mfma_per_tile
            fence = "arch::sched_barrier<0>();  // the operand reads stay here: no hoisting past the VALU work (registers)"
            out, a = n.outs[0].name, n.ins[0].name
            rows = cfg.BM if n is g["role"]["S"] or n is g["role"]["dP"] else cfg.D
            (cr, ck), lgkm = cfg.chunk(rows), cfg.lgkm_chunk(rows)
            stream = lambda st, perm, lds, b: (f"mma_ABt_lds<{st}, {perm}, {cr}, {ck}, {lgkm}, T_IN>({out}, {lds}, {b});")
            chunks = f"streamed from LDS in {cr}x{ck} chunks (lgkmcnt({lgkm}): the next chunk in flight)"
            if n is g["role"]["S"]:
                return [c, fence, f"// S = Q K_w^T: {per['S']} x {mn}; Q {chunks}, rows in key_perm order",
                        f"zero({out});", stream("SQ", "true", "lds_q", g["kt"].name + "_op")]
            if n is g["role"]["dP"]:
                return [c, fence, f"// dP = dO V_w^T: {per['dP']} x {mn}; dO {chunks}, rows in key_perm order",
                        f"zero({out});", stream("SQ", "true", "lds_do", g["vt"].name + "_op")]
            if n is g["role"]["dV"]:
                return [c, fence, f"// dV^T += dO^T P: {per['dV']} x {mn}; dO^T {chunks}", stream("SQT", "false", "lds_dot", a)]
            if n is g["role"]["dK"]:
                return [c, fence, f"// dK^T += Q^T dS: {per['dK']} x {mn}; Q^T {chunks}", stream("SQT", "false", "lds_qt", a)]
        return super().op(n)

    def decls(self) -> List[str]:
        g = self.g
        mf, BN = self.cfg.mf, g["BN"]
        casts = {id(g["p"]), id(g["dsp"])}
        lines = []
        for t in self.k.tiles:
            if t is g["q"] or t is g["do"]:
                lines.append(f"// {t.name}: {t.type_str()} -> LDS tiles as loaded (A operand of {'S' if t is g['q'] else 'dP'}) "
                             f"and transposed (A operand of {'dK^T' if t is g['q'] else 'dV^T'}), streamed by mma_ABt_lds")
            elif t is g["kt"] or t is g["vt"]:
                lines.append(f"rt_op<MF, D, MF> {t.name}_op;  // {t.name}: {t.type_str()} -> this wave's {mf} keys, B operand "
                             f"of {'S' if t is g['kt'] else 'dP'}, in registers for the whole kernel")
            elif t.kind == "reg" and id(t) in casts:
                if t.dtype.name == "f32":
                    raise LoweringError(f"cdna attention_bwd_dkdv: cast target {t.name} must be 16-bit")
                lines.append(f"rt_op<MF, BM, MF> {t.name};  // {t.name}: {t.type_str()} -> its transpose for this wave's keys, "
                             f"B operand (k = queries)")
            elif t.kind == "reg":
                if t.dtype.name != "f32":
                    raise LoweringError(f"cdna attention_bwd_dkdv: register tile {t.name} must be f32")
                if t is g["dk"] or t is g["dv"]:
                    lines.append(f"rt_t<MF, D, MF, false> {t.name};  // {t.name}: {t.type_str()} -> this wave's {mf} keys, "
                                 f"held as the {t.name}^T accumulator (D x {mf})")
                elif t.cols == BN:
                    lines.append(f"rt_rp<BM, MF, MF> {t.name};  // {t.name}: {t.type_str()} -> the wave's {mf} key columns: "
                                 f"accumulator with queries in registers (key_perm order), one key per lane")
                else:
                    raise LoweringError(f"cdna attention_bwd_dkdv: register tile {t.name} {t.shape} has no CDNA layout here")
            elif t.kind == "vec":
                lines.append(f"rv_lane<BM, MF> {t.name};  // {t.name}: {t.type_str()} -> spread over the lanes (BM / 64 "
                             f"registers); row ops shuffle each register's value in")
        return lines

    def lower(self) -> Lowered:
        g = self.g = self.match()
        Q, K, V, dO, L, Delta, dK, dV = (g[x] for x in ("Q", "K", "V", "dO", "L", "Delta", "dK", "dV"))
        cfg = self.cfg = BwdDkdvConfig(self.arch, Q.dtype.name, dK.dtype.name, g["D"], g["BM"], g["BN"],
                                       bool(self.k.constexprs.get("causal")))
        check_dkdv_config(cfg, self.check_registers)
        gloop, loop = g["gloop"], g["loop"]
        for n in (g["lk"], g["lv"], g["lq"], g["ldo"]):
            if self.expr(n.attrs["col"]) != "0":
                self._fail("tiles span the whole head dimension (col=0)")
        for n in (g["lk"], g["lv"]):
            if any(s.kind == "loop" for x in n.ins[0].index if x is not None for s in ir.symbols(x)):
                self._fail("the K/V views may not depend on a loop index")
        gi, qi = gloop.index.name, loop.index.name
        if any(s.name == qi for x in list(g["lq"].ins[0].index) + list(g["ldo"].ins[0].index) if x is not None for s in ir.symbols(x)):
            self._fail("the Q/dO views may depend on the head loop only (the query block is the row)")
        self.viewname = {}
        views, loop_views, next_views = [], [], []
        ob = {"f32": 4, "bf16": 2, "f16": 2}[dK.dtype.name]
        for nm, v in (("gK", g["lk"].ins[0]), ("gV", g["lv"].ins[0])):
            self.viewname[id(v)] = nm
            views += self.view_decl(nm, v, 2)
        for n in g["post"]:
            if n.name == "store":
                v = n.ins[1]
                nm = "gdK" if v.param is dK else "gdV" if v.param is dV else self._fail(f"store to {v.text()}")
                self.viewname[id(v)] = nm
                views += self.view_decl(nm, v, ob)
        if sorted(self.viewname.values()) != ["gK", "gV", "gdK", "gdV"]:
            self._fail("expected stores to dK[...] and dV[...] after the loops")
        for n in g["vloads"]:  # per group member: views at the current head
            v = n.ins[0]
            nm = "gL" if v.param is L else "gDelta"
            self.viewname[id(v)] = nm
            loop_views += self.view_decl(nm, v, 4)
        gn, qn = self.sym_name(gloop.index) + "_next", self.sym_name(loop.index) + "_next"
        nxt = {gi: gn}
        for nm, n in (("gQ_next", g["lq"]), ("gdO_next", g["ldo"])):
            v = n.ins[0]
            next_views += self._with(nxt, lambda: self.view_decl(nm, v, 2, f"  (the next tile: {gi} = {gn})"))
        row_q = self._with({qi: qn}, lambda: self.expr(g["lq"].attrs["row"]))
        row_do = self._with({qi: qn}, lambda: self.expr(g["ldo"].attrs["row"]))
        args = self.launch_args()
        arg_decls = self.arg_decls(
            args, lambda x: "const float" if x is L or x is Delta else "float" if (x in (dK, dV) and dK.dtype.name == "f32")
            else "u16" if x in (dK, dV) else "const int" if x in self.k.reads else "const u16")
        name = self.entry_name(cfg)
        G = self.k.grid
        waits = cfg.waits()
        if waits["Q"] != waits["dO"]:
            raise LoweringError(f"cdna attention_bwd_dkdv: the Q and dO wave halves need different waits {waits}")
        source = self.env.get_template("attention_bwd_dkdv.hip.j2").render(
            cfg=cfg, name=name, ir_text=self.k.text(), template_version=BWD_DKDV_TEMPLATE_VERSION, arg_decls=arg_decls,
            let_lines=self.declarations(BWD_TEMPLATE_NAMES), grid=[self.expr(x) for x in G], views=views, loop_views=loop_views, next_views=next_views,
            decls=_cxx_names(self.decls()), pre_ops=self.ops(g["pre"]), vec_ops=self.ops(g["vloads"]),
            body_ops=self.ops(g["rest"]), post_ops=self.ops(g["post"]), q_start=self.expr(loop.start),
            q_stop=self.expr(loop.stop), n_group=self.expr(gloop.stop), g_index=self.sym_name(gloop.index),
            q_index=self.sym_name(loop.index), row_q=row_q, row_do=row_do, row_k=self.expr(g["lk"].attrs["row"]),
            row_v=self.expr(g["lv"].attrs["row"]), kt_name=g["kt"].name, vt_name=g["vt"].name,
            wait_q=waits["Q"], wait_do=waits["dO"], load_order=[" ".join(cfg.load_order(h)) for h in (0, 1)],
            conflicts=cfg.conflicts(), swq=cfg.swizzle_q, swqt=cfg.swizzle_qt, mfma=cfg.mfma.mnemonic(cfg.dtype))
        return self._lowered(cfg, source, BWD_DKDV_TEMPLATE_VERSION, "pipelined2-register-prefetch",
                             [Q, K, V, dO, L, Delta], [dK, dV], waits=waits)


def check_attention_bwd_dkdv_args(q, k, v, do, lse, delta, dk, dv, D: int) -> None:
    """The run-time contract of the lowered attention_bwd_dkdv (Lowered.notes['requires']), as ValueErrors."""
    check_attention_bwd_dq_args(q, k, v, do, lse, delta, dk, D)
    if dv.stride(-1) != 1 or dv.shape[-1] != D or dk.shape != k.shape or dv.shape != v.shape:
        raise ValueError("cdna attention_bwd_dkdv: dk, dv must have K's / V's shape and a contiguous head dimension D")
