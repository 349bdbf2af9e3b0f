"""Tidying of generated C++ text, shared by the backends' lowerings.

Templates mark variables that a kernel may leave unused with `(void)x;` (a variable the body never
reads would otherwise warn). Whether the body reads it is only known once the body is rendered, so
the casts are settled here: a cast whose variable the rest of its block reads is dropped, and the
others stay. The result is the code a person would have written for this one kernel."""
from __future__ import annotations

import re

_VOIDS = re.compile(r"^(\s*)(\(void\)\w+\s*[;,]\s*)+$")
_NAME = re.compile(r"\(void\)(\w+)")
# comments and string / character literals: blanked before names are looked for (newlines kept)
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _code_only(source: str) -> str:
    return _NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def _rest_of_block(code: list, i: int) -> str:
    """The code after line i up to the brace that closes the block line i sits in."""
    depth, out = 0, []
    for line in code[i + 1:]:
        for at, ch in enumerate(line):
            depth += ch == "{"
            depth -= ch == "}"
            if depth < 0:
                out.append(line[:at])
                return "\n".join(out)
        out.append(line)
    return "\n".join(out)


def _reads(name: str, code: str) -> bool:
    """Whether `code` names the variable (not a member .name, ->name or a qualified ::name)."""
    return re.search(rf"(?<![\w.>:]){name}\b", code) is not None


def drop_used_voids(source: str) -> str:
    """`source` with each `(void)x;` removed where its block goes on to read x."""
    lines = source.split("\n")
    code = _code_only(source).split("\n")
    out = []
    for i, line in enumerate(lines):
        m = _VOIDS.match(line)
        if not m:
            out.append(line)
            continue
        rest = _rest_of_block(code, i)
        keep = [n for n in _NAME.findall(line) if not _reads(n, rest)]
        if keep:
            out.append(m.group(1) + " ".join(f"(void){n};" for n in keep))
    return "\n".join(out)


def cast_i64(index: str) -> str:
    """`index` (C++ text) as a 64-bit value, before it meets a stride: `(long long)i`, parenthesized
    only where it is more than a name or a number."""
    return f"(long long){index}" if index.isidentifier() or index.isdigit() else f"(long long)({index})"
