"""Compile generated HIP for CDNA without ROCm, and read back what the compiler made of it.

Recipe (shared/toolchain/README.md): Debian clang-22 (gfx942, gfx950) or clang-19 (gfx942 only),
``-x hip --offload-arch=ARCH --cuda-device-only --no-gpu-bundle-output -nogpulib -nogpuinc``, linked into an
HSA code object by lld. Read back:

* disassembly (``llvm-objdump -d --mcpu=ARCH``) -> instruction counts;
* resource usage: the ``-Rpass-analysis=kernel-resource-usage`` remarks (VGPRs, AGPRs, SGPRs, scratch,
  spills, LDS, occupancy; clang-22 says ``TotalSGPRs`` where clang-19 says ``SGPRs``) and the code object's
  metadata (``llvm-readelf --notes``: .vgpr_count, .agpr_count, .group_segment_fixed_size, ...);
* the ``-S`` assembly, where ``sched_barrier`` shows up (it emits no instruction).

``hiprtc=True`` compiles the source the way hiprtc receives it: hiprtc's own ``hiprtc_runtime.h`` is
force-included with ``__HIPCC_RTC__`` defined, so tiles/prelude.h must stand aside. That header ships in the
``rocm-llvm-python`` wheel; ``hiprtc_header()`` downloads the wheel once (pip download --no-deps) and extracts
just that file into the tiles cache directory (never into the repository).
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

from .gemm_probe import INCLUDE_DIR

ARCH_COMPILERS = {"gfx942": (22, 19), "gfx950": (22,)}  # clang-19 rejects gfx950
BASE_FLAGS = ("-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O3", "-std=c++17")
HIPRTC_WHEEL = "rocm-llvm-python==7.2.2.562.46"
HIPRTC_MEMBER = "rocm/amd_comgr/hiprtc_runtime.h"

# threadIdx/blockIdx in hiprtc_runtime.h call these ockl functions; our kernels use the builtins directly,
# but the header's inline definitions must still see declarations-with-bodies when instantiated.
OCKL_SHIM = """// tiles CI shim: work-item queries hiprtc_runtime.h refers to, defined on the builtins (no device libs)
extern "C" {
__attribute__((device, always_inline)) inline unsigned long __ockl_get_local_id(unsigned d) {
  return d == 0 ? __builtin_amdgcn_workitem_id_x() : d == 1 ? __builtin_amdgcn_workitem_id_y() : __builtin_amdgcn_workitem_id_z(); }
__attribute__((device, always_inline)) inline unsigned long __ockl_get_group_id(unsigned d) {
  return d == 0 ? __builtin_amdgcn_workgroup_id_x() : d == 1 ? __builtin_amdgcn_workgroup_id_y() : __builtin_amdgcn_workgroup_id_z(); }
}
"""


class CompileError(RuntimeError):
    pass


@dataclass(frozen=True)
class Toolchain:
    version: int
    clang: str
    objdump: str
    readelf: str


def toolchain(version: int) -> Optional[Toolchain]:
    """clang++-N with its llvm-objdump-N / llvm-readelf-N / ld.lld-N, or None when any is missing."""
    tools = [shutil.which(f"{t}-{version}") for t in ("clang++", "llvm-objdump", "llvm-readelf", "ld.lld")]
    if not all(tools):
        return None
    return Toolchain(version, tools[0], tools[1], tools[2])


def missing_reason(version: int) -> str:
    missing = [f"{t}-{version}" for t in ("clang++", "llvm-objdump", "llvm-readelf", "ld.lld") if not shutil.which(f"{t}-{version}")]
    return f"not installed: {', '.join(missing)} (apt-get install clang-{version} lld-{version} llvm-{version})"


@dataclass
class CompileResult:
    arch: str
    clang: int
    hiprtc: bool
    code_object: bytes  # the HSA code object (what hipModuleLoadData takes)
    disasm: str
    asm: str  # -S output ('' unless asked)
    remarks: str
    resources: Dict[str, int]
    notes: Dict[str, int]
    counts: Dict[str, int] = field(default_factory=dict)

    def count(self, prefix: str) -> int:
        """Instructions whose mnemonic starts with prefix (e.g. 'v_mfma_f32_32x32x16_bf16', 'ds_read')."""
        return sum(n for m, n in self.counts.items() if m.startswith(prefix))

    @property
    def vgpr_total(self) -> int:
        """VGPR + AGPR of the kernel (the unified register file a wave spends; the budget is 512 at one
        wave per SIMD, 256 at two)."""
        return self.resources.get("vgpr", 0) + self.resources.get("agpr", 0)

    def summary(self) -> str:
        r = self.resources
        mf = {m: n for m, n in self.counts.items() if m.startswith("v_mfma")}
        return (f"{self.arch} clang-{self.clang}{' hiprtc' if self.hiprtc else ''}: VGPR {r.get('vgpr')} AGPR {r.get('agpr')} "
                f"SGPR {r.get('sgpr')} scratch {r.get('scratch')} spills {r.get('vgpr_spill')}/{r.get('sgpr_spill')} "
                f"LDS {r.get('lds')} occupancy {r.get('occupancy')} | {mf} buffer_load {self.count('buffer_load')} "
                f"ds_read {self.count('ds_read')} ds_write {self.count('ds_write')} s_setprio {self.count('s_setprio')} "
                f"s_barrier {self.count('s_barrier')}")


_REMARK_KEYS = {
    "SGPRs": "sgpr", "TotalSGPRs": "sgpr", "VGPRs": "vgpr", "AGPRs": "agpr", "ScratchSize [bytes/lane]": "scratch",
    "Occupancy [waves/SIMD]": "occupancy", "SGPRs Spill": "sgpr_spill", "VGPRs Spill": "vgpr_spill",
    "LDS Size [bytes/block]": "lds",
}


def parse_remarks(text: str) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for key, val in re.findall(r"remark: +([A-Za-z][A-Za-z /\[\]]*?): (\d+) \[-Rpass-analysis", text):
        if key in _REMARK_KEYS:
            out[_REMARK_KEYS[key]] = int(val)
    return out


def resources_by_function(text: str) -> Dict[str, Dict[str, int]]:
    """parse_remarks for each kernel of a translation unit: {kernel name: resources}."""
    out: Dict[str, Dict[str, int]] = {}
    parts = re.split(r"remark: +Function Name: +(\S+) \[-Rpass-analysis", text)
    for name, body in zip(parts[1::2], parts[2::2]):
        out[name] = parse_remarks("remark: Function Name" + body)
    return out


def parse_notes(text: str) -> Dict[str, int]:
    keys = ("vgpr_count", "agpr_count", "sgpr_count", "group_segment_fixed_size", "private_segment_fixed_size",
            "vgpr_spill_count", "sgpr_spill_count", "wavefront_size", "max_flat_workgroup_size")
    out = {}
    for k in keys:
        m = re.search(r"\." + k + r":\s+(\d+)", text)
        if m:
            out[k] = int(m.group(1))
    return out


def instruction_counts(disasm: str) -> Dict[str, int]:
    """Mnemonic -> count, from llvm-objdump -d output (lines '\\t<mnemonic> operands // addr: encoding')."""
    c: Dict[str, int] = collections.Counter()
    for line in disasm.splitlines():
        m = re.match(r"\s+([a-z][a-z0-9_]+)(\s|$)", line)
        if m and "//" in line:
            mn = m.group(1)
            if mn.startswith("buffer_") and re.search(r"\blds\b", line.split("//")[0]):
                mn += "_lds"  # buffer_load_dwordx4 ... lds (gfx950 direct-to-LDS)
            c[mn] += 1
    return dict(c)


def _run(cmd: Sequence[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


def compile_hip(source: str, arch: str, clang: int = 22, *, hiprtc: bool = False, asm: bool = False,
                extra_flags: Sequence[str] = (), workdir: Optional[str] = None, name: str = "kernel") -> CompileResult:
    """Compile ``source`` for ``arch`` with clang++-``clang``; raises CompileError with the compiler's
    message on failure (including the expected ones: gfx950 builtins for gfx942, gfx950 on clang-19).
    Intermediate files go to ``workdir`` if given (and stay), else to a temporary directory (removed)."""
    tc = toolchain(clang)
    if tc is None:
        raise CompileError(missing_reason(clang))
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="tiles_cdna_") as tmp:
            return compile_hip(source, arch, clang, hiprtc=hiprtc, asm=asm, extra_flags=extra_flags, workdir=tmp, name=name)
    work = workdir
    src = os.path.join(work, name + ".hip")
    with open(src, "w") as f:
        f.write(source)
    flags = list(BASE_FLAGS) + [f"--offload-arch={arch}", "-I", INCLUDE_DIR] + list(extra_flags)
    if hiprtc:
        hdr, why = hiprtc_header()
        if hdr is None:
            raise CompileError(f"hiprtc_runtime.h unavailable: {why}")
        shim = os.path.join(work, "ockl_shim.h")
        with open(shim, "w") as f:
            f.write(OCKL_SHIM)
        flags += ["-D__HIPCC_RTC__", "-include", hdr, "-include", shim]
    co = os.path.join(work, name + ".co")
    r = _run([tc.clang, *flags, "-Rpass-analysis=kernel-resource-usage", "-c", src, "-o", co])
    if r.returncode:
        raise CompileError(r.stderr.strip())
    text_asm = ""
    if asm:
        s = os.path.join(work, name + ".s")
        ra = _run([tc.clang, *flags, "-S", src, "-o", s])
        if ra.returncode:
            raise CompileError(ra.stderr.strip())
        text_asm = open(s).read()
    dis = _run([tc.objdump, "-d", f"--mcpu={arch}", co]).stdout
    notes = parse_notes(_run([tc.readelf, "--notes", co]).stdout)
    with open(co, "rb") as f:
        code = f.read()
    return CompileResult(arch, clang, hiprtc, code, dis, text_asm, r.stderr, parse_remarks(r.stderr), notes,
                         instruction_counts(dis))


# ----------------------------------------------------------------------------- hiprtc_runtime.h


def cache_dir() -> str:
    """Where the hiprtc header download is kept: beside the kernel cache (TILES_CACHE_DIR, else
    $XDG_CACHE_HOME/tiles or ~/.cache/tiles). A download, not a compiled kernel, so TILES_CACHE=0 keeps it."""
    from tiles.core.cache import cache_dir_from_env

    return os.path.join(cache_dir_from_env(), "cdna")


def hiprtc_header(download: bool = True) -> Tuple[Optional[str], str]:
    """(path, '') of hiprtc's runtime header, or (None, reason). Looks in TILES_HIPRTC_HEADER, then the cache;
    otherwise downloads the rocm-llvm-python wheel (62 MB, pip download --no-deps) and extracts the header."""
    env = os.environ.get("TILES_HIPRTC_HEADER")
    if env:
        return (env, "") if os.path.isfile(env) else (None, f"TILES_HIPRTC_HEADER={env} does not exist")
    dest_dir = os.path.join(cache_dir(), "hiprtc", HIPRTC_WHEEL.split("==")[1])
    dest = os.path.join(dest_dir, "hiprtc_runtime.h")
    if os.path.isfile(dest):
        return dest, ""
    if not download:
        return None, "not in the cache"
    try:
        os.makedirs(dest_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="tiles_hiprtc_") as tmp:
            r = _run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, HIPRTC_WHEEL], timeout=900)
            wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
            if r.returncode or not wheels:
                return None, f"pip download {HIPRTC_WHEEL} failed: {(r.stderr or r.stdout).strip()[-300:]}"
            with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z:
                data = z.read(HIPRTC_MEMBER)
        part = dest + f".{os.getpid()}.part"
        with open(part, "wb") as f:
            f.write(data)
        os.replace(part, dest)  # publish atomically: concurrent test workers may race here
        return dest, ""
    except (OSError, KeyError, subprocess.SubprocessError, zipfile.BadZipFile) as e:
        return None, f"could not obtain {HIPRTC_MEMBER} from {HIPRTC_WHEEL}: {e}"


def loop_body(disasm: str, outermost: bool = False) -> str:
    """The instructions of a backward-branching loop, from the branch target to the backward branch, as
    llvm-objdump printed them ('' when there is no loop): by default the innermost loop closed by an
    s_cbranch (the K loop of a GEMM); with `outermost`, the outermost loop closed by any branch (clang-19
    closes attention's K/V loop with an unconditional s_branch)."""
    lines = disasm.splitlines()
    addr_of = []
    for line in lines:
        m = re.search(r"//\s*([0-9A-Fa-f]{6,}):", line)
        addr_of.append(int(m.group(1), 16) if m else None)
    branch = r"\s+s_(?:cbranch_\w+|branch)\s+(\d+)\s" if outermost else r"\s+s_cbranch_\w+\s+(\d+)\s"
    best = None
    for i, line in enumerate(lines):
        m = re.match(branch, line)
        if m and addr_of[i] is not None:
            simm = int(m.group(1))
            simm = simm - 65536 if simm >= 32768 else simm
            if simm < 0:
                target = addr_of[i] + 4 + 4 * simm
                start = next(j for j in range(i, -1, -1) if addr_of[j] is not None and addr_of[j] <= target)
                span = i - start
                if best is None or (span > best[1] - best[0] if outermost else span < best[1] - best[0]):
                    best = (start, i)
    return "" if best is None else "\n".join(lines[best[0]:best[1] + 1])
