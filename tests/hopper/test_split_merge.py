"""tiles/split.h's merge_parts, the device half of the split tail, against its reference
tiles.core.split.merge_lse, on the rows the attention tests rarely make: parts that saw no key
(+inf), parts at -inf, NaN parts, a NaN out in a part without weight, and ordinary rows.

On the CPU: the probe compiles through NVRTC. On an sm_90 GPU: each row's out and lse equal the
reference's (to rounding on ordinary rows; exactly on the special ones)."""
from __future__ import annotations

import math

import torch

import needs  # tests/hopper is on sys.path

C, PARTS = 128, 3
SOURCE = r"""
#include <tiles/tiles.h>
#include <tiles/split.h>
using namespace tiles;

// one warp a row: part r's rows at part_o + p * rows * C, lse at part_lse + p * rows
extern "C" __global__ void merge_probe(float* out, float* lse, const float* part_o, const float* part_lse,
                                       int rows, int parts) {
  const int row = blockIdx.x;
  merge_parts<%d>(out + (long long)row * %d, %d, lse + row, part_o + (long long)row * %d,
                  (long long)rows * %d, part_lse + row, rows, parts);
}
""" % (C, C, C, C, C)


def _rows():
    """(outs (PARTS, rows, C), lses (PARTS, rows)): one case a row."""
    inf, nan = math.inf, math.nan
    cases = [(0.5, -1.0, 2.0), (inf, 1.5, inf), (inf, inf, inf), (-inf, 0.25, inf), (-inf, -inf, inf),
             (-inf, -inf, -inf), (nan, 0.5, 1.0), (inf, nan, inf), (30.0, -30.0, 0.0), (88.0, 87.0, inf)]
    g = torch.Generator().manual_seed(0)
    outs = torch.randn(PARTS, len(cases), C, generator=g)
    outs[0, 1] = nan  # a part without weight: its out is never read into the row
    outs[2, 3] = inf
    return outs, torch.tensor(cases).T.contiguous()


def test_merge_probe_compiles():
    runtime = needs.nvrtc()
    comp = runtime.nvrtc_compile(SOURCE, name="merge_probe.cu")
    assert comp.cubin


def test_merge_parts_matches_merge_lse():
    needs.hopper_gpu()
    from tiles.backends.hopper import runtime
    from tiles.core.split import merge_lse
    outs, lses = _rows()
    want_o, want_l = merge_lse(outs, lses)
    rows = lses.shape[1]
    po, pl = outs.cuda().contiguous(), lses.cuda().contiguous()
    out = torch.full((rows, C), 7.0, device="cuda")
    lse = torch.full((rows,), 7.0, device="cuda")
    kern = runtime.load(runtime.compile_cuda(SOURCE, name="merge_probe.cu").cubin, "merge_probe")
    kern.launch((rows, 1, 1), (32, 1, 1), [runtime.arg_ptr(out), runtime.arg_ptr(lse), runtime.arg_ptr(po),
                                           runtime.arg_ptr(pl), runtime.arg_i32(rows), runtime.arg_i32(PARTS)])
    torch.cuda.synchronize()
    got_o, got_l = out.cpu(), lse.cpu()
    for r in range(rows):
        why = f"row {r}: lses {lses[:, r].tolist()}"
        torch.testing.assert_close(got_o[r], want_o[r], rtol=2e-6, atol=1e-6, equal_nan=True, msg=why)
        torch.testing.assert_close(got_l[r], want_l[r], rtol=2e-6, atol=1e-6, equal_nan=True, msg=why)
    assert math.isnan(got_l[6]) and torch.isnan(got_o[6]).all()  # a NaN lse keeps its row NaN
    assert got_l[2] == math.inf and torch.equal(got_o[2], torch.zeros(C))  # no part saw a key
