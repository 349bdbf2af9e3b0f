#!/bin/sh
# The first device call after sessions 39 and 40, which had no device. The GPU tests of what changed on
# the CPU in them:
# - attention declared Interleave on Hopper (tests/hopper/test_interleave_attention.py);
# - tiles.gemm(x, w.t()) with the weight read in place (tests/hopper/test_gemm_kmajor.py: if it passes,
#   HopperBackend.gemm_b_kmajor goes on), and transposed operands through the portability suite;
# - layernorm and rotary gradients, layernorm's overflowed rows, attention's first-order gradients (the
#   portability suite, on hopper and both cdna-emu targets);
# - session 40: the split merge's rows against merge_lse (tests/hopper/test_split_merge.py), the integer
#   helpers against the interpreter (tests/hopper/test_int_helpers.py), and a user's kernels without mma
#   through the SIMT lowering (tests/hopper/test_simt.py), with their windows now declared once.
# Then the fp8 GEMM's clock (bench/fp8_clock.py, prepared in session 38 and not yet run).
#   sh bench/device_session40a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
gpu_tests 300 -n 8 tests/hopper/test_interleave_attention.py tests/hopper/test_gemm_kmajor.py \
    tests/hopper/test_split_merge.py tests/hopper/test_int_helpers.py tests/hopper/test_simt.py \
    tests/portability/test_gemm_norm_rotary.py tests/portability/test_attention.py \
    -k "interleave or pingpong_kernel or kmajor or weight or linear or transposed or layernorm or rotary or gradient or merge or int_helpers or users_kernels"
timeout 200 python3 bench/fp8_clock.py 2>&1 | grep -v Warning
