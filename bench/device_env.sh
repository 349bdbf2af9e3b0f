# Sourced first by every bench/device_*.sh script: the environment each device call starts from. The
# repository on the Python path (plus DEVICE_PYTHONPATH, if a script sets it), unbuffered output, the
# kernel cache outside the tree (unless TILES_CACHE_DIR is set), results under $OUT (/tmp/out by default).
set -u
export PYTHONPATH=.${DEVICE_PYTHONPATH:+:$DEVICE_PYTHONPATH} PYTHONUNBUFFERED=1
export TILES_CACHE_DIR=${TILES_CACHE_DIR:-/tmp/tiles-cache}
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# gpu_tests SECONDS PYTEST_ARGS...: the tests quietly under a time limit, the whole log in
# $OUT/tests.txt, the failures and the summary line printed.
gpu_tests() {
  t=$1; shift
  timeout "$t" python3 -m pytest -q -p no:cacheprovider -W ignore "$@" -rfE --tb=short > "$OUT/tests.txt" 2>&1
  grep -E "^(FAILED|ERROR)|^E  |passed|failed" "$OUT/tests.txt" | cut -c1-300 | head -20
}
