"""Session 31: ptxas's `--register-usage-level` (0-10, default 5; a beta knob that trades registers for
scheduling freedom) on the two kernels whose targets are still missed: the D = 128 forward and the
fp8 GEMM. No source changes: the launched source compiled with another level, marked by a comment line
that a wrapper of runtime.compile_cuda turns into the NVRTC option (so each level is its own cached
cubin and its own loaded kernel).

    PYTHONPATH=.:bench:tests/hopper python3 bench/ptxas_levels.py check     # CPU: which levels give other SASS
    PYTHONPATH=.:bench:tests/hopper python3 bench/ptxas_levels.py attention # GPU: the forward, beside cuDNN
    PYTHONPATH=.:bench:tests/hopper python3 bench/ptxas_levels.py fp8       # GPU: the five fp8 shapes

Outputs must be bitwise the launched kernel's (instruction order changes, arithmetic does not).
"""
import hashlib
import pathlib
import re
import sys
import tempfile

from tiles.backends.hopper import runtime

MARK = "// ptxas-options: "
LEVELS = (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)  # check: the SASS falls in three classes, <= 3, 4-5 and >= 6
_compile = runtime.compile_cuda


def _marked_compile(source, arch=runtime.ARCH, options=(), name="tiles.cu", cache=True):
    m = re.search(re.escape(MARK) + r"(.*)\n", source)
    extra = (f"--ptxas-options={m.group(1)}",) if m else ()
    return _compile(source, arch, (*options, *extra), name, cache)


runtime.compile_cuda = _marked_compile


def at_level(level):
    return lambda src: src + f"\n{MARK}--register-usage-level={level}\n"


def sass_digest(cubin, tmp):
    import sass
    text = sass.disassemble(cubin, tmp)
    return hashlib.sha1("\n".join(re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", text)).encode()).hexdigest()[:10]


def fp8_sources():
    import fp8_ab
    from tiles.backends.hopper import lower_fp8
    for M, N, K in fp8_ab.SHAPES:
        yield (M, N, K), lower_fp8.fp8_source("bf16", **fp8_ab.launched(M, N, K, 132))


def check():
    from test_attention_lower import _lower
    tmp = pathlib.Path(tempfile.mkdtemp())
    cases = [(f"fwd D=128 causal={c}", _lower(D=128, causal=c, launched=True)) for c in (False, True)]
    cases = [(n, low.source, low.entry) for n, low in cases]
    cases += [(f"fp8 {shape}", k["source"], k["name"]) for shape, k in fp8_sources()]
    for label, src, entry in cases:
        seen = {}
        for level in (None, *LEVELS):
            s = src if level is None else at_level(level)(src)
            c = runtime.compile_cuda(s, name=entry + ".cu", cache=False)
            r = c.resources.get(entry, {})
            d = sass_digest(c.cubin, tmp)
            seen.setdefault(d, []).append("launched" if level is None else level)
            assert r.get("spill_stores", 0) == 0, (label, level, r)
        print(label, {d: v for d, v in seen.items()}, flush=True)


def attention():
    import attention_split as split
    split.main({f"rul{lv}": at_level(lv) for lv in (2, 6)}, exact=True)


def fp8():
    import fp8_ab
    from tiles.backends.hopper import lower_fp8
    sms = __import__("torch").cuda.get_device_properties(0).multi_processor_count

    def variants(M, N, K, sms):
        cfg = fp8_ab.launched(M, N, K, sms)
        out = {"launched": cfg}
        for lv in (2, 6):
            kern = lower_fp8.fp8_source("bf16", **cfg)
            out[f"rul{lv}"] = dict(kern, source=at_level(lv)(kern["source"]))
        return out
    fp8_ab.defer_variants = variants  # main's table: every variant bitwise against launched
    fp8_ab.main("defer")


if __name__ == "__main__":
    {"check": check, "attention": attention, "fp8": fp8}[sys.argv[1]]()
