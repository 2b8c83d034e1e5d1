"""The compile cache (include/pathways/cache.h): a content-addressed cache
of compiled executables, in memory over an optional directory store
(include/pathways/stores/dir.h), shared by runtimes and processes."""

import os
import threading
from typing import Optional, Union

from ._errors import check
from ._lowlevel import Closeable, ffi, lib
from ._types import fill_mesh, mesh_tuple

__all__ = ["CompileCache", "compile_key"]

_STATS = ("lookups", "memory_hits", "store_hits", "misses", "shared", "fill_errors",
          "bad_entries", "store_errors", "store_writes", "store_bytes_written",
          "store_raw_bytes_written", "memory_entries", "memory_bytes", "memory_evictions",
          "fill_ns", "fill_ns_saved")


def _size(value, what, bits=64):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{what} must be >= 0, not {value}")
    return value


class _Guard:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


class CompileCache(Closeable):
    """A compile cache: the executables a runtime compiles are looked up
    by a key over exactly what determines them (program bytes, backend
    name and version, mesh, options) before compiling, and kept.

        cache = CompileCache("/var/cache/myjob")     # memory + a directory
        rt = Runtime("2x4", compile_cache=cache)     # or rt.set_compile_cache(cache)
        ...
        cache.stats()["store_hits"]

    |directory| (str or PathLike; None: memory only): a dir store there
    (created if missing, its parent must exist), which other processes and
    later runs may share; |max_bytes| bounds it (0: unbounded; least
    recently used entries go). |memory_bytes| bounds the memory tier (0:
    256 MiB). |compression_level|: zstd level of stored entries (0: 3).

    Runtimes using it hold their own reference: close() (or `with`, or
    garbage collection) drops this object's, and the cache is freed once
    no runtime uses it. Thread-safe.
    """

    __slots__ = ("_life", "directory", "_lock", "__weakref__")

    def __init__(self, directory: Union[None, str, os.PathLike] = None, *,
                 memory_bytes: int = 0, max_bytes: int = 0, compression_level: int = 0):
        self._life = _Guard(None)
        self._lock = threading.Lock()
        opts = ffi.new("pw_cache_options_t*")
        lib.pw_cache_options_init(opts)
        opts.memory_bytes = _size(memory_bytes, "memory_bytes")
        if isinstance(compression_level, bool) or not isinstance(compression_level, int):
            raise TypeError("compression_level must be an int")
        if not -(1 << 31) <= compression_level < (1 << 31):
            raise ValueError(f"compression_level out of range: {compression_level}")
        opts.compression_level = compression_level
        _size(max_bytes, "max_bytes")
        self.directory = None
        if directory is not None:
            if not isinstance(directory, (str, os.PathLike)):
                raise TypeError(f"directory must be a str or os.PathLike, not "
                                f"{type(directory).__name__}")
            path = os.fsencode(directory)
            if not path or b"\0" in path:
                raise ValueError(f"directory must be a non-empty path without NUL: {directory!r}")
            self.directory = os.fsdecode(path)
            dopts = ffi.new("pw_dir_store_options_t*")
            lib.pw_dir_store_options_init(dopts)
            cpath = ffi.new("char[]", path)
            dopts.path = cpath
            dopts.max_bytes = max_bytes
            store = ffi.new("pw_store_t*")
            check(lib.pw_dir_store_create(dopts, store))
            opts.store = store[0]  # the cache owns it, also when create fails
        elif max_bytes:
            raise ValueError("max_bytes bounds the directory store: give a directory")
        out = ffi.new("pw_cache_t**")
        check(lib.pw_cache_create(opts, out))
        self._life.ptr = out[0]

    @property
    def closed(self) -> bool:
        return self._life.ptr is None

    def _retain(self):
        """A new C reference (for a runtime); ValueError once closed."""
        with self._lock:
            ptr = self._life.ptr
            if ptr is None:
                raise ValueError("operation on a closed CompileCache")
            lib.pw_cache_retain(ptr)
            return ptr

    def stats(self) -> dict:
        """The counters: lookups, memory_hits, store_hits, misses (compiles
        run), shared, fill_errors, bad_entries (corrupt store entries,
        recompiled), store_errors, store_writes, store_bytes_written,
        store_raw_bytes_written, memory_entries, memory_bytes,
        memory_evictions, fill_ns, fill_ns_saved."""
        s = ffi.new("pw_cache_stats_t*")
        s.struct_size = ffi.sizeof("pw_cache_stats_t")
        ptr = self._retain()
        try:
            check(lib.pw_cache_stats(ptr, s))
        finally:
            lib.pw_cache_release(ptr)
        return {k: getattr(s, k) for k in _STATS}

    def close(self, timeout=None) -> None:
        """Drops this object's reference (idempotent). Runtimes that use
        the cache keep it until they are closed."""
        with self._lock:
            ptr, self._life.ptr = self._life.ptr, None
        if ptr is not None:
            lib.pw_cache_release(ptr)

    def __repr__(self):
        if self.closed:
            return "<CompileCache closed>"
        where = f"dir {self.directory!r}" if self.directory else "memory only"
        return f"<CompileCache {where}>"


def compile_key(backend: str, version: int, mesh, program: Union[str, bytes],
                options: Optional[str] = None) -> str:
    """The cache key (32 hex digits) of compiling |program| with backend
    |backend| at |version| for |mesh| with |options|: stable across
    builds, processes and hosts (pw_cache_compile_key)."""
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a str, not {type(backend).__name__}")
    data = program.encode() if isinstance(program, str) else bytes(program)
    cmesh = fill_mesh(ffi.new("pw_mesh_shape_t*"), mesh_tuple(mesh))
    key = ffi.new("pw_cache_key_t*")
    check(lib.pw_cache_compile_key(backend.encode(), _size(version, "version", 32), cmesh,
                                   data, len(data),
                                   options.encode() if options else ffi.NULL, key))
    out = ffi.new("char[33]")
    lib.pw_cache_key_format(key, out)
    return ffi.string(out).decode()
