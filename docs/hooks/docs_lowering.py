"""What `python -m tiles show KERNEL --backend B [--arch A]` prints, computed in-process for the docs.

The result is either the generated source (or IR, for the interpreter) or the LoweringError /
unavailability the backend reports: a page shows whichever is true today, never a pasted copy.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Shown:
    kernel: str
    backend: str
    arch: Optional[str]
    ok: bool
    text: str  # the source / IR, or the error message

    @property
    def command(self) -> str:
        arch = f" --arch {self.arch}" if self.arch else ""
        return f"python -m tiles show {self.kernel} --backend {self.backend}{arch}"

    @property
    def lang(self) -> str:
        return {"hopper": "cpp", "cdna": "cpp"}.get(self.backend, "text")


@functools.lru_cache(maxsize=None)
def show(kernel: str, backend: str, arch: Optional[str] = None) -> Shown:
    """The same steps as tiles.__main__.cmd_show, returning text instead of printing it."""
    from tiles import __main__ as cli
    from tiles import backends
    from tiles.core.lowering import LoweringError
    from tiles.kernels import SUITE

    if kernel not in SUITE:
        raise KeyError(f"tiles:show: unknown kernel {kernel!r}; suite kernels: {sorted(SUITE)}")
    args, kw = cli._examples()[kernel]
    be = backends.get(backend)
    try:
        kw = dict(kw, **be.config(kernel, **kw, **({"arch": arch} if arch else {})))
        kfn = SUITE[kernel]
        if backend == "interp":
            return Shown(kernel, backend, arch, True, kfn.trace(*args, **kw).text())
        lower = getattr(be, "lower", None)
        if lower is None:
            return Shown(kernel, backend, arch, False,
                         f"backend {backend!r} cannot lower kernels on the machine that built these docs: "
                         f"{be.available()[1]}")
        return Shown(kernel, backend, arch, True, lower(kfn, *args, arch=arch, **kw).source)
    except LoweringError as e:
        return Shown(kernel, backend, arch, False, f"{type(e).__name__}: {e}")
    except Exception as e:  # a lowering under construction that crashes: say so, do not hide it
        return Shown(kernel, backend, arch, False, f"the {backend} lowering raised {type(e).__name__}: {e}")


def constant(src: str, name: str) -> int:
    """The value of `constexpr int NAME = <int>` (or `NAME = <int>,` in a declaration list) in generated C++."""
    m = re.search(rf"\b{re.escape(name)}\s*=\s*(\d+)\b", src)
    if not m:
        raise KeyError(f"constant {name} not found in the generated source")
    return int(m.group(1))


def excerpt(text: str, start: Optional[str] = None, end: Optional[str] = None, include_end: bool = False,
            what: str = "") -> tuple[str, int, int]:
    """Lines from the first line matching regex `start` up to (not including, unless include_end) the next
    line matching `end`. Returns (text, first line number, last line number), 1-based. A regex that
    matches nothing raises, so a page cannot silently show the wrong region after the code changes."""
    lines = text.splitlines()
    a, b = 0, len(lines)
    if start:
        hits = [i for i, s in enumerate(lines) if re.search(start, s)]
        if not hits:
            raise ValueError(f"{what}: no line matches from={start!r}")
        a = hits[0]
    if end:
        hits = [i for i, s in enumerate(lines) if i > a and re.search(end, s)]
        if not hits:
            raise ValueError(f"{what}: no line after line {a + 1} matches to={end!r}")
        b = hits[0] + (1 if include_end else 0)
    chunk = lines[a:b]
    # drop a common indentation so an excerpt from inside a function reads flush left
    ind = min((len(s) - len(s.lstrip()) for s in chunk if s.strip()), default=0)
    return "\n".join(s[ind:] for s in chunk).rstrip(), a + 1, b
