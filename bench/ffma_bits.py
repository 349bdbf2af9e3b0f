"""Session 19: the fp8 GEMM's promotion FFMAs with their scheduling bits rewritten in the cubin.

    PYTHONPATH=.:bench:tests/hopper python3 bench/ffma_bits.py [--suite] [--launched]

ptxas sets the yield hint on every second FFMA of a promotion run (bit clear: the warp may yield) and the
reuse flag on the scale operand of the others only; an FFMA reading the scale from the register file
then shares a bank with part or acc. Control bits of a Hopper instruction (the high word's bits 41-61):
stall (4), yield (1), write barrier (3), read barrier (3), wait mask (6), reuse (4; bit 1 is operand B's).
They are scheduling hints and caches, not meaning: the output must stay the same bits. Modes, for
every run of 16 or more FFMAs in the launched kernel at the issue's five shapes:
* `noyield_reuse`: no yield hint on any, and operand B's reuse flag wherever the next FFMA reads the
  same register there (no FFMA reads the scale from the register file but the first of a run);
* `noyield`: no yield hint on any, reuse as ptxas left it;
* `yield_all`: the yield hint on every one, no reuse flags (a yielded warp may not reuse);
* `reuse` (session 30): the yield hints as ptxas left them, and operand B's reuse flag wherever the
  next FFMA reads the same register there (whether a yield between keeps the cached value is what
  the bitwise check says).
`--launched` (session 30) patches the kernels tiles.gemm_fp8 launches now (the scales by TMA where
the launcher takes them, fp8_ab.launched) instead of the global-load kernels session 19 patched, and
adds the `imm` bound (fp8_promote_edits: the scale an immediate, two register reads an FFMA).
Each patched cubin is checked bitwise against the launched kernel's output, then all are timed
interleaved next to row-wise `_scaled_mm` (hopper_gemm_tiles.timed; `--suite`: as the standard suite times).
"""
import pathlib
import re
import struct
import sys
import tempfile

import torch

from tiles.backends.hopper import lower_fp8, runtime
from tiles.bench import fp8
from tiles.bench import run as bench_run

import fp8_ab
import fp8_promote_edits
import hopper_gemm_tiles as ht
import sass

YIELD, REUSE = 41 + 4, 41 + 17  # bit positions in the high 64-bit word
MODES = ("noyield_reuse", "noyield", "yield_all", "reuse")


def instructions(listing: str):
    """(offset in the function, text, low word, high word) of each instruction of a cuobjdump -sass
    listing of one kernel, in order."""
    lines = listing.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);\s*/\* 0x([0-9a-f]{16}) \*/", line)
        if m:
            hi = re.match(r"\s*/\* 0x([0-9a-f]{16}) \*/", lines[i + 1])
            out.append((int(m[1], 16), m[2].strip(), int(m[3], 16), int(hi[1], 16)))
    return out


def text_section(cubin: bytes, name: str) -> int:
    """The file offset of the kernel's code (ELF section .text.<name>) in a cubin."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strtab = sections[shstrndx][4]
    for sh_name, _, _, _, offset, _ in sections:
        end = cubin.index(b"\0", strtab + sh_name)
        if cubin[strtab + sh_name:end].decode() == ".text." + name:
            return offset
    raise KeyError(f"no .text.{name} in the cubin")


def ffma_runs(ins, at_least=16):
    runs, cur = [], []
    for x in ins:
        if x[1].startswith("FFMA "):
            cur.append(x)
        else:
            if len(cur) >= at_least:
                runs.append(cur)
            cur = []
    return runs


def b_reg(text):
    return text.split(None, 1)[1].split(",")[2].strip().replace(".reuse", "")


def patch(cubin: bytes, name: str, listing: str, mode: str):
    """The cubin with the promotion runs' bits rewritten (mode), and how many instructions changed."""
    data = bytearray(cubin)
    base = text_section(cubin, name)
    changed = 0
    for run in ffma_runs(instructions(listing)):
        for i, (at, text, lo, hi) in enumerate(run):
            new = hi
            if mode in ("noyield_reuse", "noyield"):
                new |= 1 << YIELD
            if mode in ("noyield_reuse", "reuse") and i + 1 < len(run) and b_reg(run[i + 1][1]) == b_reg(text):
                new |= 1 << (REUSE + 1)
            if mode == "yield_all":
                new &= ~(1 << YIELD)
                new &= ~(0xF << REUSE)
            if new == hi:
                continue
            here = base + at
            if data[here:here + 16] != lo.to_bytes(8, "little") + hi.to_bytes(8, "little"):
                raise RuntimeError(f"{text} at {at:#x}: the cubin's bytes are not the listing's")
            data[here + 8:here + 16] = new.to_bytes(8, "little")
            changed += 1
    return bytes(data), changed


def variants(M, N, K, sms, tmp, launched=False):
    cfg = (fp8_ab.launched if launched else fp8_ab.global_loads)(M, N, K, sms)
    kern = lower_fp8.fp8_source(torch.bfloat16, **cfg)
    cubin = runtime.compile_cuda(kern["source"], name=kern["name"] + ".cu").cubin
    listing = sass.disassemble(cubin, tmp)
    out, counts = {"launched": cfg}, {}
    for mode in MODES:
        patched, counts[mode] = patch(cubin, kern["name"], listing, mode)
        src = kern["source"] + f"\n// promotion FFMAs' bits: {mode}\n"  # its own key in bind's kernel table
        lower_fp8._kernels[(kern["name"], src, torch.cuda.current_device())] = runtime.load(patched, kern["name"])
        out[mode] = dict(kern, source=src)
    if launched:
        out["imm"] = fp8_promote_edits.edit(kern, "imm")
    return out, counts


def main(suite=False, launched=False):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tmp = pathlib.Path(tempfile.mkdtemp())
    for M, N, K in fp8_ab.SHAPES:
        n_sets = bench_run._n_sets(M * K + N * K + 2 * M * N, torch.device("cuda")) if suite else 2
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(n_sets)]
        vs, counts = variants(M, N, K, sms, tmp, launched)
        fns, outs = fp8_ab.launch_all(sets, vs)
        same = {m: torch.equal(outs[m], outs["launched"]) for m in MODES}
        ms = ht.suite_timed(fns, len(sets)) if suite else ht.timed(fns, rounds=11)
        print(M, N, K, vs["launched"], "changed", counts, "bitwise", same, flush=True)
        print("   ", " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                            for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    sys.exit(main("--suite" in sys.argv[1:], "--launched" in sys.argv[1:]))
