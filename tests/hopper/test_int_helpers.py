"""The integer helpers the Hopper lowerings spell the IR's scalar expressions with (ops.h: ceil_div,
int_min, int_max, and C's / and %) compute what the interpreter's ir.evaluate computes, negative
operands included, and cdiv by 0 (0, as the interpreter and the CDNA headers give). On the CPU the
probe compiles; on an sm_90 GPU every pair agrees."""
from __future__ import annotations

import itertools

import torch

import needs  # tests/hopper is on sys.path
from tiles.core import ir

SOURCE = r"""
#include <tiles/tiles.h>
using namespace tiles;

extern "C" __global__ void int_probe(const int* a, const int* b, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int x = a[i], y = b[i];
  out[5 * i + 0] = ceil_div(x, y);
  out[5 * i + 1] = x / y;
  out[5 * i + 2] = x % y;
  out[5 * i + 3] = int_min(x, y);
  out[5 * i + 4] = int_max(x, y);
}
"""
OPS = ("cdiv", "//", "%", "min", "max")
VALUES = (-300, -129, -128, -127, -5, -1, 0, 1, 5, 127, 128, 129, 300)


def test_int_probe_compiles():
    runtime = needs.nvrtc()
    assert runtime.nvrtc_compile(SOURCE, name="int_probe.cu").cubin


def test_int_helpers_match_the_interpreter():
    needs.hopper_gpu()
    from tiles.backends.hopper import runtime
    pairs = list(itertools.product(VALUES, VALUES))  # b = 0 too: cdiv gives 0 (C's / and % by 0 do not count)
    a = torch.tensor([p[0] for p in pairs], dtype=torch.int32, device="cuda")
    b = torch.tensor([p[1] for p in pairs], dtype=torch.int32, device="cuda")
    out = torch.zeros(len(pairs) * 5, dtype=torch.int32, device="cuda")
    kern = runtime.load(runtime.compile_cuda(SOURCE, name="int_probe.cu").cubin, "int_probe")
    kern.launch(((len(pairs) + 127) // 128, 1, 1), (128, 1, 1),
                [runtime.arg_ptr(a), runtime.arg_ptr(b), runtime.arg_ptr(out), runtime.arg_i32(len(pairs))])
    got = out.view(-1, 5).cpu().tolist()
    for (x, y), row in zip(pairs, got):
        want = [ir.evaluate(ir.Bin(op, ir.as_expr(x), ir.as_expr(y)), {}) for op in OPS]
        if y == 0:  # division by zero is undefined in C: only cdiv, min and max are compared there
            row, want = [row[0], row[3], row[4]], [want[0], want[3], want[4]]
        assert row == want, (x, y, row, want)
