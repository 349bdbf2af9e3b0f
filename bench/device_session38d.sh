#!/bin/sh
# Session 38, fourth call: earlier sessions' edits of the launched D = 128 forward (carry, staggered
# walks, clusters, the deferred store, and the O store left out as a bound), measured again the way
# device_session38b.sh measured ring_store: rested launches interleaved, time, clock and cycles.
#   sh bench/device_session38d.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 330 python3 bench/attention_clock.py ab 4096 split_ring attention_carry:carry attention_carry:carry_qfirst \
  attention_timeline:no_ostore attention_timeline:stagger attention_cluster:cluster attention_defer:defer 2>&1 | grep -v Warning
timeout 200 python3 bench/attention_clock.py ab 16384 attention_carry:carry attention_timeline:no_ostore 2>&1 | grep -v Warning
