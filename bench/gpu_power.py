"""Session 35: is a kernel held by the board's power limit? Each kernel runs back to back for a few
seconds while nvidia-smi samples the SM clock, the board power and the clock-event reasons every
50 ms; the medians of the last three quarters are printed with the kernel's TFLOP/s over the same
launches. A kernel at the limit (power near 700 W, the SW power cap among the reasons, the clock
under 1980 MHz) runs faster for every joule it saves; one below it does not.

    PYTHONPATH=.:bench:tests/hopper python3 bench/gpu_power.py [attention] [fp8]
"""
import statistics
import subprocess
import sys
import time

import torch

import tiles

QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"


def sample(fn, flops, seconds=2.5):
    """(median SM MHz, median W, the reasons seen (hex masks), TFLOP/s) while fn(i) runs back to back
    (after one call outside the samples: a first call may compile)."""
    fn(0)
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0, n = time.time(), 0
    st = None
    while time.time() - t0 < seconds:
        if st is None and time.time() - t0 > seconds / 4:
            st, n0 = torch.cuda.Event(enable_timing=True), n
            st.record()
        for _ in range(5):
            fn(n)
            n += 1
        torch.cuda.synchronize()
    en = torch.cuda.Event(enable_timing=True)
    en.record()
    en.synchronize()
    ms = st.elapsed_time(en) / (n - n0)
    smi.terminate()
    rows = [r.split(", ") for r in smi.communicate()[0].strip().splitlines() if r.count(",") >= 2]
    rows = rows[len(rows) // 4:]
    if not rows:
        return None
    mhz = statistics.median(float(r[0]) for r in rows)
    watts = statistics.median(float(r[1]) for r in rows)
    reasons = sorted({r[2].strip() for r in rows})
    return mhz, watts, reasons, flops / (ms * 1e-3) / 1e12


def report(label, res):
    if res is None:
        print(f"{label}: nvidia-smi gave no samples", flush=True)
        return
    mhz, watts, reasons, tf = res
    print(f"{label}: {tf:.0f} TFLOP/s, SM {mhz:.0f} MHz, {watts:.0f} W, reasons {reasons}", flush=True)
    time.sleep(1.5)


def attention():
    D, H = 128, 16
    for B, S in ((4, 4096), (1, 16384)):
        sets = []
        for i in range(3):
            g = torch.Generator(device="cuda").manual_seed(i)
            sets.append(tuple(torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3)))
        qt = [tuple(t.transpose(1, 2) for t in x) for x in sets]
        flops = 4 * B * H * S * S * D

        def cudnn(i):
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(*qt[i % 3])
        report(f"attention D={D} S={S} tiles", sample(lambda i: tiles.attention(*sets[i % 3]), flops))
        report(f"attention D={D} S={S} cudnn", sample(cudnn, flops))


def fp8():
    import fp8_ab

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in ((8192, 8192, 8192), (6144, 7168, 2304)):
        sets = fp8_ab.input_sets(M, N, K)
        cfg = fp8_ab.launched(M, N, K, sms)
        vs = {"launched": cfg, "cl2": dict(cfg, cluster=2)}
        fns, _ = fp8_ab.launch_all(sets, vs)
        for label, fn in fns.items():
            report(f"fp8 {M}x{N}x{K} {label}", sample(fn, 2 * M * N * K))
        x = sets[0]
        a_bf, b_bf = x["a_bf"], x["b_bf"]
        report(f"fp8 {M}x{N}x{K} bf16 cublas (dequantized)", sample(lambda i: torch.matmul(a_bf, b_bf.t()), 2 * M * N * K))


if __name__ == "__main__":
    which = sys.argv[1:] or ["attention", "fp8"]
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,clocks.max.sm", "--format=csv"],
                         capture_output=True, text=True).stdout, flush=True)
    for w in which:
        {"attention": attention, "fp8": fp8}[w]()
