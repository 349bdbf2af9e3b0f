"""Stream-K in the persistent fp8 GEMM (include/tiles/schedule.h, lower_fp8.split_tiles).

On the CPU: which tiles the launcher splits, the walk's arithmetic (a Python transcription of the
template's whole-tile loop and split_share, checked for the properties the kernel relies on), and the
stream-K kernels compile with the fp8 wgmma, no spills, and their mainloops on the uniform datapath.
On an sm_90 GPU: the kernel itself, at grids small enough that tiles split into many shares, against
the float64 dequantized reference and bitwise from run to run."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from sass import descriptor_copies, disassemble, mainloops
from tiles.backends.hopper import lower_fp8


def test_split_tiles():
    # whole waves: nothing to split
    assert lower_fp8.split_tiles(264, 132, 56) == 0
    # fewer tiles than two waves: all of them; more: the partial wave plus one whole wave
    assert lower_fp8.split_tiles(96, 132, 56) == 96
    assert lower_fp8.split_tiles(144, 132, 56) == 144
    assert lower_fp8.split_tiles(288, 132, 56) == 24 + 132
    assert lower_fp8.split_tiles(2048, 132, 64) == 68 + 132
    # too little work to share out (each share under MIN_SHARE K blocks)
    assert lower_fp8.split_tiles(6, 132, 3) == 0
    # iteration numbers that would not fit 32 bits on the device
    assert lower_fp8.split_tiles(200, 132, 1 << 20) == 0


class Walk:
    """Slot `slot` of `slots`: the template's loop over whole tiles, then split_share (schedule.h)."""

    def __init__(self, tiles, kblocks, sk_tiles, slot, slots):
        self.kblocks, self.slots, self.slot = kblocks, slots, slot
        self.dp_tiles, self.sk_count = tiles - sk_tiles, sk_tiles * kblocks
        self.next_tile, self.it, self.it_end = slot, self.share_begin(slot), self.share_begin(slot + 1)

    def share_begin(self, s):
        return s * self.sk_count // self.slots

    def owner(self, i):
        s = i * self.slots // self.sk_count
        while s + 1 < self.slots and self.share_begin(s + 1) <= i:
            s += 1
        while self.share_begin(s) > i:
            s -= 1
        return s

    def last_share(self):
        return self.owner(((self.it_end - 1) // self.kblocks + 1) * self.kblocks - 1)

    def units(self):
        while self.next_tile < self.dp_tiles:
            yield self.next_tile, 0, self.kblocks
            self.next_tile += self.slots
        while self.it < self.it_end:
            t = self.it // self.kblocks
            k0 = self.it - t * self.kblocks
            k1 = min(self.kblocks, k0 + self.it_end - self.it)
            self.it += k1 - k0
            yield self.dp_tiles + t, k0, k1


@pytest.mark.parametrize("tiles,kblocks,slots", [(96, 56, 132), (288, 56, 132), (144, 56, 132), (6, 32, 4),
                                                 (12, 9, 7), (13, 5, 13), (30, 4, 13), (3, 40, 7)])
def test_walk_covers_each_k_block_once_and_heads_wait_only_on_first_shares(tiles, kblocks, slots):
    sk = lower_fp8.split_tiles(tiles, slots, kblocks)
    seen, firsts, raised, waited = {}, {}, set(), []
    for slot in range(slots):
        w = Walk(tiles, kblocks, sk, slot, slots)
        units = list(w.units())
        for n, (t, k0, k1) in enumerate(units):
            assert 0 <= k0 < k1 <= kblocks
            for kb in range(k0, k1):
                assert (t, kb) not in seen, f"tile {t} block {kb} twice"
                seen[t, kb] = slot
            if (k0, k1) == (0, kblocks):
                continue
            if k0 > 0:  # hands its sum on: must be this slot's first split unit (it waits on nothing before)
                assert n == sum(1 for u in units if u[0] < tiles - sk), "a later share that is not the first"
                raised.add(slot)
                firsts[slot] = t
            else:  # the head: the slot's last unit; it waits on the shares after it that hold the tile
                assert n == len(units) - 1
                w2 = Walk(tiles, kblocks, sk, slot, slots)
                for s in range(slot + 1, w2.last_share() + 1):
                    if w2.share_begin(s) != w2.share_begin(s + 1):
                        waited.append((s, t))
    assert len(seen) == tiles * kblocks
    # every raised flag is waited on once, by the head of the tile it belongs to
    assert sorted(s for s, _ in waited) == sorted(raised)
    assert all(firsts[s] == t for s, t in waited)


def test_stream_k_kernels_compile(tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills  # tests/hopper is on sys.path

    for cfg in ({}, {"BN": 256, "stages": 4, "schedule": "pingpong"}, {"overlap": False, "epilogue": "regs"}):
        k = lower_fp8.fp8_source("bf16", stream_k=True, **cfg)
        assert k["name"].endswith("_sk") and "partial_wait(" in k["source"]
        c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
        assert_no_spills(c, k["name"], tmp_path)
        sass = disassemble(c.cubin, tmp_path)
        assert "QGMMA.64x128x32.F32.E4M3.E4M3" in sass and "LDL" not in sass and "STL" not in sass
        # both mainloops (whole tiles, shares) keep the wgmma descriptors in uniform registers: no
        # divergence-reconvergence (BSSY) inside them, as in the kernel without stream-K
        plain_c = runtime.compile_cuda(lower_fp8.fp8_source("bf16", **cfg)["source"], name="plain.cu", cache=False)
        size = min(len(body) for body in mainloops(disassemble(plain_c.cubin, tmp_path)))
        loops = [body for body in mainloops(sass) if len(body) <= 1.25 * size]
        assert len(loops) == 2 and all(any("ULOP3" in i for i in body) and not any("BSSY" in i for i in body)
                                       for body in loops)
        # descriptors built in uniform registers (the warpgroup index through a shuffle): no copies into them
        # (an R2UR may still move a B scale, loaded by a vector LDG, to the uniform operand of its FMUL)
        assert all(not descriptor_copies(body) for body in loops), [descriptor_copies(b) for b in loops]
        assert descriptor_copies(["R2UR UR9, R6", "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT"])
        # the flag's release and acquire at GPU scope
        assert "MEMBAR.ALL.GPU" in sass or "MEMBAR.SC.GPU" in sass
        plain = lower_fp8.fp8_source("bf16", **cfg)["source"]
        assert "split_share" not in plain and "partial_wait" not in plain
        assert plain == lower_fp8.fp8_source("bf16", stream_k=False, **cfg)["source"]
    # in 2-CTA clusters the shares are the clusters' (both CTAs take the same K range of their rows)
    k = lower_fp8.fp8_source("bf16", stream_k=True, cluster=2, BN=256, stages=4, schedule="pingpong")
    assert "split_share<CLUSTER>" in k["source"] and "(s * CLUSTER + rank) * CONSUMERS + cw" in k["source"]
    c = runtime.compile_cuda(k["source"], name=k["name"] + ".cu", cache=False)
    assert_no_spills(c, k["name"], tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    assert "UTMALDG.2D.MULTICAST" in sass and "QGMMA.64x128x32.F32.E4M3.E4M3" in sass
    with pytest.raises(TypeError, match="stream_k"):
        lower_fp8.fp8_source("bf16", stream_k="auto")


@pytest.mark.parametrize("cfg", [{}, {"BN": 256, "stages": 4, "schedule": "pingpong"}, {"cluster": 2},
                                 {"BN": 256, "stages": 4, "schedule": "pingpong", "cluster": 2}],
                         ids=["bn128", "bn256_pingpong", "bn128_cluster2", "bn256_pingpong_cluster2"])
@pytest.mark.parametrize("mnk,grid", [((300, 129, 4096), 4), ((384, 640, 1024), 7), ((257, 300, 1000), 13),
                                      ((1024, 1536, 7168), None)])
def test_stream_k_on_the_gpu(cfg, mnk, grid):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), M + N + K)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    go, out = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], out=out, stream_k=True, sms=grid, **cfg)
    go()
    torch.cuda.synchronize()
    err, bound = fp8.error_and_bound(out, x)
    assert err <= bound, (err, bound)
    first = out.clone()
    go()
    torch.cuda.synchronize()
    assert torch.equal(out, first)  # the shares are added in K order on every run
    # the flags are all lowered again (else the next launch would read a stale partial sum)
    for ws, flags in lower_fp8._workspaces.values():
        assert int(flags.abs().sum()) == 0
