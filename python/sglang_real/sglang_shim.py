"""Imports sglang 0.5.23's observability modules without torch (docs/semconv.md §7, "Real sglang fixtures").

The venv (scripts/sglang-venv.sh) installs the sglang wheel with --no-deps. The modules under test are imported
from that wheel unchanged: srt/observability/{metrics_collector,trace,trace_async,scheduler_stage_metrics,
req_time_stats,utils}.py, srt/runtime_context.py, srt/environ.py, srt/utils/gauge_histogram.py. Their import
chain also reaches modules that import torch and triton at module level; each of those is replaced here, and only
those:

- ``sglang`` and ``sglang.srt``: their ``__init__`` (the frontend language API) is not run; the packages keep
  their real paths, so every submodule loads from the wheel.
- ``sglang.srt.utils`` (``utils/common.py`` imports torch, triton, PIL): the package without its ``__init__``,
  holding the real ``get_bool_env_var`` and ``get_int_env_var`` compiled from ``utils/common.py``'s own source.
- ``sglang.srt.disaggregation.utils`` and ``sglang.srt.model_executor.forward_batch_info`` (torch): the real
  ``DisaggregationMode`` and ``ForwardMode`` classes compiled from those files' source.
- ``sglang.srt.utils.nvtx_utils`` (torch profiler hooks): no profiler is ever active here, so its
  ``profile_range`` is a null context and its method decorator the identity, which is what the real module does
  when no torch profiler runs and nvtx is off.
- ``sglang.srt.server_args`` (its argument groups import torch through ``srt/platforms``): metrics_collector.py
  imports ``ServerArgs`` for its type annotations only (the collectors take ``server_args`` and never read it);
  the placeholder class here is never instantiated. The configuration the collectors do read is published by the
  driver into sglang's real runtime context (sglang_driver.py, ``publish``).
A definition the shim asks for and the source lacks fails the import, so a newer sglang cannot pass silently.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import sys
import types

_spec = importlib.util.find_spec("sglang")
if _spec is None or not _spec.submodule_search_locations:
    raise ImportError("sglang is not installed (scripts/sglang-venv.sh)")
PKG = list(_spec.submodule_search_locations)[0]
SRT = os.path.join(PKG, "srt")


def _bare_package(modname: str, path: str) -> types.ModuleType:
    m = types.ModuleType(modname)
    m.__path__ = [path]
    m.__file__ = os.path.join(path, "__init__.py")
    sys.modules[modname] = m
    parent, _, child = modname.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, m)
    return m


def _real_defs(relpath: str, names: list[str], modname: str, package: bool = False) -> types.ModuleType:
    """A module holding only the named top-level definitions of a real sglang file, compiled from its source."""
    path = os.path.join(SRT, relpath)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    keep = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in names]
    missing = set(names) - {n.name for n in keep}
    if missing:
        raise ImportError(f"{relpath}: sglang's source has no top-level {sorted(missing)}")
    if package:
        m = _bare_package(modname, os.path.dirname(path))
    else:
        m = types.ModuleType(modname)
        m.__file__ = path
        sys.modules[modname] = m
    g = m.__dict__
    exec(
        "import os\nfrom enum import Enum, IntEnum, auto\nfrom functools import lru_cache, total_ordering\n"
        "from typing import Any, Dict, List, Optional\n",
        g,
    )
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), g)
    return m


def install() -> None:
    """Registers the replacements above; call before importing sglang."""
    if "sglang.srt" in sys.modules:
        return
    _bare_package("sglang", PKG)
    _bare_package("sglang.srt", SRT)
    _real_defs("utils/common.py", ["get_bool_env_var", "get_int_env_var"], "sglang.srt.utils", package=True)
    _real_defs("disaggregation/utils.py", ["DisaggregationMode"], "sglang.srt.disaggregation.utils")
    _real_defs("model_executor/forward_batch_info.py", ["ForwardMode"], "sglang.srt.model_executor.forward_batch_info")
    nv = types.ModuleType("sglang.srt.utils.nvtx_utils")
    nv.NVTX_SCHEDULER_ENABLED = False
    nv.profile_range = lambda *a, **k: contextlib.nullcontext()

    def scheduler_nvtx_method(fn=None, *a, **k):
        return fn if fn is not None else (lambda f: f)

    nv.scheduler_nvtx_method = scheduler_nvtx_method
    sys.modules[nv.__name__] = nv
    sa = types.ModuleType("sglang.srt.server_args")

    class ServerArgs:  # annotations only; see the module doc
        def __init__(self, *a, **k):
            raise RuntimeError("sglang_shim: ServerArgs is a placeholder (docs/semconv.md §7)")

    sa.ServerArgs = ServerArgs
    sys.modules[sa.__name__] = sa
