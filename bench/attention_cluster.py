"""Session 36: the D = 128 forward in 2-CTA clusters, K and V shared by TMA multicast.

Both CTAs of a cluster run neighbouring query tiles of one head (the walk's units 2c and 2c + 1), so
they read the same key blocks at the same time. Each fetches one column chunk (64 of the 128 columns,
16 KB) of every K and V block and multicasts it to both, so a CTA's producer fetches half of what it
did and the L2 serves each block once a pair. A stage is refilled only once the consumers of both
CTAs have released it: every consumer thread arrives on its own stage's empty barrier, and every
thread (`cluster`) or one lane a warp (`cluster_w`) on the peer's. Nothing else changes: each tile's arithmetic is the launched kernel's,
so the output must be the launched one's to the bit.

The question is power, not latency: back to back and in the suite's timing the forward runs at the
board's 700 W limit (session 35), and session 33's shorter epilogues did not show in its time. K and
V leave the L2 at about 5 TB/s; halving that traffic is the one part of the kernel's energy no
earlier edit touched.

The split tail's parts are walked in pairs as well: unit whole + 2·(t·parts + p) + r is part p of
tile whole + 2t + r, and a part's workspace slot stays (tile − whole)·parts + p, which the merge
kernel reads. That needs whole, the tile count and a head's tile count even (checked at launch).

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_cluster.py [check]
"""
import re
import sys

import attention_split as split

HELPERS = r"""
// ---- session 36 experiment (bench/attention_cluster.py): K and V shared by a 2-CTA cluster
__device__ __forceinline__ void tma_load_4d_multicast(u32 dst, const tma_map* map, u32 bar, int c0, int c1, int c2,
                                                      int c3, u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;"
      ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(mask) : "memory");
}
// column chunk `rank` of the tile, written into both CTAs of the pair (their barriers at the same offset)
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void load_chunk_pair(st<T, R, C, SW>& dst, const tma_map& map, barrier& bar, int rank,
                                                int col, int c1, int c2, int c3) {
  using ST = st<T, R, C, SW>;
  static_assert(ST::chunks == 2, "one column chunk a CTA of the pair");
  tma_load_4d_multicast(dst.addr() + rank * ST::chunk_bytes, &map, bar.addr(), col + rank * ST::chunk_cols, c1, c2,
                        c3, 0x3);
}
// a ring stage both producers write into: released to both (to the peer by every thread, or by
// lane 0 of each warp: PEER_ARRIVALS a phase)
__device__ __forceinline__ void release_pair(barrier& b, int peer) {
  arrive(b);
  if (PEER_ARRIVALS == CONSUMERS * 128 || arch::lane_id() == 0) arrive_cluster(b, peer);
}
// the split tail's units in pairs: the two CTAs of a cluster take the same part of neighbouring tiles
__device__ __forceinline__ void split_unit_pair(int unit, int whole, int parts, int& tile, int& part) {
  if (unit < whole) {
    tile = unit, part = -1;
  } else {
    const int v = unit - whole, pair = v >> 1;
    tile = whole + 2 * (pair / parts) + (v & 1), part = pair % parts;
  }
}
"""


def _sub(src, pattern, repl, count=1):
    new, n = re.subn(pattern, repl, src)
    if n != count:
        raise RuntimeError(f"{pattern!r} matched {n} times, not {count}")
    return new


def edit(src: str, per_warp: bool = False) -> str:
    split_form = "split_unit(" in src
    main, sep, rest = src.partition("\n// The split tail's merge")  # the merge kernel stays as it is
    peer = "CONSUMERS * 4" if per_warp else "CONSUMERS * 128"
    s = _sub(main, r"(constexpr int THREADS = [^\n]*\n)",
             lambda m: m.group(1) + f"constexpr int PEER_ARRIVALS = {peer};  // a phase's arrivals from the peer\n" + HELPERS)
    s = _sub(s, r"__launch_bounds__\(THREADS, 1\)\n", "__launch_bounds__(THREADS, 1) __cluster_dims__(2, 1, 1)\n")
    s = _sub(s, r"S\.ring\.init_all\(1, CONSUMERS \* 128\);", "S.ring.init_all(1, CONSUMERS * 128 + PEER_ARRIVALS);")
    s = _sub(s, r"  __syncthreads\(\);\n", "  arch::cluster_sync();  // the peer's barriers exist before any multicast or remote arrival\n"
                                         "  const int rank = int(arch::cluster_ctarank()), peer = rank ^ 1;\n  (void)peer;\n")
    for t, m in (("kt", "map_K"), ("vt", "map_V")):
        s = _sub(s, rf"load_async_4d\(S\.{t}\[pos\.stage\], {m}, S\.ring\.full\[pos\.stage\], 0, ",
                 f"load_chunk_pair(S.{t}[pos.stage], {m}, S.ring.full[pos.stage], rank, 0, ")
    s = _sub(s, r"release\(S\.ring\.empty\[held\]\)", "release_pair(S.ring.empty[held], peer)", count=2)
    if split_form:
        s = _sub(s, r"split_unit\(prog, ", "split_unit_pair(prog, ", count=2)
        s = _sub(s, r"\(prog - split_whole\)", "((tile - split_whole) * split_parts + part)", count=2)
    # no CTA leaves while its peer may still arrive on its barriers
    s = _sub(s, r"(    if \(cw == 0\) arch::bar_sync\(1, 256\);[^\n]*\n  \}\n)\}\s*$",
             lambda m: m.group(1) + "  arch::cluster_sync();\n}\n")
    return s + sep + rest


VARIANTS = {"cluster": edit, "cluster_w": lambda s: edit(s, per_warp=True)}


def precheck():
    """The grid the launcher takes (one CTA an SM) must fit as resident pairs, and the split tail's
    whole count must be even; printed, and asserted, before anything is timed."""
    import torch
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    for S in (4096, 8192, 16384):
        B = 16384 // S
        x = split.input_sets(B, S, 16, 128, n=1)[0]
        go = split.launcher(W, attention_fwd, *x, variant="cluster", variants=VARIANTS)
        kern = W._kernel_cache[(id(go.lowered), torch.cuda.current_device())]
        pairs = runtime.max_active_clusters(kern, 2, 384, go.lowered.shared_bytes, runtime.num_sms())
        print(f"S={S}: split (whole, parts) {go.split}, resident pairs {pairs} of {runtime.num_sms() // 2}",
              flush=True)
        assert pairs * 2 >= runtime.num_sms(), "the persistent grid would not be resident"
        assert go.split is None or go.split[0] % 2 == 0


if __name__ == "__main__":
    if sys.argv[1:] == ["check"]:
        split.check(VARIANTS)
        from test_attention_lower import _lower
        from tiles.backends.hopper import runtime
        opts = {"peel": True, "split_tail": True}
        low = _lower(D=128, causal=False, launched=True, options=opts)
        runtime.compile_cuda(edit(low.source), name=low.entry + "_cluster_split.cu", cache=False)
        print("split form compiled", flush=True)
    else:
        precheck()
        split.main(VARIANTS, exact=True, shapes=(4096, 8192, 16384), suite=True)
