"""attention_fwd cut along the keys on CDNA (split.h: the launcher's cut of a grid shorter than the chip,
decode's case): the split kernel and its <entry>_merge, rendered for gfx942 / gfx950, compiled by clang
(both kernels spill-free, the split kernel's registers those of the whole one), and run on the CPU through
the emulated arch layer, every work-group of every part, then the merge: the output against float64 by
TESTING.md's rule, and the merge alone on crafted parts against tiles/core/split.py's merge_lse. The
launcher on the CPU with its kernels recorded: where it cuts, the arguments it hands each kernel, a call
prepared once; and `python -m tiles show attention_fwd --backend cdna --split`."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from tests.portability.reference import check_attention_fwd, check_attention_fwd_ragged
from tiles.backends.cdna import compile as cc
from tiles.backends.cdna.lower_attention import MERGE_THREADS, CDNAAttentionLowering, default_tiles
from tiles.core import split
from tiles.kernels import SUITE

from .conftest import build_host, need_clang, run

TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}

DRIVER = r'''
// emulation driver: every work-group of every part into the f32 workspace, then the merge into O and L
#include <cstdio>
#include <cstdint>
#include <vector>
#include KERNEL_SRC
static std::vector<uint16_t> Qh, Kh, Vh;
static std::vector<float> WSO, WSL, Lh;
static std::vector<unsigned char> Oh;
static std::vector<int> KL{KLEN};  // each sequence's key count (attention_fwd's KLen), where it reads one
static std::vector<int> PG{PAGES};  // a paged cache's table (attention_fwd's Pages), row-major
static void body() { CALL; }
static void merge() { MERGE; }
static void readf(const char* p, void* d, size_t n) { FILE* f = fopen(p, "rb"); if (!f || fread(d, 1, n, f) != n) { fprintf(stderr, "read %s\n", p); exit(2); } fclose(f); }
int main(int argc, char** argv) {
  Qh.resize(NQ); Kh.resize(NK); Vh.resize(NK);
  WSO.assign((size_t)PARTS * NQ, __builtin_nanf("")); WSL.assign((size_t)PARTS * NL, __builtin_nanf(""));
  Oh.assign((size_t)NQ * OUT_BYTES, 0xFF); Lh.assign(NL, __builtin_nanf(""));
  if (RUN_KERNEL) {
    readf(argv[1], Qh.data(), NQ * 2); readf(argv[2], Kh.data(), NK * 2); readf(argv[3], Vh.data(), NK * 2);
    for (int b = 0; b < GRID * PARTS; ++b) tiles::emu::run_block((unsigned)b, 512, body);
  } else {  // the merge alone, on crafted parts
    readf(argv[1], WSO.data(), (size_t)PARTS * NQ * 4); readf(argv[2], WSL.data(), (size_t)PARTS * NL * 4);
  }
  for (long long b = 0; b < ((long long)NQ + MT - 1) / MT; ++b) tiles::emu::run_block((unsigned)b, MT, merge);
  FILE* f = fopen(argv[4], "wb"); fwrite(Oh.data(), 1, (size_t)NQ * OUT_BYTES, f); fwrite(Lh.data(), 4, NL, f); fclose(f);
  return 0;
}
'''


def lower_split(arch, out, B, Sq, Sk, H, Hkv, D, causal, dtype="bf16", ragged=False, table=None, pages=0):
    dt = TORCH[dtype]
    q, o = torch.empty(B, Sq, H, D, dtype=dt), torch.empty(B, Sq, H, D, dtype=torch.float32)
    k = torch.empty(B, Sk, Hkv, D, dtype=dt) if table is None else torch.empty(pages, Sk // table.shape[1], Hkv, D, dtype=dt)
    lse = torch.empty(B, H, Sq, dtype=torch.float32)
    extra = (torch.empty(B, dtype=torch.int32),) if ragged else ()
    extra += () if table is None else (table,)
    kern = SUITE["attention_fwd"].trace(q, k, k, o, lse, D ** -0.5, *extra, causal=causal, D=D, **default_tiles(arch, D))
    return CDNAAttentionLowering(kern, arch, split=out).lower()


def emulate(tmp_path, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal, parts, crafted=None, seed=0, lens=None,
            table=None, pages=0):
    """(q, k, v, O, L, low) of the split kernel in `parts` parts and its merge, run on the CPU; with
    `crafted` = (ws_o, ws_l), the merge alone on those parts; with `lens`, each sequence's key count, and
    with `table` too, k and v handed over as a pool of `pages` pages (returned as the cache they hold)."""
    from .test_attention_emulation import paged_pool

    torch.manual_seed(seed)
    dt = TORCH[dtype]
    q = torch.randn(B, Sq, H, D).to(dt)
    k, v = torch.randn(B, Sk, Hkv, D).to(dt), torch.randn(B, Sk, Hkv, D).to(dt)
    for b, n in enumerate([] if lens is None else lens.tolist()):  # a cache's rows past a count: NaN
        k[b, max(n, 0):], v[b, max(n, 0):] = float("nan"), float("nan")
    ws = torch.empty(B, Sq, H, D, dtype=torch.float32)  # one part's slice: the strides the kernel reads
    lse = torch.empty(B, H, Sq, dtype=torch.float32)
    low = lower_split(arch, out, B, Sq, Sk, H, Hkv, D, causal, dtype, ragged=lens is not None, table=table, pages=pages)
    kk, vv = (k, v) if table is None else (paged_pool(k, table, pages), paged_pool(v, table, pages))
    tensors = {"Q": q, "K": kk, "V": vv, "O": ws, "L": lse, "KLen": lens, "Pages": table}
    call = []
    for kind, x in low.args:
        if kind == "ptr":
            call.append({"Q": "Qh.data()", "K": "Kh.data()", "V": "Vh.data()", "O": "WSO.data()", "L": "WSL.data()",
                         "KLen": "KL.data()", "Pages": "PG.data()"}[x.name])
        elif kind in ("dim", "stride"):
            pname, attr = x.name.split(".")
            t = tensors[pname]
            call.append(str(t.shape[int(attr[5:])] if attr.startswith("shape") else t.stride(int(attr[6:]))))
        else:
            call.append(repr(float(D ** -0.5)) + "f")
    call += [str(parts), str(ws.numel()), str(lse.numel())]
    o = torch.empty(B, Sq, H, D, dtype=TORCH[out])
    out_t = "float" if out == "f32" else "u16"
    merge = (f"kern_merge(WSO.data(), WSL.data(), ({out_t}*)Oh.data(), Lh.data(), {parts}, {B}, {Sq}, {H}, "
             f"{o.stride(0)}, {o.stride(1)}, {o.stride(2)}, {lse.stride(0)}, {lse.stride(1)})")
    grid = -(-Sq // default_tiles(arch, D)["BM"]) * H * B
    drv = os.path.join(tmp_path, "driver.cpp")
    with open(drv, "w") as f:
        f.write(DRIVER)
    defines = [f"CALL=kern({', '.join(call)})", f"MERGE={merge}", f"NQ={q.numel()}", f"NK={kk.numel()}",
               f"NL={lse.numel()}", f"GRID={grid}", f"PARTS={parts}", f"OUT_BYTES={o.element_size()}",
               f"MT={MERGE_THREADS}", f"RUN_KERNEL={int(crafted is None)}",
               f"KLEN={'0' if lens is None else ','.join(map(str, lens.tolist()))}",
               f"PAGES={'0' if table is None else ','.join(map(str, table.flatten().tolist()))}"]
    exe = build_host(low.source.replace(low.entry, "kern"), 950 if arch == "gfx950" else 942, defines, main=drv)
    paths = [os.path.join(tmp_path, n) for n in ("q.bin", "k.bin", "v.bin", "out.bin")]
    for t, p in zip((q, kk, vv) if crafted is None else crafted, paths):
        (t.contiguous().view(torch.int16) if t.dtype != torch.float32 else t.contiguous()).numpy().tofile(p)
    run(exe, *paths)
    raw = np.fromfile(paths[3], dtype=np.uint8)
    nb = o.numel() * o.element_size()
    got = torch.from_numpy(raw[:nb].copy())
    o_got = got.view(torch.float32) if out == "f32" else got.view(torch.int16).view(TORCH[out])
    lse_got = torch.from_numpy(raw[nb:].copy().view(np.float32)).view(lse.shape)
    return q, k, v, o_got.view(o.shape), lse_got, low


CASES = [
    # arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal, parts
    ("gfx942", "bf16", "bf16", 2, 3, 700, 2, 1, 64, False, 5),   # decode-like rows, parts of 1-2 key blocks (odd starts)
    ("gfx942", "bf16", "bf16", 1, 130, 300, 2, 2, 64, True, 4),  # causal: parts with no key block at all
    ("gfx950", "f16", "f32", 1, 4, 1000, 2, 1, 128, False, 7),   # f32 output, 16 blocks in 7 parts
]


@pytest.mark.parametrize("arch,dtype,out,B,Sq,Sk,H,Hkv,D,causal,parts", CASES)
def test_split_attention_matches_reference(tmp_path, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal, parts):
    q, k, v, o, lse, _ = emulate(str(tmp_path), arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal, parts)
    assert not torch.isnan(o.float()).any(), "an output element was never written"
    check_attention_fwd(o, lse, q, k, v, causal, D ** -0.5)


def test_split_ragged_cache_matches_reference(tmp_path):
    """A decode batch of ragged cache lengths, cut along the keys: every part takes its share of its own
    sequence's key blocks (the short sequences' later parts see no key and carry no weight in the merge)."""
    lens = torch.tensor([700, 65, 0, 383], dtype=torch.int32)
    q, k, v, o, lse, low = emulate(str(tmp_path), "gfx942", "bf16", "bf16", 4, 2, 700, 4, 1, 64, False, 6, lens=lens)
    assert "const int seq_k = " in low.source
    assert not torch.isnan(o.float()).any(), "an output element was never written"
    check_attention_fwd_ragged(o, lse, q, k, v, lens, False, 64 ** -0.5)


def test_split_paged_cache_matches_reference(tmp_path):
    """Decode over a paged cache, cut along the keys: each part's first block's page declared before its
    prologue, the next block's in the loop; a shuffled pool whose other pages hold NaN."""
    lens = torch.tensor([1024, 300], dtype=torch.int32)
    table = torch.tensor([[6, 2, 0, 4], [1, 5, 3, 7]], dtype=torch.int32)
    q, k, v, o, lse, low = emulate(str(tmp_path), "gfx950", "bf16", "bf16", 2, 1, 1024, 4, 1, 64, False, 5, lens=lens,
                                   table=table, pages=9)
    assert "const int blk = imin(kb_begin * " in low.source
    assert not torch.isnan(o.float()).any(), "an output element was never written, or read a page it does not hold"
    check_attention_fwd_ragged(o, lse, q, k, v, lens, False, 64 ** -0.5)


def test_merge_follows_merge_lse(tmp_path):
    """The merge kernel alone on parts crafted for the edge cases: a part that saw no key (+inf) whatever
    its output holds, -inf parts, a NaN lse, a row no part saw, lse near the f32 exponent's ends."""
    parts, B, Sq, H, D = 3, 1, 8, 1, 64
    g = torch.Generator().manual_seed(1)
    ws_o = torch.randn(parts, B, Sq, H, D, generator=g)
    inf, nan = math.inf, math.nan
    ws_l = torch.tensor([[1.0, 2.0, 3.0], [inf, 0.5, inf], [inf, inf, inf], [-inf, -inf, inf], [nan, 1.0, 2.0],
                         [88.0, -88.0, 80.0], [-80.0, -87.0, inf], [0.0, 0.0, 0.0]]).t().reshape(parts, B, H, Sq)
    ws_o[0, 0, 1] = nan  # part 0 of row 1 saw no key: its output carries no weight, NaN or not
    _, _, _, o, lse, _ = emulate(str(tmp_path), "gfx942", "bf16", "f32", B, Sq, 300, H, H, D, False, parts,
                                 crafted=(ws_o, ws_l, ws_o))
    want_o, want_l = split.merge_lse(ws_o.reshape(parts, Sq, D), ws_l.reshape(parts, Sq))
    o, lse = o.reshape(Sq, D), lse.reshape(Sq)
    torch.testing.assert_close(o, want_o, rtol=1e-5, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(lse, want_l, rtol=1e-6, atol=1e-5, equal_nan=True)
    assert torch.isnan(o[4]).all() and torch.isnan(lse[4]), "a NaN part keeps its row NaN"
    assert torch.equal(o[2], torch.zeros(D)) and lse[2] == inf, "a row no part saw: zeros, +inf"
    assert torch.isfinite(o[1]).all(), "a part that saw no key carries no weight, even with a NaN output"


@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx950", 22)])
@pytest.mark.parametrize("D,causal", [(64, False), (128, False), (128, True)])
def test_split_kernels_compile_spill_free(arch, clang, D, causal):
    need_clang(clang)
    low = lower_split(arch, "bf16", 2, 4, 5000, 8, 2, D, causal)
    whole = lower_split(arch, "bf16", 2, 4, 5000, 8, 2, D, causal)
    whole = CDNAAttentionLowering(whole.kernel, arch).lower()  # the same IR (f32 O), not cut
    r, w = cc.compile_hip(low.source, arch, clang), cc.compile_hip(whole.source, arch, clang)
    by = cc.resources_by_function(r.remarks)
    assert set(by) == {low.entry, low.notes["split"]["merge"]}, by
    for name, res in by.items():
        assert res.get("scratch") == 0 and res.get("vgpr_spill") == 0 and res.get("sgpr_spill") == 0, (name, res)
    main, ref = by[low.entry], cc.resources_by_function(w.remarks)[whole.entry]
    assert main["vgpr"] + main.get("agpr", 0) <= ref["vgpr"] + ref.get("agpr", 0) + 8, (main, ref)
    assert main["lds"] == ref["lds"]


def test_the_launcher_cuts_short_grids_and_merges(monkeypatch):
    """CDNABackend.launch_with on the CPU, the kernels recorded instead of run: a decode grid (one program:
    MQA's 8 query heads as rows, 4096 keys) runs as split.plan's parts and then the merge, with the split
    kernel's own arguments, the workspace offsets after them, and the merge reading the workspace and
    writing the outputs; a full grid, or too few key blocks, runs whole. The CU count is the device's
    (here stood in for: an MI300X's 304, an MI355X's 256, an MI308X's 80)."""
    from tiles import backends
    from tiles.backends.cdna.backend import CDNABackend

    b = backends.get("cdna")
    bf = torch.bfloat16
    cus = {"gfx942": 304, "gfx950": 256}
    monkeypatch.setattr(CDNABackend, "compute_units", lambda self, arch, device: cus[arch])

    def launch(B, Sq, H, Sk, arch="gfx942", D=128):
        calls = []
        q, o = torch.zeros(B, Sq, H, D, dtype=bf), torch.zeros(B, Sq, H, D, dtype=bf)
        k = torch.zeros(B, Sk, 1, D, dtype=bf)
        lse = torch.zeros(B, H, Sq)
        b.launch_with(SUITE["attention_fwd"], (q, k, k, o, lse, 0.1), dict(causal=False, D=D), arch,
                      lambda low, entry, grid, block, argv: calls.append((low, entry, grid, block, argv)))
        return calls, o, lse

    ((low, entry, grid, block, argv), (mlow, mentry, mgrid, mblock, margv)), o, lse = launch(1, 8, 1, 4096)
    parts = split.plan(1, 304, 4096 // 64)[1]
    assert parts > 16 and entry == low.entry and entry.endswith("_split") and grid == (parts, 1, 1) and block == (512, 1, 1)
    assert [a.value for a in argv[-3:]] == [parts, 8 * 128, 8]  # parts, one slice of the workspace's O and L
    assert len(argv) == len(low.args) + 3
    ptrs = [a.value for a, (kind, _) in zip(argv, low.args) if kind == "ptr"]
    ws_o, ws_l = ptrs[3], ptrs[4]  # Q, K, V, then the workspace's first slices as O and L
    assert ws_o not in (o.data_ptr(), 0) and ws_l not in (lse.data_ptr(), 0)
    assert mlow is low and mentry == low.notes["split"]["merge"] and mblock == (MERGE_THREADS, 1, 1)
    assert mgrid == (-(-8 * 128 // MERGE_THREADS), 1, 1)
    assert [a.value for a in margv[:4]] == [ws_o, ws_l, o.data_ptr(), lse.data_ptr()]
    assert [a.value for a in margv[4:]] == [parts, 1, 8, 1, *o.stride()[:3], *lse.stride()[:2]]
    for shape in ((1, 8, 1, 512), (2, 4096, 40, 4096)):  # 8 key blocks; 2 x 32 x 40 programs > 304 CUs
        ((low, entry, grid, _, argv),), _, _ = launch(*shape)
        assert entry == low.entry and not entry.endswith("_split") and grid[0] == -(-shape[1] // 128) * shape[2] * shape[0]
    ((low, _, grid, _, _), _), _, _ = launch(1, 8, 1, 4096, arch="gfx950")
    assert grid[0] == split.plan(1, 256, 4096 // 64)[1] and low.arch == "gfx950"
    cus["gfx942"] = 80  # fewer CUs: 96 programs already fill them
    ((low, entry, grid, _, _),), _, _ = launch(1, 8, 96, 4096)
    assert not entry.endswith("_split") and grid[0] == 96
    assert backends.get("cdna-emu").compute_units("gfx942", None) == 304  # the emulated target's, not the GPU's


def test_a_call_is_prepared_once(monkeypatch):
    """What a call builds is kept by call signature: the same tensors again skip the lowering and the
    checks (two prepares for a cut grid: whole, then its parts), and each run still takes a fresh
    workspace, whose addresses the parts kernel writes and the merge reads. Other tensors prepare anew."""
    from tiles import backends
    from tiles.backends.cdna.backend import CDNABackend
    from tiles.core.backend import LaunchCache

    b = backends.get("cdna")
    monkeypatch.setattr(CDNABackend, "compute_units", lambda self, arch, device: 304)
    monkeypatch.setitem(b.__dict__, "_launches", LaunchCache())  # empty, and the backend's own back after
    prepared = []
    real = CDNABackend.prepare
    monkeypatch.setattr(CDNABackend, "prepare", lambda self, *a, **kw: prepared.append(1) or real(self, *a, **kw))
    bf = torch.bfloat16
    q, o = torch.zeros(1, 8, 1, 128, dtype=bf), torch.zeros(1, 8, 1, 128, dtype=bf)
    k, lse = torch.zeros(1, 4096, 1, 128, dtype=bf), torch.zeros(1, 1, 8)
    runs = []
    for out in (o, o, torch.zeros_like(o)):
        calls = []
        b.launch_with(SUITE["attention_fwd"], (q, k, k, out, lse, 0.1), dict(causal=False, D=128), "gfx942",
                      lambda low, entry, grid, block, argv: calls.append((low, argv)))
        (low, argv), (_, margv) = calls
        ptrs = [a.value for a, (kind, _) in zip(argv, low.args) if kind == "ptr"]
        assert ptrs[3:5] == [a.value for a in margv[:2]] and margv[2].value == out.data_ptr()
        runs.append(len(prepared))
    assert runs == [2, 2, 4], runs


def test_show_split_prints_the_parts_and_their_merge(tmp_path):
    """`python -m tiles show attention_fwd --backend cdna --split` prints the cut launch (the parts kernel
    and its merge in one unit); --emit writes a unit clang compiles; other kernels, or the interpreter,
    are refused with a line saying what --split shows."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def show(*argv):
        return subprocess.run([sys.executable, "-m", "tiles", "show", *argv], capture_output=True, text=True, cwd=root)

    r = show("attention_fwd", "--backend", "cdna", "--split")
    assert r.returncode == 0, r.stderr
    for want in ("split_range(kb_begin, kb_end, part, parts);", "_split_merge(", "merge_element<dt::bf16>(",
                 "#include \"tiles/split.h\"", "O += (long long)part * o_parts_stride"):
        assert want in r.stdout, want
    for argv in (("gemm", "--backend", "cdna", "--split"), ("attention_fwd", "--split")):
        r = show(*argv)
        assert r.returncode == 2 and "--split shows attention_fwd" in r.stderr and "Traceback" not in r.stderr, r.stderr
    need_clang(22)
    r = show("attention_fwd", "--backend", "cdna", "--arch", "gfx950", "--split", "--emit", str(tmp_path))
    assert r.returncode == 0, r.stderr
    src = [p for p in r.stdout.split() if p.endswith(".hip")][0]
    res = cc.compile_hip(open(src).read(), "gfx950", 22)
    assert set(cc.resources_by_function(res.remarks)) == {os.path.basename(src)[:-4], os.path.basename(src)[:-4] + "_merge"}


def test_the_launcher_cuts_paged_decode_by_the_keys_a_sequence_holds(monkeypatch):
    """A paged cache's pool has one page's rows on its key axis: the launcher counts a program's key blocks
    from the loop's bound (pages a sequence times the page size), so paged decode is cut as the same
    contiguous cache is, not as one page."""
    from tiles import backends
    from tiles.backends.cdna.backend import CDNABackend

    b = backends.get("cdna")
    bf = torch.bfloat16
    monkeypatch.setattr(CDNABackend, "compute_units", lambda self, arch, device: 304)

    def grids(k, *extra):
        calls = []
        q, o = torch.zeros(2, 1, 8, 128, dtype=bf), torch.zeros(2, 1, 8, 128, dtype=bf)
        b.launch_with(SUITE["attention_fwd"], (q, k, k, o, torch.zeros(2, 8, 1), 0.1, *extra), dict(causal=False, D=128),
                      "gfx942", lambda low, entry, grid, block, argv: calls.append(grid))
        return calls

    lens = torch.tensor([32768, 100], dtype=torch.int32)
    contiguous = grids(torch.zeros(2, 32768, 1, 128, dtype=bf), lens)
    paged = grids(torch.zeros(256, 256, 1, 128, dtype=bf), lens, torch.arange(256, dtype=torch.int32).view(2, 128))
    assert len(contiguous) == 2 and contiguous[0][0] > 2 * 8 and paged == contiguous
