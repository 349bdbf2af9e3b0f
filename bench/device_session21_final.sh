#!/bin/sh
# Session 21's closing call: bench/device_closing.sh, run "m", with the D = 64 fused backward as
# launched now (not rotated, dS by stmatrix, from 512 queries non-causal) in the sanitizer's fused
# workload and the standard suite. (It ran at 2229e27 with the steps written out here and an inline
# ratio printout, which bench/suite_ratios.py now gives.)
#   TILES_COMMIT=<commit> sh bench/device_session21_final.sh
RUN=m sh bench/device_closing.sh
