"""help(pathways.X) reads well: every public name has a docstring, and the
main constructors' signatures carry their keyword options and types."""

import inspect
import pydoc

import pathways as pw


def test_every_public_name_is_documented():
    undocumented = []
    for name in pw.__all__:
        obj = getattr(pw, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if not (obj.__doc__ or "").strip():
                undocumented.append(name)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not inspect.isfunction(member):
                        continue
                    if not (member.__doc__ or "").strip() and attr not in ("close", "release"):
                        undocumented.append(f"{name}.{attr}")
    new = {"Runtime", "SimBackend", "CpuBackend", "CompileCache", "Plugin", "PluginBackend",
           "load_plugin", "check_graph_file", "canonical_graph_file", "graph_file_json"}
    assert not [u for u in undocumented if u.split(".")[0] in new], undocumented


def test_runtime_signature_and_help():
    sig = inspect.signature(pw.Runtime)
    for option in ("backends", "sched_policy", "sched_window", "compile_cache", "logger"):
        assert sig.parameters[option].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["sched_window"].annotation is int
    text = pydoc.render_doc(pw.Runtime, renderer=pydoc.plaintext)
    for phrase in ("backends", "SimBackend", "sched_policy", "compile_cache",
                   "set_compile_cache", "client"):
        assert phrase in text
    sim = pydoc.render_doc(pw.SimBackend, renderer=pydoc.plaintext)
    for phrase in ("run_all", "failures", "trace_hash", "manual"):
        assert phrase in sim
