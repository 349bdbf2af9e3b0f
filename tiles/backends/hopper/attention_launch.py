"""How the Hopper attention kernels are launched: the tile sizes and schedule options a problem takes
(config, SCHEDULES, schedule: each with the H200 measurement behind it), and the binding of one call
(prepare): tensor maps, copies where TMA cannot describe a tensor, the persistent grid and the split
tail's workspace. The lowering itself is lower_attention.py.
"""
from __future__ import annotations

import ctypes
import math
from typing import Dict, Optional

from tiles.core import ir, split
from tiles.core.backend import LaunchCache, call_signature
from tiles.core.lowering import Lowered, LoweringError, check_reads
from tiles.core.patterns import Interleave, Pattern

from . import runtime

ARCH = runtime.ARCH
# The forward's last partial wave in key parts (option split_tail, tiles/split.h) from these key
# lengths, by head dim. The suite's timing on the H200, over the launched forward (session 32,
# bench/attention_split_tail.py): D = 128 0.963 / 1.009 / 1.020 / 1.027 at S = 1k / 4k / 8k / 16k,
# D = 64 0.925 / 0.996 / 1.034 / 1.035. Below, the merge kernel (~6 us) and the parts' own
# prologues cost more than the tail's idle SMs. Causal grids walk in pairs (plan_window), which the
# split does not cut: the heavy-first walk it needs ran 0.90-0.92x at D = 128.
SPLIT_TAIL_KEYS = {128: 4096, 64: 8192}
# The D = 128 forward stores O by TMA from the last key block's ring stage (option ring_store) up to these
# query lengths, non-causal and causal (None: every length). H200, session 37 (bench/attention_ring_store.py,
# back to back / the suite's timing, over the choice before): non-causal 1.090 / 1.095 at S = 512, 1.056 /
# 1.063 at 1k, 1.025 / 1.026 at 2k; causal 1.078-1.088 at 512 (over option tma_store), 1.072-1.080 at 1k,
# 1.046-1.048 at 2k, 1.032 at 4k, 1.025-1.037 at 8k and 1.023-1.044 at 16k (the causal walk's programs
# are short on average). With the split tail's whole tiles (session 38, bench/attention_clock.py ab,
# rested launches interleaved): 1.005 at 4k (0.7 % fewer cycles), 0.995 at 8k, 0.989 at 16k.
RING_STORE_QUERIES = {False: 4096, True: None}
# where a kernel takes packed sequences' table of blocks (Blocks) among its arguments
TABLE_AT = {"attention_fwd": 8, "attention_bwd_dq": 8, "attention_bwd_dkdv": 9}


def tma_ready(t) -> bool:
    """Whether a TMA map can describe tensor t: unit inner stride, 16-byte aligned base and outer strides."""
    return (t.dim() >= 1 and t.stride(-1) == 1 and t.data_ptr() % 16 == 0
            and all(st * t.element_size() % 16 == 0 for st in t.stride()[:-1]))


def rank4(t, align: int):
    """A tensor map's dims and element strides, innermost axis first, padded to rank 4. Axes of extent
    1 are only ever read at coordinate 0, so any legal stride will do: past the tensor's end, rounded
    up to `align` elements (16 bytes or more)."""
    dims = list(reversed(t.shape)) + [1] * (4 - t.dim())
    strides = list(reversed(t.stride())) + [0] * (4 - t.dim())
    big = max([int(st) * int(n) for st, n in zip(t.stride(), t.shape)] + [align])
    big = -(-big // align) * align
    for i in range(1, 4):
        if dims[i] == 1:
            strides[i] = big
    return dims, strides


class AttentionLaunch:
    """The launch-side class methods of WarpSpecializedLowering."""

    @classmethod
    def config(cls, kernel: Optional[str] = None, D: Optional[int] = None, **problem) -> dict:
        """Tile sizes the kernel leaves to the backend. The forward at D = 64 takes 192 query rows per
        program, one consumer warpgroup per 64 (FlashAttention-3's choice): the softmax, not the
        tensor cores, bounds D = 64, and a third warpgroup hides more of it. Measured on the H200
        (bench/hopper_notes.md): +2 to +21% over 128 rows non-causal, -3 to +5% causal. Causal
        with at most 2k queries takes 128 rows in two warpgroups taking turns: 1.045 / 1.068x at
        S = 512 / 1k (session 17), and at 2k 1.022-1.027x with O through TMA (session 38; 0.97x
        storing from registers, session 17); a short causal program is mostly its diagonal block,
        and 192-row blocks mask more of it."""
        if kernel == "attention_fwd" and D == 64:
            if problem.get("causal") and 0 < problem.get("Sq", 0) <= 2048:
                return {"BM": 128}
            return {"BM": 192}
        if kernel == "attention_bwd_dq":
            # two consumer warpgroups of 64 query rows instead of one: 1.16-1.38x over BM = 64 on the
            # H200 (bench/hopper_notes.md, tile sweep); 64 keys a block at D = 128 keep S, dP and dQ
            # in registers, 128 keys at D = 64
            return {"BM": 128, "BN": 64 if D == 128 else 128}
        return {}

    # schedule options per (kernel, head dim) the tile sweep measured better than the pattern's default
    SCHEDULES = {("attention_bwd_dq", 128): {"pingpong": True, "tma_store": True, "resident": True},
                 # resident (Q and dO as register A operands): 1.06 / 1.02 / 0.99x at S = 1k / 4k / 16k
                 # non-causal, 1.03 / 1.01x causal at 4k / 16k, the kernel alone (session 24; from 8k
                 # non-causal the fused kernel runs instead). At D = 64 it ran 0.68-0.76x: its 32 registers
                 # cost the loop dP's hoist (loop_registers), and hoisted anyway ptxas serializes (C7512)
                 # 1.25-1.38x over BM=64, 1.21-1.37x without turns: +1 to +6 %. The scale folded into the exponent: 1-5% slower here at 5 of 8
                 # shapes, in two runs (bench/hopper_notes.md, session 13). The warpgroup index through a
                 # shuffle: off in session 14 (1-3.5 % slower then); on today's code (descriptor offsets)
                 # 2 % faster at 11 of 12 shapes, in two runs (session 15). dQ through a TMA store: 1.003-1.066x
                 # at all 8 shapes (S = 512-16k, causal and not; session 19)
                 ("attention_bwd_dkdv", 64): {"pingpong": True, "fold": False, "whole_tile_stores": True,
                                              "peel": True, "vec_tma": True, "resident": True},
                 # K and V as register A operands (resident): dK/dV at D = 64 1.12-1.15x non-causal at
                 # S = 1k-16k, 1.10 / 1.15x causal at 4k / 16k, the kernel alone (session 24). At D = 128
                 # their 64 registers spill
                 # the rotated loop's first iteration peeled: dK/dV at D = 64 1.03 / 1.09 / 1.14x at
                 # S = 512 / 2k / 16k non-causal, 1.00-1.01x causal (session 16); the forward and dQ
                 # within -6 to +3 %, dK/dV at D = 128 0.77-0.91x (ptxas serializes its wgmmas). dQ at
                 # D = 128 non-causal again 0.97-0.98x (session 25); causal it meets C7519 (TMA store)
                 # dK and dV stored without a test a pair where the tile is whole: faster at 15 of 16
                 # shapes, by up to 6 % (session 16); the forward was up to 4 % slower with it and dQ
                 # -3 to +2 %, so off there
                 # LSE and Delta by the producer's TMA (vec_tma): dK/dV 1.06-1.09x at D = 128 and
                 # 0.98-1.09x at D = 64 (S = 1k-16k, causal and not; session 22)
                 ("attention_bwd_dkdv", 128): {"whole_tile_stores": True, "vec_tma": True},
                 # the rotated loop's first iteration peeled: the forward at D = 128 1.022 / 1.034x at
                 # S = 4k / 16k non-causal, 1.00-1.01x at 1k and causal (session 24, the kernel alone;
                 # session 16's kernel had read -6 to +3 %). Not with the TMA store (schedule): ptxas
                 # serializes that form's wgmmas causal (C7519)
                 ("attention_fwd", 128): {"peel": True},
                 # dK, dV (128 registers) + the dQ block: the persistent loop's own registers make
                 # ptxas spill (144 bytes); one CTA per program does not. Not rotated: dK's wgmma is
                 # issued right after dQ's and runs while dQ is staged for its reduce. The warpgroup
                 # index through a shuffle: 5-13 % faster (session 16; it spilled before the reducer
                 # warp took the reduce out of the consumers). LSE and Delta by TMA: 1.02-1.14x over
                 # loading them through autograd (session 22; launched from 8k non-causal: FUSED_BACKWARD_D)
                 ("attention_bwd_fused", 128): {"persistent": False, "rotate": False, "uniform_warpgroup": True,
                                                "whole_tile_stores": True, "vec_tma": True},
                 # dQ summed by warpgroup (split_k), persistent: 1.03-1.07x the split backward through
                 # autograd, where one CTA a program ran 0.78-0.87x (ptxas rematerialized the loop's
                 # shuffle lanes: 740 instructions a block against 585; session 20). Not rotated (dK's
                 # wgmma issued right after dQ's, under dQ's staging): 1.02-1.13x the split backward
                 # where rotated ran 1.00-1.08x, at all 6 shapes (S = 1k-16k, causal and not; session 21)
                 # K and V as register A operands (resident): 1.05-1.07x non-causal at S = 1k-16k, 1.01 /
                 # 1.04x causal at 4k / 16k, the kernel alone (session 24): the SS wgmmas of N = 64 read
                 # as many bytes of A as of B, and shared memory's bandwidth is what the loop runs at
                 ("attention_bwd_fused", 64): {"uniform_warpgroup": True, "whole_tile_stores": True,
                                               "rotate": False, "resident": True}}

    _lowered_cache: Dict[tuple, Lowered] = {}

    _kernel_cache: Dict[tuple, object] = {}

    _launches = LaunchCache()

    @classmethod
    def prepare(cls, kfn, *args, options: Optional[dict] = None, **kwargs):
        """Everything one launch needs, built once: returns a zero-argument function that launches
        the kernel on these tensors (the benchmark times that), or None when the grid is empty.
        Kept per call signature: a training step that meets the same addresses and shapes again
        (PyTorch's caching allocator hands them back) skips tracing, binding and the tensor maps."""
        import torch

        # the kernel is loaded per device: the current one is part of what the launch depends on
        sig = call_signature(kfn, args, kwargs, (tuple(sorted((options or {}).items())), torch.cuda.current_device()))
        go = cls._launches.get(sig)
        if go is not None:
            return go
        go = cls._prepare(kfn, *args, options=options, **kwargs)
        if go is not None and not go.copies:  # maps into per-call copies cannot be reused
            cls._launches.put(sig, go)
        return go

    @classmethod
    def _prepare(cls, kfn, *args, options: Optional[dict] = None, **kwargs):
        bound = kfn.bind(*args, **kwargs)
        k = kfn.trace(*args, **kwargs)
        low = cls._lowering(k, options)
        if not cls.folds_hold(low, bound):  # the softmax's scale is not positive at this launch
            low = cls._lowering(k, {**(options or {}), "fold": False})
        tensors = {p.name: bound.arguments[p.name] for p in k.params}
        env = cls._env(k, tensors, bound)
        grid = tuple(int(ir.evaluate(g, env)) for g in k.grid)
        if min(grid) <= 0:
            return None
        check_reads(k, tensors, env, grid)  # KLen: int32, here, one count for every program's sequence
        short = cls._short_grid(k, low, options, bound, env, grid)
        if short is not None:
            low, options = short
        copies = []
        # TMA needs 16-byte aligned outer strides: a stride-0 broadcast or an odd stride gets a copy
        # (inputs only: a tensor written through TMA, by a reduce or by option tma_store, is refused)
        for a in low.args:
            if a[0] == "tma_vec":  # a vector's rows padded to 16 bytes where they are not (a per-call copy)
                t = tensors[a[2].name]
                if t.stride(-1) != 1 or t.data_ptr() % 16 or any((st * 4) % 16 for st in t.stride()[:-1]):
                    n = t.shape[-1]
                    padded = t.new_zeros(*t.shape[:-1], -(-n // 4) * 4)[..., :n]
                    padded.copy_(t)
                    tensors[a[2].name] = padded
                    copies.append(padded)
                continue
            if a[0] != "tma":
                continue
            t = tensors[a[2].name]
            esz = t.element_size()
            if t.stride(-1) != 1 or t.data_ptr() % 16 or any(
                    (st * esz) % 16 or (st == 0 and n > 1) for st, n in zip(t.stride()[:-1], t.shape[:-1])):
                ops = [n for n in k.walk() if isinstance(n, ir.Op) and n.name in ("store_add", "store", "load_async")
                       and any(isinstance(x, ir.View) and x.param is a[2] for x in n.ins)]
                if ops and all(n.name != "load_async" for n in ops):  # its map is the one it is written through
                    raise ValueError(f"{k.name}: {a[2].name} is written through TMA: it needs its last axis "
                                     f"contiguous, a 16-byte aligned base and rows, and no broadcast axes; got strides "
                                     f"{tuple(t.stride())}, base {t.data_ptr() % 16} bytes past 16")
                tensors[a[2].name] = t.contiguous()
                copies.append(tensors[a[2].name])
        env = cls._env(k, tensors, bound)  # again: a copy above may have changed strides
        programs, grid0 = math.prod(grid), grid[0]
        units = programs
        sp = low.notes.get("split")
        if sp is not None:  # option split_tail: the last partial wave walked in parts (tiles/split.h)
            forced = (options or {}).get("split_tail")
            whole, parts = split.plan(programs, runtime.num_sms(), split.heaviest_trips(k, env, grid0),
                                      None if forced is True else forced)
            units = whole + (programs - whole) * parts
            ws_floats = (programs - whole) * parts * sp["rows"] * (sp["cols"] + 1)
            if whole == programs:  # nothing to split at this launch: the kernel without the option
                plain = {**(options or {}), "split_tail": False}
                low = cls._lowering(k, plain)
                if not cls.folds_hold(low, bound):
                    low = cls._lowering(k, {**plain, "fold": False})
                sp = None
                units = programs
        if low.notes["persistent"]:  # one CTA per SM walks the units (registers allow one per SM)
            grid = (min(units, runtime.num_sms()), 1, 1)
        import torch
        kkey = (id(low), torch.cuda.current_device())
        kern = cls._kernel_cache.get(kkey)
        if kern is None:  # compile (disk-cached) and load once per lowering and device
            comp = runtime.compile_cuda(low.source, name=low.entry + ".cu")
            kern = cls._kernel_cache[kkey] = runtime.load(comp.cubin, low.entry)
            if sp is not None:  # the split's merge kernel lives in the same translation unit
                cls._kernel_cache[kkey + ("merge",)] = runtime.load(comp.cubin, sp["merge"])
        argv = []
        for a in low.args:
            if a[0] == "tma":
                _, m, P, rows, kept_row = a
                t = tensors[P.name]
                box = [128 // t.element_size(), 1, 1, 1]  # one 128-byte swizzle line
                box[t.dim() - 1 - kept_row] = rows
                argv.append(runtime.tensor_map(t, box, 128, *rank4(t, 8)))
            elif a[0] == "tma_vec":  # one unswizzled box along the last axis
                _, m, P, rows = a
                t = tensors[P.name]
                argv.append(runtime.tensor_map(t, [rows, 1, 1, 1], 0, *rank4(t, 4)))
            elif a[0] == "ptr":
                argv.append(runtime.arg_ptr(tensors[a[1].name]))
            elif a[0] == "dim":
                argv.append(runtime.arg_i32(env[a[1].name]))
            elif a[0] == "stride64":
                argv.append(runtime.arg_i64(env[a[1].name]))
            elif a[0] == "f32":
                argv.append(runtime.arg_f32(env[a[1].name]))
            elif a[0] == "split_ws":
                ws_arg = len(argv)
                argv.append(None)  # a fresh workspace each launch, from torch's allocator on this stream
            elif a[0] == "split_whole":
                argv.append(runtime.arg_i32(whole))
            elif a[0] == "split_parts":
                argv.append(runtime.arg_i32(parts))
        if sp is None:
            def go():  # the caller's tensors stay the caller's: only per-call copies are held here
                kern.launch(grid, low.block, argv, smem=low.shared_bytes)
                return copies
        else:
            merge = cls._kernel_cache[kkey + ("merge",)]
            device = tensors[k.params[0].name].device
            merge_grid = ((programs - whole) * sp["rows"] // 4, 1, 1)

            def go():
                # the workspace is stream-ordered: the allocator hands it on only after the merge has run
                ws = torch.empty(ws_floats, dtype=torch.float32, device=device)
                call = list(argv)
                call[ws_arg] = ctypes.c_void_p(ws.data_ptr())
                kern.launch(grid, low.block, call, smem=low.shared_bytes)
                merge.launch(merge_grid, (128, 1, 1), call)
                return copies
        go.lowered, go.copies = low, copies
        go.split = None if sp is None else (whole, parts)
        go.grid = grid
        return go

    @staticmethod
    def _env(k: ir.Kernel, tensors: dict, bound) -> dict:
        """The values of the kernel's sizes, strides and scalars at this launch."""
        env = {}
        for P in k.params:
            t = tensors[P.name]
            env.update({d.name: int(t.shape[i]) for i, d in enumerate(P.dims)})
            env.update({st.name: int(t.stride(i)) for i, st in enumerate(P.strides)})
        for sc in k.scalars:
            env[sc.name] = float(bound.arguments[sc.name])
        return env

    @classmethod
    def _short_grid(cls, k: ir.Kernel, low: Lowered, options: Optional[dict], bound, env: dict, grid):
        """A grid shorter than one wave (decode: a few heads' programs over a long cache) cut along its
        keys until it fills the SMs once: (the split lowering, its options), or None where the launch
        decides nothing (split_tail set either way, already split, not persistent, no merge declared or
        stores that stop short (split.cuttable), fewer than split.SHORT_GRID_TRIPS trips). The TMA store
        of O gives way (a part's O goes to the workspace from registers), and a causal walk in pairs to the heavy-first one (the pairs are not
        cut). H200, session 41 (bench/attention_decode.py): before the persistent grid was as long as its
        units, parts of a short grid queued on its few CTAs and gained nothing (8 programs over 32k keys:
        372 us unsplit, 378-469 us in 2-32 parts); with it, not yet measured."""
        if ((options or {}).get("split_tail") is not None or low.notes.get("split") is not None
                or not low.notes["persistent"] or not split.cuttable(k)):
            return None
        programs, sms = math.prod(grid), runtime.num_sms()
        trips = split.heaviest_trips(k, env, grid[0])
        if split.short_grid_parts(programs, sms, trips) == 1:
            return None
        opts = {**(options or {}), "split_tail": True}
        opts.pop("tma_store", None)
        if low.notes.get("window"):
            opts["window"] = False
        try:
            split_low = cls._lowering(k, opts)
            if not cls.folds_hold(split_low, bound):
                split_low = cls._lowering(k, {**opts, "fold": False})
        except LoweringError:
            return None
        return split_low, opts

    @classmethod
    def _lowering(cls, k: ir.Kernel, options: Optional[dict]) -> Lowered:
        key = (id(k), tuple(sorted((options or {}).items())))  # traces are cached per specialization
        low = cls._lowered_cache.get(key)
        if low is None:
            low = cls._lowered_cache[key] = cls(k, ARCH, **(options or {})).lower()
        return low

    @staticmethod
    def folds_hold(low: Lowered, bound) -> bool:
        """Whether every scale plan_fold moved into an exponent is positive (and finite) for these
        arguments: only then is the folded kernel exact."""
        if not low.notes.get("positive"):
            return True
        env = {sc.name: float(bound.arguments[sc.name]) for sc in low.kernel.scalars}
        for P in low.kernel.params:
            t = bound.arguments[P.name]
            env.update({d.name: int(t.shape[i]) for i, d in enumerate(P.dims)})
        values = [float(ir.evaluate(c, env)) for c in low.notes["positive"]]
        return all(0 < v < math.inf for v in values)

    @classmethod
    def schedule(cls, kernel: str, D: Optional[int], tensors=(), causal: bool = False,
                 overlap=None) -> Optional[dict]:
        """The options a launch takes: SCHEDULES, and where the problem decides, the TMA store of the
        output (tma_store). The forward at D = 64 stores through TMA up to 1k queries: 1.037 / 1.006x
        non-causal at S = 512 / 1k, 1.080 / 1.044x causal, 0.98-1.00x from 4k; causal also at 2k, where
        config() takes 128-row tiles (session 38). At D = 128 its staging
        tiles cost the forward a ring stage: 0.70-0.92x, but 1.046x causal at S = 512, where a program
        runs at most four key blocks (session 19). Only where every 16-bit tensor suits TMA (16-byte
        aligned base and outer strides, unit inner stride). The D = 128 forward up to
        RING_STORE_QUERIES stores O by TMA from the last key block's ring stage instead (ring_store;
        with the split tail, its whole tiles). The D = 64 fused backward takes its vectors by TMA
        (vec_tma) non-causal only. The schedules were measured on the PingPong kernels: a kernel that
        declares `overlap` Interleave takes them without the turns (pingpong) and without ring_store,
        which hands its stage over in the turns."""
        import torch
        opts = dict(cls.SCHEDULES.get((kernel, D)) or {})
        Sq = tensors[0].shape[1] if tensors and isinstance(tensors[0], torch.Tensor) else None
        # packed sequences (a table of their blocks, api._blocks): the longest is L's rows, and O's store
        # stops at each sequence's last row, which neither a TMA box nor the split's merge respects: those
        # options are left out below. The table comes heaviest first: walked in order, a head's blocks
        # together (those running at once read a few sequences' keys of one head, which L2 holds; all
        # heads of a few blocks, heavy first, would read every head's)
        at = TABLE_AT.get(kernel)
        packed = at is not None and len(tensors) > at and isinstance(tensors[at], torch.Tensor)
        if packed:
            Sq = tensors[4].shape[2]
            opts.update(order="pid0_fastest", reverse=False)
            # L and Delta by the producer's TMA faulted (CUDA_ERROR_ILLEGAL_INSTRUCTION at the ring's first
            # loads, session 47, bench/varlen_bwd_bisect.py): in a packed launch the consumers load them
            opts.pop("vec_tma", None)
        short = Sq is not None and (D == 64 and (Sq <= 1024 or causal and Sq <= 2048) or D == 128 and causal and Sq <= 512)
        if kernel == "attention_fwd" and short:
            opts["tma_store"] = True
            opts.pop("peel", None)
        if kernel == "attention_bwd_fused" and D == 64 and "vec_tma" not in opts:
            # LSE and Delta by the producer's TMA: 1.00-1.05x non-causal at S = 512-16k through
            # autograd, 1.03x / 1.05x the kernel alone at 4k / 16k; causal 0.92-1.04x, 0.97x alone at
            # 16k, in two calls each (session 22)
            opts["vec_tma"] = not causal
        Sk = tensors[1].shape[1] if len(tensors) > 1 and isinstance(tensors[1], torch.Tensor) else 0
        if kernel == "attention_fwd" and len(tensors) > 7 and isinstance(tensors[7], torch.Tensor):
            Sk *= tensors[7].shape[1]  # a paged cache (Pages): the keys a sequence's pages hold, not one page's
        split_tail = kernel == "attention_fwd" and not causal and Sk >= SPLIT_TAIL_KEYS.get(D, math.inf)
        top = RING_STORE_QUERIES[bool(causal)]
        if kernel == "attention_fwd" and D == 128 and Sq is not None and (top is None or Sq <= top):
            # O by TMA from the last key block's K tile: no staging tiles of its own, so the ring keeps its
            # stages (tma_store's cost a stage at D = 128) and the peel stays
            opts.pop("tma_store", None)
            opts.update(peel=True, ring_store=True)
        if (opts.get("tma_store") or opts.get("ring_store")) and not all(
                tma_ready(t) for t in tensors if isinstance(t, torch.Tensor) and t.element_size() == 2):
            opts.pop("tma_store", None)  # stored from registers, which takes any strides
            opts.pop("ring_store", None)
        if packed and kernel == "attention_fwd":
            opts.pop("tma_store", None)
            opts.pop("ring_store", None)
        if split_tail and "tma_store" not in opts and not packed:
            opts["split_tail"] = True
        if isinstance(overlap, Interleave):
            opts.pop("pingpong", None)
            opts.pop("ring_store", None)
        return opts or None

    @classmethod
    def launch(cls, backend, kfn, *args, **kwargs):
        if kwargs.get("options") is None:
            pattern = kfn.overlap  # a pattern chosen per call (a callable) is the traced kernel's
            if not isinstance(pattern, Pattern):
                pattern = kfn.trace(*args, **{k: v for k, v in kwargs.items() if k != "options"}).pattern
            # a sliding window's trip counts vary along program 0 as a causal grid's do: scheduled as one
            banded = bool(kwargs.get("causal")) or kwargs.get("left") is not None or kwargs.get("right") is not None
            kwargs["options"] = cls.schedule(kfn.name, kwargs.get("D"), args, banded, pattern)
        go = cls.prepare(kfn, *args, **kwargs)
        if go is not None:
            go()

    @staticmethod
    def _maps(low: Lowered):
        return {a[1]: (a[2], a[3], a[4]) for a in low.args if a[0] == "tma"}
