"""Session 19: what each part of the forward's softmax costs at D = 128, as speed bounds beside the
launched kernel and cuDNN (the way bench/fp8_bounds.py bounds the fp8 GEMM's promotion).

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_bounds.py

The launched forward's generated source with one part of the softmax changed (none of them computes
attention; everything else is the launched kernel, instruction for instruction):
* `noexp`: P = scale·S − m without the exponential (MUFU.EX2 gone, its FFMA kept);
* `nomax`: the row maximum not taken (m_new = m: no FMNMX tree, no shuffles);
* `norescale`: O not rescaled by alpha (64 FMUL a thread a block);
* `nosum`: the row sum not taken;
* `none`: all four (measured above the tensor cores' peak on the H200: ptxas then drops work, so
  this one is not a bound).
Timed by bench/attention_split.py's harness (hopper_gemm_tiles.timed: 20 launches behind a sleep,
medians) next to SDPA's cuDNN backend, at B·S = 16k tokens, H = 16, non-causal (session 19 timed
S = 4k and 16k; the harness adds 1k).
"""
import attention_split as split

C = "(scale * 1.4426950408889634f)"
EDITS = {
    "noexp": [(f"exp2_scaled_row(s, s, {C}, m_new);",
               f"map_row(s, s, m_new, [=](float x, float y) {{ return fmaf(x, {C[1:-1]}, -y); }});")],
    "nomax": [(f"row_max_scaled<true>(m_new, s, {C}, m);", "copy(m_new, m);")],
    "norescale": [("mul_row(o, o, alpha);", "")],
    "nosum": [("row_sum(l, s, l);", "")],
}
EDITS["none"] = [e for k in ("noexp", "nomax", "norescale", "nosum") for e in EDITS[k]]


def bound(name):
    """The edit that takes EDITS[name]'s parts out of the launched source (each occurrence of each)."""
    def ed(src):
        for old, new in EDITS[name]:
            if old not in src:
                raise RuntimeError(f"{name}: {old!r} is not in the launched source")
            src = src.replace(old, new)
        return src + f"\n// bound: {name}\n"
    return ed


if __name__ == "__main__":
    split.main({name: bound(name) for name in EDITS}, exact=False)
