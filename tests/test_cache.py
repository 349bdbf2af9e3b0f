"""The kernel cache promises of docs/guarantees.md, tested with real processes, threads and files (CPU)."""
from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import signal
import stat
import sys
import threading
import time
import warnings

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _tiles_cache_worker as W  # noqa: E402

from tiles.core import cache as C  # noqa: E402

BASE_KEY = {
    "source": "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }",
    "template_version": "gemm/3",
    "options": ["-O3", "-std=c++17", "--use_fast_math"],
    "compiler_version": "nvrtc 13.0",
    "arch": "sm_90a",
    "tiles_version": "0.1.0",
}


def key(**over):
    k = dict(BASE_KEY)
    k.update(over)
    return k


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    C._reset_warnings()
    for var in ("TILES_CACHE", "TILES_DISABLE_CACHE", "TILES_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    yield
    C._reset_warnings()


def entries(d):
    return sorted(n for n in os.listdir(d) if n.endswith(C.ENTRY_SUFFIX))


def temps(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".tmp"))


def count(path):
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return len(f.read().split())


def tiles_warnings(rec):
    return [w for w in rec if issubclass(w.category, RuntimeWarning) and "tiles" in str(w.message)]


# ----------------------------------------------------------------------------------------- key

def test_each_key_part_changes_the_key():
    base = C.key_digest(BASE_KEY)
    alt = {"source": BASE_KEY["source"] + " ", "template_version": "gemm/4", "options": ["-O2"],
           "compiler_version": "nvrtc 13.5", "arch": "gfx942", "tiles_version": "0.1.1"}
    assert set(alt) == set(C.REQUIRED_KEY_PARTS)
    digests = {base}
    for part, value in alt.items():
        d = C.key_digest(key(**{part: value}))
        assert d != base, part
        digests.add(d)
    assert len(digests) == 7


def test_key_is_canonical_and_stable():
    reordered = dict(reversed(list(BASE_KEY.items())))
    assert C.key_digest(reordered) == C.key_digest(BASE_KEY)
    assert C.key_digest(key(options={"b": 1, "a": 2})) == C.key_digest(key(options={"a": 2, "b": 1}))
    assert C.key_digest(key(options=("-O3",))) == C.key_digest(key(options=["-O3"]))
    assert C.key_digest(key(name="gemm")) != C.key_digest(BASE_KEY)  # extra parts count too
    # the same in another interpreter (no hash randomisation in the key)
    assert len(C.key_digest(BASE_KEY)) == 64


@pytest.mark.parametrize("part", C.REQUIRED_KEY_PARTS)
def test_missing_key_part_is_a_value_error(part, tmp_path):
    k = dict(BASE_KEY)
    del k[part]
    with pytest.raises(ValueError, match=part):
        C.key_digest(k)
    with pytest.raises(ValueError, match=part):
        C.KernelCache(tmp_path).get_or_build(k, lambda: b"x")


def test_unserialisable_key_is_a_value_error():
    with pytest.raises(ValueError, match="canonical"):
        C.key_digest(key(options=[object()]))
    with pytest.raises(ValueError):
        C.key_digest(key(options=[float("nan")]))


# ----------------------------------------------------------------------------------------- basics

def test_build_once_then_memory_then_disk(tmp_path):
    cnt = str(tmp_path / "count")
    d = tmp_path / "cache"
    a = C.KernelCache(d)
    want = W.payload_for(BASE_KEY)
    assert a.get_or_build(BASE_KEY, W.counting_build(BASE_KEY, cnt)) == want
    assert a.get_or_build(BASE_KEY, W.counting_build(BASE_KEY, cnt)) == want
    assert count(cnt) == 1 and a.stats["builds"] == 1 and a.stats["memory_hits"] == 1
    assert entries(d) == [C.key_digest(BASE_KEY) + C.ENTRY_SUFFIX] and temps(d) == []
    assert stat.S_IMODE(os.stat(a.entry_path(BASE_KEY)).st_mode) & 0o077 == 0
    b = C.KernelCache(d)  # as a new process would
    assert b.get_or_build(BASE_KEY, W.counting_build(BASE_KEY, cnt)) == want
    assert count(cnt) == 1 and b.stats["disk_hits"] == 1


def test_build_error_propagates_and_leaves_nothing(tmp_path):
    c = C.KernelCache(tmp_path)

    def boom():
        raise RuntimeError("nvrtc: error: expected ';'")
    with pytest.raises(RuntimeError, match="expected ';'"):
        c.get_or_build(BASE_KEY, boom)
    assert entries(tmp_path) == [] and temps(tmp_path) == []
    assert c.get_or_build(BASE_KEY, lambda: b"ok") == b"ok"  # lock released


def test_build_must_return_bytes(tmp_path):
    with pytest.raises(TypeError, match="expected bytes"):
        C.KernelCache(tmp_path).get_or_build(BASE_KEY, lambda: "text")


# ----------------------------------------------------------------------------------------- concurrency

def test_16_processes_and_32_threads_build_once(tmp_path):
    d = str(tmp_path / "cache")
    cnt = str(tmp_path / "count")
    k = key(source="never seen " + os.urandom(8).hex())
    want = hashlib.sha256(W.payload_for(k)).hexdigest()
    ctx = mp.get_context("spawn")
    ready_q, result_q, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=W.race_child, args=(d, k, cnt, 0.3, ready_q, go, result_q), daemon=True)
             for _ in range(16)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready_q.get(timeout=120)
        cache = C.KernelCache(d)
        start = threading.Event()
        results = []

        def thread_body():
            start.wait(60)
            try:
                out = cache.get_or_build(k, W.counting_build(k, cnt, 0.3))
                results.append(hashlib.sha256(out).hexdigest())
            except BaseException as e:
                results.append(f"ERR: {type(e).__name__}: {e}")
        threads = [threading.Thread(target=thread_body) for _ in range(32)]
        for t in threads:
            t.start()
        go.set()
        start.set()
        for t in threads:
            t.join(120)
        child_results = [result_q.get(timeout=120)[1] for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    assert results == [want] * 32
    assert child_results == [want] * 16
    assert count(cnt) == 1, "exactly one of 48 concurrent callers compiles"
    assert entries(d) == [C.key_digest(k) + C.ENTRY_SUFFIX] and temps(d) == []


@pytest.mark.parametrize("phase", ["build", "write"])
def test_writer_killed_mid_build_or_write(tmp_path, phase):
    d = str(tmp_path / "cache")
    cnt, sig = str(tmp_path / "count"), str(tmp_path / "signal")
    k = key(source=f"killed during {phase}")
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=W.doomed_child, args=(d, k, cnt, sig, phase), daemon=True)
    p.start()
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(sig):
            assert p.is_alive() and time.monotonic() < deadline, "child never reached the hang point"
            time.sleep(0.01)
        if phase == "write":
            assert len(temps(d)) == 1  # half an entry sits in a temp file ...
        assert entries(d) == []  # ... but nothing is published

        # a waiter in this process queues on the lock held by the doomed child
        cache = C.KernelCache(d)
        out = []
        t = threading.Thread(target=lambda: out.append(cache.get_or_build(k, W.counting_build(k, cnt))))
        t.start()
        time.sleep(0.3)
        assert t.is_alive(), "the waiter must wait for the builder holding the lock"
        os.kill(p.pid, signal.SIGKILL)
        p.join(30)
        assert p.exitcode == -signal.SIGKILL
        t.join(30)
        assert not t.is_alive(), "a killed lock holder must not block the others"
    finally:
        if p.is_alive():
            p.kill()
    assert out == [W.payload_for(k)]
    assert count(cnt) == 2  # the dead child's attempt, then ours
    assert entries(d) == [C.key_digest(k) + C.ENTRY_SUFFIX] and temps(d) == []
    assert C.KernelCache(d).get_or_build(k, lambda: pytest.fail("must load from disk")) == W.payload_for(k)


# ----------------------------------------------------------------------------------------- damaged entries

def _flip(blob, i):
    b = bytearray(blob)
    b[i] ^= 0x10
    return bytes(b)


H = C.HEADER_SIZE
DAMAGE = {
    "zero-byte": lambda b: b"",
    "magic-only": lambda b: b[:4],
    "header-truncated": lambda b: b[:H - 1],
    "header-only": lambda b: b[:H],
    "payload-truncated": lambda b: b[:H + 7],
    "last-byte-missing": lambda b: b[:-1],
    "trailing-garbage": lambda b: b + b"\0",
    "flip-magic": lambda b: _flip(b, 1),
    "flip-version": lambda b: _flip(b, 8),
    "flip-length": lambda b: _flip(b, 12),
    "flip-payload-sha": lambda b: _flip(b, 8 + 12 + 5),
    "flip-key-digest": lambda b: _flip(b, 8 + 12 + 32 + 5),
    "flip-payload-first": lambda b: _flip(b, H),
    "flip-payload-last": lambda b: _flip(b, len(b) - 1),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_rebuilt_never_returned(tmp_path, damage):
    cnt = str(tmp_path / "count")
    C.KernelCache(tmp_path).get_or_build(BASE_KEY, lambda: W.payload_for(BASE_KEY))
    path = C.KernelCache(tmp_path).entry_path(BASE_KEY)
    with open(path, "rb") as f:
        good = f.read()
    with open(path, "wb") as f:
        f.write(DAMAGE[damage](good))
    c = C.KernelCache(tmp_path)
    assert c.get_or_build(BASE_KEY, W.counting_build(BASE_KEY, cnt)) == W.payload_for(BASE_KEY)
    assert count(cnt) == 1 and c.stats["rejected"] >= 1
    with open(path, "rb") as f:
        assert f.read() == good  # republished intact


def test_entry_of_another_key_is_not_returned(tmp_path):
    other = key(arch="gfx950")
    c = C.KernelCache(tmp_path)
    c.get_or_build(other, lambda: b"gfx950 code object")
    os.replace(c.entry_path(other), c.entry_path(BASE_KEY))  # a misplaced (or forged) entry
    assert C.KernelCache(tmp_path).get_or_build(BASE_KEY, lambda: b"sm_90a cubin") == b"sm_90a cubin"


def test_damaged_entry_is_deleted_even_if_rebuild_fails(tmp_path):
    c = C.KernelCache(tmp_path)
    c.get_or_build(BASE_KEY, lambda: b"cubin")
    with open(c.entry_path(BASE_KEY), "r+b") as f:
        f.truncate(10)

    def boom():
        raise RuntimeError("compiler crashed")
    with pytest.raises(RuntimeError, match="compiler crashed"):
        C.KernelCache(tmp_path).get_or_build(BASE_KEY, boom)
    assert entries(tmp_path) == []


def _plant(tmp_path, payload):
    """A well-formed entry for BASE_KEY with the given payload, as an attacker could write it."""
    path = C.KernelCache(tmp_path).entry_path(BASE_KEY)
    os.makedirs(tmp_path, exist_ok=True)
    with open(path, "wb") as f:
        f.write(C.encode_entry(payload, C.key_digest(BASE_KEY)))
    return path


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_group_or_world_writable_entry_not_loaded(tmp_path, mode):
    path = _plant(tmp_path, b"planted")
    os.chmod(path, mode)
    c = C.KernelCache(tmp_path)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert c.get_or_build(BASE_KEY, lambda: b"genuine") == b"genuine"
        c2 = C.KernelCache(tmp_path)
        os.chmod(path, mode)
        assert c2.get_or_build(BASE_KEY, lambda: b"genuine") == b"genuine"
    ws = tiles_warnings(rec)
    assert len(ws) == 1 and "writable by group or others" in str(ws[0].message)
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0  # replaced by a private entry


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file owned by another uid needs root")
def test_entry_owned_by_another_uid_not_loaded(tmp_path):
    path = _plant(tmp_path, b"planted")
    os.chmod(path, 0o600)
    os.chown(path, 54321, 54321)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert C.KernelCache(tmp_path).get_or_build(BASE_KEY, lambda: b"genuine") == b"genuine"
    ws = tiles_warnings(rec)
    assert len(ws) == 1 and "another user" in str(ws[0].message)


def test_symlinked_entry_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(C.encode_entry(b"planted", C.key_digest(BASE_KEY)))
    d = tmp_path / "cache"
    d.mkdir()
    os.symlink(target, C.KernelCache(d).entry_path(BASE_KEY))
    assert C.KernelCache(d).get_or_build(BASE_KEY, lambda: b"genuine") == b"genuine"


# ----------------------------------------------------------------------------------------- unusable directories

def _three_calls_in_two_caches(d):
    out = []
    for _ in range(2):
        c = C.KernelCache(d)
        for i in range(3):
            k = key(source=f"kernel {i}")
            out.append(c.get_or_build(k, lambda i=i: b"code %d" % i))
            out.append(c.get_or_build(k, lambda: pytest.fail("memory layer must serve this")))
    return out


def test_cache_dir_under_a_regular_file_degrades_with_one_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    d = blocker / "cache"
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = _three_calls_in_two_caches(d)
    assert out == [b"code %d" % i for i in range(3) for _ in range(2)] * 2
    ws = tiles_warnings(rec)
    assert len(ws) == 1, [str(w.message) for w in ws]
    assert "not usable" in str(ws[0].message) and str(d) in str(ws[0].message)


def _unprivileged(fn) -> None:
    """Run fn as an ordinary user: in a forked child that drops root to nobody when the tests run as root
    (root ignores directory permissions), else here. The child's failure fails the test."""
    if os.geteuid() != 0:
        fn()
        return
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            fn()
            code = 0
        except BaseException:  # noqa: BLE001
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "the unprivileged run failed (its traceback is above)"


def test_read_only_cache_dir_degrades_with_one_warning():
    import shutil
    import tempfile
    base = tempfile.mkdtemp()  # not under pytest's root-only tmp_path: nobody must be able to reach it
    os.chmod(base, 0o755)
    d = os.path.join(base, "ro")
    os.mkdir(d)
    os.chmod(d, 0o555)

    def scenario():
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            out = _three_calls_in_two_caches(d)
        assert out == [b"code %d" % i for i in range(3) for _ in range(2)] * 2
        assert len(tiles_warnings(rec)) == 1
        assert os.listdir(d) == []
    try:
        _unprivileged(scenario)
    finally:
        os.chmod(d, 0o755)
        shutil.rmtree(base)


# ----------------------------------------------------------------------------------------- switches

def test_tiles_cache_dir_is_honoured(tmp_path, monkeypatch):
    d = tmp_path / "from-env"
    monkeypatch.setenv("TILES_CACHE_DIR", str(d))
    assert C.KernelCache().directory == str(d)
    assert C.get_cache().directory == str(d)
    assert C.get_or_build(BASE_KEY, lambda: b"cubin") == b"cubin"
    assert entries(d) == [C.key_digest(BASE_KEY) + C.ENTRY_SUFFIX]


def test_default_dir_is_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert C.cache_dir_from_env() == str(tmp_path / ".cache" / "tiles")


@pytest.mark.parametrize("var,value", [("TILES_CACHE", "0"), ("TILES_DISABLE_CACHE", "1")])
def test_disable_switch(tmp_path, monkeypatch, var, value):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILES_CACHE_DIR", str(d))
    monkeypatch.setenv(var, value)
    cnt = str(tmp_path / "count")
    for _ in range(2):
        c = C.KernelCache()
        assert not c.enabled
        assert c.get_or_build(BASE_KEY, W.counting_build(BASE_KEY, cnt)) == W.payload_for(BASE_KEY)
        assert c.get_or_build(BASE_KEY, W.counting_build(BASE_KEY, cnt)) == W.payload_for(BASE_KEY)
    assert count(cnt) == 2  # once per process-lifetime cache, nothing shared through disk
    assert not d.exists()
    assert C.get_cache().enabled is False


def test_allow_build_false_raises_clearly(tmp_path):
    c = C.KernelCache(tmp_path)
    with pytest.raises(RuntimeError) as ei:
        c.get_or_build(BASE_KEY, lambda: pytest.fail("must not build"), allow_build=False, name="attention_fwd")
    assert str(ei.value) == ("tiles: kernel attention_fwd is not compiled and cannot be compiled during CUDA "
                             "graph capture; call it once before capturing")
    assert entries(tmp_path) == []
    c.get_or_build(BASE_KEY, lambda: b"cubin", name="attention_fwd")
    assert c.get_or_build(BASE_KEY, lambda: pytest.fail("no"), allow_build=False) == b"cubin"  # memory
    assert C.KernelCache(tmp_path).get_or_build(BASE_KEY, lambda: pytest.fail("no"),
                                                allow_build=False) == b"cubin"  # disk
    off = C.KernelCache(tmp_path, enabled=False)
    with pytest.raises(RuntimeError, match="kernel gemm is not compiled"):
        off.get_or_build(key(name="gemm"), lambda: b"x", allow_build=False)


def test_cache_module_is_standalone():
    """The worker processes load cache.py by path; it must need nothing but the standard library."""
    mod = W.load_cache_module()
    assert mod.key_digest(BASE_KEY) == C.key_digest(BASE_KEY)
    assert mod.MAGIC == C.MAGIC and mod.FORMAT_VERSION == C.FORMAT_VERSION


# ----------------------------------------------------------------------------- through NVRTC

def _nvrtc_runtime():
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-python (cuda.bindings.nvrtc) is not installed")
    from tiles.backends.hopper import runtime
    try:
        runtime.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not loadable: {e}")
    return runtime


SRC = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = FILL; }'


def test_compile_cuda_caches_by_what_nvrtc_is_given(tmp_path, monkeypatch):
    """A real NVRTC compile with the cache on: the second call comes from the cache (no compiler log),
    other options are another entry, and option lists that join to the same string are other keys."""
    runtime = _nvrtc_runtime()
    monkeypatch.setenv("TILES_CACHE_DIR", str(tmp_path))
    a = runtime.compile_cuda(SRC, options=["-DFILL=1.f", "-DUNUSED"])
    assert a.log and len(entries(tmp_path)) == 1
    again = runtime.compile_cuda(SRC, options=["-DFILL=1.f", "-DUNUSED"])
    assert again.cubin == a.cubin and not again.log
    other = runtime.compile_cuda(SRC, options=["-DFILL=2.f", "-DUNUSED"])
    assert other.log and other.cubin != a.cubin and len(entries(tmp_path)) == 2
    two, one = runtime.cuda_key(SRC, options=["-DA=1", "-DB"]), runtime.cuda_key(SRC, options=["-DA=1 -DB"])
    assert C.key_digest(two) != C.key_digest(one)  # (the second defines A as "1 -DB")
    key = runtime.cuda_key(SRC, options=["-DFILL=1.f"])
    assert key["options"][:3] == [f"-arch={runtime.ARCH}", *runtime.BASE_OPTIONS]  # what NVRTC is given
    assert "libnvrtc.so" in key["compiler_version"]  # the library file, not only major.minor


def test_compiler_identity_is_the_same_before_and_after_a_compile():
    """NVRTC loads libnvrtc-builtins lazily, at its first compile; the key must not change with it, or
    a new process would never find the entries of the last one."""
    runtime = _nvrtc_runtime()
    before = runtime.cuda_key(SRC)
    runtime.compile_cuda(SRC, options=["-DFILL=2.f"], cache=False)
    assert runtime.cuda_key(SRC) == before


# ----------------------------------------------------------------------------------------- lock files, clear

def locks(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".lock"))


def test_lock_file_goes_once_its_entry_is_published(tmp_path):
    c = C.KernelCache(tmp_path)
    c.get_or_build(BASE_KEY, lambda: b"ok")
    assert entries(tmp_path) == [C.key_digest(BASE_KEY) + C.ENTRY_SUFFIX] and locks(tmp_path) == []

    def boom():
        raise RuntimeError("nvrtc: error")
    other = key(source="fails")
    with pytest.raises(RuntimeError):
        c.get_or_build(other, boom)
    assert locks(tmp_path) == ["." + C.key_digest(other) + ".lock"]  # no entry: the next builder takes it
    assert c.get_or_build(other, lambda: b"fixed") == b"fixed" and locks(tmp_path) == []


def test_summary_and_clear(tmp_path):
    c = C.KernelCache(tmp_path)
    for i in range(3):
        c.get_or_build(key(source=f"k{i}"), lambda i=i: bytes(100 * (i + 1)))
    dead = C.key_digest(key(source="dead"))
    (tmp_path / ("." + dead + ".lock")).write_bytes(b"")  # a builder that died: its lock and half an entry
    half = tmp_path / ("." + dead + ".x1y2.tmp")
    half.write_bytes(b"half")
    old = time.time() - 120
    os.utime(half, (old, old))  # a temporary file is only taken once it is a minute old
    info = c.summary()
    assert info["entries"] == 3 and info["other"] == 2 and info["directory"] == str(tmp_path)
    assert info["bytes"] == sum(os.path.getsize(tmp_path / n) for n in entries(tmp_path))
    done = c.clear()
    assert done["entries"] == 3 and done["bytes"] == info["bytes"] and done["kept"] == 0
    assert os.listdir(tmp_path) == []
    n = []
    assert c.get_or_build(key(source="k0"), lambda: n.append(1) or b"again") == b"again" and n == [1]  # memory too


def test_clear_leaves_a_compile_in_progress(tmp_path):
    """A key whose lock is held (another process compiling) keeps its lock and temporary file; the
    compile then publishes as usual."""
    import fcntl
    c = C.KernelCache(tmp_path)
    busy = C.key_digest(key(source="busy"))
    lock = tmp_path / ("." + busy + ".lock")
    lock.write_bytes(b"")
    tmp = tmp_path / ("." + busy + ".abc.tmp")
    tmp.write_bytes(b"partial")
    old = time.time() - 120
    os.utime(tmp, (old, old))  # old enough to be taken, were its key's lock free
    fd = os.open(lock, os.O_RDWR)  # a second open file description conflicts like another process's
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        c.get_or_build(key(source="done"), lambda: b"x")
        done = c.clear()
        assert done["entries"] == 1 and done["kept"] == 2
        assert lock.exists() and tmp.exists()
    finally:
        os.close(fd)
    assert c.clear()["kept"] == 0 and os.listdir(tmp_path) == []


def test_clear_leaves_other_users_entries(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    c = C.KernelCache(tmp_path)
    c.get_or_build(BASE_KEY, lambda: b"mine")
    theirs = tmp_path / ("f" * 64 + C.ENTRY_SUFFIX)
    theirs.write_bytes(b"theirs")
    os.chown(theirs, 65534, 65534)
    assert c.summary()["other"] == 1
    done = c.clear()
    assert done["entries"] == 1 and done["kept"] == 1 and theirs.exists()


def test_cache_command(tmp_path, monkeypatch, capsys):
    from tiles.__main__ import main
    monkeypatch.setenv("TILES_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILES_CACHE", raising=False)
    monkeypatch.delenv("TILES_DISABLE_CACHE", raising=False)
    C.KernelCache(tmp_path).get_or_build(BASE_KEY, lambda: bytes(2 ** 20))
    assert main(["cache"]) == 0
    assert capsys.readouterr().out.startswith(f"kernel cache {tmp_path}: 1 entries, 1.0 MiB")
    assert main(["cache", "--clear"]) == 0
    assert "deleted 1 entries (1.0 MiB); 0 other files left" in capsys.readouterr().out
    assert os.listdir(tmp_path) == []
    assert main(["info"]) == 0 and f"kernel cache: {tmp_path}  (python -m tiles cache)" in capsys.readouterr().out
    monkeypatch.setenv("TILES_CACHE", "0")
    assert main(["cache"]) == 0 and "(off: TILES_CACHE=0" in capsys.readouterr().out
    C.KernelCache(tmp_path, enabled=True).get_or_build(BASE_KEY, lambda: b"left by an earlier run")
    assert main(["cache", "--clear"]) == 0 and "deleted 1 entries" in capsys.readouterr().out  # off, still cleared
    assert os.listdir(tmp_path) == []


def test_compiler_identity_is_the_copy_the_compiles_use(tmp_path):
    """A second libnvrtc mapped into the process (a framework's own copy) neither joins the key nor
    changes it: the key names the file cuda.bindings calls."""
    import ctypes
    import shutil
    runtime = _nvrtc_runtime()
    before = runtime.cuda_key(SRC)["compiler_version"]
    used = before.split(" ", 1)[1].split(":")[0]
    copy = tmp_path / os.path.basename(used)
    shutil.copyfile(used, copy)
    ctypes.CDLL(str(copy))
    assert str(copy) in C.library_identity("libnvrtc")  # both copies are mapped now ...
    assert runtime.cuda_key(SRC)["compiler_version"] == before  # ... and the key is the one it was


def test_library_identity_by_address():
    import ctypes
    libc = ctypes.CDLL(None)
    addr = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    got = C.library_identity("libc", addr)
    assert got.count(":") == 2 and "libc" in os.path.basename(got.split(":")[0])
    assert C.library_identity("libc", 1) == C.library_identity("libc")  # an address outside: every copy


def test_a_lock_deleted_under_a_waiter_is_not_held_twice(tmp_path):
    """clear() (or the publishing builder) deletes a lock file while a waiter has it open: the waiter,
    once it gets the flock, must see that its file is gone and lock the one now at the path, so it and a
    newcomer never build at the same time."""
    k = key(source="deleted lock")
    dig = C.key_digest(k)
    lock = tmp_path / ("." + dig + ".lock")
    lock.write_bytes(b"")  # a lock left by a builder that died
    holder, x, y = (C.KernelCache(tmp_path) for _ in range(3))
    fd = holder._try_lock(dig)  # clear() has taken the idle key's lock ...
    assert fd is not None
    builds, go = [], threading.Event()

    def build_x():
        builds.append("X")
        go.wait(5)
        return b"x"
    tx = threading.Thread(target=lambda: x.get_or_build(k, build_x))
    tx.start()
    time.sleep(0.2)  # ... X has opened the same file and waits on it
    holder._unlink_lock(dig)  # ... clear() deletes it and lets go
    os.close(fd)
    time.sleep(0.2)
    got = []
    ty = threading.Thread(target=lambda: got.append(y.get_or_build(k, lambda: builds.append("Y") or b"y")))
    ty.start()
    time.sleep(0.3)
    go.set()
    tx.join(10)
    ty.join(10)
    assert len(builds) == 1, builds  # one compile; the other read its entry
    assert got == [b"x" if builds == ["X"] else b"y"]


def test_clear_keeps_a_fresh_temporary_file_without_a_lock(tmp_path):
    """A writer that could not lock (flock unsupported, or it gave up waiting) has a temporary file and no
    lock file: clear() leaves a temporary file under a minute old."""
    c = C.KernelCache(tmp_path)
    fresh = tmp_path / ("." + "e" * 64 + ".abc.tmp")
    fresh.write_bytes(b"being written")
    assert c.clear()["kept"] == 1 and fresh.exists()
