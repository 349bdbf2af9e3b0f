"""On-disk kernel cache: compiled kernels (cubin / code object bytes) keyed by everything that made them.

Standard library only, on purpose: no vendor, no torch, importable by path for tests.

Promises (see docs/guarantees.md; each is tested in tests/test_cache.py):

* The key is the sha256 of a canonical JSON of the caller's key parts, which must contain
  ``source``, ``template_version``, ``options``, ``compiler_version``, ``arch`` and ``tiles_version``.
* One file per entry, ``<dir>/<key digest>.tkc``, written to a temporary file in the same directory and
  published with a single ``os.replace``. A file is ``MAGIC`` + header (format version, payload length,
  sha256 of the payload, key digest) + payload; every field is checked on read.
* A truncated, zero-byte, corrupted or wrong-key entry is never returned: it is ignored, deleted when it
  is ours, and rebuilt. An entry owned by another uid, or writable by group/others, is not loaded (one
  warning per process).
* Many threads and processes building the same key at once all get the same bytes and leave one entry:
  an advisory ``fcntl.flock`` per key lets one of them build while the others wait and then read. The
  kernel drops the lock when its holder dies, so a killed builder never blocks the others. The lock
  file goes once its entry is published.
* ``clear()`` (``python -m tiles cache --clear``) deletes this user's entries and the leftovers of
  keys nobody is compiling; a compile in progress is left to finish and publish.
* A missing, unwritable or read-only cache directory degrades to building in memory, with one
  ``warnings.warn`` per process.
* ``TILES_CACHE_DIR`` chooses the directory (default ``$XDG_CACHE_HOME/tiles``, else ``~/.cache/tiles``);
  ``TILES_CACHE=0`` or ``TILES_DISABLE_CACHE=1`` turns the disk cache off (kernels still live in memory
  for the life of the process).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import struct
import tempfile
import threading
import time
import warnings
from typing import Any, Callable, Mapping

__all__ = [
    "KernelCache", "REQUIRED_KEY_PARTS", "key_digest", "canonical_key", "get_cache", "get_or_build",
    "cache_dir_from_env", "cache_enabled_from_env",
]

REQUIRED_KEY_PARTS = ("source", "template_version", "options", "compiler_version", "arch", "tiles_version")

MAGIC = b"TILESKC\x00"
FORMAT_VERSION = 1
# format version, payload length, sha256(payload), key digest (raw sha256 of the canonical key)
_HEADER = struct.Struct("<IQ32s32s")
HEADER_SIZE = len(MAGIC) + _HEADER.size
ENTRY_SUFFIX = ".tkc"
_TMP_SUFFIX = ".tmp"
_LOCK_SUFFIX = ".lock"

_warned: set = set()
_warned_lock = threading.Lock()


def _warn_once(kind: str, message: str) -> None:
    with _warned_lock:
        if kind in _warned:
            return
        _warned.add(kind)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _reset_warnings() -> None:
    """Forget which one-per-process warnings were given (for tests)."""
    with _warned_lock:
        _warned.clear()


# ---------------------------------------------------------------------------------------------- key

def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"__bytes__": bytes(obj).hex()}
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=lambda x: json.dumps(x, sort_keys=True, default=_json_default))
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"tiles cache: key part of type {type(obj).__name__} is not serialisable: {obj!r}")


def canonical_key(key_parts: Mapping[str, Any]) -> bytes:
    """The canonical JSON bytes that the key digest is taken over. Raises ValueError on a bad key."""
    if not isinstance(key_parts, Mapping):
        raise TypeError(f"tiles cache: key_parts must be a dict, got {type(key_parts).__name__}")
    missing = [k for k in REQUIRED_KEY_PARTS if k not in key_parts]
    if missing:
        raise ValueError(
            f"tiles cache: key_parts is missing {', '.join(missing)}; a cache key must name all of "
            f"{', '.join(REQUIRED_KEY_PARTS)} (got {', '.join(sorted(map(str, key_parts))) or 'nothing'})")
    bad = [k for k in key_parts if not isinstance(k, str)]
    if bad:
        raise ValueError(f"tiles cache: key_parts keys must be strings, got {bad!r}")
    try:
        text = json.dumps(key_parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as e:
        raise ValueError(f"tiles cache: key_parts cannot be made canonical: {e}") from None
    return text.encode("utf-8")


def key_digest(key_parts: Mapping[str, Any]) -> str:
    """Hex sha256 of the canonical key; the entry's file name stem."""
    return hashlib.sha256(canonical_key(key_parts)).hexdigest()


# ---------------------------------------------------------------------------------------------- env

def library_identity(stem: str, address: int | None = None) -> str:
    """The shared library ``stem``.so* (e.g. "libnvrtc") this process has loaded, as path, size and
    modification time: a compiler's API reports only its major.minor version, and a patch release of
    the same version must not load the binaries of the one before. ``address``, a function of the
    library the compiles go through, picks that file where two copies are mapped (one a framework
    loaded for itself, say), so the key neither lists both nor changes when the second one arrives.
    Only the library itself, not the ones it loads lazily (libnvrtc-builtins), so the key is the same
    before and after a first compile. Empty where /proc is not there."""
    try:
        with open("/proc/self/maps") as f:
            fields = [line.split(None, 5) for line in f]
    except OSError:
        return ""
    mapped = [(x[0], x[5].strip()) for x in fields
              if len(x) == 6 and os.path.basename(x[5].strip()).startswith(stem + ".so")]
    paths = sorted({p for _, p in mapped})
    if address is not None:
        def holds(span: str) -> bool:
            lo, hi = (int(v, 16) for v in span.split("-"))
            return lo <= address < hi
        paths = sorted({p for span, p in mapped if holds(span)}) or paths
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(out)


def cache_enabled_from_env(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("TILES_CACHE", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    if env.get("TILES_DISABLE_CACHE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    return True


def cache_dir_from_env(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    d = env.get("TILES_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.join(base, "tiles"))


# ---------------------------------------------------------------------------------------------- file format

def encode_entry(payload: bytes, digest_hex: str) -> bytes:
    return (MAGIC + _HEADER.pack(FORMAT_VERSION, len(payload), hashlib.sha256(payload).digest(),
                                 bytes.fromhex(digest_hex)) + payload)


def decode_entry(blob: bytes, digest_hex: str) -> bytes | None:
    """The payload if ``blob`` is a complete, intact entry for ``digest_hex``; None otherwise."""
    if len(blob) < HEADER_SIZE or blob[:len(MAGIC)] != MAGIC:
        return None
    version, length, payload_sha, key = _HEADER.unpack_from(blob, len(MAGIC))
    if version != FORMAT_VERSION or key != bytes.fromhex(digest_hex):
        return None
    if len(blob) - HEADER_SIZE != length:
        return None
    payload = blob[HEADER_SIZE:]
    if hashlib.sha256(payload).digest() != payload_sha:
        return None
    return payload


# ---------------------------------------------------------------------------------------------- cache

_MISSING, _INVALID, _UNTRUSTED = "missing", "invalid", "untrusted"


class KernelCache:
    """A two-level (memory, then disk) cache of compiled kernel bytes.

    ``KernelCache()`` reads ``TILES_CACHE_DIR`` / ``TILES_CACHE`` / ``TILES_DISABLE_CACHE`` now;
    ``directory`` and ``enabled`` override them.
    """

    def __init__(self, directory: str | os.PathLike | None = None, *, enabled: bool | None = None,
                 lock_timeout: float = 900.0):
        self.directory = (os.path.abspath(os.fspath(directory)) if directory is not None
                          else cache_dir_from_env())
        self.enabled = cache_enabled_from_env() if enabled is None else bool(enabled)
        self.lock_timeout = float(lock_timeout)
        self._memory: dict[str, bytes] = {}
        self._key_locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._dir_state: str | None = None  # None: not checked; "rw"; "ro" (read what is there); "none"
        self.stats = {"memory_hits": 0, "disk_hits": 0, "builds": 0, "rejected": 0}

    # -- public -------------------------------------------------------------------------------------

    def entry_path(self, key_parts: Mapping[str, Any]) -> str:
        return self._path(key_digest(key_parts))

    def clear_memory(self) -> None:
        with self._guard:
            self._memory.clear()

    def summary(self) -> dict:
        """What the directory holds: {"directory", "entries", "bytes", "other"} (other: lock and
        temporary files, and entries of other users, which clear() leaves)."""
        out = {"directory": self.directory, "entries": 0, "bytes": 0, "other": 0}
        for name, st in self._listing():
            if name.endswith(ENTRY_SUFFIX) and not name.startswith(".") and st.st_uid == os.geteuid():
                out["entries"] += 1
                out["bytes"] += st.st_size
            elif stat.S_ISREG(st.st_mode):
                out["other"] += 1
        return out

    def clear(self) -> dict:
        """Delete this user's entries, and the lock and temporary files of keys nobody is compiling now
        (a key's lock is tried without waiting: a compile in progress keeps its files and publishes its
        entry as usual; a temporary file is only deleted once it is a minute old, as a writer that could
        not lock writes it within seconds). Returns {"entries": deleted, "bytes": freed, "kept": other
        files left}."""
        self.clear_memory()
        done = {"entries": 0, "bytes": 0, "kept": 0}
        keys = set()
        for name, st in self._listing():
            if name.endswith(ENTRY_SUFFIX) and not name.startswith(".") and st.st_uid == os.geteuid():
                try:
                    os.unlink(os.path.join(self.directory, name))
                    done["entries"] += 1
                    done["bytes"] += st.st_size
                except OSError:
                    pass
            elif name.startswith(".") and (name.endswith(_LOCK_SUFFIX) or name.endswith(_TMP_SUFFIX)):
                keys.add(name[1:].split(".")[0])
        for digest in sorted(keys):
            fd = self._try_lock(digest)
            if fd is None and os.path.lexists(self._lock_path(digest)):
                continue  # being compiled (or not ours): left as it is
            try:
                self._sweep_temps(digest, min_age=60.0)
                if fd is not None:
                    self._unlink_lock(digest)
            finally:
                if fd is not None:
                    os.close(fd)
        done["kept"] = sum(1 for _, st in self._listing() if stat.S_ISREG(st.st_mode))
        return done

    def get_or_build(self, key_parts: Mapping[str, Any], build: Callable[[], bytes], *,
                     allow_build: bool = True, name: str | None = None) -> bytes:
        """The cached bytes for ``key_parts``, calling ``build()`` (at most once across the threads and
        processes sharing this cache directory) when there are none.

        ``allow_build=False`` (e.g. during CUDA graph capture) raises RuntimeError instead of building.
        """
        digest = key_digest(key_parts)
        label = name or (key_parts.get("name") if isinstance(key_parts.get("name"), str) else None) \
            or digest[:16]

        hit = self._memory.get(digest)
        if hit is not None:
            self.stats["memory_hits"] += 1
            return hit

        with self._key_lock(digest):
            hit = self._memory.get(digest)
            if hit is not None:
                self.stats["memory_hits"] += 1
                return hit
            state = self._check_dir() if self.enabled else "none"
            if state != "none":
                payload, why = self._read(digest)
                if payload is not None:
                    return self._remember(digest, payload, disk=True)
            if not allow_build:
                raise RuntimeError(
                    f"tiles: kernel {label} is not compiled and cannot be compiled during CUDA graph "
                    f"capture; call it once before capturing")
            if state != "rw":
                return self._remember(digest, self._build(build, label), disk=False)
            return self._build_locked(digest, build, label)

    # -- internals ----------------------------------------------------------------------------------

    def _path(self, digest: str) -> str:
        return os.path.join(self.directory, digest + ENTRY_SUFFIX)

    def _key_lock(self, digest: str) -> threading.Lock:
        with self._guard:
            lk = self._key_locks.get(digest)
            if lk is None:
                lk = self._key_locks[digest] = threading.Lock()
            return lk

    def _remember(self, digest: str, payload: bytes, *, disk: bool) -> bytes:
        self.stats["disk_hits" if disk else "builds"] += 1
        with self._guard:
            self._memory[digest] = payload
        return payload

    def _build(self, build: Callable[[], bytes], label: str) -> bytes:
        out = build()
        if not isinstance(out, (bytes, bytearray, memoryview)):
            raise TypeError(f"tiles cache: the build function of kernel {label} returned "
                            f"{type(out).__name__}, expected bytes")
        return bytes(out)

    def _unusable(self, why: str) -> None:
        _warn_once(("dir", self.directory),
                   f"tiles: kernel cache directory {self.directory!r} is not usable ({why}); kernels will "
                   f"be compiled in memory for this process only. Set TILES_CACHE_DIR to a writable "
                   f"directory, or TILES_CACHE=0 to silence this.")

    def _check_dir(self) -> str:
        if self._dir_state is not None:
            return self._dir_state
        d = self.directory
        state = "rw"
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            st = os.stat(d)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", d)
            if not os.access(d, os.W_OK | os.X_OK):
                state = "ro" if os.access(d, os.R_OK | os.X_OK) else "none"
                self._unusable("not writable")
        except OSError as e:
            state = "none"
            self._unusable(f"{type(e).__name__}: {e.strerror or e}")
        self._dir_state = state
        return state

    def _read(self, digest: str) -> tuple[bytes | None, str]:
        path = self._path(digest)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None, _MISSING
        except OSError:  # a symlink (ELOOP), a permission problem: not an entry we can trust
            self.stats["rejected"] += 1
            return None, _UNTRUSTED
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.stats["rejected"] += 1
                return None, _UNTRUSTED
            if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                self.stats["rejected"] += 1
                who = "owned by another user" if st.st_uid != os.geteuid() else "writable by group or others"
                _warn_once(("untrusted", self.directory),
                           f"tiles: ignoring kernel cache entry {path!r} ({who}); it will be rebuilt. "
                           f"Cache entries must belong to you and be writable only by you.")
                return None, _UNTRUSTED
            chunks = []
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                chunks.append(b)
        except OSError:
            self.stats["rejected"] += 1
            return None, _INVALID
        finally:
            os.close(fd)
        payload = decode_entry(b"".join(chunks), digest)
        if payload is None:
            self.stats["rejected"] += 1
            return None, _INVALID
        return payload, "ok"

    def _lock_path(self, digest: str) -> str:
        return os.path.join(self.directory, "." + digest + _LOCK_SUFFIX)

    def _unlink_lock(self, digest: str) -> None:
        try:
            os.unlink(self._lock_path(digest))
        except OSError:
            pass

    def _listing(self) -> list:
        """(name, lstat) of each file in the directory; empty when it cannot be read."""
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return []
        out = []
        for n in names:
            try:
                out.append((n, os.lstat(os.path.join(self.directory, n))))
            except OSError:
                pass
        return out

    def _holds_path(self, fd: int, path: str) -> bool:
        """Whether the locked file is still the one at `path`: a lock file is deleted while held (by the
        builder that published, or by clear()), so a waiter that then gets the flock holds a file no
        one else will open, and must lock the path's current file instead."""
        try:
            a, b = os.fstat(fd), os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)

    def _try_lock(self, digest: str) -> int | None:
        """An fd holding the key's flock if nobody holds it now; else None (no waiting, no creating)."""
        path = self._lock_path(digest)
        try:
            import fcntl
            fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except (ImportError, OSError):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        if not self._holds_path(fd, path):  # deleted since we opened it: someone else's now
            os.close(fd)
            return None
        return fd

    def _acquire_file_lock(self, digest: str) -> int | None:
        """An fd holding an exclusive flock for ``digest``'s lock file as it is now on disk, or None
        when locking is not possible."""
        try:
            import fcntl
        except ImportError:  # not POSIX
            return None
        path = self._lock_path(digest)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fd = os.open(path, flags, 0o600)
            except OSError:
                return None
            delay = 0.002
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                except OSError:  # e.g. ENOLCK on some network file systems: go on without the lock
                    os.close(fd)
                    return None
                if time.monotonic() > deadline:
                    os.close(fd)
                    _warn_once(("lock-timeout", self.directory),
                               f"tiles: waited {self.lock_timeout:.0f} s for another process compiling into "
                               f"{self.directory!r}; compiling here as well.")
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
            if self._holds_path(fd, path):
                return fd
            os.close(fd)  # the file was deleted while we waited on it: lock the one there now

    def _build_locked(self, digest: str, build: Callable[[], bytes], label: str) -> bytes:
        lock_fd = self._acquire_file_lock(digest)
        try:
            payload, why = self._read(digest)  # someone may have published while we waited
            if payload is not None:
                if lock_fd is not None:
                    self._unlink_lock(digest)  # (held and the entry is there: as after a publish)
                return self._remember(digest, payload, disk=True)
            path = self._path(digest)
            if why == _INVALID:
                try:
                    os.unlink(path)  # ours (untrusted ones are left for their owner), never loaded
                except OSError:
                    pass
            if lock_fd is not None:
                self._sweep_temps(digest)
            payload = self._build(build, label)
            if self._publish(digest, payload) and lock_fd is not None:
                # Unlinked while held: a waiter queued on this inode reads the published entry once it
                # holds the lock, and a later caller locks a new file and finds the entry the same way.
                self._unlink_lock(digest)
            return self._remember(digest, payload, disk=False)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)  # releases the flock

    def _sweep_temps(self, digest: str, min_age: float = 0.0) -> None:
        """Remove temporary files left for this key by writers that died (we hold the key's lock), of at
        least `min_age` seconds."""
        prefix = "." + digest + "."
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for n in names:
            if n.startswith(prefix) and n.endswith(_TMP_SUFFIX):
                p = os.path.join(self.directory, n)
                try:
                    st = os.lstat(p)
                    if st.st_uid == os.geteuid() and time.time() - st.st_mtime >= min_age:
                        os.unlink(p)
                except OSError:
                    pass

    def _publish(self, digest: str, payload: bytes) -> bool:
        """Write the entry; False (and the directory treated as read-only from now on) when that failed."""
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix="." + digest + ".", suffix=_TMP_SUFFIX, dir=self.directory)
            try:
                data = memoryview(encode_entry(payload, digest))
                while data:
                    n = os.write(fd, data)
                    data = data[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self._path(digest))
            tmp = None
            return True
        except OSError as e:
            self._dir_state = "ro"
            self._unusable(f"writing an entry failed: {type(e).__name__}: {e.strerror or e}")
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


# ---------------------------------------------------------------------------------------------- process-wide cache

_default: KernelCache | None = None
_default_lock = threading.Lock()


def get_cache() -> KernelCache:
    """The process-wide cache, made again if TILES_CACHE_DIR / TILES_CACHE / TILES_DISABLE_CACHE changed."""
    global _default
    d, en = cache_dir_from_env(), cache_enabled_from_env()
    with _default_lock:
        if _default is None or _default.directory != d or _default.enabled != en:
            _default = KernelCache(d, enabled=en)
        return _default


def get_or_build(key_parts: Mapping[str, Any], build: Callable[[], bytes], *, allow_build: bool = True,
                 name: str | None = None) -> bytes:
    """``get_cache().get_or_build(...)``."""
    return get_cache().get_or_build(key_parts, build, allow_build=allow_build, name=name)
