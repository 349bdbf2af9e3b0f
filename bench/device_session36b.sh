#!/bin/sh
# Session 36, second call: the D = 128 forward's short sequences (S = 512 / 1k / 2k non-causal, B·S = 16k,
# H = 16: 4-16 key blocks a tile), where the tile boundary weighs most. Session 33's carry (the last
# P V and the epilogue under the next tile's first turn), its O-store bound, and the 2-CTA cluster,
# beside launched and cuDNN (outputs compared against launched, not required bitwise: the bound is not).
#   TILES_COMMIT=<c> sh bench/device_session36b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 420 python3 -c "
import attention_split as s, attention_carry as c, attention_timeline as t, attention_cluster as k
v = {'carry': c.edit, 'carry_qfirst': c.VARIANTS['carry_qfirst'], 'cluster': k.edit, 'no_ostore': t.no_ostore}
s.main(v, exact=False, shapes=(512, 1024, 2048), suite=True)
" 2>&1 | grep -v Warning
