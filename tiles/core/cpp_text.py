"""Tidying of generated C++ text, shared by the backends' lowerings.

Templates mark variables that a kernel may leave unused with `(void)x;` (a variable the body never
reads would otherwise warn). Whether the body reads it is only known once the body is rendered, so
the casts are settled here: a cast whose variable the rest of its block reads is dropped, and the
others stay. The result is the code a person would have written for this one kernel."""
from __future__ import annotations

import re

_VOIDS = re.compile(r"^(\s*)(\(void\)\w+\s*[;,]\s*)+$")
_NAME = re.compile(r"\(void\)(\w+)")


def _code(line: str) -> str:
    """A line without its // comment (the generated code keeps no // inside string literals)."""
    at = line.find("//")
    return line if at < 0 else line[:at]


def _rest_of_block(lines: list, i: int) -> str:
    """The code after line i up to the end of the block that line i sits in."""
    depth, out = 0, []
    for line in lines[i + 1:]:
        code = _code(line)
        for ch in code:
            depth += ch == "{"
            depth -= ch == "}"
            if depth < 0:
                out.append(code[:code.rfind("}")])
                return "\n".join(out)
        out.append(code)
    return "\n".join(out)


def drop_used_voids(source: str) -> str:
    """`source` with each `(void)x;` removed where its block goes on to read x."""
    lines = source.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = _VOIDS.match(line)
        if not m:
            out.append(line)
            continue
        rest = _rest_of_block(lines, i)
        keep = [n for n in _NAME.findall(line) if not re.search(rf"\b{n}\b", rest)]
        if keep:
            out.append(m.group(1) + " ".join(f"(void){n};" for n in keep))
    return "\n".join(out)
