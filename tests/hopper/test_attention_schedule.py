"""The schedule choices of the Hopper attention lowering, on the CPU (the source) and on the H200 (the
answers): the softmax's scale folded into its exponent, which is exact only for a positive scale and
so is checked at every launch; one-shot tiles released in the loop's last iteration; the causal walk
in pairs of programs inside L2 windows; PingPong turns that run on across programs."""
from __future__ import annotations

import math
import pathlib
import sys

import pytest
import torch

from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
from tiles.core.dtypes import f32
from tiles.core.lang import add, cast, fill, load_async, mma, mul, row_sum, store, wait, zero
from tiles.core.patterns import PingPong
from tiles.core.trace import kernel
from tiles.kernels import attention_fwd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_attention_lower import _lower, _meta  # noqa: E402
import needs  # noqa: E402
from test_compile import assert_no_spills  # noqa: E402

SCALE = "(scale * 1.4426950408889634f)"


def test_scale_is_folded_into_the_exponent():
    low = _lower(D=128, causal=True)
    src = low.source.split("consumers: everything else")[1]  # past the IR listing in the header comment
    assert f"row_max_scaled<true>(m_new, s, {SCALE}, m);" in src  # <true>: the maximum as a tree
    assert f"exp2_scaled_row(s, s, {SCALE}, m_new);" in src
    assert "  mul(s, s," not in src and "  exp2(s, s);" not in src
    assert "// mul(s, s, scale * 1.4426950408889634)  [folded into the exp2_scaled below]" in src
    assert len(low.notes["positive"]) == 1
    plain = _lower(D=128, causal=True, options={"fold": False})
    assert f"mul(s, s, {SCALE});" in plain.source and "row_max<true>(m_new, s, m);" in plain.source
    assert "exp2(s, s);" in plain.source and "_scaled" not in plain.source
    assert plain.notes["positive"] == [] and plain.entry != low.entry


@pytest.mark.parametrize("kernel,form", [("dq", "row"), ("dkdv", "col")])
def test_backward_folds_its_probabilities(kernel, form):
    # P = 2^(scale·log2(e)·S − LSE·log2(e)): no row maximum; the transposed dK/dV tiles take the column form
    src = _lower(D=128, causal=True, kernel=kernel, launched=True).source
    assert f"exp2_scaled_{form}(s, s, {SCALE}, lse);" in src


def test_fold_is_checked_against_the_launch_arguments():
    low = _lower(D=64, causal=False)
    q, kv = _meta(2, 100, 4, 64), _meta(2, 100, 2, 64)
    lse = _meta(2, 4, 100, dtype=torch.float32)
    for scale, holds in [(0.125, True), (1e-30, True), (-0.125, False), (0.0, False), (math.nan, False),
                         (math.inf, False)]:
        bound = attention_fwd.bind(q, kv, kv, q, lse, scale, causal=False, D=64)
        assert WarpSpecializedLowering.folds_hold(low, bound) is holds, scale


def test_one_shot_tiles_are_released_in_the_last_iteration():
    src = _lower(D=128, causal=True).source
    assert "const int kb_stop = " in src
    assert "if (kb + 1 == kb_stop) release(S.once_empty[0]);" in src  # q, after S = Q Kᵀ retires
    assert "if (kb_stop <= 0) release(S.once_empty[0]);" in src  # a program with no key block
    assert src.count("release(S.once_empty[0])") == 2
    opts = {**WarpSpecializedLowering.SCHEDULES[("attention_bwd_dq", 128)], "resident": False}
    dq = _lower(D=128, causal=True, kernel="dq", launched=True, options=opts).source
    assert "if (kb + 1 == kb_stop) release(S.once_empty[1]);" in dq  # dO, after dP = dO Vᵀ retires
    # K, V of dK/dV are read across the query-head loop around the pipelined loop: released after it
    dkdv = _lower(D=128, causal=True, kernel="dkdv", launched=True).source
    assert "kb_stop" not in dkdv and "release(S.once_empty[0]);  // kt is read no more" in dkdv
    # not persistent: nothing to release
    assert "once_empty" not in _lower(D=128, causal=True, options={"persistent": False}).source.split("consumers:")[1]
    late = _lower(D=128, causal=True, options={"early_release": False}).source
    assert "kb_stop" not in late and "release(S.once_empty[0]);  // q is read no more this tile" in late


def test_resident_a_operands_are_read_from_registers():
    """Option resident: a one-shot tile that is an untransposed A operand in the loop is loaded into
    registers once a program; its wgmmas take the register form, and a tile nothing else reads from
    shared memory is released right after the load instead of after the loop."""
    opts = {**WarpSpecializedLowering.SCHEDULES[("attention_bwd_dq", 128)], "resident": True}
    dq = _lower(D=128, causal=True, kernel="dq", launched=True, options=opts).source
    body = dq.split("consumers:")[1]
    for t, i in (("q", 0), ("do", 1)):
        assert f"rt<bf16, WG_ROWS, 128> {t}_a;" in dq
        load = body.index(f"load({t}_a, S.{'do_' if t == 'do' else t}, wg_row0);")
        assert body.index(f"wait(S.once[{i}], it & 1);") < load < body.index(f"release(S.once_empty[{i}]);")
        assert body.count(f"release(S.once_empty[{i}])") == 1  # not again after the loop
    # each copy is read in right after its own barrier, before the next tile's wait: Q's load runs
    # while dO still lands
    assert body.index("load(q_a, S.q, wg_row0);") < body.index("wait(S.once[1], it & 1);")
    assert "mma_ABt(s, q_a, S.kt[pos.stage], false);" in dq and "mma_ABt(dp, do_a, S.vt[pos.stage], false);" in dq
    # the fused kernel at D = 64: K and V in registers; K is still dQ's B operand in shared memory, so it
    # is released after the loop, V as soon as it is loaded
    fused = _lower(D=64, causal=False, kernel="fused", launched=True).source
    assert "mma_ABt(s, kt_a, S.q[pos.stage], false);" in fused and "mma_ABt(dp, vt_a, S.do_[pos.stage], false);" in fused
    assert "mma_AtB_slice<WG_ROWS>(dq, S.dss[dsb], S.kt, wg_row0, false);" in fused
    assert "release(S.once_empty[0]);  // kt is read no more this tile" in fused
    assert fused.index("release(S.once_empty[1]);") < fused.index("for (int kb = 0;", fused.index("consumers:"))
    # without the option, both from shared memory
    plain = _lower(D=64, causal=False, kernel="fused", launched=True,
                   options={**WarpSpecializedLowering.SCHEDULES[("attention_bwd_fused", 64)], "resident": False}).source
    assert "kt_a" not in plain and "mma_ABt(s, S.kt, wg_row0, S.q[pos.stage], false);" in plain
    # a comma-separated value names the tiles: V only
    only_v = _lower(D=64, causal=False, kernel="fused", launched=True,
                    options={**WarpSpecializedLowering.SCHEDULES[("attention_bwd_fused", 64)], "resident": "vt"}).source
    assert "kt_a" not in only_v and "mma_ABt(dp, vt_a, S.do_[pos.stage], false);" in only_v


@pytest.mark.parametrize("scale", [0.09, -0.09, 0.0])
def test_forward_of_any_scale_sign_on_the_gpu(scale):
    """The kernel launched directly (tiles.attention itself takes only scale > 0): a scale that is
    not positive runs the unfolded lowering, and every answer meets the float64 rule."""
    be = needs.hopper_gpu()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "portability"))
    from reference import check_attention_fwd

    g = torch.Generator().manual_seed(5)
    B, S, H, Hkv, D = 2, 333, 4, 2, 128
    q = torch.randn(B, S, H, D, generator=g).bfloat16().cuda()
    k, v = (torch.randn(B, S, Hkv, D, generator=g).bfloat16().cuda() for _ in range(2))
    for causal in (False, True):
        out, lse = torch.full_like(q, math.nan), torch.full((B, H, S), math.nan, device="cuda")
        go = WarpSpecializedLowering.prepare(attention_fwd, q, k, v, out, lse, scale, causal=causal, D=D)
        assert bool(go.lowered.notes["positive"]) == (scale > 0)
        be.launch(attention_fwd, q, k, v, out, lse, scale, causal=causal, D=D)
        torch.cuda.synchronize()
        check_attention_fwd(out, lse, q, k, v, causal, scale)


def test_tree_max_takes_any_even_pair_count(tmp_path):
    """A 96-key block leaves each row 12 pairs a thread, not a power of two: the tree folds the odd
    value over into the next round. On the CPU it compiles with no spill; on the GPU it meets the
    float64 rule and equals the chain's maximum to the bit (a maximum is exact in any order)."""
    from test_compile import assert_no_spills

    runtime = needs.nvrtc()
    low = _lower(D=128, causal=False, BN=96)
    assert "row_max_scaled<true>(m_new, s, " in low.source
    assert_no_spills(runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False), low.entry, tmp_path)
    needs.hopper_gpu()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "portability"))
    from reference import check_attention_fwd

    g = torch.Generator().manual_seed(7)
    B, S, H, D = 2, 333, 4, 128
    q, k, v = (torch.randn(B, S, H, D, generator=g).bfloat16().cuda() for _ in range(3))
    outs = {}
    for tree in (True, False):
        out, lse = torch.full_like(q, math.nan), torch.full((B, H, S), math.nan, device="cuda")
        WarpSpecializedLowering.prepare(attention_fwd, q, k, v, out, lse, 0.09, causal=False, D=D, BN=96,
                                        options={"tree_max": tree})()
        torch.cuda.synchronize()
        check_attention_fwd(out, lse, q, k, v, False, 0.09)
        outs[tree] = (out, lse)
    assert torch.equal(outs[True][0], outs[False][0]) and torch.equal(outs[True][1], outs[False][1])


def test_causal_walk_pairs_programs_in_l2_windows():
    src = _lower(D=128, causal=True).source
    assert "const int window = int_max(1, (int)(16LL * 1024 * 1024 / (streamed > 0 ? streamed : 1)));" in src
    assert "const long long streamed = 65536LL * (int_max(int_min(ceil_div(K_shape1, 128), ceil_div((grid0 - 1) * 128" in src
    assert src.count("for (int slot = 0, done = 0;; ++slot) {") == 2  # the producer and the consumers alike
    assert "const int pid0 = slot & 1 ? level : grid0 - 1 - level" in src
    # not causal: program 0 fastest already keeps a head's programs together
    assert "slot" not in _lower(D=128, causal=False).source
    assert "slot" not in _lower(D=128, causal=True, options={"window": False}).source
    # dK/dV streams Q, dO of each query head of the group: a loop around the pipelined one multiplies it
    dkdv = _lower(D=128, causal=True, kernel="dkdv", launched=True).source
    assert "const long long streamed = 32768LL * (Q_shape2 / K_shape2) * (ceil_div(Q_shape1, 64) - " in dkdv
    assert "const int pid0 = slot & 1 ? grid0 - 1 - level : level" in dkdv  # its heavy programs are the first
    assert "slot" in _lower(D=128, causal=True, kernel="dq", launched=True).source


@pytest.mark.parametrize("D,S,H", [(128, 16384, 4), (64, 16192, 4), (128, 1000, 40)])
def test_causal_walk_covers_every_program_on_the_gpu(D, S, H):
    """Windows smaller than the heads (S = 16k: 2 heads a window), an odd level count (D = 64:
    85 blocks of 192 rows) and more pairs than CTAs (S = 1000, 40 heads): every program of the
    forward, dQ and dK/dV runs once, with the answer of the heavy-first walk to the bit (outputs
    poisoned first)."""
    needs.hopper_gpu()
    from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq

    g = torch.Generator(device="cuda").manual_seed(D + S)
    q, k, v, do = (torch.randn(1, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
    lse, delta = torch.randn(1, H, S, device="cuda", generator=g), torch.randn(1, H, S, device="cuda", generator=g)
    cfg = WarpSpecializedLowering.config("attention_fwd", D=D)
    outs = {}
    for window in (True, False):
        o, l2 = torch.full_like(q, math.nan), torch.full((1, H, S), math.nan, device="cuda")
        go = WarpSpecializedLowering.prepare(attention_fwd, q, k, v, o, l2, D ** -0.5, causal=True, D=D,
                                             options={"window": window}, **cfg)
        assert ("slot" in go.lowered.source) == window
        go()
        dq = torch.full_like(q, math.nan)
        dcfg = WarpSpecializedLowering.config("attention_bwd_dq", D=D)
        opts = {**(WarpSpecializedLowering.SCHEDULES.get(("attention_bwd_dq", D)) or {}), "window": window}
        WarpSpecializedLowering.prepare(attention_bwd_dq, q, k, v, do, lse, delta, dq, D ** -0.5, causal=True, D=D,
                                        options=opts, **dcfg)()
        dk, dv = torch.full_like(k, math.nan), torch.full_like(v, math.nan)
        opts = {**(WarpSpecializedLowering.SCHEDULES.get(("attention_bwd_dkdv", D)) or {}), "window": window}
        WarpSpecializedLowering.prepare(attention_bwd_dkdv, q, k, v, do, lse, delta, dk, dv, D ** -0.5, causal=True,
                                        D=D, options=opts)()
        torch.cuda.synchronize()
        outs[window] = (o, l2, dq, dk, dv)
    for a, b in zip(outs[True], outs[False]):
        assert not a.isnan().any() and torch.equal(a, b)


def test_turns_run_on_across_programs():
    """PingPong with the rotation: warpgroup 0 gets the first turn once, every run of the loop ends with
    each warpgroup handing the turn over, and warpgroup 0 takes the last hand-over after the programs."""
    src = _lower(D=128, causal=True).source
    body = src.split("consumers: everything else")[1]
    first = "if (cw == 1) arch::bar_arrive(1, 256);  // warpgroup 0 takes the first turn"
    assert body.count(first) == 1 and body.index(first) < body.index("for (int slot")
    assert body.count("arch::bar_arrive(2 - cw, 256);") == 2  # after this iteration's turn, and after the last
    assert body.rstrip().endswith("if (cw == 0) arch::bar_sync(1, 256);  // warpgroup 1's last hand-over: no barrier "
                                  "left half-arrived\n  }\n}")
    old = _lower(D=128, causal=True, options={"continuous_turns": False}).source.split("consumers: everything else")[1]
    assert "if (cw == 0) arch::bar_arrive(2, 256);  // warpgroup 1's last turn" in old
    assert old.index(first) > old.index("for (int slot") and "hand-over" not in old
    # three consumer warpgroups (D = 64) take no turns
    assert "bar_arrive" not in _lower(D=64, causal=True, launched=True).source


def test_warpgroup_index_is_warp_uniform(tmp_path):
    """uniform_warpgroup hands the consumer warpgroup's index through a shuffle: ptxas then builds the
    wgmma descriptors in uniform registers, with no R2UR copy before each wgmma (session 14: forward and
    dQ 1-7 % faster; dK/dV at D = 64 2 % faster since session 15; the fused backward 5-13 % since 16)."""
    from sass import disassemble

    shuffle = "const int cw = __shfl_sync(0xffffffffu, warpgroup_id() - 1, 0);"
    low = _lower(D=128, causal=True)
    plain = _lower(D=128, causal=True, options={"uniform_warpgroup": False})
    assert shuffle in low.source and shuffle not in plain.source and "const int cw = warpgroup_id() - 1;" in plain.source
    assert shuffle in _lower(D=64, causal=True, kernel="dkdv", launched=True).source
    assert shuffle in _lower(D=128, causal=True, kernel="fused", launched=True).source  # since session 16
    assert shuffle in _lower(D=128, causal=True, kernel="dkdv", launched=True).source
    assert shuffle in _lower(D=128, causal=True, kernel="dq", launched=True).source
    runtime = needs.nvrtc()
    copies = {}
    for tag, lw in (("uniform", low), ("plain", plain)):
        c = runtime.compile_cuda(lw.source, name=lw.entry + ".cu", cache=False)
        copies[tag] = disassemble(c.cubin, tmp_path).count("R2UR")
    assert copies["uniform"] < copies["plain"], copies


@pytest.mark.parametrize("D", [64, 128])
def test_tree_max_shortens_the_chain(D, tmp_path):
    """tree_max (on by default; measured faster in session 16): the softmax's row maximum as a tree. The
    source calls row_max_scaled<true>; in the forward's main loop the longest chain of dependent FMNMX
    drops from one a pair of a row's values to about log2 of them."""
    from sass import disassemble, mainloops, max_chain
    from test_compile import assert_no_spills

    runtime = needs.nvrtc()
    chains = {}
    for tree in (False, True):
        launched = WarpSpecializedLowering.SCHEDULES.get(("attention_fwd", D)) or {}
        low = _lower(D=D, causal=False, launched=True, options={**launched, "tree_max": tree})
        tags = low.entry[:-2] if launched.get("peel") else low.entry  # the entry's last tag is peel's "pl"
        assert ("row_max_scaled<true>(m_new, s, " in low.source) == tree and tags.endswith("t") == tree
        c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
        assert_no_spills(c, low.entry, tmp_path)  # the tree's values stay in registers: no stack either
        body = min(mainloops(disassemble(c.cubin, tmp_path), "HGMMA"), key=len)
        chains[tree] = (max_chain(body), sum("FMNMX" in i for i in body))
    assert chains[False][0] >= 16 and chains[True][0] <= 8, chains
    assert chains[True][1] == chains[False][1], chains  # as many FMNMX: the same work, in another order
    assert max_chain(["FMNMX R0, R1, R2, !PT", "SHFL.BFLY PT, R3, R0, 0x1, 0x1f", "FMNMX R4, R0, R3, !PT"]) == 2


@pytest.mark.parametrize("D", [64, 128])
def test_tree_max_gives_the_same_bits_on_the_gpu(D):
    """Max is exact in any order: the forward with the tree and with the chain agrees to the bit (O and
    LSE), causal and not, with GQA and tails, and meets the float64 rule."""
    needs.hopper_gpu()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "portability"))
    from reference import check_attention_fwd

    g = torch.Generator().manual_seed(D)
    B, Sq, Sk, H, Hkv = 2, 1000, 1300, 8, 2
    q = torch.randn(B, Sq, H, D, generator=g).bfloat16().cuda()
    k, v = (torch.randn(B, Sk, Hkv, D, generator=g).bfloat16().cuda() for _ in range(2))
    cfg = WarpSpecializedLowering.config("attention_fwd", D=D)
    for causal in (False, True):
        outs = {}
        for tree in (True, False):
            out, lse = torch.full_like(q, math.nan), torch.full((B, H, Sq), math.nan, device="cuda")
            go = WarpSpecializedLowering.prepare(attention_fwd, q, k, v, out, lse, D ** -0.5, causal=causal, D=D,
                                                 options={"tree_max": tree}, **cfg)
            assert ("row_max_scaled<true>" in go.lowered.source) == tree
            go()
            outs[tree] = (out, lse)
        torch.cuda.synchronize()
        assert torch.equal(outs[True][0], outs[False][0]) and torch.equal(outs[True][1], outs[False][1])
        check_attention_fwd(outs[True][0], outs[True][1], q, k, v, causal, D ** -0.5)


def test_fused_backward_after_flashattention3():
    """attention_bwd_fused (session 16): dS in two copies with one barrier a block, and dQ's TMA reduce
    issued by warp 1 of the producer warpgroup, which meets each consumer warpgroup on two named
    barriers (4 + 2w empty, 5 + 2w full). Options ds_stages=1 and reducer=False give the session-12
    form back."""
    low = _lower(D=128, causal=True, kernel="fused", launched=True)
    src = low.source
    body = src.split("consumers: everything else")[1]
    assert "st<bf16, 128, 64> dss[2];" in src and "int dsb = 0;" in body and "dsb ^= 1;" in body
    assert body.count("arch::bar_sync(3, CONSUMERS * 128);") == 1  # after the store only
    assert "store(S.dss[dsb], wg_row0, dsp);" in body and "mma_AtB(dq, S.kt, wg_row0, S.dss[dsb], false);" in body
    # the consumer hands the staging tile over, the reducer adds it and hands it back
    assert "arch::bar_sync(4 + 2 * cw, 128 + 32);  // the reducer has read the staging tile's last contents" in body
    assert "arch::bar_arrive(5 + 2 * cw, 128 + 32);" in body and "reduce_add_async" not in body
    red = src.split("reducer: the transposed store_adds")[1].split("consumers: everything else")[0]
    assert "for (int w = 0; w < CONSUMERS; ++w) arch::bar_arrive(4 + 2 * w, 128 + 32);" in red  # start empty, once
    assert "arch::bar_sync(5 + 2 * w, 128 + 32);" in red and "reduce_add_async(&map_dQacc, S.dq_red[w], w * WG_ROWS," in red
    assert red.index("arch::tma_store_wait_read<0>();") < red.rindex("arch::bar_arrive(4 + 2 * w, 128 + 32);")
    # every hand-over is answered: the consumers' last wait, after the walk over the programs, meets the
    # reducer's last hand-back
    assert body.rstrip().endswith("    }\n    arch::bar_sync(4 + 2 * cw, 128 + 32);  // the reducer has read the last "
                                  "staging tile\n  }\n}")
    old = _lower(D=128, causal=True, kernel="fused", launched=True,
                 options={**WarpSpecializedLowering.SCHEDULES[("attention_bwd_fused", 128)], "ds_stages": 1,
                          "reducer": False}).source
    assert "dss[2]" not in old and old.count("arch::bar_sync(3, CONSUMERS * 128);") == 2
    assert "reducer:" not in old and "reduce_add_async(&map_dQacc, S.dq_red[cw]" in old
    with pytest.raises(Exception, match="ds_stages=3"):
        _lower(D=128, causal=True, kernel="fused", launched=True, options={"ds_stages": 3})


@pytest.mark.parametrize("kernel", ["dkdv", "fused"])
def test_vectors_are_loaded_a_block_ahead(kernel):
    """prefetch: the LSE and Delta of the next query block are loaded while this one computes (a second
    copy each); before the loop, the first block's. Off, they load at their own block. (Where vec_tma
    is on, as launched now, the producer loads them into the ring instead.)"""
    launched = WarpSpecializedLowering.SCHEDULES.get((f"attention_bwd_{kernel}", 128)) or {}
    src = _lower(D=128, causal=True, kernel=kernel, launched=True, options={**launched, "vec_tma": False}).source
    body = src.split("consumers: everything else")[1]
    for v in ("lse", "delta"):
        assert f"cv<64> {v}_next;" in body and f"{v} = {v}_next;  // loaded one iteration ahead" in body
        assert body.count(f"load({v}_next, ") == 2  # the first block's, before the loop; then each next one
    assert "(kb + 1) * 64);" in body and ") / 64) * 64);  // prefetched" in body
    assert body.index("// prefetched") < body.index("for (int kb")
    off = _lower(D=128, causal=True, kernel=kernel, launched=True,
                 options={**launched, "vec_tma": False, "prefetch": False}).source
    assert "_next" not in off and "load(lse, L + " in off
    # the forward and dQ load no vector in their loops: nothing to prefetch
    assert "_next" not in _lower(D=128, causal=True).source
    assert "_next" not in _lower(D=128, causal=True, kernel="dq", launched=True).source


def test_whole_tiles_are_stored_without_a_test_a_pair(tmp_path):
    """ops.h store: with whole_tile_stores (on for dK/dV), a register tile that lies wholly inside its
    tensor goes out one store a pair with no bounds test (the tested walk reloads its bounds between
    stores); the lowering turns it on with TILES_WHOLE_TILE_STORES. The SASS shows both forms."""
    from sass import disassemble

    runtime = needs.nvrtc()
    for kernel, D in (("dkdv", 64), ("dkdv", 128), ("fused", 128)):
        assert "#define TILES_WHOLE_TILE_STORES" in _lower(D=D, causal=True, kernel=kernel, launched=True).source
    assert "TILES_WHOLE_TILE_STORES" not in _lower(D=128, causal=True, kernel="dq", launched=True).source
    tested = _lower(D=128, causal=False, options={"wide_stores": 0})  # pair stores: the form counted below
    whole = _lower(D=128, causal=False, options={"whole_tile_stores": True, "wide_stores": 0})
    assert "TILES_WHOLE_TILE_STORES" not in tested.source and whole.entry.endswith("ws")
    counts = {}
    for tag, lw in (("whole", whole), ("tested", tested)):
        c = runtime.compile_cuda(lw.source, name=lw.entry + ".cu", cache=False)
        sass = disassemble(c.cubin, tmp_path)
        counts[tag] = (sass.count("STG.E "), sass.count("LDC "))
    # 32 more pair stores a thread (the untested copy of O's), and far fewer bound reloads
    assert counts["whole"][0] >= counts["tested"][0] + 32 and counts["whole"][1] < counts["tested"][1], counts


@pytest.mark.parametrize("kernel,D", [("fwd", 128), ("fwd", 64), ("dq", 128), ("dkdv", 64)])
def test_peeled_first_iteration(kernel, D, tmp_path):
    """peel (on for dK/dV at D = 64): the rotated loop's first iteration is emitted on its own, without
    the deferred mma; the loop from the second on issues it unguarded. One empty HGMMA.64x8x16 fewer in the SASS (ptxas's
    close of the group the guard may leave empty), no spill."""
    from sass import disassemble
    from test_compile import assert_no_spills

    name = {"fwd": "attention_fwd", "dq": "attention_bwd_dq", "dkdv": "attention_bwd_dkdv"}[kernel]
    # without the TMA store, which dQ launches with at D = 128: peeled, the store's divergent issue
    # makes ptxas serialize the wgmmas (C7519), and dQ is launched unpeeled
    opts = {**(WarpSpecializedLowering.SCHEDULES.get((name, D)) or {}), "tma_store": False}
    plain = _lower(D=D, causal=True, kernel=kernel, launched=True, options={**opts, "peel": False})
    peeled = _lower(D=D, causal=True, kernel=kernel, launched=True, options={**opts, "peel": True})
    # launched peeled: dK/dV at D = 64 (session 16), the forward at D = 128 (session 24)
    assert opts.get("peel", False) == ((kernel, D) in (("dkdv", 64), ("fwd", 128)))
    body = peeled.source.split("consumers: everything else")[1]
    loop = body.split("// the first iteration, peeled: no deferred mma before it")[1]
    first, rest = loop.split("for (int kb = ", 1)
    assert "const int kb = " in first and "[the previous iteration's" not in first
    assert "[the previous iteration's: issued late so it runs under the softmax]" in rest
    # in the loop the deferred mma goes unguarded; after it, the last iteration's keeps its guard
    inner, after = rest.split("[the last iteration's", 1)
    assert "if (held >= 0) mma_AB(" not in inner and "if (held >= 0) mma_AB(" in after
    def tag(low):  # the entry name's tags, less the output and vector forms that may follow "pl"
        return low.entry.removesuffix("vt").removesuffix("ts")
    assert tag(peeled).endswith("pl") and not tag(plain).endswith("pl")
    runtime = needs.nvrtc()
    empty = {}
    for tag, lw in (("plain", plain), ("peeled", peeled)):
        c = runtime.compile_cuda(lw.source, name=lw.entry + ".cu", cache=False)
        assert_no_spills(c, lw.entry, tmp_path)
        empty[tag] = disassemble(c.cubin, tmp_path).count("HGMMA.64x8x16")
    assert empty["peeled"] == empty["plain"] - 1, empty
    # without a rotation there is nothing to peel
    assert "peeled" not in _lower(D=128, causal=True, options={"rotate": False, "peel": True}).source


@pytest.mark.parametrize("D", [64, 128])
def test_peeled_loop_gives_the_same_bits_on_the_gpu(D):
    """The peeled first iteration computes what the guarded loop did: the forward and dQ agree to the
    bit with and without it (GQA, tails, causal and not)."""
    needs.hopper_gpu()
    from tiles.kernels import attention_bwd_dq

    g = torch.Generator().manual_seed(D + 2)
    B, Sq, Sk, H, Hkv = 2, 1000, 1300, 8, 2
    q, do = (torch.randn(B, Sq, H, D, generator=g).bfloat16().cuda() for _ in range(2))
    k, v = (torch.randn(B, Sk, Hkv, D, generator=g).bfloat16().cuda() for _ in range(2))
    delta = torch.randn(B, H, Sq, generator=g).cuda()
    W = WarpSpecializedLowering
    for causal in (False, True):
        outs = {}
        for peel in (False, True):
            out, lse = torch.full_like(q, math.nan), torch.full((B, H, Sq), math.nan, device="cuda")
            go = W.prepare(attention_fwd, q, k, v, out, lse, D ** -0.5, causal=causal, D=D,
                           options={**(W.SCHEDULES.get(("attention_fwd", D)) or {}), "peel": peel},
                           **W.config("attention_fwd", D=D))
            assert go.lowered.entry.removesuffix("vt").endswith("pl") == peel
            go()
            dq = torch.full_like(q, math.nan)
            go = W.prepare(attention_bwd_dq, q, k, v, do, lse, delta, dq, D ** -0.5, causal=causal, D=D,
                           options={**(W.SCHEDULES.get(("attention_bwd_dq", D)) or {}), "peel": peel},
                           **W.config("attention_bwd_dq", D=D))
            go()
            outs[peel] = (out, lse, dq)
        torch.cuda.synchronize()
        for a, b in zip(outs[False], outs[True]):
            assert torch.equal(a, b)
        assert torch.isfinite(outs[True][0]).all() and torch.isfinite(outs[True][2]).all()


@pytest.mark.parametrize("kernel,D", [("fwd", 128), ("fwd", 64), ("dkdv", 128), ("dkdv", 64)])
@pytest.mark.parametrize("wide", [2, 4])
def test_wide_stores(kernel, D, wide, tmp_path):
    """wide_stores = N (ops.h store_wide; 2 is the default): the quad's lanes swap pairs so that each
    stores N pairs of one row at once, 8 or 16 bytes, where a pair a store writes half of each sector
    (the form with wide_stores = 0). The SASS shows the wide stores and the quad's shuffles, and no
    spill."""
    from sass import disassemble
    from test_compile import assert_no_spills

    name = {"fwd": "attention_fwd", "dkdv": "attention_bwd_dkdv"}[kernel]
    opts = WarpSpecializedLowering.SCHEDULES.get((name, D)) or {}
    low = _lower(D=D, causal=True, kernel=kernel, launched=True, options={**opts, "wide_stores": wide})
    assert f"#define TILES_WIDE_STORES {wide}" in low.source and f"wd{wide}" in low.entry
    plain = _lower(D=D, causal=True, kernel=kernel, launched=True, options={**opts, "wide_stores": 0})
    assert "TILES_WIDE_STORES" not in plain.source
    runtime = needs.nvrtc()
    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    plain_sass = disassemble(runtime.compile_cuda(plain.source, name=plain.entry + ".cu", cache=False).cubin, tmp_path)
    op = {2: "STG.E.64", 4: "STG.E.128"}[wide]
    assert op in sass and op not in plain_sass
    # a shuffle a word and round (log2 N rounds, half the words swapped in each): D / 4 words of a
    # thread's row of the stored tile, the fewest of the kernels' stores
    assert sass.count("SHFL.BFLY") >= plain_sass.count("SHFL.BFLY") + D // 4 * {2: 1, 4: 2}[wide] // 2


def test_wide_stores_option_is_checked():
    with pytest.raises(Exception, match="wide_stores"):
        _lower(D=128, causal=False, options={"wide_stores": 3})


def _tail_inputs(D, seed):
    """Inputs with row tails and grouped heads (1000 queries over 8 heads, 1300 keys over 2), on the
    GPU: (B, Sq, Sk, H, Hkv), q, do, k, v, an LSE and a Delta."""
    g = torch.Generator().manual_seed(seed)
    B, Sq, Sk, H, Hkv = 2, 1000, 1300, 8, 2
    q, do = (torch.randn(B, Sq, H, D, generator=g).bfloat16().cuda() for _ in range(2))
    k, v = (torch.randn(B, Sk, Hkv, D, generator=g).bfloat16().cuda() for _ in range(2))
    lse_in = (torch.rand(B, H, Sq, generator=g) * 4 + 4).cuda()
    delta = torch.randn(B, H, Sq, generator=g).cuda()
    return (B, Sq, Sk, H, Hkv), q, do, k, v, lse_in, delta


@pytest.mark.parametrize("D", [64, 128])
def test_wide_stores_give_the_same_bits_on_the_gpu(D):
    """The same values reach the same addresses whichever store form carries them: the forward's O and
    LSE and dK/dV agree to the bit, causal and not, with row tails (1000 queries, 1300 keys) and with
    outputs 4 bytes past a 16-byte boundary, which send the wide form back to pair stores."""
    needs.hopper_gpu()
    from tiles.kernels import attention_bwd_dkdv

    (B, Sq, Sk, H, Hkv), q, do, k, v, lse_in, delta = _tail_inputs(D, D + 5)
    W = WarpSpecializedLowering
    for causal in (False, True):
        for offset in (0, 2):  # 2: outputs 4 bytes past a 16-byte boundary (the pair stores' fallback)
            outs = {}
            for wide in (0, 2, 4):
                fopts = {**(W.SCHEDULES.get(("attention_fwd", D)) or {}), "wide_stores": wide}
                buf = torch.full((B * Sq * H * D + offset,), math.nan, dtype=torch.bfloat16, device="cuda")
                o = buf[offset:].view(B, Sq, H, D)
                lse = torch.full((B, H, Sq), math.nan, device="cuda")
                W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options=fopts,
                          **W.config("attention_fwd", D=D))()
                bopts = {**(W.SCHEDULES.get(("attention_bwd_dkdv", D)) or {}), "wide_stores": wide}
                kbuf = torch.full((2, B * Sk * Hkv * D + offset), math.nan, dtype=torch.bfloat16, device="cuda")
                dk, dv = (kbuf[i, offset:].view(B, Sk, Hkv, D) for i in range(2))
                W.prepare(attention_bwd_dkdv, q, k, v, do, lse_in, delta, dk, dv, D ** -0.5, causal=causal, D=D,
                          options=bopts, **W.config("attention_bwd_dkdv", D=D))()
                outs[wide] = (o, lse, dk, dv)
            torch.cuda.synchronize()
            assert all(torch.isfinite(t).all() for t in outs[0])
            for wide in (2, 4):
                assert all(torch.equal(a, b) for a, b in zip(outs[0], outs[wide])), (causal, offset, wide)


def test_forward_tile_follows_the_problem():
    """D = 64 takes 192 query rows (three warpgroups) but for causal problems of at most 1k queries,
    which take 128 rows in two warpgroups taking turns (measured faster there, session 17)."""
    W = WarpSpecializedLowering
    assert W.config("attention_fwd", D=64) == {"BM": 192}
    assert W.config("attention_fwd", D=64, causal=False, Sq=512, Sk=512) == {"BM": 192}
    assert W.config("attention_fwd", D=64, causal=True, Sq=1024, Sk=1024) == {"BM": 128}
    assert W.config("attention_fwd", D=64, causal=True, Sq=2048, Sk=2048) == {"BM": 128}
    assert W.config("attention_fwd", D=64, causal=True, Sq=4096, Sk=4096) == {"BM": 192}
    assert W.config("attention_fwd", D=128, causal=True, Sq=512, Sk=512) == {}
    low = _lower(D=64, causal=True, launched=True, **W.config("attention_fwd", D=64, causal=True, Sq=512))
    assert "BM128" in low.entry and "pp" in low.entry  # two consumer warpgroups taking turns


@pytest.mark.parametrize("kernel", ["fwd", "dq"])
@pytest.mark.parametrize("D", [64, 128])
def test_tma_store_stages_the_output(kernel, D, tmp_path):
    """Option tma_store: the 16-bit output tile goes through a swizzled staging tile per consumer
    warpgroup and one TMA store; the pair stores and their bounds tests are gone, the CTA waits for
    its stores before it exits, and ptxas spills nothing."""
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills

    # schedule() launches the TMA store unpeeled (peeled, ptxas serializes the causal forward's wgmmas)
    opts = {**(WarpSpecializedLowering.SCHEDULES.get((f"attention_{'fwd' if kernel == 'fwd' else 'bwd_dq'}", D)) or {}),
            "tma_store": True, "peel": False}
    low = _lower(D=D, causal=True, kernel=kernel, launched=True, options=opts)
    plain = _lower(D=D, causal=True, kernel=kernel, launched=True, options={**opts, "tma_store": False})
    src = low.source.split("consumers: everything else")[1]
    out = "O" if kernel == "fwd" else "dQ"
    assert f"store_async_4d(map_{out}, S.{out}_out[cw]," in src and f"store(S.{out}_out[cw]," in src
    assert f"store({out} + " not in src and f"store({out} + " in plain.source.split("consumers: everything else")[1]
    assert "arch::tma_store_wait<0>();  // this warpgroup's TMA stores are done" in src
    assert low.entry.endswith("ts") and not plain.entry.endswith("ts")
    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)


@pytest.mark.parametrize("D", [64, 128])
def test_tma_store_gives_the_same_bits_on_the_gpu(D):
    """The same values, stored by TMA: the forward's O and LSE and dQ agree to the bit with the pair
    stores, causal and not, with row tails (1000 queries, 1300 keys; TMA drops the rows past the
    tensor) and grouped heads."""
    needs.hopper_gpu()
    from tiles.kernels import attention_bwd_dq

    (B, Sq, Sk, H, Hkv), q, do, k, v, lse_in, delta = _tail_inputs(D, D + 7)
    W = WarpSpecializedLowering
    for causal in (False, True):
        outs = {}
        for tma in (False, True):
            fopts = {**(W.SCHEDULES.get(("attention_fwd", D)) or {}), "tma_store": tma}
            o = torch.full((B, Sq, H, D), math.nan, dtype=torch.bfloat16, device="cuda")
            lse = torch.full((B, H, Sq), math.nan, device="cuda")
            W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options=fopts,
                      **W.config("attention_fwd", D=D, causal=causal, Sq=Sq))()
            qopts = {**(W.SCHEDULES.get(("attention_bwd_dq", D)) or {}), "tma_store": tma}
            dq = torch.full_like(q, math.nan)
            W.prepare(attention_bwd_dq, q, k, v, do, lse_in, delta, dq, D ** -0.5, causal=causal, D=D,
                      options=qopts, **W.config("attention_bwd_dq", D=D))()
            outs[tma] = (o, lse, dq)
        torch.cuda.synchronize()
        assert all(torch.isfinite(t).all() for t in outs[False])
        assert all(torch.equal(a, b) for a, b in zip(outs[False], outs[True])), causal


def test_tma_store_is_launched_where_measured_faster():
    """schedule(): dQ at D = 128 always, the forward at D = 64 up to 1k queries (causal 2k), nothing else (the forward
    at D = 128 takes ring_store, tests/hopper/test_ring_store.py); and never where a 16-bit tensor does
    not suit TMA (here an output 4 bytes past a 16-byte boundary)."""
    W = WarpSpecializedLowering
    q = lambda S, off=0: torch.empty(2 * S * 4 * 64 + off, dtype=torch.bfloat16)[off:].view(2, S, 4, 64)  # noqa: E731
    lse = torch.empty(2, 4, 512)
    assert W.schedule("attention_fwd", 64, (q(512), q(512), q(512), q(512), lse, 0.1))["tma_store"] is True
    assert "tma_store" not in (W.schedule("attention_fwd", 64, (q(2048), q(2048), q(2048), q(2048), lse, 0.1)) or {})
    # causal at 2k as well, with config()'s 128-row tiles; not at 4k
    assert W.schedule("attention_fwd", 64, (q(2048), q(2048), q(2048), q(2048), lse, 0.1), True)["tma_store"] is True
    assert "tma_store" not in (W.schedule("attention_fwd", 64, (q(4096), q(4096), q(4096), q(4096), lse, 0.1), True) or {})
    assert "tma_store" not in (W.schedule("attention_fwd", 128, (q(512),)) or {})
    assert W.schedule("attention_fwd", 128, (q(512),), causal=True) == {"peel": True, "ring_store": True}
    assert "tma_store" not in (W.schedule("attention_fwd", 128, (q(1024),), causal=True) or {})
    assert "tma_store" not in (W.schedule("attention_fwd", 64, (q(512), q(512), q(512), q(512, 2), lse, 0.1)) or {})
    assert W.schedule("attention_bwd_dq", 128, (q(4096),)) == {"pingpong": True, "tma_store": True, "resident": True}
    assert W.schedule("attention_bwd_dq", 128, (q(4096, 2),)) == {"pingpong": True, "resident": True}
    assert W.schedule("attention_bwd_dkdv", 128, (q(512),)) == W.SCHEDULES[("attention_bwd_dkdv", 128)]


def test_tma_store_refuses_an_output_tma_cannot_map():
    """An output written through TMA cannot be swapped for an aligned copy as an input can (the writes
    would land in the copy): prepare refuses it with a ValueError naming the tensor, before any launch."""
    needs.hopper_gpu()
    W = WarpSpecializedLowering
    q, k, v = (torch.zeros(1, 256, 2, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    o = torch.empty(256 * 2 * 64 + 2, dtype=torch.bfloat16, device="cuda")[2:].view(1, 256, 2, 64)  # 4 B past 16
    lse = torch.empty(1, 2, 256, device="cuda")
    with pytest.raises(ValueError, match="O is written through TMA"):
        W.prepare(attention_fwd, q, k, v, o, lse, 0.125, causal=False, D=64, options={"tma_store": True},
                  **W.config("attention_fwd", D=64))


def test_fused_backward_at_d64_sums_dq_by_warpgroup(tmp_path):
    """At D = 64 the fused backward's dQ block (64 queries x 64) has neither the 128 key rows the
    warpgroups split nor them as columns, but sums over them: each warpgroup takes its own keys' share
    (mma_AtB_slice from its rows of dS and K) and the reducer warp adds both partial tiles at the same
    coordinates. Launched persistent: no spill."""
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills

    for causal in (False, True):
        low = _lower(D=64, causal=causal, kernel="fused", options={"uniform_warpgroup": True})  # persistent
        src = low.source.split("// Generated by")[1]
        assert "mma_AtB_slice<WG_ROWS>(dq, S.dss[dsb], S.kt, wg_row0, false);" in src
        assert "rt<float, 64, 64> dq;" in src and "st<float, 64, 64> dq_red[CONSUMERS];" in src
        assert "store(S.dq_red[cw], dq, 0);" in src and " + w * WG_ROWS" not in src
        # the persistent walk: each staging tile's empty token is handed once before it and taken back
        # once after it (a second arrival per program, before the consumers took the first, hung)
        reducer = src.split("reducer: the transposed store_adds")[1]
        walk_head = "for (int slot = 0" if causal else "for (int prog = blockIdx.x"  # causal: pairs of programs
        before, walk = reducer.split(walk_head, 1)
        assert "arch::bar_arrive(4 + 2 * w, 128 + 32);" in before
        assert walk.split("} else {")[0].count("arch::bar_arrive(4 + 2 * w") == 1  # after each reduce only
        consumers = src.split("consumers: everything else")[1]
        assert consumers.rstrip().endswith("    }\n    arch::bar_sync(4 + 2 * cw, 128 + 32);  // the reducer has read "
                                           "the last staging tile\n  }\n}")  # after the walk's closing brace
        # launched persistent, the walk's constants computed in each role (with the reducer's walk in
        # the producer warpgroup's registers, ptxas spilled them when they lived across setmaxnreg)
        low = _lower(D=64, causal=causal, kernel="fused", launched=True)
        assert low.notes["persistent"] and "mma_AtB_slice<WG_ROWS>" in low.source
        assert low.source.count("const int grid0 = ") == 3
        end = "const int heads = grid1 * grid2" if causal else "const int programs = grid0 * grid1 * grid2;"
        assert low.source.count(end) == 3
        assert "constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;" in low.source
        c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
        assert_no_spills(c, low.entry, tmp_path)
    # at D = 128 the block is held transposed, its rows split as before
    assert "mma_AtB_slice" not in _lower(D=128, causal=False, kernel="fused").source


def test_fused_backward_stores_ds_by_stmatrix(tmp_path):
    """dS (16-bit registers into a swizzled shared tile) goes four pairs a stmatrix (ops.h store,
    session 21): the D = 64 fused loop as launched (not rotated: no deferred mma) stores it in four
    STSM and no 4-byte STS; with stmatrix=False, sixteen STS. Its gradients meet the float64 rule in
    the GPU tests (tests/test_attention_fused.py and the one below)."""
    runtime = needs.nvrtc()
    from sass import disassemble, mainloops

    counts = {}
    for on in (True, False):
        options = {**WarpSpecializedLowering.SCHEDULES[("attention_bwd_fused", 64)], "stmatrix": on}
        low = _lower(D=64, causal=False, kernel="fused", launched=True, options=options)
        assert "issued late so it runs under the softmax" not in low.source
        assert ("#define TILES_NO_STMATRIX" in low.source) is not on
        c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
        loop = min(mainloops(disassemble(c.cubin, tmp_path), "HGMMA"), key=len)
        counts[on] = (sum("STSM" in t for t in loop), sum(t.split()[0] == "STS" for t in loop))
    assert counts == {True: (4, 0), False: (0, 16)}, counts


def test_backward_runs_fused_at_d64_only(monkeypatch):
    """tiles.attention's backward takes attention_bwd_fused at the head dims of FUSED_BACKWARD_D (64,
    from 512 queries, causal from 1k: faster than the split kernels there, sessions 20 and 21; 128
    non-causal from 8k, causal from 16k, session 22) where
    its key-block programs fill the GPU twice, at both head dims with FUSED_BACKWARD, else the split
    kernels; direct launches (no problem given) lower it at both."""
    from tiles.backends.hopper.backend import HopperBackend

    be = HopperBackend.__new__(HopperBackend)  # supports() reads only the class's switches
    problem = dict(causal=False, Sq=4096, Sk=4096, B=4, Hkv=32)
    assert be.supports("attention_bwd_fused", D=64, **problem)
    short = {**problem, "Sq": 512, "Sk": 512, "B": 32}
    assert be.supports("attention_bwd_fused", D=64, **short)
    assert not be.supports("attention_bwd_fused", D=64, **{**short, "causal": True})  # the split kernels were faster
    assert be.supports("attention_bwd_fused", D=64, **{**problem, "causal": True, "Sq": 1024, "Sk": 1024, "B": 16})
    assert not be.supports("attention_bwd_fused", D=128, **problem)  # 4k queries: the split kernels
    long = {**problem, "Sq": 8192, "Sk": 8192, "B": 2, "Hkv": 16}  # D = 128 non-causal from 8k (session 22)
    assert be.supports("attention_bwd_fused", D=128, **long)
    assert not be.supports("attention_bwd_fused", D=128, **{**long, "causal": True})  # causal from 16k
    assert be.supports("attention_bwd_fused", D=128, **{**long, "causal": True, "Sq": 16384, "Sk": 16384, "B": 1})
    assert be.supports("attention_bwd_fused") and not be.supports("attention_bwd_fused", D=96, **problem)
    # not measured, so the split kernels: short queries; too few key-block programs to fill the GPU
    assert not be.supports("attention_bwd_fused", D=64, **{**problem, "Sq": 256, "Sk": 256, "B": 64})
    assert not be.supports("attention_bwd_fused", D=64, **{**problem, "Sk": 256, "B": 1, "Hkv": 8})  # 16 programs
    monkeypatch.setattr(HopperBackend, "FUSED_BACKWARD_D", {})
    assert not be.supports("attention_bwd_fused", D=64, **problem)
    monkeypatch.setattr(HopperBackend, "FUSED_BACKWARD", True)
    assert be.supports("attention_bwd_fused", D=64, **problem) and be.supports("attention_bwd_fused", D=128, **problem)


def test_register_budgets_fit_the_ctas_allocation():
    """setmaxnreg moves registers within the CTA's allocation (168 a thread for 384 threads), so the
    budgets must sum within it: 32 + 2 x 240 (64K, above 168 x 384) left the consumers' setmaxnreg.inc
    waiting forever on the H200 (session 20). The template's static_assert refuses that sum, and the
    persistent D = 64 fused backward, whose reducer warp needs more than 24, takes 40 + 2 x 232."""
    runtime = needs.nvrtc()
    low = _lower(D=64, causal=True, kernel="fused", launched=True)
    assert "constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;" in low.source
    runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    bad = low.source.replace("PRODUCER_REGS = 40, CONSUMER_REGS = 232", "PRODUCER_REGS = 32, CONSUMER_REGS = 240")
    with pytest.raises(Exception, match="register budgets exceed the CTA's allocation"):
        runtime.compile_cuda(bad, name=low.entry + "_bad.cu", cache=False)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_at_d64_runs_fused_on_the_gpu(causal, monkeypatch):
    """tiles.attention's backward at D = 64 from 512 queries (1k causal) is attention_bwd_fused (not the split
    kernels), with row tails and grouped heads, and meets the float64 rule of the portability suite.
    (36 key-block programs: the GPU-filling rule is lowered for the test, the kernel is the same.)"""
    needs.hopper_gpu()
    import tiles
    from reference import attention_ref, fl, max_err
    from tiles.backends.hopper.backend import HopperBackend

    monkeypatch.setattr(HopperBackend, "FUSED_BACKWARD_PROGRAMS_PER_SM", 0)

    launched = []
    launch = tiles.api._launch
    monkeypatch.setattr(tiles.api, "_launch", lambda b, kfn, *a, **kw: (launched.append(kfn.name), launch(b, kfn, *a, **kw)))
    g = torch.Generator(device="cuda").manual_seed(20)
    B, S, H, Hkv, D = 2, 1100, 4, 2, 64
    q = torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16()
    k, v = (torch.randn(B, S, Hkv, D, device="cuda", generator=g).bfloat16() for _ in range(2))
    do = torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16()
    scale = 0.7 / math.sqrt(D)
    grads = {}
    for kind, fn in (("tiles", lambda q, k, v: tiles.attention(q, k, v, causal=causal, scale=scale, backend="hopper")),
                     ("ref", lambda q, k, v: attention_ref(q, k, v, causal, scale)[0]),
                     ("lp", lambda q, k, v: attention_ref(q, k, v, causal, scale, dtype=torch.bfloat16)[0])):
        dt = torch.float64 if kind == "ref" else torch.bfloat16
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        fn(*xs).backward(do.to(dt))
        grads[kind] = [x.grad for x in xs]
    assert "attention_bwd_fused" in launched and "attention_bwd_dq" not in launched, launched
    for i, n in enumerate("qkv"):
        ref = grads["ref"][i]
        e, e_lp = max_err(grads["tiles"][i], ref), max_err(grads["lp"][i], ref)
        assert e <= 3 * e_lp + fl(ref), f"d{n}: max error {e:.3e} > 3·{e_lp:.3e} + fl"


@pytest.mark.parametrize("kernel,D", [("fused", 64), ("fused", 128), ("dkdv", 64), ("dkdv", 128)])
def test_vectors_come_through_the_ring_by_tma(kernel, D, tmp_path):
    """vec_tma: the producer thread loads each stage's LSE and Delta windows by TMA with the stage's
    tiles (their bytes on its full barrier) and the consumers read them from shared memory: no global
    load of either in the consumers, no copy a block ahead; the same ring depth, no spill."""
    from tiles.backends.hopper import runtime

    W = WarpSpecializedLowering
    name = f"attention_bwd_{kernel}"
    base = _lower(D=D, causal=True, kernel=kernel, launched=True)
    low = _lower(D=D, causal=True, kernel=kernel, launched=True,
                 options={**(W.SCHEDULES.get((name, D)) or {}), "vec_tma": True})
    src = low.source
    producer, consumers = src.split("consumers: everything else")
    for v, P in (("lse", "L"), ("delta", "Delta")):
        assert f"sv<64> {v}_s[STAGES];" in src
        assert f"load_async_4d(S.{v}_s[pos.stage], map_{P}, S.ring.full[pos.stage], kb * 64, " in producer
        assert f"load({v}, S.{v}_s[pos.stage]);" in consumers
        assert f"{P} + " not in consumers and f"float* __restrict__ {P}," not in src
    assert "_next" not in src
    assert "S.lse_s[pos.stage], S.delta_s[pos.stage]);" in producer.split("expect_tiles(S.ring.full")[1].split("\n")[0]
    assert low.notes["stages"] == base.notes["stages"]
    assert ("map_L", "map_Delta") == tuple(a[1] for a in low.args if a[0] == "tma_vec")
    assert_no_spills(runtime.compile_cuda(src, name=low.entry + ".cu", cache=False), low.entry, tmp_path)
    with pytest.raises(Exception, match="vec_tma: the pipelined loop loads no column vector"):
        _lower(D=D, causal=True, options={"vec_tma": True})


@pytest.mark.parametrize("D", [64, 128])
def test_vectors_by_tma_give_the_same_bits_on_the_gpu(D):
    """The same LSE and Delta values whichever way they come: dK/dV agree to the bit with and without
    vec_tma, causal and not, with row tails and grouped heads, from rows 16-byte aligned (1000
    queries) and from rows that are not (1001: the launch copies them into padded rows), and from
    strided views."""
    needs.hopper_gpu()
    from tiles.kernels import attention_bwd_dkdv

    W = WarpSpecializedLowering
    for Sq in (1000, 1001):
        (B, _, Sk, H, Hkv), q, do, k, v, lse_in, delta = _tail_inputs(D, D + 11)
        q, do = (torch.cat([x, x[:, :1]], 1)[:, :Sq].contiguous() for x in (q, do))
        lse_in, delta = (torch.cat([x, x[..., :1]], -1)[..., :Sq].contiguous() for x in (lse_in, delta))
        wide = torch.zeros(B, H, 1040, device="cuda")  # rows 16-byte aligned, not contiguous
        wide[..., :Sq] = lse_in
        for causal in (False, True):
            outs = []
            for vt, lse in ((False, lse_in), (True, lse_in), (True, wide[..., :Sq])):
                opts = {**(W.SCHEDULES.get(("attention_bwd_dkdv", D)) or {}), "vec_tma": vt}
                dk, dv = torch.full_like(k, math.nan), torch.full_like(v, math.nan)
                W.prepare(attention_bwd_dkdv, q, k, v, do, lse, delta, dk, dv, D ** -0.5, causal=causal, D=D,
                          options=opts, **W.config("attention_bwd_dkdv", D=D))()
                outs.append((dk, dv))
            torch.cuda.synchronize()
            assert all(torch.isfinite(t).all() for t in outs[0])
            for other in outs[1:]:
                assert all(torch.equal(a, b) for a, b in zip(outs[0], other)), (Sq, causal)


def test_vectors_by_tma_where_measured_faster():
    """vec_tma as launched: the dK/dV kernels and the D = 128 fused kernel always; the D = 64 fused
    kernel non-causal only (session 22's sweeps); dQ and the forward load no vector in their loops."""
    W = WarpSpecializedLowering
    on = lambda kernel, D, causal: bool((W.schedule(kernel, D, causal=causal) or {}).get("vec_tma"))  # noqa: E731
    for D in (64, 128):
        for causal in (False, True):
            assert on("attention_bwd_dkdv", D, causal)
            assert on("attention_bwd_fused", D, causal) == (D == 128 or not causal)
            assert not on("attention_bwd_dq", D, causal) and not on("attention_fwd", D, causal)


@kernel(overlap=PingPong(stages=2))
def _running_sum(k, Q, K, O, L, *, D, how, BM=128, BN=128):
    """A loop's running row sum in the forms plan_quad_sums must leave alone: read inside the loop
    (`read`), started at 1 (`one`), scaled by itself (`self`); `plain` is the form it takes."""
    k.grid(k.cdiv(Q.shape[1], BM), Q.shape[2], Q.shape[0])
    qb, h, b = k.program_id(0), k.program_id(1), k.program_id(2)
    q, kt, vt = k.shared(BM, D, Q.dtype), k.shared(BN, D, K.dtype), k.shared(BN, D, K.dtype)
    s, p, o = k.reg(BM, BN, f32), k.reg(BM, BN, Q.dtype), k.reg(BM, D, f32)
    l, x = k.vec(BM, f32), k.vec(BM, f32)
    wait(load_async(q, Q[b, :, h, :], row=qb * BM, col=0))
    fill(l, 1.0 if how == "one" else 0.0)
    fill(x, 0.5)
    zero(o)
    for j in k.pipeline(k.cdiv(K.shape[1], BN)):
        wait(load_async(kt, K[b, :, h, :], row=j * BN, col=0), load_async(vt, K[b, :, h, :], row=j * BN, col=0))
        mma(s, q, kt, tb=True, accumulate=False)
        mul(l, l, l if how == "self" else x)
        row_sum(l, s, l)
        if how == "read":
            add(x, x, l)
        cast(p, s)
        mma(o, p, vt)
    store(O[b, :, h, :], o, row=qb * BM, col=0)
    store(L[b, h, :], l, row=qb * BM)


def test_running_row_sum_adds_its_quad_once(tmp_path):
    """quad_sums (on): the forward's denominator is each lane's part of its row in the loop (no shuffle
    there) and the quad's four parts are added once, after the loop; the main loop's SASS loses the
    four SHFLs a block of the row sum (two rows, two each) and keeps the maximum's. A sum the loop reads,
    one that starts at 1 or one scaled by itself keeps the per-block form."""
    from sass import disassemble, mainloops
    runtime = needs.nvrtc()
    for D in (64, 128):
        shfl = {}
        for on in (True, False):
            launched = WarpSpecializedLowering.SCHEDULES.get(("attention_fwd", D)) or {}
            low = _lower(D=D, causal=False, launched=True, options={**launched, "quad_sums": on})
            body = low.source.split("consumers: everything else")[1]
            assert (body.count("row_sum_partial(l, s, l);") == (2 if launched.get("peel") else 1)) == on
            assert body.count("row_sum_finish(l);") == int(on) and ("row_sum(l, s, l);" in body) != on
            assert body.index("row_sum_finish(l);" if on else "row_sum(l, s, l)") < body.index("div_row(o, o, l);")
            assert ("qs" in low.entry) == on
            c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
            loop = min(mainloops(disassemble(c.cubin, tmp_path), "HGMMA"), key=len)
            shfl[on] = sum("SHFL" in i for i in loop)
        assert shfl[False] - shfl[True] == 4 and shfl[True] == 4, (D, shfl)
    assert "row_sum_partial" in _lower(D=128, causal=True).source  # the causal forward too
    q, kv, lse = _meta(2, 300, 4, 64), _meta(2, 300, 4, 64), _meta(2, 4, 300, dtype=torch.float32)
    for how in ("plain", "read", "one", "self"):
        low = WarpSpecializedLowering(_running_sum.trace(q, kv, q, lse, D=64, how=how)).lower()
        assert ("row_sum_partial(" in low.source) == (how == "plain"), how
        assert (low.source.count("row_sum_finish(") == 1) == (how == "plain"), how


@pytest.mark.parametrize("D", [64, 128])
def test_running_row_sum_by_parts_on_the_gpu(D):
    """With and without quad_sums the forward meets the float64 rule (causal and not, GQA, tails); the
    sum's order differs, so O and the LSE agree to their rounding, not to the bit."""
    needs.hopper_gpu()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "portability"))
    from reference import check_attention_fwd

    g = torch.Generator().manual_seed(D + 1)
    B, Sq, Sk, H, Hkv = 2, 700, 1100, 8, 2
    q = torch.randn(B, Sq, H, D, generator=g).bfloat16().cuda()
    k, v = (torch.randn(B, Sk, Hkv, D, generator=g).bfloat16().cuda() for _ in range(2))
    cfg = WarpSpecializedLowering.config("attention_fwd", D=D)
    launched = WarpSpecializedLowering.SCHEDULES.get(("attention_fwd", D)) or {}
    for causal in (False, True):
        outs = {}
        for on in (True, False):
            out, lse = torch.full_like(q, math.nan), torch.full((B, H, Sq), math.nan, device="cuda")
            go = WarpSpecializedLowering.prepare(attention_fwd, q, k, v, out, lse, D ** -0.5, causal=causal, D=D,
                                                 options={**launched, "quad_sums": on}, **cfg)
            assert ("row_sum_finish(l);" in go.lowered.source) == on
            go()
            outs[on] = (out, lse)
        torch.cuda.synchronize()
        for on in (True, False):
            check_attention_fwd(outs[on][0], outs[on][1], q, k, v, causal, D ** -0.5)
        assert (outs[True][0].float() - outs[False][0].float()).abs().max().item() < 2e-2
        assert (outs[True][1] - outs[False][1]).abs().max().item() < 1e-4


def test_a_paged_cache_is_scheduled_by_the_keys_a_sequence_holds():
    """The launcher's schedule counts a paged cache's keys as its pages a sequence times the page size (the
    pool's key axis is one page): the split tail is chosen as for the same contiguous cache."""
    W = WarpSpecializedLowering
    q, o = _meta(2, 1, 32, 128), _meta(2, 1, 32, 128)
    lse = _meta(2, 32, 1, dtype=torch.float32)
    lens = _meta(2, dtype=torch.int32)
    contiguous = _meta(2, 16384, 8, 128)
    pool, table = _meta(128, 256, 8, 128), _meta(2, 64, dtype=torch.int32)
    want = W.schedule("attention_fwd", 128, (q, contiguous, contiguous, o, lse, 0.1, lens))
    got = W.schedule("attention_fwd", 128, (q, pool, pool, o, lse, 0.1, lens, table))
    assert want.get("split_tail") and got.get("split_tail") == want.get("split_tail")
