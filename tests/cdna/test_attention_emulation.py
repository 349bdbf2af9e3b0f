"""The lowered attention_fwd (IR -> lower_attention -> HIP) run on the CPU through the emulated arch layer
(tests/cdna/emu/tiles_arch_emu.h), every work-group of the flattened, chiplet-remapped grid, and compared
with the float64 reference by TESTING.md's rule (tests/portability/reference.py: E <= 2 E(lp) + fl, the mean
error rule, LSE = +inf exactly on rows that see no key)."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from tests.portability.reference import check_attention_fwd, check_attention_fwd_ragged
from tiles.backends.cdna import schedule as S
from tiles.backends.cdna.lower_attention import CDNAAttentionLowering, default_tiles
from tiles.kernels import SUITE

from .conftest import build_host, run

DRIVER = r'''
// emulation driver: reads Q, K, V (16-bit bit patterns), runs every work-group, writes O and L
#include <cstdio>
#include <cstdint>
#include <vector>
#include KERNEL_SRC
static std::vector<uint16_t> Qh, Kh, Vh;
static std::vector<unsigned char> Oh;
static std::vector<float> Lh;
static std::vector<int> KL{KLEN};  // each sequence's key count (attention_fwd's KLen), where it reads one
static std::vector<int> PG{PAGES};  // a paged cache's table (attention_fwd's Pages), row-major
static void body() { CALL; }
static void readf(const char* p, void* d, size_t n) { FILE* f = fopen(p, "rb"); if (!f || fread(d, 1, n, f) != n) { fprintf(stderr, "read %s\n", p); exit(2); } fclose(f); }
int main(int argc, char** argv) {
  Qh.resize(NQ); Kh.resize(NK); Vh.resize(NK); Oh.assign(NQ * OUT_BYTES, 0xFF); Lh.assign(NL, __builtin_nanf(""));
  readf(argv[1], Qh.data(), NQ * 2); readf(argv[2], Kh.data(), NK * 2); readf(argv[3], Vh.data(), NK * 2);
  long long barriers = 0;
  for (int b = 0; b < GRID; ++b) barriers += tiles::emu::run_block((unsigned)b, 512, body);
  FILE* f = fopen(argv[4], "wb"); fwrite(Oh.data(), 1, NQ * OUT_BYTES, f); fwrite(Lh.data(), 4, NL, f); fclose(f);
  printf("barriers %lld\n", barriers);
  return 0;
}
'''

TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def paged_pool(cache: torch.Tensor, table: torch.Tensor, pages: int) -> torch.Tensor:
    """A pool of `pages` pages holding sequence b's rows [j · P, (j + 1) · P) of `cache` in page table[b, j]
    (P = the page size, cache rows / table columns); the pages no sequence holds are NaN."""
    B, S, Hkv, D = cache.shape
    P = S // table.shape[1]
    pool = torch.full((pages, P, Hkv, D), float("nan"), dtype=cache.dtype)
    for b in range(B):
        for j in range(table.shape[1]):
            pool[int(table[b, j])] = cache[b, j * P:(j + 1) * P]
    return pool


def emulate_attention(tmp_path, arch, dtype, out_dtype, B, Sq, Sk, H, Hkv, D, causal, seed=0, check_registers=True,
                      lens=None, table=None, pages=0, **tiles):
    """(q, k, v, O, L, scale, barriers, lowered, grid) of the forward run on the CPU; with `lens`, each
    sequence's key count (the cache's rows past it NaN); with `table` as well, k and v reach the kernel
    as a pool of `pages` pages (paged_pool) and are returned as the contiguous cache they hold."""
    torch.manual_seed(seed)
    dt = TORCH[dtype]
    q = torch.randn(B, Sq, H, D).to(dt)
    k = torch.randn(B, Sk, Hkv, D).to(dt)
    v = torch.randn(B, Sk, Hkv, D).to(dt)
    for b, n in enumerate([] if lens is None else lens.tolist()):  # a cache's rows past a count: NaN
        k[b, max(n, 0):], v[b, max(n, 0):] = float("nan"), float("nan")
    o = torch.empty(B, Sq, H, D, dtype=TORCH[out_dtype])
    lse = torch.empty(B, H, Sq, dtype=torch.float32)
    scale = D ** -0.5
    cfg = {**default_tiles(arch, D), **tiles}
    extra = tuple(t for t in (lens, table) if t is not None)
    kk, vv = (k, v) if table is None else (paged_pool(k, table, pages), paged_pool(v, table, pages))
    kern = SUITE["attention_fwd"].trace(q, kk, vv, o, lse, scale, *extra, causal=causal, D=D, **cfg)
    low = CDNAAttentionLowering(kern, arch, check_registers=check_registers).lower()
    tensors = {"Q": q, "K": kk, "V": vv, "O": o, "L": lse, "KLen": lens, "Pages": table}
    call = []
    for kind, x in low.args:
        if kind == "ptr":
            call.append({"Q": "Qh.data()", "K": "Kh.data()", "V": "Vh.data()", "O": f"({'float' if out_dtype == 'f32' else 'u16'}*)Oh.data()",
                         "L": "Lh.data()", "KLen": "KL.data()", "Pages": "PG.data()"}[x.name])
        elif kind in ("dim", "stride"):
            pname, attr = x.name.split(".")
            t = tensors[pname]
            call.append(str(t.shape[int(attr[5:])] if attr.startswith("shape") else t.stride(int(attr[6:]))))
        else:
            call.append(repr(float(scale)) + "f")
    grid = -(-Sq // cfg["BM"]) * H * B
    src = low.source.replace(low.entry, "kern")
    drv = os.path.join(tmp_path, "driver.cpp")
    with open(drv, "w") as f:
        f.write(DRIVER)
    defines = [f"CALL=kern({', '.join(call)})", f"NQ={q.numel()}", f"NK={kk.numel()}", f"NL={lse.numel()}", f"GRID={grid}",
               f"OUT_BYTES={o.element_size()}", f"KLEN={'0' if lens is None else ','.join(map(str, lens.tolist()))}",
               f"PAGES={'0' if table is None else ','.join(map(str, table.flatten().tolist()))}"]
    exe = build_host(src, 950 if arch == "gfx950" else 942, defines, main=drv)
    paths = [os.path.join(tmp_path, n) for n in ("q.bin", "k.bin", "v.bin", "out.bin")]
    for t, p in zip((q, kk, vv), paths):
        t.contiguous().view(torch.int16).numpy().tofile(p)
    out = run(exe, *paths)
    raw = np.fromfile(paths[3], dtype=np.uint8)
    nb = o.numel() * o.element_size()
    o_got = torch.from_numpy(raw[:nb].copy()).view(TORCH[out_dtype] if out_dtype != "bf16" else torch.int16)
    if out_dtype == "bf16":
        o_got = o_got.view(torch.bfloat16)
    o_got = o_got.view(o.shape)
    lse_got = torch.from_numpy(raw[nb:].copy().view(np.float32)).view(lse.shape)
    barriers = int(out.split()[1])
    return q, k, v, o_got, lse_got, scale, barriers, low, grid


CASES = [
    # arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal
    ("gfx942", "bf16", "bf16", 1, 200, 300, 4, 2, 64, True),    # GQA, causal with Sq != Sk, tails in both
    ("gfx942", "bf16", "bf16", 2, 130, 70, 2, 1, 128, False),   # MQA, key tail inside the first tile
    ("gfx950", "f16", "f16", 1, 150, 100, 2, 2, 128, True),     # Sq > Sk causal: first rows see no key (LSE = +inf)
    ("gfx950", "bf16", "f32", 1, 64, 129, 3, 1, 64, False),     # one key past a tile, f32 output
]


@pytest.mark.parametrize("arch,dtype,out,B,Sq,Sk,H,Hkv,D,causal", CASES)
def test_emulated_attention_matches_reference(tmp_path, arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal):
    q, k, v, o, lse, scale, barriers, low, grid = emulate_attention(str(tmp_path), arch, dtype, out, B, Sq, Sk, H, Hkv, D, causal)
    assert not torch.isnan(o.float()).any(), "a query row was never written"
    check_attention_fwd(o, lse, q, k, v, causal, scale)
    # every work-item passed the same barriers: 3 + 4 per K/V tile of its block (ping-pong balanced)
    BM, BN = low.notes["config"].BM, low.notes["config"].BN
    want = 0
    for qb in range(-(-Sq // BM)):
        n = -(-Sk // BN)
        if causal:
            n = max(min(n, -(-(qb * BM + BM + Sk - Sq) // BN)), 0)
        want += S.barrier_counts(low.notes["schedule_obj"], n)[0]
    assert barriers == 512 * want * H * B


RAGGED = [
    # arch, dtype, B, Sq, Sk (the cache's rows), H, Hkv, D, causal, each sequence's key count
    ("gfx942", "bf16", 4, 3, 300, 4, 1, 64, False, [300, 129, 1, 0]),    # decode rows: a full cache, a tail, none
    ("gfx942", "bf16", 3, 70, 260, 2, 2, 128, True, [260, 64, 700]),     # causal per sequence; a count past the cache
    ("gfx950", "f16", 2, 5, 200, 2, 1, 128, True, [3, -4]),              # rows before their keys; a negative count
]


@pytest.mark.parametrize("arch,dtype,B,Sq,Sk,H,Hkv,D,causal,lens", RAGGED)
def test_emulated_ragged_cache_matches_reference(tmp_path, arch, dtype, B, Sq, Sk, H, Hkv, D, causal, lens):
    """Each program reads its sequence's key count (KLen[b], clamped to the cache's rows and to 0): its
    loop stops there, its mask and the causal alignment follow it, and its views of K and V end there
    (the cache's rows past the count hold NaN here, and read as zeros); the rows of each sequence
    against float64 over its own keys."""
    lens = torch.tensor(lens, dtype=torch.int32)
    q, k, v, o, lse, scale, _, low, _ = emulate_attention(str(tmp_path), arch, dtype, dtype, B, Sq, Sk, H, Hkv, D,
                                                           causal, lens=lens)
    assert "const int seq_k = " in low.source and "KLen[pid2 * KLen_stride0]" in low.source
    assert not torch.isnan(o.float()).any(), "a query row was never written"
    check_attention_fwd_ragged(o, lse, q, k, v, lens, causal, scale)


PAGED = [
    # arch, dtype, B, Sq, pages a sequence, page size, H, Hkv, D, causal, each sequence's key count
    ("gfx942", "bf16", 3, 1, 3, 256, 4, 1, 64, False, [768, 300, 0]),     # decode rows; a count inside a page
    ("gfx950", "f16", 2, 70, 2, 256, 2, 2, 128, True, [512, 257]),        # causal rows; the second page's first key
]


@pytest.mark.parametrize("arch,dtype,B,Sq,npages,P,H,Hkv,D,causal,lens", PAGED)
def test_emulated_paged_cache_matches_reference(tmp_path, arch, dtype, B, Sq, npages, P, H, Hkv, D, causal, lens):
    """A paged cache: each key block's page of the pool read from the table (the views declared where the
    block's loads are, the next block's in the loop), in a shuffled pool whose other pages and whose rows
    past each count hold NaN; each sequence against float64 over its own keys."""
    lens = torch.tensor(lens, dtype=torch.int32)
    pages = B * npages + 2
    table = torch.randperm(pages, generator=torch.Generator().manual_seed(4))[:B * npages].view(B, npages).to(torch.int32)
    q, k, v, o, lse, scale, _, low, _ = emulate_attention(str(tmp_path), arch, dtype, dtype, B, Sq, npages * P, H, Hkv,
                                                           D, causal, lens=lens, table=table, pages=pages)
    assert "const int page = imax(imin(Pages[pid2 * Pages_stride0 + blk * Pages_stride1], K_shape0 - 1), 0);" in low.source
    assert not torch.isnan(o.float()).any(), "a query row was never written, or read a page it does not hold"
    check_attention_fwd_ragged(o, lse, q, k, v, lens, causal, scale)


WINDOWS = [
    # arch, dtype, B, Sq, Sk, H, Hkv, D, causal, (left, right)
    ("gfx942", "bf16", 1, 300, 300, 2, 1, 64, True, (100, -1)),     # causal, each row its last 101 keys
    ("gfx950", "f16", 1, 200, 350, 2, 2, 128, False, (64, 30)),     # a band both sides; Sk != Sq
    ("gfx942", "bf16", 1, 130, 500, 2, 1, 128, True, (0, -1)),      # each row its own key alone
]


@pytest.mark.parametrize("arch,dtype,B,Sq,Sk,H,Hkv,D,causal,window", WINDOWS)
def test_emulated_sliding_window_matches_reference(tmp_path, arch, dtype, B, Sq, Sk, H, Hkv, D, causal, window):
    """A sliding window: each query block's loop starts at the block of its first row's first key
    (kb_begin, the prologue's tile), mask_window cuts the left edge and mask_causal the right."""
    left, right = window
    over = dict(left=None if left < 0 else left, right=None if right < 0 or causal else right)
    q, k, v, o, lse, scale, _, low, _ = emulate_attention(str(tmp_path), arch, dtype, dtype, B, Sq, Sk, H, Hkv, D,
                                                           causal, **over)
    assert "const int kb_begin = imax(" in low.source and "mask_window(" in low.source
    assert not torch.isnan(o.float()).any(), "a query row was never written"
    check_attention_fwd(o, lse, q, k, v, causal, scale, window)


def test_emulated_attention_mf32_tile(tmp_path):
    """The 32x32-MFMA variant (BM = 256: 32 query rows per wave, a 1-bit key permutation) on D = 64."""
    q, k, v, o, lse, scale, *_ = emulate_attention(str(tmp_path), "gfx942", "bf16", "bf16", 1, 100, 90, 1, 1, 64, True,
                                                   check_registers=False, BM=256, BN=128)
    check_attention_fwd(o, lse, q, k, v, True, scale)
