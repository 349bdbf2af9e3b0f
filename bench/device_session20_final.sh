#!/bin/sh
# Session 20's closing call (about 550 s of device time were left), with tiles.attention's backward
# fused at D = 64 from 1k queries: bench/device_closing.sh, run "k". (It ran with the closing steps
# written out here, printing the backward's ratios only; session 21 moved them into device_closing.sh.)
#   TILES_COMMIT=<commit> sh bench/device_session20_final.sh
RUN=k sh bench/device_closing.sh
