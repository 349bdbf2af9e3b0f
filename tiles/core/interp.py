"""The reference interpreter: executes tile IR with torch, one program (block) at a time.

It defines what every op means; the backends must agree with it. Arithmetic is f32 (the accumulate
type of both vendors' tensor cores); every op's result is rounded to its destination tile's dtype, so
a kernel's own casts (P to bf16 before P@V, say) are honoured. Tiles start as NaN so a read of
something never written poisons the output, and a load_async lands only at the wait that covers it.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from . import ir, split
from .ir import Loop, Op, Tile, View, evaluate

F32 = torch.float32


def _val(x, env):
    """A scalar operand: evaluated Expr, or the tensor of a tile."""
    if isinstance(x, Tile):
        return env["tiles"][x]
    return evaluate(x, env["sym"])


def _window(view: View, row0: int, col0: int, shape, tensors, sym):
    """(slice tuple into the tensor, slice tuple into the tile) of the in-range part of a window."""
    t = tensors[view.param.name]
    idx, tile_idx = [], []
    kept = view.kept
    offsets = (row0, col0)[: len(kept)]
    for axis, x in enumerate(view.index):
        if x is None:
            k = kept.index(axis)
            lo, n, dim = offsets[k], shape[k], t.shape[axis]
            if view.stop(axis) is not None:  # X[:n]: past n reads as past the end
                dim = max(min(dim, evaluate(view.stop(axis), sym)), 0)
            a, b = max(lo, 0), min(lo + n, dim)
            if b <= a:
                return None
            idx.append(slice(a, b))
            tile_idx.append(slice(a - lo, b - lo))
        else:
            i = evaluate(x, sym)
            if not 0 <= i < t.shape[axis]:
                return None
            idx.append(i)
    return t, tuple(idx), tuple(tile_idx)


def _read(view, row0, col0, dst: Tile, env):
    out = torch.zeros(dst.shape, dtype=dst.dtype.torch, device=env["device"])
    w = _window(view, row0, col0, dst.shape, env["tensors"], env["sym"])
    if w is not None:
        t, idx, tidx = w
        out[tidx] = t[idx].to(dst.dtype.torch)
    return out


def _elementwise(fn) -> Callable:
    def run(op: Op, env):
        d = op.outs[0]
        args = [_val(x, env) for x in op.ins]
        args = [a.to(F32) if isinstance(a, torch.Tensor) else a for a in args]
        env["tiles"][d] = fn(*args).to(d.dtype.torch)

    return run


def _safe_div(a, b):
    return torch.where(b == 0, torch.zeros_like(a), a / torch.where(b == 0, torch.ones_like(b), b))


UNARY = {
    "exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2, "neg": torch.neg,
    "abs": torch.abs, "rsqrt": torch.rsqrt, "copy": lambda x: x,
}


def _binop(fn):
    return lambda a, b: fn(a, b if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=F32, device=a.device))


# max and min are C's fmaxf / fminf, as every backend spells them: a NaN operand gives the other one
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "max": _binop(torch.fmax), "min": _binop(torch.fmin),
}

BROADCAST = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": _safe_div}

CMP = {"==": torch.eq, "!=": torch.ne, "<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge}


def _grid_index(shape, device):
    r = torch.arange(shape[0], device=device)[:, None]
    c = torch.arange(shape[1], device=device)[None, :]
    return r, c


def _op_load(op, env):
    d, src = op.outs[0], op.ins[0]
    if isinstance(src, Tile):
        env["tiles"][d] = env["tiles"][src].to(d.dtype.torch)
        return
    row = _val(op.attrs["row"], env)
    col = _val(op.attrs["col"], env) if op.attrs.get("col") is not None else 0
    env["tiles"][d] = _read(src, row, col, d, env)


def _op_load_async(op, env):
    d, src = op.outs[0], op.ins[0]
    data = _read(src, _val(op.attrs["row"], env), _val(op.attrs["col"], env), d, env)
    env["inflight"][op.attrs["token"]] = (d, data)


def _op_wait(op, env):
    for tok in op.attrs["tokens"]:
        d, data = env["inflight"].pop(tok)
        env["tiles"][d] = data


def _op_store(op, env):
    src, view = op.ins
    row = _val(op.attrs["row"], env)
    col = _val(op.attrs["col"], env) if op.attrs.get("col") is not None else 0
    w = _window(view, row, col, src.shape, env["tensors"], env["sym"])
    if w is not None:
        t, idx, tidx = w
        caught = env.get("caught")
        if caught is not None and view.param.name in caught:  # a part's result, merged after all parts
            if caught[view.param.name] is not None:
                raise RuntimeError(f"{view.param.name} is stored twice in one program: its parts cannot be merged")
            caught[view.param.name] = (t, idx, env["tiles"][src][tidx].to(F32))
            return
        t[idx] = env["tiles"][src][tidx].to(t.dtype)


def _op_store_shared(op, env):
    d, src = op.outs[0], op.ins[0]
    env["tiles"][d] = env["tiles"][src].to(d.dtype.torch)


def _op_store_add(op, env):
    src, view = op.ins
    w = _window(view, _val(op.attrs["row"], env), _val(op.attrs["col"], env), src.shape, env["tensors"], env["sym"])
    if w is not None:
        t, idx, tidx = w
        t[idx] += env["tiles"][src][tidx].to(t.dtype)


def _op_mma(op, env):
    acc, a, b = op.outs[0], op.ins[0], op.ins[1]
    A = env["tiles"][a].to(F32)
    B = env["tiles"][b].to(F32)
    A = A.T if op.attrs["ta"] else A
    B = B.T if op.attrs["tb"] else B
    prod = A @ B
    env["tiles"][acc] = (env["tiles"][acc] + prod) if op.attrs["accumulate"] else prod


def _op_fill(op, env):
    d = op.outs[0]
    env["tiles"][d] = torch.full(d.shape, float(_val(op.attrs["value"], env)), dtype=d.dtype.torch,
                                 device=env["device"])


def _op_cast(op, env):
    env["tiles"][op.outs[0]] = env["tiles"][op.ins[0]].to(op.outs[0].dtype.torch)


def _fmax_reduce(x, dim):
    """A maximum that skips NaN, as a chain of fmaxf does: NaN only where every element is NaN."""
    nan = torch.isnan(x)
    m = torch.where(nan, torch.full_like(x, -math.inf), x).amax(dim)
    return torch.where(nan.all(dim), torch.full_like(m, math.nan), m)


def _op_reduce(fn):
    def run(op, env):
        d, src = op.outs[0], op.ins[0]
        x = env["tiles"][src].to(F32)
        dim = 1 if op.name.startswith("row") else 0
        r = fn(x, dim)
        if len(op.ins) > 1:
            r = fn(torch.stack([r, env["tiles"][op.ins[1]].to(F32)]), 0)  # the running value joins the reduction
        env["tiles"][d] = r.to(d.dtype.torch)

    return run


def _op_broadcast(op, env):
    d, src, v = op.outs[0], op.ins[0], op.ins[1]
    kind, axis = op.name.split("_")
    vv = env["tiles"][v].to(F32)
    vv = vv[:, None] if axis == "row" else vv[None, :]
    env["tiles"][d] = BROADCAST[kind](env["tiles"][src].to(F32), vv).to(d.dtype.torch)


def _masked(op, env, where):
    d = op.outs[0]
    t = env["tiles"][d]
    env["tiles"][d] = torch.where(where, torch.tensor(float(_val(op.attrs["value"], env)), dtype=t.dtype,
                                                      device=t.device), t)


def _op_mask_causal(op, env):
    r, c = _grid_index(op.outs[0].shape, env["device"])
    a = {k: _val(op.attrs[k], env) for k in ("row0", "col0", "offset")}
    _masked(op, env, (a["col0"] + c) > (a["row0"] + r + a["offset"]))


def _op_mask_window(op, env):
    r, c = _grid_index(op.outs[0].shape, env["device"])
    a = {k: _val(op.attrs[k], env) for k in ("row0", "col0", "offset")}
    _masked(op, env, (a["col0"] + c) < (a["row0"] + r + a["offset"]))


def _op_mask_cols(op, env):
    _, c = _grid_index(op.outs[0].shape, env["device"])
    _masked(op, env, (_val(op.attrs["col0"], env) + c) >= _val(op.attrs["limit"], env))


def _op_mask_rows(op, env):
    d = op.outs[0]
    r = torch.arange(d.shape[0], device=env["device"])
    r = r if d.kind == "vec" else r[:, None]
    _masked(op, env, (_val(op.attrs["row0"], env) + r) >= _val(op.attrs["limit"], env))


def _op_fill_where(op, env):
    ref = env["tiles"][op.ins[0]].to(F32)
    _masked(op, env, CMP[op.attrs["cmp"]](ref, float(_val(op.attrs["rhs"], env))))


HANDLERS: dict[str, Callable] = {
    "load": _op_load, "load_async": _op_load_async, "wait": _op_wait, "store": _op_store,
    "store_shared": _op_store_shared, "store_add": _op_store_add,
    "mma": _op_mma, "fill": _op_fill, "cast": _op_cast,
    "row_max": _op_reduce(_fmax_reduce), "row_sum": _op_reduce(lambda x, d: torch.sum(x, d)),
    "col_max": _op_reduce(_fmax_reduce), "col_sum": _op_reduce(lambda x, d: torch.sum(x, d)),
    "mask_causal": _op_mask_causal, "mask_window": _op_mask_window, "mask_cols": _op_mask_cols,
    "mask_rows": _op_mask_rows,
    "fill_where": _op_fill_where,
}
HANDLERS.update({n: _elementwise(f) for n, f in UNARY.items()})
HANDLERS.update({n: _elementwise(f) for n, f in BINARY.items()})
HANDLERS.update({f"{k}_{a}": _op_broadcast for k in BROADCAST for a in ("row", "col")})


def _run_nodes(nodes, env):
    for n in nodes:
        if isinstance(n, Loop):
            sym = env["sym"]
            start, stop = evaluate(n.start, sym), evaluate(n.stop, sym)
            if n.pipelined and "part" in env:
                start, stop = split.part_range(start, stop, *env["part"])
            for i in range(start, stop):
                sym[n.index.name] = i
                _run_nodes(n.body, env)
        else:
            HANDLERS[n.name](n, env)


def _program(kernel, tensors, sym, device, pid, part=None, caught=None):
    env = {
        "sym": dict(sym, pid0=pid[0], pid1=pid[1], pid2=pid[2]),
        "tensors": tensors,
        "device": device,
        "inflight": {},
        "tiles": {t: torch.full(t.shape, math.nan, dtype=t.dtype.torch, device=device)
                  if t.dtype.torch.is_floating_point else torch.zeros(t.shape, dtype=t.dtype.torch, device=device)
                  for t in kernel.tiles},
    }
    if part is not None:
        env["part"], env["caught"] = part, caught
    _run_nodes(kernel.body, env)
    if env["inflight"]:
        raise RuntimeError(f"{kernel.name}: load_async never waited on: {sorted(env['inflight'])}")


def _split_program(kernel, merge, tensors, sym, device, pid, parts):
    """One program run as `parts` parts of its pipelined loop, their stores into merge.out and
    merge.lse merged by split.merge_lse: what a backend that splits the loop must agree with."""
    got = []
    for p in range(parts):
        caught = {merge.out.name: None, merge.lse.name: None}
        _program(kernel, tensors, sym, device, pid, (p, parts), caught)
        got.append(caught)
    if any((c[merge.out.name] is None) != (c[merge.lse.name] is None) for c in got):
        raise RuntimeError(f"{kernel.name}: a part stored one of {merge.out.name}, {merge.lse.name} without the other")
    if got[0][merge.out.name] is None:
        return
    (to, io, _), (tl, il, _) = got[0][merge.out.name], got[0][merge.lse.name]
    outs = torch.stack([c[merge.out.name][2] for c in got])
    lses = torch.stack([c[merge.lse.name][2] for c in got])
    if lses.shape[1] != outs.shape[1]:
        raise RuntimeError(f"{kernel.name}: {merge.lse.name} stores {lses.shape[1]} rows, {merge.out.name} {outs.shape[1]}")
    out, lse = split.merge_lse(outs, lses)
    to[io] = out.to(to.dtype)
    tl[il] = lse.to(tl.dtype)


def run(kernel: ir.Kernel, tensors: dict, sym: dict, device, parts: int = 1) -> None:
    """Run every program of the grid. `tensors` maps parameter names to torch tensors (written in
    place by stores); `sym` holds the run-time scalars (dims, strides, float args). parts > 1 runs
    each program's pipelined loop in that many parts and merges them (the loop's merge= declaration).
    The tensors a kernel reads elements of (k.read) join `sym`, on the CPU: each read is a number."""
    grid = [evaluate(g, sym) for g in kernel.grid]
    sym = dict(sym, **{ir.read_key(p): tensors[p.name].detach().cpu() for p in kernel.reads})
    if any(g < 0 for g in grid):
        raise ValueError(f"{kernel.name}: negative grid {grid}")
    loop = kernel.main_loop()
    merge = loop.merge if loop is not None else None
    if not isinstance(parts, int) or parts < 1:
        raise ValueError(f"parts must be a positive int, got {parts!r}")
    if parts > 1 and merge is None:
        raise ValueError(f"parts={parts}: {kernel.name}'s pipelined loop declares no merge= (k.lse_merge)")
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                if parts > 1:
                    _split_program(kernel, merge, tensors, sym, device, (x, y, z), parts)
                else:
                    _program(kernel, tensors, sym, device, (x, y, z))

