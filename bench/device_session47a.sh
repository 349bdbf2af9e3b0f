#!/bin/sh
# Session 47, first call: packed sequences on the GPU. Session 46's backward and paged prefill (never run
# on a GPU) with this session's tables of blocks (api._blocks: the forward's and dQ's query blocks, dK /
# dV's key blocks, heaviest first, walked in order), on hopper and cdna-emu; then the packed timing
# against the code before the tables: OLD (a checkout of 3acecf1, copied beside the tree, not committed)
# runs the same benchmarks in the same process order.
#   OLD=old47 sh bench/device_session47a.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
OLD=${OLD:-old47}
gpu_tests 170 -n 8 tests/portability/test_attention_varlen.py tests/hopper/test_attention_lower.py \
    tests/test_stopped_windows.py -k "varlen or packed or stop"
bench() {  # bench DIR ARGS: bench/attention_varlen.py of the tree in DIR, its result lines
  (cd "$1" && shift && PYTHONPATH=.:bench:tests/portability TILES_CACHE_DIR=/tmp/tc-$$ timeout 120 \
    python3 bench/attention_varlen.py "$@" 2>&1 | grep -a -E "^(fwd|  )" | tr -cd '\11\12\15\40-\176' | cut -c1-330)
}
for args in "" "--backward"; do
  echo "== new $args"; bench . $args
  echo "== old $args"; bench "$OLD" $args
done
