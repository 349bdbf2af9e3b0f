#!/bin/sh
# Session 39 had no device; this is its first call on one. The GPU tests of what changed on the CPU:
# - attention declared Interleave on Hopper (tests/hopper/test_interleave_attention.py);
# - tiles.gemm(x, w.t()) with the weight read in place (tests/hopper/test_gemm_kmajor.py: if it passes,
#   HopperBackend.gemm_b_kmajor goes on), and transposed operands through the portability suite;
# - layernorm and rotary gradients, layernorm's overflowed rows, attention's first-order gradients (the
#   portability suite, on hopper and both cdna-emu targets).
# Then the fp8 GEMM's clock (bench/fp8_clock.py, prepared in session 38 and not yet run).
#   sh bench/device_session39a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
gpu_tests 300 -n 8 tests/hopper/test_interleave_attention.py tests/hopper/test_gemm_kmajor.py \
    tests/portability/test_gemm_norm_rotary.py tests/portability/test_attention.py \
    -k "interleave or pingpong_kernel or kmajor or weight or linear or transposed or layernorm or rotary or gradient"
timeout 200 python3 bench/fp8_clock.py 2>&1 | grep -v Warning
