#!/bin/sh
# Session 38, fourth call: earlier sessions' edits of the launched D = 128 forward (carry, staggered
# walks, clusters, the deferred store, and the O store left out as a bound), measured again the way
# device_session38b.sh measured ring_store: rested launches interleaved, time, clock and cycles. `split`:
# the launched source before session 38, which the edits apply to. (At 16k, first run: carry 0.990x,
# the O store left out 0.976x.)
#   sh bench/device_session38d.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 330 python3 bench/attention_clock.py ab 4096 split attention_carry:carry attention_carry:carry_qfirst \
  attention_timeline:no_ostore attention_timeline:stagger attention_cluster:cluster attention_defer:defer 2>&1 | grep -v Warning
