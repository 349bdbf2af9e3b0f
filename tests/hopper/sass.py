"""Reading what ptxas made of a kernel, for the Hopper tests: the disassembly and resource table of a
cubin (cuobjdump, from pip's nvidia-cuda-cuobjdump or the PATH), the loops of a listing, and the few
dependence questions the tests ask of a loop body. A test without cuobjdump skips."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest


def cuobjdump():
    """The cuobjdump binary, or None."""
    for p in map(pathlib.Path, sys.path):
        c = p / "nvidia" / "cu13" / "bin" / "cuobjdump"
        if c.exists():
            return str(c)
    return shutil.which("cuobjdump")


def _run(flag: str, cubin: bytes, tmp_path, why: str) -> str:
    tool = cuobjdump()
    if tool is None:
        pytest.skip(why)
    f = tmp_path / "k.cubin"
    f.write_bytes(cubin)
    return subprocess.run([tool, flag, str(f)], check=True, capture_output=True, text=True).stdout


def disassemble(cubin: bytes, tmp_path) -> str:
    """The cubin's SASS listing."""
    return _run("-sass", cubin, tmp_path, "cuobjdump not found (pip install nvidia-cuda-cuobjdump)")


def res_usage(cubin: bytes, name: str, tmp_path) -> dict:
    """Registers / stack / local memory of `name` read from the cubin itself (cuobjdump -res-usage)."""
    out = _run("-res-usage", cubin, tmp_path, "no ptxas lines in the NVRTC log and no cuobjdump to read the cubin")
    m = re.search(re.escape(name) + r".*?\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out, re.S)
    assert m, out
    return dict(registers=int(m[1]), stack=int(m[2]), local=int(m[4]))


def mainloops(sass: str, needle: str = "QGMMA") -> list:
    """Instruction lists of the loops of a SASS listing that issue `needle` (QGMMA: fp8 wgmma; HGMMA:
    16-bit): a backward branch to an address before it. Loops around other loops are included too;
    callers pick by size."""
    ins = [(int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    at = {a: i for i, (a, _) in enumerate(ins)}
    loops = []
    for i, (a, text) in enumerate(ins):
        m = re.search(r"BRA (?:\S+, )?0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in at:
            body = [t for _, t in ins[at[int(m.group(1), 16)]:i + 1]]
            if any(needle in t for t in body):
                loops.append(body)
    return loops


def descriptor_copies(body) -> list:
    """The QGMMAs of a loop body whose descriptor (gdesc[URn]: URn .. URn+3, A's and B's 64-bit
    descriptors) was last written, in program order, by an R2UR: a copy from a vector register."""
    writer, copied = {}, []
    for line in body:
        m = re.match(r"\s*(?:@!?U?P\w+\s+)?([\w.]+)\s+(UR\d+)?", line)
        if not m:
            continue
        op, dst = m.groups()
        if op.startswith("QGMMA"):
            n = int(re.search(r"gdesc\[UR(\d+)\]", line).group(1))
            if any(writer.get(n + d) == "R2UR" for d in range(4)):
                copied.append(line)
        if dst:
            r = int(dst[2:])
            for d in range(2 if ".64" in op else 1):
                writer[r + d] = op.split(".")[0]
    return copied


def max_chain(body, op: str = "FMNMX") -> int:
    """The longest chain of dependent `op` instructions in a loop body, in program order (a shuffle
    passes its source's depth on; any other write starts a register afresh)."""
    depth, longest = {}, 0
    for line in body:
        m = re.match(r"\s*(?:@!?U?P\w+\s+)?([\w.]+)\s+(?:PT, )?(R\d+)\s*,\s*(.*)", line)
        if not m:
            continue
        name, dst, rest = m.groups()
        srcs = re.findall(r"\bR\d+\b", rest)
        if name.startswith(op):
            depth[dst] = 1 + max((depth.get(r, 0) for r in srcs), default=0)
            longest = max(longest, depth[dst])
        elif name.startswith("SHFL"):
            depth[dst] = depth.get(srcs[0], 0) if srcs else 0
        else:
            depth[dst] = 0
    return longest
