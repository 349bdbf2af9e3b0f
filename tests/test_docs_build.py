"""The documentation site builds with `mkdocs build --strict` (no network needed: theme.font is off)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (./dev docs)")
@pytest.mark.skipif(importlib.util.find_spec("material") is None,
                    reason="mkdocs-material is not installed (./dev docs)")
def test_docs_build_strict(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "guarantees" / "index.html").is_file()


def test_every_public_op_is_in_the_api_reference():
    """Each op a user calls (tiles.attention, tiles.gemm_fp8, ...) has its entry in the reference page;
    gemm_fp8 had none until session 36."""
    import inspect

    import tiles
    from tiles import api
    ops = [n for n in tiles.__all__ if inspect.isfunction(getattr(tiles, n, None))
           and getattr(getattr(tiles, n), "__module__", "") == api.__name__]
    assert {"attention", "gemm", "gemm_fp8"} <= set(ops)
    with open(os.path.join(ROOT, "docs", "reference", "api.md")) as f:
        page = f.read()
    missing = [n for n in ops if f"::: tiles.api.{n}\n" not in page]
    assert not missing, f"docs/reference/api.md has no entry for {missing}"
