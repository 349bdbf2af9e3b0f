"""The Hopper GEMM that proves the stack: templates/gemm.cu.j2 rendered, NVRTC-compiled, launched.

    c = run_gemm(a, b, torch.bfloat16)                 # a: (M, K), b: (K, N), both row-major
    src = gemm_source(**cfg).source                    # what the tests compile on the CPU

The IR lowering (lower.py) will render the same template; this module is the direct entry the
benchmarks and tests use until then.
"""
from __future__ import annotations

import dataclasses
import functools
import pathlib
from typing import Optional

import jinja2

from . import runtime

TEMPLATES = pathlib.Path(__file__).parent / "templates"

# The Hopper recipe: 128x256 tile, K step 64, 4 stages of 48 KB, 1 producer warpgroup (40 registers)
# + 2 consumer warpgroups (232 registers, each 64 x 256 fp32 accumulators = 128 regs), persistent with
# grouped order; measured best on the H200 (bench/hopper_notes.md): 2-CTA clusters multicasting B and
# the epilogue through shared memory + TMA store (+7% over stores from registers at 8192^3).
DEFAULTS = dict(BM=128, BN=256, BK=64, stages=4, consumers=2, group_m=8, producer_regs=40, consumer_regs=232,
                b_kmajor=False, epilogue="tma", cluster=2, wide_stores=0, deferred_store=False)

_CTYPE = {"bfloat16": "bf16", "float16": "f16", "float32": "float", "bf16": "bf16", "f16": "f16", "f32": "float",
          "float": "float"}
SMEM_LIMIT = 232448  # bytes of shared memory one block may use on sm_90 (227 KB)


@functools.lru_cache(maxsize=None)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def ctype(dtype) -> str:
    """C++ element type name of a torch dtype or tiles dtype name."""
    key = str(dtype).replace("torch.", "")
    if key not in _CTYPE:
        raise TypeError(f"the Hopper GEMM supports bf16/f16 inputs and bf16/f16/f32 outputs, not {dtype}")
    return _CTYPE[key]


@dataclasses.dataclass(frozen=True)
class GemmKernel:
    source: str
    name: str
    cfg: dict
    smem_bytes: int
    threads: int
    in_t: str = "bf16"
    out_t: str = "bf16"


def _stage_bytes(cfg: dict, in_bytes: int = 2) -> int:
    return (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * in_bytes


def gemm_source(in_dtype="bf16", out_dtype="bf16", *, template: str = "gemm.cu.j2", name: str = "",
                context: Optional[dict] = None, **over) -> GemmKernel:
    """Render templates/gemm.cu.j2 (or a template extending it) for one configuration; keys of
    DEFAULTS may be overridden, `context` adds variables for a child template."""
    unknown = set(over) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown GEMM options {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    cfg = {**DEFAULTS, **_fit_defaults(over, over.get("b_kmajor", False))}
    if cfg["BK"] != 64:
        raise ValueError("BK must be 64 (one 128-byte swizzle line of bf16/f16 per row)")
    if cfg["BM"] % (64 * cfg["consumers"]) or cfg["BN"] % 64 or not 64 <= cfg["BN"] <= 256:
        raise ValueError(f"tile {cfg['BM']}x{cfg['BN']} does not fit {cfg['consumers']} consumer warpgroups")
    it, ot = ctype(in_dtype), ctype(out_dtype)
    if it not in ("bf16", "f16"):
        raise TypeError(f"GEMM inputs must be bf16 or f16, got {in_dtype}")
    if cfg["epilogue"] not in ("regs", "tma"):
        raise ValueError(f"epilogue must be 'regs' or 'tma', got {cfg['epilogue']!r}")
    if cfg["epilogue"] == "tma" and cfg["BM"] // cfg["consumers"] != 64:
        raise ValueError("the TMA epilogue needs 64 rows per consumer warpgroup")
    if cfg["wide_stores"] not in (0, 2, 4):
        raise ValueError(f"wide_stores is 0 (a pair a store), 2 or 4 pairs a store, got {cfg['wide_stores']!r}")
    if cfg["deferred_store"] and ot not in ("bf16", "f16"):
        raise ValueError(f"deferred_store packs a finished tile to a 16-bit output while the next accumulates; "
                         f"out_dtype {out_dtype} leaves no room for both (use deferred_store=False)")
    if cfg["cluster"] not in (1, 2) or (cfg["cluster"] > 1 and (cfg["b_kmajor"] or (cfg["BN"] // 64) % cfg["cluster"])):
        raise ValueError("cluster is 1 or 2 (multicast of row-major B split by 64-column chunks)")
    tags = [(f"s{cfg['stages']}", f"{cfg['stages']} ring stages", True),
            (f"c{cfg['consumers']}", f"{cfg['consumers']} consumer warpgroups", True),
            (f"g{cfg['group_m']}", f"tile rows in groups of {cfg['group_m']}", True),
            ("bt", "B read K-major (an N x K storage)", cfg["b_kmajor"]),
            ("tmaepi", "the tile stored by TMA", cfg["epilogue"] == "tma"),
            (f"cl{cfg['cluster']}", f"{cfg['cluster']}-CTA clusters sharing B", cfg["cluster"] > 1),
            (f"wd{cfg['wide_stores']}", f"{cfg['wide_stores']} pairs a store", bool(cfg["wide_stores"])),
            ("ds", "a finished tile stored under the next tile's first k-block", cfg["deferred_store"])]
    on = [(t, meaning) for t, meaning, used in tags if used]
    legend = "" if name else ", ".join(f"{t} = {meaning}" for t, meaning in on)  # a caller's name has no tags
    name = name or "tiles_gemm_{it}_{ot}_{BM}x{BN}x{BK}".format(it=it, ot=ot, **cfg) + "".join("_" + t for t, _ in on)
    # the ring (1 KB-aligned tiles) [+ 2 staging tiles of 8 KB per consumer] + the barrier block
    # rounded to 1 KB + 1 KB of alignment slack
    smem = cfg["stages"] * _stage_bytes(cfg) + 1024 + 1024
    if cfg["epilogue"] == "tma":
        smem += cfg["consumers"] * 2 * 64 * 128
    if smem > SMEM_LIMIT:
        raise ValueError(f"{cfg['stages']} stages need {smem} bytes of shared memory (limit {SMEM_LIMIT})")
    src = _env().get_template(template).render(name=name, in_t=it, out_t=ot, legend=legend, **cfg, **(context or {}))
    return GemmKernel(source=src, name=name, cfg=cfg, smem_bytes=smem, threads=128 * (1 + cfg["consumers"]),
                      in_t=it, out_t=ot)


def _tma_ready(t, inner: int):
    """A view TMA can describe: 16-byte aligned base and row stride (pad rows with a copy if not)."""
    import torch
    esz = t.element_size()
    broadcast = t.stride(0) == 0 and t.shape[0] > 1  # TMA needs a real row stride
    if t.stride(-1) == 1 and (t.stride(0) * esz) % 16 == 0 and t.data_ptr() % 16 == 0 and not broadcast:
        return t
    pad = -(-inner * esz // 16) * 16 // esz
    buf = torch.empty(t.shape[0], pad, dtype=t.dtype, device=t.device)
    buf[:, :inner].copy_(t)
    return buf[:, :inner]  # the pad columns lie outside the tensor map: TMA reads them as zeros


def _fit_defaults(over: dict, b_kmajor: bool, out=None) -> dict:
    """Drop default features a problem cannot use (explicit options are kept, and may then be refused)."""
    over = dict(over)
    cfg = {**DEFAULTS, **over}
    if "cluster" not in over and (b_kmajor or (cfg["BN"] // 64) % 2):
        over["cluster"] = 1  # multicast is written for row-major B split in 64-column chunks
    tma_out_ok = out is None or ((out.stride(0) * out.element_size()) % 16 == 0 and out.data_ptr() % 16 == 0)
    if "epilogue" not in over and (cfg["BM"] // cfg["consumers"] != 64 or not tma_out_ok):
        over["epilogue"] = "regs"  # TMA cannot describe this output (or the tile): store from registers
    return over


def prepare(a, b, out_dtype=None, out=None, b_kmajor: bool = False, **over):
    """Everything a launch needs, built once (the benchmark reuses it): (kernel, args, grid, kern, c, keep)."""
    import torch
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"run_gemm takes 2-D a and b, got {tuple(a.shape)} and {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[0] if b_kmajor else b.shape[1]
    if (b.shape[1] if b_kmajor else b.shape[0]) != K:
        raise ValueError(f"inner dimensions differ: a {tuple(a.shape)}, b {tuple(b.shape)} (b_kmajor={b_kmajor})")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if not (a.is_cuda and b.is_cuda):
        raise ValueError("run_gemm needs CUDA tensors")
    out_dtype = out_dtype or a.dtype
    if out is None:
        out = torch.empty(M, N, dtype=out_dtype, device=a.device)
    over = _fit_defaults(over, b_kmajor, out)
    kern = gemm_source(a.dtype, out_dtype, b_kmajor=b_kmajor, **over)
    k, args, grid, keep = bind(kern, a, b, out)
    return k, args, grid, kern, out, keep


_loaded: dict = {}


def bind(kern: GemmKernel, a, b, out):
    """Compile/load `kern` and build its launch arguments for these tensors: (kernel, args, grid, keep).

    a: (M, K); b: (K, N), or (N, K) when the kernel was rendered with b_kmajor; out: (M, N) row-major.
    Rows that TMA cannot describe (stride not a multiple of 16 bytes) are copied into padded buffers."""
    cfg = kern.cfg
    M, K = a.shape
    N = b.shape[0] if cfg["b_kmajor"] else b.shape[1]
    if tuple(out.shape) != (M, N) or out.stride(1) != 1 or ctype(out.dtype) != kern.out_t:
        raise ValueError(f"out must be a row-major ({M}, {N}) {kern.out_t} tensor, got {tuple(out.shape)} "
                         f"{out.dtype} strides {out.stride()}")
    if ctype(a.dtype) != kern.in_t or b.dtype != a.dtype:
        raise TypeError(f"kernel {kern.name} takes {kern.in_t} inputs, got {a.dtype} and {b.dtype}")
    k = _loaded.get((kern.name, kern.source))
    if k is None:  # compile (disk-cached) and load once per kernel source, not per call
        compiled = runtime.compile_cuda(kern.source, name=kern.name + ".cu")
        k = _loaded[(kern.name, kern.source)] = runtime.load(compiled.cubin, kern.name)
    a2 = _tma_ready(a, K)
    b2 = _tma_ready(b, K if cfg["b_kmajor"] else N)
    map_a = runtime.tensor_map_2d(a2, cfg["BM"], 64)
    map_b = runtime.tensor_map_2d(b2, cfg["BN"], 64) if cfg["b_kmajor"] else runtime.tensor_map_2d(b2, cfg["BK"], 64)
    if cfg["epilogue"] == "tma":
        map_c = runtime.tensor_map_2d(out, 64, 128 // out.element_size())
    else:
        map_c = runtime.null_map()
    cl = cfg["cluster"]
    ctiles = -(-M // (cfg["BM"] * cl)) * -(-N // cfg["BN"])
    slots = runtime.num_sms() // cl
    if cl > 1:
        slots = min(slots, _max_clusters(k, kern))
    grid = max(1, min(ctiles, slots)) * cl
    args = [map_a, map_b, map_c, runtime.arg_ptr(out), runtime.arg_i32(M), runtime.arg_i32(N), runtime.arg_i32(K),
            runtime.arg_i64(out.stride(0))]
    keep = (a2, b2, out)  # what the raw pointers in `args` point into must outlive the launches
    return k, args, grid, keep


_clusters_cache: dict = {}


def _max_clusters(k, kern) -> int:
    key = (kern.name, kern.smem_bytes)
    if key not in _clusters_cache:
        try:
            _clusters_cache[key] = runtime.max_active_clusters(k, kern.cfg["cluster"], kern.threads,
                                                               kern.smem_bytes, runtime.num_sms())
        except runtime.DriverError as e:  # no occupancy answer: assume every SM pairs up
            import warnings
            warnings.warn(f"cluster occupancy query failed ({e}); assuming {runtime.num_sms() // kern.cfg['cluster']}")
            _clusters_cache[key] = runtime.num_sms() // kern.cfg["cluster"]
    return _clusters_cache[key]
    return _clusters_cache[key]


def run_gemm(a, b, out_dtype=None, *, out=None, b_kmajor: bool = False, **cfg):
    """C = A @ B (or A @ B^T with b_kmajor=True, b given as N x K) on the current stream."""
    k, args, grid, kern, out, keep = prepare(a, b, out_dtype, out=out, b_kmajor=b_kmajor, **cfg)
    k.launch((grid,), (kern.threads,), args, smem=kern.smem_bytes)
    return out


def launcher(a, b, out_dtype=None, **cfg):
    """A zero-argument function that relaunches the same GEMM (for timing loops) and its output."""
    k, args, grid, kern, out, keep = prepare(a, b, out_dtype, **cfg)

    def go():
        _ = keep
        k.launch((grid,), (kern.threads,), args, smem=kern.smem_bytes)
    return go, out
