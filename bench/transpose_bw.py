"""Session 35: the fp8 operands' K-major copies (transpose.py) at the issue's five shapes: A (K x M) and B
(K x N) in one launch, and each alone, timed back to back over three input sets (events, medians); the bytes
read and written over the time, against a device-to-device copy of the same bytes.

    PYTHONPATH=. python3 bench/transpose_bw.py
"""
import statistics

import torch

from tiles.backends.hopper import transpose
from tiles.bench import fp8


def timed(fn, reps=9, inner=10):
    """Median ms a call: `inner` calls between two events, queued behind a sleep kernel so that the host's
    launch overhead stays out of the device's time."""
    times = []
    for r in range(reps):
        torch.cuda._sleep(5_000_000)
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        st.record()
        for i in range(inner):
            fn(r * inner + i)
        en.record()
        en.synchronize()
        times.append(st.elapsed_time(en) / inner)
    return statistics.median(times[1:])


def main():
    for s in fp8.SHAPES:
        M, N, K = s["M"], s["N"], s["K"]
        sets = []
        for i in range(3):
            a = torch.randint(0, 256, (K, M), dtype=torch.uint8, device="cuda")
            b = torch.randint(0, 256, (K, N), dtype=torch.uint8, device="cuda")
            sets.append((a.t(), b.t(), torch.empty(2 * (M + N) * K, dtype=torch.uint8, device="cuda")))
        nbytes = 2 * (M + N) * K  # read and written
        both = timed(lambda i: transpose.kmajor_all(sets[i % 3][:2]))
        each = timed(lambda i: [transpose.kmajor(t) for t in sets[i % 3][:2]])
        copy = timed(lambda i: sets[i % 3][2][:nbytes // 2].copy_(sets[(i + 1) % 3][2][nbytes // 2:]))
        print(f"{M} x {N} x {K}: one launch {both * 1e3:.1f} us ({nbytes / both / 1e9:.2f} TB/s), two launches "
              f"{each * 1e3:.1f} us, a plain copy of the bytes {copy * 1e3:.1f} us ({nbytes / copy / 1e9:.2f} TB/s)",
              flush=True)


if __name__ == "__main__":
    main()
