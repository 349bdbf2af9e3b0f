"""Where the stream-K fp8 GEMM's time goes, per CTA: %globaltimer stamps injected into the rendered
kernel (this script's copy only) and written past the end of the partial-sum workspace.

    PYTHONPATH=. python3 bench/stream_k_trace.py

Per consumer warpgroup 0 of each CTA: kernel start, the start of its share of the split tiles, the head's loop end,
the head's end of waiting for the other shares, a later share's loop end, the consumer's end.
Prints the distribution over CTAs (microseconds from the earliest start).
"""
import statistics

import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

STAMP = "gtimer()"
GTIMER = ("__device__ __forceinline__ long long gtimer() {\n  unsigned long long t;\n"
          "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n  return (long long)t;\n}\n\n")


def traced_source(src: str) -> str:
    def put(anchor, code, after=True):
        nonlocal src
        assert src.count(anchor) == 1, anchor
        src = src.replace(anchor, anchor + code if after else code + anchor)
    put('extern "C" __global__', GTIMER, after=False)
    put("    arch::reg_inc<CONSUMER_REGS>();\n",
        "    long long* trace = (long long*)(ws + gridDim.x * CONSUMERS * (acc_t::pairs * 128)) + blockIdx.x * 8;\n"
        "    const bool tr = threadIdx.x == 128;\n"
        f"    if (tr) trace[0] = {STAMP};\n")
    put("\n    split_share<CLUSTER> share(ctiles, kblocks, sk_tiles);", f"\n    if (tr) trace[1] = {STAMP};", after=False)
    put("        const int last = share.last_share();\n", f"        if (tr) trace[2] = {STAMP};\n", after=False)
    put("          add_partial(acc, ws + (s * CONSUMERS + cw) * (acc_t::pairs * 128));\n        }\n",
        f"        if (tr) trace[3] = {STAMP};\n")
    put("          store_partial(ws + part_id * (acc_t::pairs * 128), acc);\n", f"          if (tr) trace[4] = {STAMP};\n",
        after=False)
    put("    if (wg_thread() == 0) arch::tma_store_wait<0>();", f"    if (tr) trace[5] = {STAMP};\n", after=False)
    return src


def main():
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for (M, N, K), cfg in [((1024, 1536, 7168), {}), ((1024, 4608, 7168), {}), ((6144, 7168, 2304), {}),
                           ((6144, 7168, 2304), dict(BN=256, stages=4, schedule="pingpong"))]:
        x = fp8.make_set(M, N, K, dev, 7)
        out = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
        kern = lower_fp8.fp8_source("bf16", stream_k=True, **cfg)
        kern["source"] = traced_source(kern["source"])
        kern["name"] += "_traced"
        kern["source"] = kern["source"].replace(kern["name"][:-7] + "(", kern["name"] + "(")
        wsb = sms * 128 * cfg.get("BN", 128) * 4
        ws = torch.zeros(wsb + sms * 8 * 8, dtype=torch.uint8, device=dev)
        flags = torch.zeros(sms * 2, dtype=torch.int32, device=dev)
        lower_fp8._workspaces[(str(out.device), torch.cuda.current_stream(dev).cuda_stream)] = (ws, flags)
        sb = x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1])
        go = lower_fp8.bind(kern, x["a"], x["b"], x["sa"], sb, out)
        for _ in range(3):
            go()
        torch.cuda.synchronize()
        ws[wsb:].zero_()
        torch.cuda._sleep(1_000_000)
        go()
        torch.cuda.synchronize()
        t = ws[wsb:].view(torch.int64).view(sms, 8).cpu()
        t0 = int(t[:, 0].min())
        rel = lambda c: [(int(v) - t0) / 1000 for v in t[:, c] if int(v) != 0]  # noqa: E731
        ntiles = -(-M // 128) * -(-N // cfg.get("BN", 128))
        sk = lower_fp8.split_tiles(ntiles, sms, -(-K // 128))
        print(f"--- {M}x{N}x{K} {cfg or 'BN=128'}: {ntiles} tiles, {sk} split", flush=True)
        for c, what in enumerate(["start", "share start", "head loop end", "head waited", "share loop end", "end"]):
            v = rel(c)
            if v:
                print(f"  {what:18} n={len(v):3} min {min(v):7.1f} med {statistics.median(v):7.1f} max {max(v):7.1f} us")
        waits = [(int(b) - int(a)) / 1000 for a, b in zip(t[:, 2], t[:, 3]) if int(a) and int(b)]
        if waits:
            print(f"  head wait+add     n={len(waits):3} min {min(waits):7.1f} med {statistics.median(waits):7.1f} "
                  f"max {max(waits):7.1f} us", flush=True)


if __name__ == "__main__":
    main()
