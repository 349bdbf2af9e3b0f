"""`python -m tiles demo`, the README's main job, on this machine's best backend (the interpreter on the CPU):
every row is checked against float64 and says ok, prefill and decode (one row, four causal drafts, and one
row a sequence over a cache of ragged lengths)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_runs_and_every_row_is_ok():
    r = subprocess.run([sys.executable, "-m", "tiles", "demo"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if "max|err|" in line]
    assert len(rows) == 6 and all(" ok " in line for line in rows), r.stdout
    assert sum(line.lstrip().startswith("decode") for line in rows) == 3 and "rows=4" in r.stdout, r.stdout
    assert "(cache_seqlens)" in r.stdout, r.stdout
