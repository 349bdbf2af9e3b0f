"""Cutting a pipelined loop's range into parts and merging their results (ir.LseMerge).

The one rule every backend follows, so a part's key blocks are the same wherever it runs: part p of
R covers [start + p·n // R, start + (p+1)·n // R) of a loop of n trips. merge_lse is the reference
merge the interpreter runs and the device merges are tested against.
"""
import math


def heaviest_trips(k, env: dict, grid0: int) -> int:
    """The heaviest program's trips of kernel k's pipelined loop, from the sizes in `env` (a count a
    program reads counts as its bound): at both ends of program 0, where a causal loop's heaviest are,
    and its middle, where a two-sided sliding window's are."""
    from tiles.core import ir
    loop = k.main_loop()
    trips = 0
    for p0 in (0, grid0 // 2, max(grid0 - 1, 0)):
        at = dict(env, pid0=p0, pid1=0, pid2=0)
        trips = max(trips, int(ir.evaluate(ir.as_expr(loop.stop), at)) - int(ir.evaluate(ir.as_expr(loop.start), at)))
    return trips


def part_range(start: int, stop: int, part: int, parts: int):
    """The trips [lo, hi) of `part` (0-based) of `parts`: contiguous, in order, sizes within one."""
    if not 0 <= part < parts:
        raise ValueError(f"part must be in [0, {parts}), got {part}")
    n = max(stop - start, 0)
    return start + part * n // parts, start + (part + 1) * n // parts


def merge_lse(outs, lses):
    """Merge R parts: outs (R, rows, ...) each normalized by its own sum, lses (R, rows) natural-log
    sums of exponentials (+inf: the part saw no key). Returns (out, lse) in float32: the weighted
    sum out = Σ exp(lse_i − lse) out_i and lse = log Σ exp(lse_i). A part that saw no key is left
    out (whatever its out holds); a row no part saw gives out = 0 and lse = +inf, the convention of
    a whole row that sees no key; a NaN lse keeps the row NaN (out and lse), as an unsplit row's
    would be. The device merge (tiles/split.h) follows the same rule."""
    import torch
    outs, lses = outs.float(), lses.float()
    live = lses != math.inf
    masked = torch.where(live, lses, torch.full_like(lses, -math.inf))
    top = torch.where(torch.isnan(masked), torch.full_like(masked, -math.inf), masked).amax(0)  # fmaxf skips NaN
    safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    w = torch.where(live, torch.exp(masked - safe), torch.zeros_like(masked))
    total = w.sum(0)
    shape = w.shape + (1,) * (outs.dim() - lses.dim())
    acc = torch.where(live.reshape(shape), w.reshape(shape) * outs, torch.zeros_like(outs)).sum(0)
    q = torch.where(total > 0, 1.0 / total.clamp_min(torch.finfo(torch.float32).tiny), torch.zeros_like(total))
    out = acc * q.reshape(q.shape + (1,) * (acc.dim() - q.dim()))
    lse = torch.where(total > 0, safe + torch.log(total.clamp_min(torch.finfo(torch.float32).tiny)),
                      torch.where(total == 0, torch.full_like(total, math.inf), torch.full_like(total, math.nan)))
    return out, lse


def plan(programs: int, workers: int, trips: int, parts=None, overhead: float = 2.0, max_parts=None):
    """(whole, parts) for a persistent walk of `programs` programs of `trips` loop trips each on
    `workers` CTAs: the first `whole` run whole, each later one as `parts` parts. The tail is the
    partial last wave; cutting it into R parts makes its ceil(tail·R / workers) rounds each R times
    shorter, plus `overhead` trips a unit (its prologue and epilogue). The smallest R within 3 % of
    the cheapest is taken: every part is one more workspace tile to merge. parts=R forces R (the
    benchmarks' variants); no tail, or R = 1 best, gives whole = programs (nothing split).
    R is at most `max_parts`: by default 8, the most measured on the standard shapes' last waves, and
    for a grid shorter than one wave (decode: a few heads' programs over a long cache) as many as
    fill the workers once."""
    if programs <= 0 or workers <= 0:
        raise ValueError(f"programs and workers must be positive, got {programs}, {workers}")
    if max_parts is None:
        max_parts = max(8, workers // programs)
    whole = programs // workers * workers
    tail = programs - whole
    if tail == 0 or trips < 2:
        return programs, 1
    if parts is not None:
        if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
            raise ValueError(f"split_tail: parts must be a positive int, got {parts!r}")
        r = min(parts, trips)
        return (programs, 1) if r == 1 else (whole, r)

    def cost(r):
        return -(-tail * r // workers) * (trips / r + overhead)
    costs = {r: cost(r) for r in range(1, min(max_parts, trips) + 1)}
    best = min(costs.values())
    r = min(x for x, c in costs.items() if c <= best * 1.03)
    return (programs, 1) if r == 1 else (whole, r)


# A grid shorter than one wave (decode: a few heads' programs over a long cache) is cut along its loop
# from this many trips: below it the merge's second launch (about 5 us on the H200, session 41) costs
# about what the cut saves. An estimate from that call, not a measured crossover; no AMD figure exists.
SHORT_GRID_TRIPS = 16


def cuttable(k) -> bool:
    """Whether kernel k's pipelined loop may be cut into parts: it declares a merge, and the merged output
    and LSE are stored through whole windows. A store that stops short (packed sequences: O[0, :q0 + n])
    keeps the rows after it, which belong to another program, and the parts' merge writes whole tiles."""
    from tiles.core import ir
    loop = k.main_loop()
    if loop is None or loop.merge is None:
        return False
    merged = (loop.merge.out, loop.merge.lse)
    return not any(isinstance(n, ir.Op) and n.name == "store" and n.ins[1].param in merged and n.ins[1].stops
                   for n in k.walk())


def short_grid_parts(programs: int, workers: int, trips: int) -> int:
    """The parts each program of a grid shorter than one wave is cut into (plan's choice, which fills
    the workers about once), or 1 where the grid is not cut: a wave or more (the last wave is each
    launcher's own plan), or fewer than SHORT_GRID_TRIPS trips."""
    if programs >= workers or trips < SHORT_GRID_TRIPS:
        return 1
    return plan(programs, workers, trips)[1]
