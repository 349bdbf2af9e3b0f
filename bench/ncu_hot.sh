# Sourced by device scripts: hot NAME KERNEL_REGEX SCRIPT ARGS... runs SCRIPT once to compile, then
# under ncu (SourceCounters, WarpStateStats; clocks left alone; the 4th matching launch), and prints
# the kernel's duration and the SASS instructions and opcodes with the most stall samples
# (bench/ncu_hotspots.py). The report's CSV stays in $OUT.
hot() {
  name=$1; k=$2; script=$3; shift 3
  python3 "$script" "$@" >/dev/null 2>&1  # compile outside the profiler
  timeout "${NCU_TIMEOUT:-120}" ncu --clock-control none -o "$OUT/$name" -f --section SourceCounters --section WarpStateStats \
    -k "$k" --launch-skip 3 --launch-count 1 python3 "$script" "$@" > "$OUT/ncu_$name.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name.csv" 2> "$OUT/$name.err"
  echo "== $name: $*"
  grep -E "Duration|Warp Cycles Per Issued" "$OUT/ncu_$name.log" | head -2
  python3 bench/ncu_hotspots.py "$OUT/$name.csv" "${HOT_ROWS:-14}" 2>&1 | cut -c1-170 || head -c 400 "$OUT/$name.err"
  rm -f "$OUT/$name.ncu-rep"
}
