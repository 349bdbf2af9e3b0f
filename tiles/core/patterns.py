"""Overlap patterns: how a kernel's main loop overlaps memory with compute.

A kernel *declares* one; each backend maps it to its native schedule (see ARCHITECTURE.md):

| pattern            | Hopper                                      | CDNA                                   |
|--------------------|---------------------------------------------|----------------------------------------|
| Pipelined(s)       | TMA ring of s stages on mbarriers           | double-buffered LDS                    |
| ProducerConsumer   | producer warp + consumer warpgroups,        | 8-wave ping-pong (default; wave        |
|                    | setmaxnreg budgets                          | specialization loses without register  |
|                    |                                             | reallocation)                          |
| PingPong           | two consumer warpgroups alternate GEMM and  | 8-wave ping-pong: two 4-wave groups    |
|                    | softmax (FlashAttention-3)                  | offset by one s_barrier                |
| Interleave         | async wgmma overlapped with the previous    | 4-wave interleave, one wave per SIMD   |
|                    | block's softmax                             |                                        |

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
