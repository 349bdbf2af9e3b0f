"""Session 36: the forward's O store deferred under the next tile's first S (an edit of the launched source).

Left out, the O store is worth 13 % of the D = 128 forward at S = 512, 8 % at 1k and 5 % at 2k
(`device_session36b.sh`). Both warpgroups end a tile together, so while one stores its O the tensor
cores have only the other's last P V. Session 33's carry moved the last P V as well and lost 9 % at
512. Here (`defer`) only the store moves. At the tile's end O is normalized and packed to bf16, 32
registers held across the tile boundary. It is stored once the next tile's first S = Q Kᵀ has been
issued and the turn passed on, so the store runs under that wgmma and the other warpgroup's. The
walk's last tile, and a tile with no key block, store at once. Split-tail parts store to the
workspace as launched. The fp8 GEMM's `defer_store` is the same idea (bench/hopper_fp8_notes.md,
session 30). The output must be the launched one's to the bit.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_defer.py [check | S ...]
"""
import re
import sys

import attention_split as split
from attention_ostage import _as_split_form

O_STORE = "store(O + pid2 * O_stride0 + pid1 * O_stride2, O_stride1, O_shape1, O_shape3, o, pid0 * 128 + wg_row0, 0);"
PENDING = "store(pend_dst, O_stride1, O_shape1, O_shape3, o_pend, pend_row, 0);"


def _sub(src, pattern, repl, count=1):
    new, n = re.subn(pattern, repl, src)
    if n != count:
        raise RuntimeError(f"{pattern!r} matched {n} times, not {count}")
    return new


def edit(src: str) -> str:
    if "split_unit(" not in src:
        src = _as_split_form(src)
    main, sep, rest = src.partition("\n// The split tail's merge")
    s = _sub(main, r"(    rv<WG_ROWS> l;[^\n]*\n)",
             lambda m: m.group(1) + "    rt<bf16, WG_ROWS, 128> o_pend;  // the last tile's O, stored under this tile's first S\n"
                                    "    bf16* pend_dst = O;\n    int pend_row = 0;\n    bool pend_o = false;\n")
    head, mark, tail = s.partition("// the first iteration, peeled")
    # the first arrive after the peel mark is the peeled iteration's turn
    i = tail.index("        arch::bar_arrive(2 - cw, 256);")
    j = tail.index("\n", i) + 1
    tail = tail[:j] + f"        if (pend_o) {PENDING}  // the last tile's O, under this S\n        pend_o = false;\n" + tail[j:]
    s = head + mark + tail
    s = _sub(s, re.escape("        " + O_STORE) + r"\n",
             f"        if (pend_o) {PENDING}  // a tile with no key block: the last one's first\n"
             "        cast(o_pend, o);\n"
             "        pend_dst = O + pid2 * O_stride0 + pid1 * O_stride2, pend_row = pid0 * 128 + wg_row0, pend_o = true;\n")
    s = _sub(s, r"(    if \(cw == 0\) arch::bar_sync\(1, 256\);[^\n]*\n)",
             lambda m: f"    if (pend_o) {PENDING}  // the walk's last tile\n" + m.group(1))
    return s + sep + rest


VARIANTS = {"defer": edit}

if __name__ == "__main__":
    if sys.argv[1:] == ["check"]:
        split.check(VARIANTS)
        from test_attention_lower import _lower
        from tiles.backends.hopper import runtime
        low = _lower(D=128, causal=False, launched=True, options={"peel": True, "split_tail": True})
        c = runtime.compile_cuda(edit(low.source), name=low.entry + "_defer_split.cu", cache=False)
        assert "serialized" not in c.log, c.log
        print("split form compiled:", c.resources.get(low.entry), flush=True)
    else:
        split.main(VARIANTS, exact=True, shapes=tuple(int(a) for a in sys.argv[1:]) or (512, 1024, 2048, 4096),
                   suite=True)
