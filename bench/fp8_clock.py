"""Session 38: the SM clock inside the fp8 GEMM, beside its cycles, as bench/attention_clock.py reads
it in the attention forward.

The first consumer thread of each CTA (thread 128) reads %globaltimer and clock64 when it starts and,
through a local object's destructor, when it leaves the kernel: cycles over nanoseconds is its SM's
clock over the CTA's life. Rested launches behind the 5 ms sleep (the standard suite's timing),
interleaved over 12 rounds: each variant's event time, its clock and its cycles (the clock times the
span of the CTAs), medians and quartiles, beside row-wise `torch._scaled_mm`.

Variants: `block` (the launched block-scaled kernel), `rowwise_same` (the row-wise kernel on the same
tiles and schedule: no promotion, one scaling at the tile's end) and `rowwise` (the row-wise kernel's own
launched tiles). The question is whether the block-scaled kernel's gap to row-wise `_scaled_mm` at
8192³ is cycles (the promotion's FFMAs in the issue slots) or clock (their power).

    PYTHONPATH=.:bench python3 bench/fp8_clock.py [check]
"""
import statistics
import sys

import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

import fp8_ab

CTAS = 132
SHAPES = [(8192, 8192, 8192), (6144, 7168, 2304)]

HELPERS = f"""
// ---- session 38 instrument (bench/fp8_clock.py): globaltimer and clock64 at a CTA's start and end
__device__ long long ck_buf[{CTAS} * 4];
__device__ __forceinline__ void ck_read(int slot) {{
  if (threadIdx.x != 128 || blockIdx.x >= {CTAS}) return;
  long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  ck_buf[blockIdx.x * 4 + slot * 2] = ns;
  ck_buf[blockIdx.x * 4 + slot * 2 + 1] = clock64();
}}
struct ck_guard {{
  __device__ ck_guard() {{ ck_read(0); }}
  __device__ ~ck_guard() {{ ck_read(1); }}
}};
"""
BODY = "  extern __shared__ unsigned char smem_raw[];\n"


def edit(src: str) -> str:
    glob = src.index("extern \"C\" __global__")
    if src.count(BODY) != 1:
        raise RuntimeError("the kernel's first line is not where the edit expects it")
    return src[:glob] + HELPERS + src[glob:].replace(BODY, "  ck_guard ck_g;\n" + BODY)


def configs(M, N, K):
    block = fp8_ab.launched(M, N, K, CTAS)
    same = {k: v for k, v in block.items() if k in ("BM", "BN", "stream_k", "schedule", "defer_store", "cluster")}
    rowwise = dict(lower_fp8.launch_options(M, N, K, CTAS, rowwise=True), rowwise=True)
    # session 45: the block-scaled kernel on the row-wise kernel's own tiles (192 x 128 at 8192³), which
    # took 8 % fewer cycles than 128 x 256 there, row-wise
    tiles_of_rowwise = {k: v for k, v in rowwise.items() if k in ("BM", "BN", "stream_k")}
    scales = {k: v for k, v in block.items() if k.startswith(("sa_", "sb_", "scales_"))}
    return {"block": block, "rowwise_same": dict(same, rowwise=True), "rowwise": rowwise,
            "block_on_rowwise_tiles": dict(tiles_of_rowwise, **scales)}


def kernel(cfg):
    kern = lower_fp8.fp8_source("bf16", **cfg)
    return dict(kern, source=edit(kern["source"]))


def check():
    import pathlib
    import tempfile
    sys.path.insert(0, "tests/hopper")
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    for M, N, K in SHAPES:
        for name, cfg in configs(M, N, K).items():
            kern = kernel(cfg)
            c = runtime.compile_cuda(kern["source"], name=kern["name"] + "_clock.cu", cache=False)
            with tempfile.TemporaryDirectory() as d:
                assert_no_spills(c, kern["name"], pathlib.Path(d))
            print(M, N, K, name, cfg, c.resources.get(kern["name"]), flush=True)


def _buf(module, zero=False):
    import numpy as np
    from cuda.bindings import driver as cu
    err, ptr, size = cu.cuModuleGetGlobal(module, b"ck_buf")
    assert err == cu.CUresult.CUDA_SUCCESS, err
    if zero:
        (err,) = cu.cuMemsetD8(ptr, 0, size)
        return None
    buf = np.zeros(size // 8, dtype=np.int64)
    (err,) = cu.cuMemcpyDtoH(buf.ctypes.data, ptr, size)
    return buf.reshape(CTAS, 2, 2)


def clock(buf):
    live = [c for c in range(CTAS) if buf[c, 0, 0] and buf[c, 1, 0]]
    cyc = sum(int(buf[c, 1, 1] - buf[c, 0, 1]) for c in live)
    ns = sum(int(buf[c, 1, 0] - buf[c, 0, 0]) for c in live)
    span = max(int(buf[c, 1, 0]) for c in live) - min(int(buf[c, 0, 0]) for c in live)
    return cyc / ns, span


def main(rounds=12):
    for M, N, K in SHAPES:
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), s) for s in range(3)]
        gos, mods = {}, {}
        for name, cfg in configs(M, N, K).items():
            kern = kernel(cfg)
            row = cfg.get("rowwise", False)
            gos[name] = []
            for x in sets:
                out = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
                sb = x["sb_row"] if row else x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1])
                gos[name].append((lower_fp8.bind(kern, x["a"], x["b"], x["sa_row"] if row else x["sa"], sb, out), out))
            mods[name] = lower_fp8._kernels[(kern["name"], kern["source"], torch.cuda.current_device())].module
            gos[name][0][1].fill_(float("nan"))
            gos[name][0][0]()
            torch.cuda.synchronize()
            err, bound = (fp8.error_and_bound_rowwise if row else fp8.error_and_bound)(gos[name][0][1], sets[0])
            print(f"{M}x{N}x{K} {name} {cfg}: error {err:.3g}, bound {bound:.3g} ({'ok' if err <= bound else 'OUTSIDE'})",
                  flush=True)
        rows = {n: [] for n in (*gos, "scaled_mm_rowwise")}
        for r in range(rounds):
            for n in (list(gos) if r % 2 == 0 else list(gos)[::-1]) + ["scaled_mm_rowwise"]:
                x = sets[r % 3]
                if n in mods:
                    _buf(mods[n], zero=True)
                st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(10_000_000)
                st.record()
                if n in gos:
                    gos[n][r % 3][0]()
                else:
                    torch._scaled_mm(x["a"], x["b"].t(), scale_a=x["sa_row"], scale_b=x["sb_row"], out_dtype=torch.bfloat16)
                en.record()
                en.synchronize()
                ms = st.elapsed_time(en)
                ghz, span = clock(_buf(mods[n])) if n in mods else (0.0, 0)
                rows[n].append((ms, ghz, ghz * span / 1e6))
        flops = 2 * M * N * K
        base = statistics.median(x[0] for x in rows["block"])
        for n, xs in rows.items():
            q = [statistics.quantiles([x[i] for x in xs], n=4) for i in range(3)]
            print(f"{M}x{N}x{K} {n}: {flops / (q[0][1] * 1e-3) / 1e12:.0f} TFLOP/s ({base / q[0][1]:.3f} of block), "
                  f"{q[0][1] * 1e3:.0f} us" + (f", {q[1][1]:.3f} GHz [{q[1][0]:.3f}-{q[1][2]:.3f}], {q[2][1]:.4f} M cycles "
                                                f"[{q[2][0]:.4f}-{q[2][2]:.4f}]" if n in mods else ""), flush=True)


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
