"""Render the fp8 GEMM's launched configurations with the global scale loads (fp8_ab.global_loads, the
issue's five shapes) from the templates of an earlier commit, for a before/after comparison on the
device (`fp8_ab.py before`):

    PYTHONPATH=.:bench python3 bench/render_before.py REV bench/ab_before_fp8_REV.json

REV is read with `git show REV:tiles/backends/hopper/templates/...`; the headers are today's (the
comparison is of the template's code). The JSON maps "M,N,K" to fp8_source's dict.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import jinja2

from tiles.backends.hopper import gemm_probe, lower_fp8

import fp8_ab


def main(rev, out):
    with tempfile.TemporaryDirectory() as d:
        for t in gemm_probe.TEMPLATES.iterdir():
            text = subprocess.run(["git", "show", f"{rev}:tiles/backends/hopper/templates/{t.name}"], check=True,
                                  capture_output=True, text=True).stdout
            (pathlib.Path(d) / t.name).write_text(text)
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(d), undefined=jinja2.StrictUndefined,
                                 trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
        real, gemm_probe._env = gemm_probe._env, lambda: env
        try:
            kerns = {}
            for M, N, K in fp8_ab.SHAPES:
                cfg = fp8_ab.global_loads(M, N, K, 132)
                kerns[f"{M},{N},{K}"] = lower_fp8.fp8_source("bf16", **cfg)
        finally:
            gemm_probe._env = real
    json.dump(kerns, open(out, "w"), indent=0)
    print("wrote", out, {k: v["name"] for k, v in kerns.items()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
