"""Session 33: a query tile's last P V and its epilogue carried into the next tile's first turn.

In the launched forward each warpgroup ends a tile with a turn of its own for the last P V, then
waits for it, normalizes and stores O and the LSE, then starts the next tile with a turn that holds
one S = Q Kᵀ: the tensor cores have the other warpgroup's single wgmma to run while one warpgroup
stores, and the next tile's first softmax has nothing under it. Here (`carry`, an edit of the
launched source) the next tile's first turn issues the previous tile's last P V and then the new
tile's S, the steady loop's pair; the previous tile's epilogue runs while they do, and the walk's
last tile ends with the launched turn. The output must be the launched kernel's to the bit.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_carry.py [check]

`check` (CPU) compiles the edit through NVRTC and asserts no spill. On the GPU: bitwise against
launched, then the suite's timing and back to back, beside cuDNN, at S = 4k / 8k / 16k (H = 16).
"""
import sys

import attention_split as split


def _block(lines, start):
    """The index of the line that closes the block opened at lines[start] (same indent + '}')."""
    pad = len(lines[start]) - len(lines[start].lstrip())
    for i in range(start + 1, len(lines)):
        if lines[i] == " " * pad + "}":
            return i
    raise RuntimeError(f"no close for {lines[start]!r}")


def edit(src: str) -> str:
    lines = src.split("\n")
    top = next(i for i, x in enumerate(lines) if x.startswith("    for (int prog = blockIdx.x, it = 0; prog < "))
    end = _block(lines, top)
    assert lines[end + 1].startswith("    if (cw == 0) arch::bar_sync(1, 256);"), lines[end + 1]
    body = lines[top + 1:end]
    i_void = next(i for i, x in enumerate(body) if x.startswith("      (void)pid0;"))
    header = body[:i_void + 1]
    pid_line = next(x for x in header if x.lstrip().startswith("const int pid0 = "))
    unit_lines = [x for x in header if "split_unit(" in x or x.lstrip().startswith("int tile, part;")]
    i_peel = next(i for i, x in enumerate(body) if "// the first iteration, peeled" in x)
    fills = body[i_void + 1:i_peel]
    assert any("wait(S.once[0], it & 1);" in x for x in fills), fills
    fill_lines = [x for x in fills if x.lstrip().startswith("fill(")]
    kb_stop = [x for x in fills if "const int kb_stop" in x]
    p_end = _block(body, i_peel)
    peel = body[i_peel:p_end + 1]
    i_loop = p_end + 1
    l_end = _block(body, i_loop)
    loop = body[i_loop:l_end + 1]
    tail = body[l_end + 1:]
    i_div = next(i for i, x in enumerate(tail) if x.strip() == "// div_row(o, o, l)")
    epilogue = tail[i_div:]
    final_turn = tail[:i_div]
    # the peeled turn: the previous tile's P V first, then Q (it may land while that runs) and S
    turn = next(i for i, x in enumerate(peel) if "arch::bar_sync(1 + cw, 256);" in x)
    commit = next(i for i in range(turn, len(peel)) if "mma_commit();" in peel[i])
    pad = " " * 8
    new_peel = peel[:1] + [x for x in peel[1:turn] if "wait(t1, t2)" in x or "wait(S.ring.full" in x or "const int kb" in x]
    new_peel += [peel[turn],
                 pad + "if (pend >= 0) mma_AB(o, p, S.vt[held], true);  // the previous tile's last P V",
                 pad + "mma_commit();",
                 pad + "wait(S.once[0], it & 1);  // this tile's Q"]
    new_peel += peel[turn + 1:commit + 2]  # the S wgmma, its commit and the hand-over
    assert "bar_arrive" in new_peel[-1], new_peel[-1]
    # the wait outside the test: ptxas does not pair the two tests of pend, and with the wait on one
    # path only it takes o as in flight at the fills below (and serializes the wgmmas, C7514)
    new_peel += [pad + "mma_wait<1>(o);  // the previous tile's P V retired (its S may still run)",
                 pad + "if (held >= 0) release(S.ring.empty[held]), held = -1;",
                 pad + "if (pend >= 0) {  // the previous tile's epilogue, under this tile's S",
                 pad + "  row_sum_finish(l);",
                 *epi_block(unit_lines, pid_line, epilogue, pad + "  "),
                 pad + "}",
                 *[pad + x.strip() for x in fill_lines]]
    new_peel += peel[commit + 2:]
    out = [lines[top].replace("{", "{", 1)]
    out += header + kb_stop + new_peel + loop + ["      pend = prog;"]
    new = lines[:top] + ["    int pend = -1;  // the unit whose last P V and epilogue the next unit's first turn carries"] + out
    new += ["    }", "    if (pend >= 0) {  // the walk's last tile: the launched ending"]
    new += ["  " + x for x in final_turn if "no iteration released q" not in x]
    new += epi_block(unit_lines, pid_line, epilogue, "      ")
    new += ["    }"] + lines[end + 1:]
    return "\n".join(new)


def epi_block(unit_lines, pid_line, epilogue, pad):
    """The tile's epilogue for the pending unit: its indices recomputed from `pend`."""
    out = [pad + "{", pad + "  const int prog = pend;", pad + "  (void)prog;"]
    out += [pad + "  " + x.strip() for x in unit_lines]
    out += [pad + "  " + pid_line.strip(), pad + "  (void)pid0; (void)pid1; (void)pid2;"]
    base = len(epilogue[0]) - len(epilogue[0].lstrip())
    out += [pad + "  " + x[base:] for x in epilogue]
    out.append(pad + "}")
    return out


def _w0(src):  # the previous tile's epilogue after this tile's S too: nothing of its own under it
    src = edit(src)
    old = "mma_wait<1>(o);  // the previous tile's P V retired (its S may still run)"
    assert src.count(old) == 1
    return src.replace(old, "mma_wait<0>(o, s);")


def _qfirst(src):  # Q waited for before the turn, as the launched kernel's first turn does
    src = edit(src)
    q = "        wait(S.once[0], it & 1);  // this tile's Q\n"
    turn = "        arch::bar_sync(1 + cw, 256);  // my turn on the tensor cores\n        if (pend >= 0) mma_AB"
    assert src.count(q) == 1 and src.count(turn) == 1
    return src.replace(q, "").replace(turn, q + turn)


VARIANTS = {"carry": edit, "carry_w0": _w0, "carry_qfirst": _qfirst}


def check():
    import pathlib
    import tempfile
    from test_attention_lower import _lower
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    for extra in ({}, {"split_tail": True}):
        opts = {**(W.SCHEDULES.get(("attention_fwd", 128)) or {}), **extra}
        low = _lower(D=128, causal=False, launched=True, options=opts)
        for name, fn in VARIANTS.items():
            c = runtime.compile_cuda(fn(low.source), name=f"{low.entry}_{name}.cu", cache=False)
            with tempfile.TemporaryDirectory() as d:
                assert_no_spills(c, low.entry, pathlib.Path(d))
            print(extra, name, "compiled:", c.resources.get(low.entry), flush=True)


def main():
    split.main(VARIANTS, shapes=(4096, 8192, 16384), suite=True)


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
