#!/bin/sh
# Session 25, first call: the forward's peel launch at D = 128 (e472e3c) through the GPU tests, the
# sanitizers over the attention workload, and two standard-suite runs.
#   TILES_COMMIT=<commit> sh bench/device_session25a.sh
RUN="zc zd" WORKLOAD=attention TOOLS="synccheck racecheck" TOOL_TIMEOUT=45 sh bench/device_closing.sh
