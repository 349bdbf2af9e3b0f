# Sourced first by every bench/device_*.sh script: the environment each device call starts from. The
# repository on the Python path (plus DEVICE_PYTHONPATH, if a script sets it), unbuffered output, the
# kernel cache outside the tree (unless TILES_CACHE_DIR is set), results under $OUT (/tmp/out by default).
set -u
export PYTHONPATH=.${DEVICE_PYTHONPATH:+:$DEVICE_PYTHONPATH} PYTHONUNBUFFERED=1
export TILES_CACHE_DIR=${TILES_CACHE_DIR:-/tmp/tiles-cache}
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
