"""Writes the wgmma.mma_async wrappers into include/tiles/arch.h (between the GENERATED markers).

Why generated: an m64n256k16 wgmma names 128 accumulator registers in one asm statement; typing those
lists by hand for every N and input type is error-prone, and the preprocessor cannot count. The output
is plain, reviewable C++ that lives in arch.h (the one file allowed to spell PTX).

    python -m tiles.backends.hopper.gen_arch          # rewrite arch.h
    python -m tiles.backends.hopper.gen_arch --check  # exit 1 if arch.h is stale (used by the tests)
"""
from __future__ import annotations

import pathlib
import sys

ARCH_H = pathlib.Path(__file__).parent / "include" / "tiles" / "arch.h"
BEGIN = "// BEGIN GENERATED wgmma (gen_arch.py)\n"
END = "// END GENERATED wgmma\n"
NS = (16, 32, 64, 96, 128, 160, 176, 192, 256)  # wgmma N values tiles uses (PTX allows every multiple of 8 up to 256)
TYPES = (("bf16", ".bf16.bf16"), ("f16", ".f16.f16"))
# 8-bit inputs: k32 per instruction, both operands K-major in shared memory (the fp8 forms have no
# transpose immediates), so only wgmma_ss<N, fp8e4m3, 0, 0> exists.
FP8_NS = (64, 96, 128, 192, 256)  # 96: the fp8 GEMM's 128 x 96 tiles, where 128-wide ones leave SMs idle; 192: bench/fp8_bn192.py
FP8_TYPES = (("fp8e4m3", ".e4m3.e4m3"),)


def _regs(first: int, count: int) -> str:
    return ", ".join(f"%{i}" for i in range(first, first + count))


def _ops(npairs: int) -> str:
    return ", ".join(f'"+f"(d[{i}].x), "+f"(d[{i}].y)' for i in range(npairs))


def generate() -> str:
    out = []
    for n in NS:
        nd = n // 2  # fp32 accumulators per thread
        out.append(f"// ---- N = {n}: {nd} accumulators per thread\n")
        out.append(f'#define TILES_WGMMA_D{n} "{{" "{_regs(0, nd)}" "}}"\n')
        out.append(f"#define TILES_WGMMA_OPS{n}(d) {_ops(nd // 2)}\n")
        for cname, ptx in TYPES:
            ia, ib, isc, ita, itb = nd, nd + 1, nd + 2, nd + 3, nd + 4
            out.append(
                f"template <int TA, int TB> struct wgmma_ss<{n}, {cname}, TA, TB> {{\n"
                f"  static __device__ __forceinline__ void run(float2 (&d)[{nd // 2}], u64 desc_a, u64 desc_b, int scale_d) {{\n"
                f'    asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{isc}, 0;\\n"\n'
                f'                 " wgmma.mma_async.sync.aligned.m64n{n}k16.f32{ptx} " TILES_WGMMA_D{n}\n'
                f'                 ", %{ia}, %{ib}, p, 1, 1, %{ita}, %{itb};\\n}}\\n"\n'
                f"                 : TILES_WGMMA_OPS{n}(d)\n"
                f'                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));\n'
                f"  }}\n}};\n")
            a0, ibr, iscr, itbr = nd, nd + 4, nd + 5, nd + 6
            out.append(
                f"template <int TB> struct wgmma_rs<{n}, {cname}, TB> {{\n"
                f"  static __device__ __forceinline__ void run(float2 (&d)[{nd // 2}], const u32 (&a)[4], u64 desc_b, int scale_d) {{\n"
                f'    asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{iscr}, 0;\\n"\n'
                f'                 " wgmma.mma_async.sync.aligned.m64n{n}k16.f32{ptx} " TILES_WGMMA_D{n}\n'
                f'                 ", {{%{a0}, %{a0 + 1}, %{a0 + 2}, %{a0 + 3}}}, %{ibr}, p, 1, 1, %{itbr};\\n}}\\n"\n'
                f"                 : TILES_WGMMA_OPS{n}(d)\n"
                f'                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));\n'
                f"  }}\n}};\n")
    for n in FP8_NS:
        nd = n // 2
        ia, ib, isc = nd, nd + 1, nd + 2
        if n not in NS:  # an N only the 8-bit forms take: its register lists
            out.append(f"// ---- N = {n} (8-bit inputs only): {nd} accumulators per thread\n")
            out.append(f'#define TILES_WGMMA_D{n} "{{" "{_regs(0, nd)}" "}}"\n')
            out.append(f"#define TILES_WGMMA_OPS{n}(d) {_ops(nd // 2)}\n")
        for cname, ptx in FP8_TYPES:
            out.append(
                f"template <> struct wgmma_ss<{n}, {cname}, 0, 0> {{\n"
                f"  static __device__ __forceinline__ void run(float2 (&d)[{nd // 2}], u64 desc_a, u64 desc_b, int scale_d) {{\n"
                f'    asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{isc}, 0;\\n"\n'
                f'                 " wgmma.mma_async.sync.aligned.m64n{n}k32.f32{ptx} " TILES_WGMMA_D{n}\n'
                f'                 ", %{ia}, %{ib}, p, 1, 1;\\n}}\\n"\n'
                f"                 : TILES_WGMMA_OPS{n}(d)\n"
                f'                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));\n'
                f"  }}\n}};\n")
    return "".join(out)


def render(text: str) -> str:
    i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:i] + generate() + text[j:]


def main(argv: list[str]) -> int:
    text = ARCH_H.read_text()
    new = render(text)
    if "--check" in argv:
        if new != text:
            print(f"{ARCH_H} is stale: run python -m tiles.backends.hopper.gen_arch", file=sys.stderr)
            return 1
        return 0
    ARCH_H.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
