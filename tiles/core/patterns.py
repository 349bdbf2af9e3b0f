"""Overlap patterns: how a kernel's main loop overlaps memory with compute.

A kernel *declares* one, with a number of stages: how many of the loop's iterations may have their
loads in flight. Each backend maps the pattern to a schedule of its own, and may make the ring deeper
than declared where its memory allows (the declaration is a floor, not a fixed depth), or refuse a
pattern it has no schedule for, with the reason. What each backend makes of each pattern is on the
documentation site, "Warp specialization vs ping-pong and interleave"; `python -m tiles show KERNEL
--backend NAME` prints the lowered code.

* Pipelined(stages): loads for later iterations issued while this one computes.
* ProducerConsumer(stages, consumers): some threads only load, the rest only compute.
* PingPong(stages): two groups of compute threads take turns, one's matrix products running while
  the other does its element-wise work.
* Interleave(stages): one group of threads interleaves its loads, matrix products and element-wise
  work instruction by instruction.

The interpreter runs every pattern as the plain sequential loop: patterns change timing, never results.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    stages: int = 2

    def __post_init__(self):
        if not isinstance(self.stages, int) or not 1 <= self.stages <= 8:
            raise ValueError(f"{type(self).__name__}: stages must be an int in 1..8, got {self.stages!r}")

    @property
    def name(self) -> str:
        return type(self).__name__

    def describe(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in self.__dict__.items())
        return f"{self.name}({fields})"


@dataclass(frozen=True)
class Pipelined(Pattern):
    """Loads for iteration i+stages-1 are in flight while iteration i computes."""


@dataclass(frozen=True)
class ProducerConsumer(Pattern):
    """One producer issues loads; `consumers` compute groups split the rows of every register tile."""

    consumers: int = 2

    def __post_init__(self):
        super().__post_init__()
        if self.consumers not in (1, 2, 3):
            raise ValueError(f"ProducerConsumer: consumers must be 1, 2 or 3, got {self.consumers!r}")


@dataclass(frozen=True)
class PingPong(Pattern):
    """Two compute groups alternate: one does matrix work while the other does vector work."""


@dataclass(frozen=True)
class Interleave(Pattern):
    """One compute group overlaps its own matrix work with the previous step's vector work."""


PATTERNS = (Pipelined, ProducerConsumer, PingPong, Interleave)
