"""Lets the published miles (miles-rl 0.0.2) import its rollout and rollout-manager modules without a GPU
(docs/python.md "Compatibility"; e2e/miles_real_e2e_test.go).

miles imports four sglang *engine-process* modules at module level; the rollout manager process never runs them
(they are the sglang server's own code: argument parsing of the engine, killing its process tree, its tensor
dumper). sglang 0.5.23 itself is installed from PyPI without its dependencies (torch ≥ 2.x, triton, CUDA
kernels), so those four modules cannot be imported here. Only they are replaced, and every other sglang module
miles imports (the OpenAI protocol types, the function-call parsers, the router) is the real one from the wheel:

- ``sglang`` and ``sglang.srt``: their ``__init__`` (the frontend language API) is not run; the packages keep their
  real paths, so every other submodule loads from the wheel.
- ``sglang.srt.utils`` (``utils/common.py`` imports triton): the package without its ``__init__``, holding
  ``kill_process_tree``, which miles calls only to stop an engine it launched (none here: it raises).
- ``sglang.srt.server_args.ServerArgs``: miles adds the engine's ``--sglang-*`` flags through
  ``ServerArgs.add_cli_args``; none is added here, and the driver sets the few ``sglang_*`` fields the rollout code
  reads to sglang's defaults (miles_driver.py, ``SGLANG_DEFAULTS``).
- ``sglang.srt.debug_utils.dumper`` (imports the engine's zmq/io_struct plumbing): a module holding the real
  ``_BaseConfig``, ``DumperConfig`` and ``_get_rank`` compiled from that file's own source (miles parses its
  ``--dumper-*`` flags with them); the ``dumper`` object itself is None, used only when ``--dumper-enable``.
A definition asked for here that the source lacks fails the import, so a newer sglang cannot pass silently.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types


def _bare_package(name: str, path: str) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__path__ = [path]
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, m)
    return m


def _module(name: str, **defs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(defs)
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, m)
    return m


class ServerArgs:
    """Placeholder for sglang's engine arguments: adds no flags, is never instantiated here."""

    @staticmethod
    def add_cli_args(parser) -> None:
        return None


_DUMPER_PRELUDE = """
import enum, functools, json, os, re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, List, Literal, Optional, Union, get_args, get_type_hints
import torch.distributed as dist
"""


def _real_defs(path: str, modname: str, names: list[str]) -> types.ModuleType:
    """A module holding only the named top-level definitions of a real sglang file, compiled from its source."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    keep = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in names]
    missing = set(names) - {n.name for n in keep}
    if missing:
        raise ImportError(f"{path}: sglang's source has no top-level {sorted(missing)}")
    m = types.ModuleType(modname)
    m.__file__ = path
    sys.modules[modname] = m
    parent, _, child = modname.rpartition(".")
    setattr(sys.modules[parent], child, m)
    exec(_DUMPER_PRELUDE, m.__dict__)
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), m.__dict__)
    return m


def kill_process_tree(*args, **kwargs):
    raise RuntimeError("no sglang engine process runs here")


def install() -> None:
    if "sglang.srt" in sys.modules:
        return
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("sglang is not installed (scripts/miles-venv.sh)")
    root = list(spec.submodule_search_locations)[0]
    _bare_package("sglang", root)
    _bare_package("sglang.srt", root + "/srt")
    utils = _bare_package("sglang.srt.utils", root + "/srt/utils")
    utils.kill_process_tree = kill_process_tree
    _module("sglang.srt.server_args", ServerArgs=ServerArgs)
    _bare_package("sglang.srt.debug_utils", root + "/srt/debug_utils")
    dumper = _real_defs(root + "/srt/debug_utils/dumper.py", "sglang.srt.debug_utils.dumper",
                        ["_BaseConfig", "DumperConfig", "_get_rank"])
    dumper.dumper = None
