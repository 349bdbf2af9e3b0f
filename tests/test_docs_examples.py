"""Every code sample on the site that says it runs does run: python blocks whose first line is
`# runs` are extracted from docs/**/*.md and executed on the CPU (the reference interpreter)."""
from __future__ import annotations

import contextlib
import io
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})python[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=ticks)[ \t]*$",
                   re.M | re.S)
MARK = "# runs"


def runnable_blocks():
    out = []
    for dirpath, _, files in os.walk(DOCS):
        for f in sorted(files):
            if not f.endswith(".md"):
                continue
            path = os.path.join(dirpath, f)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for i, m in enumerate(FENCE.finditer(text)):
                body = m.group("body")
                ind = m.group("indent")
                lines = [ln[len(ind):] if ln.startswith(ind) else ln for ln in body.splitlines()]
                if lines and lines[0].strip() == MARK:
                    line = text[:m.start()].count("\n") + 1
                    out.append(pytest.param("\n".join(lines) + "\n", id=f"{os.path.relpath(path, DOCS)}:{line}"))
    return sorted(out, key=lambda p: p.id)


BLOCKS = runnable_blocks()


def test_every_python_sample_is_runnable():
    """A python block on the site is a promise that it works: each one carries the `# runs` mark.
    (Excerpts of the project's files are inserted by the build hook, not written as python blocks.)"""
    unmarked = []
    for dirpath, _, files in os.walk(DOCS):
        for f in sorted(files):
            if f.endswith(".md"):
                text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                for m in FENCE.finditer(text):
                    first = m.group("body").strip().splitlines()[:1]
                    if first != [MARK]:
                        unmarked.append(f"{os.path.relpath(os.path.join(dirpath, f), DOCS)}:"
                                        f"{text[:m.start()].count(chr(10)) + 1}")
    assert not unmarked, f"python blocks without '{MARK}' as their first line: {unmarked}"


def test_there_are_runnable_samples():
    # the tutorials and the overlap page carry runnable samples; losing them all would be a regression
    assert len(BLOCKS) >= 8, [b.id for b in BLOCKS]


@pytest.mark.parametrize("code", BLOCKS)
def test_doc_sample_runs(code, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the samples are written for the CPU interpreter
    monkeypatch.setenv("TILES_CACHE", "0")
    if ROOT not in sys.path:
        monkeypatch.syspath_prepend(ROOT)
    ns = {"__name__": "__docs_sample__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<docs sample>", "exec"), ns)
    assert "Traceback" not in out.getvalue()
