"""Plugins loaded from shared objects (include/pathways/plugin.h,
docs/plugins.md): a backend (or store) built on its own, loaded by path or
by name, and used in a Runtime like a bundled one."""

import os
from typing import Optional, Union

from ._backends import Backend, _SimOps
from ._errors import FailedPreconditionError, check
from ._lowlevel import ffi, lib

__all__ = ["Plugin", "PluginBackend", "load_plugin", "plugin_dir", "PLUGIN_ABI_VERSION"]

#: The plugin ABI version this libpathways loads (pw_plugin_entry's).
PLUGIN_ABI_VERSION = lib.PW_PLUGIN_ABI_VERSION


def _text(p):
    return None if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def plugin_dir() -> str:
    """The directory of the bundled plugin modules (libpathways_cpu.so,
    libpathways_sim.so, ...) beside the libpathways in use."""
    return _text(lib.pw_plugin_dir())


class Plugin:
    """A loaded plugin library (load_plugin). |name|, |kind| ("backend",
    "transport", "store"), |version|, |description|, |args_help| (the
    grammar of its options string) and |abi_version| come from its
    factory; |path| is the file loaded. The library stays mapped until the
    process exits (what it made points into it)."""

    __slots__ = ("_ptr", "name", "kind", "version", "description", "args_help", "abi_version",
                 "path")

    def __init__(self, path_or_name: Union[str, os.PathLike]):
        if not isinstance(path_or_name, (str, os.PathLike)):
            raise TypeError(f"load_plugin takes a path or a name (str or os.PathLike), not "
                            f"{type(path_or_name).__name__}")
        raw = os.fsencode(path_or_name)
        if not raw or b"\0" in raw:
            raise ValueError(f"bad plugin path or name {path_or_name!r}")
        self._ptr = None
        out = ffi.new("pw_plugin_t**")
        check(lib.pw_plugin_load(raw, out))
        self._ptr = out[0]
        f = lib.pw_plugin_factory(self._ptr)
        self.name = _text(f.name)
        self.kind = _text(lib.pw_plugin_kind_name(f.kind))
        self.version = _text(f.version)
        self.description = _text(f.description)
        self.args_help = _text(f.args_help)
        self.abi_version = f.abi_version
        self.path = _text(lib.pw_plugin_path(self._ptr))

    def backend(self, args: str = "") -> "PluginBackend":
        """A backend of this plugin for Runtime(backends=[...]), created
        from options string |args| (the plugin's grammar: args_help) when
        the runtime is made. FailedPreconditionError for a plugin of
        another kind."""
        if self.kind != "backend":
            raise FailedPreconditionError(
                f"plugin {self.name!r} ({self.path}) is a {self.kind} plugin, not a backend")
        return PluginBackend(self, args)

    def __del__(self):
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr is not None and lib is not None:
            lib.pw_plugin_release(ptr)

    def __repr__(self):
        return (f"<Plugin {self.name!r} {self.kind} {self.version or ''} (ABI "
                f"{self.abi_version}) from {self.path}>")


def load_plugin(path_or_name: Union[str, os.PathLike]) -> Plugin:
    """Loads a plugin library: a path (anything with a '/'), or a bare name
    ("cpu", "sim", "dir", "inproc", or your own) looked up as NAME,
    libpathways_NAME.so and pathways_NAME.so in PATHWAYS_PLUGIN_PATH, then
    in plugin_dir(). Errors name the file: NotFoundError (no such file,
    no entry point, a name found nowhere: every file tried),
    FailedPreconditionError (another ABI version: both named),
    InvalidArgumentError (not a shared object, a bad factory)."""
    return Plugin(path_or_name)


class PluginBackend(_SimOps, Backend):
    """A backend made by a plugin (Plugin.backend(args)). Its devices are
    what its options string says (e.g. "devices=8" for the cpu plugin);
    the runtime's slices must fit in them. When the plugin made a sim
    backend, the SimBackend methods (run_all, stats, fail, ...) work on it;
    on another backend they raise InvalidArgumentError."""

    __slots__ = ("plugin", "args", "kind")

    def __init__(self, plugin: Plugin, args: str = ""):
        super().__init__()
        if not isinstance(args, str):
            raise TypeError(f"plugin options must be a str, not {type(args).__name__}")
        if "\0" in args:
            raise ValueError("plugin options must not contain NUL")
        self.plugin = plugin
        self.args = args
        self.kind = plugin.name

    def _create(self, allocator, set_logger, device_count):
        out = ffi.new("pw_backend_t*")
        check(lib.pw_plugin_create_backend(self.plugin._ptr, self.args.encode(), out))
        self._c = out[0]
        return self._c

    def _set_health(self, device, health):
        if lib.pw_sim_backend_is_sim(self._c):
            from ._backends import SimBackend
            return SimBackend._set_health(self, device, health)
        if self.plugin.name == "cpu":
            check(lib.pw_cpu_backend_set_health(self._c, device, health))
            return
        from ._errors import UnimplementedError
        raise UnimplementedError(f"set_device_health: plugin backend {self.plugin.name!r} "
                                 "has no health hook")

    def __repr__(self):
        return f"<PluginBackend {self.plugin.name!r} args={self.args!r}>"
