#!/bin/sh
# Session 13: compute-sanitizer over the attention kernels with the new schedule (causal pairs in L2
# windows, turns across programs, early release of Q), on grids where persistent CTAs walk several programs.
WORKLOAD=attention sh bench/device_sanitize.sh
