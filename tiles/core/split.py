"""Cutting a pipelined loop's range into parts and merging their results (ir.LseMerge).

The one rule every backend follows, so a part's key blocks are the same wherever it runs: part p of
R covers [start + p·n // R, start + (p+1)·n // R) of a loop of n trips. merge_lse is the reference
merge the interpreter runs and the device merges are tested against.
"""
import math
from dataclasses import dataclass


def part_range(start: int, stop: int, part: int, parts: int):
    """The trips [lo, hi) of `part` (0-based) of `parts`: contiguous, in order, sizes within one."""
    if not 0 <= part < parts:
        raise ValueError(f"part must be in [0, {parts}), got {part}")
    n = max(stop - start, 0)
    return start + part * n // parts, start + (part + 1) * n // parts


def merge_lse(outs, lses):
    """Merge R parts: outs (R, rows, ...) each normalized by its own sum, lses (R, rows) natural-log
    sums of exponentials (+inf: the part saw no key). Returns (out, lse) in float32: the weighted
    sum out = Σ exp(lse_i − lse) out_i and lse = log Σ exp(lse_i); a row no part saw gives out = 0
    and lse = +inf, the convention of a whole row that sees no key."""
    import torch
    outs, lses = outs.float(), lses.float()
    live = lses != math.inf
    masked = torch.where(live, lses, torch.full_like(lses, -math.inf))
    top = masked.amax(0)
    safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    w = torch.where(live, torch.exp(masked - safe), torch.zeros_like(masked))
    total = w.sum(0)
    c = torch.where(total > 0, w / total.clamp_min(torch.finfo(torch.float32).tiny), torch.zeros_like(w))
    c = c.reshape(c.shape + (1,) * (outs.dim() - lses.dim()))
    out = (c * outs).sum(0)
    lse = torch.where(total > 0, safe + torch.log(total.clamp_min(torch.finfo(torch.float32).tiny)),
                      torch.full_like(total, math.inf))
    return out, lse


def plan(programs: int, workers: int, trips: int, parts=None, overhead: float = 2.0, max_parts: int = 8):
    """(whole, parts) for a persistent walk of `programs` programs of `trips` loop trips each on
    `workers` CTAs: the first `whole` run whole, each later one as `parts` parts. The tail is the
    partial last wave; cutting it into R parts makes its ceil(tail·R / workers) rounds each R times
    shorter, plus `overhead` trips a unit (its prologue and epilogue). The smallest R within 3 % of
    the cheapest is taken: every part is one more workspace tile to merge. parts=R forces R (the
    benchmarks' variants); no tail, or R = 1 best, gives whole = programs (nothing split)."""
    if programs <= 0 or workers <= 0:
        raise ValueError(f"programs and workers must be positive, got {programs}, {workers}")
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


def share_begin(b: int, shares: int, tail: int, trips: int) -> int:
    """First trip of stream share b of `shares`, counting the tail's `tail` programs' `trips` trips end to end."""
    return b * tail * trips // shares


def stream_items(b: int, shares: int, tail: int, trips: int):
    """The items of stream share b (tiles/split.h split_unit): [(s, program of the tail, lo, hi)] for its
    item s = 0 (where it starts) and, where it runs on into the next program, s = 1. A share is shorter
    than a program (tail < shares), so it touches two at most; an empty share has no item."""
    lo, hi = share_begin(b, shares, tail, trips), share_begin(b + 1, shares, tail, trips)
    if lo == hi:
        return []
    t0 = lo // trips
    items = [(0, t0, lo - t0 * trips, min(trips, hi - t0 * trips))]
    if hi > (t0 + 1) * trips:
        items.append((1, t0 + 1, 0, hi - (t0 + 1) * trips))
    return items


def stream_slots(t: int, shares: int, tail: int, trips: int):
    """The workspace slots (item s of share b at s · shares + b) of tail program t's parts, in trip order:
    the share that ran on into t from the one before (its item 1), then those that start in t."""
    def owner(i):
        b = i * shares // (tail * trips)
        while b + 1 < shares and share_begin(b + 1, shares, tail, trips) <= i:
            b += 1
        while share_begin(b, shares, tail, trips) > i:
            b -= 1
        return b
    lo = t * trips
    slots = []
    for b in range(owner(lo), owner(lo + trips - 1) + 1):
        begin = share_begin(b, shares, tail, trips)
        if begin == share_begin(b + 1, shares, tail, trips):
            continue  # an empty share
        slots.append(shares + b if begin < lo else b)
    return slots


@dataclass(frozen=True)
class Plan:
    """A split walk: `whole` programs whole, then the tail in `parts` parts of each program (shares == 0),
    or laid end to end and cut into `shares` equal shares, one a CTA (stream-K's way)."""
    whole: int
    parts: int = 1
    shares: int = 0


def plan_tail(programs: int, workers: int, trips: int, uniform: bool, parts=None, overhead: float = 2.0,
              stream=None) -> Plan:
    """The cheaper of `plan`'s parts and stream shares for the tail: a share costs tail·trips / workers
    trips plus `overhead` for each of the (up to) two programs it touches, against plan's rounds of parts.
    Shares need every program to run the same trips (`uniform`: a non-causal loop). parts=R forces parts;
    stream=True forces shares, stream=False parts."""
    whole, r = plan(programs, workers, trips, parts, overhead)
    tail = programs - programs // workers * workers
    if parts is not None or stream is False or not uniform or tail == 0 or trips < 2:
        return Plan(whole, r)
    share = tail * trips / workers
    cost_stream = share + overhead * (2 if share > 1 else 1)
    cost_parts = -(-tail * r // workers) * (trips / r + overhead) if whole < programs else trips + overhead
    if stream or cost_stream < cost_parts:
        return Plan(programs // workers * workers, 1, workers)
    return Plan(whole, r)
