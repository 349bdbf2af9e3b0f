"""Helpers run in child processes by tests/test_cache.py.

They load tiles/core/cache.py by path (it is standard-library only) so that a spawned child starts in
tens of milliseconds instead of importing the whole tiles package and torch.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time

_CACHE_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tiles", "core", "cache.py")


def load_cache_module():
    name = "_tiles_cache_standalone"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, os.path.normpath(_CACHE_PY))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def payload_for(key_parts) -> bytes:
    """The bytes a correct build of ``key_parts`` returns (deterministic, a few KiB)."""
    seed = hashlib.sha256(repr(sorted(key_parts.items())).encode()).digest()
    return b"".join(hashlib.sha256(seed + i.to_bytes(4, "little")).digest() for i in range(128))


def counting_build(key_parts, count_path, sleep_s=0.0):
    def build():
        with open(count_path, "a") as f:
            f.write(f"{os.getpid()}\n")
        if sleep_s:
            time.sleep(sleep_s)
        return payload_for(key_parts)
    return build


def race_child(cache_dir, key_parts, count_path, sleep_s, ready_q, go, result_q):
    C = load_cache_module()
    cache = C.KernelCache(cache_dir, enabled=True)
    ready_q.put(os.getpid())
    if not go.wait(60):
        result_q.put((os.getpid(), "ERR: no go signal"))
        return
    try:
        out = cache.get_or_build(key_parts, counting_build(key_parts, count_path, sleep_s))
        result_q.put((os.getpid(), hashlib.sha256(out).hexdigest()))
    except BaseException as e:  # report everything to the parent
        result_q.put((os.getpid(), f"ERR: {type(e).__name__}: {e}"))


def doomed_child(cache_dir, key_parts, count_path, signal_path, phase):
    """Starts building ``key_parts`` and then hangs at ``phase`` ("build" or "write") until SIGKILLed."""
    C = load_cache_module()
    cache = C.KernelCache(cache_dir, enabled=True)

    def signal_and_hang():
        with open(signal_path, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)

    if phase == "write":
        real_write = os.write

        def half_write(fd, data):  # write half of the entry into the temp file, then hang
            n = real_write(fd, bytes(data[: len(data) // 2]))
            signal_and_hang()
            return n
        os.write = half_write
        build = counting_build(key_parts, count_path)
    else:
        inner = counting_build(key_parts, count_path)

        def build():
            inner()
            signal_and_hang()
            return payload_for(key_parts)
    cache.get_or_build(key_parts, build)
