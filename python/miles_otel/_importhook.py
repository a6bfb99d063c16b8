"""Post-import hooks: run a function on a module right after it is first executed (or at once when it already
is), the way OpenTelemetry's and ddtrace's instrumentations attach to a library without editing it.

A ``from miles.utils.http_utils import post`` executes ``http_utils`` first and binds the name after, so a hook
that replaces ``http_utils.post`` is seen by every module that imports the name later."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

Hook = Callable[[Any], None]

_lock = threading.RLock()
_hooks: dict[str, list[Hook]] = {}
_finder: "_Finder | None" = None


def when_imported(name: str, hook: Hook) -> None:
    """Run ``hook(module)`` once ``name`` is imported; at once when it already is."""
    with _lock:
        mod = sys.modules.get(name)
        if mod is None:
            _hooks.setdefault(name, []).append(hook)
            _install()
            return
    hook(mod)


def clear() -> None:
    """Forget every pending hook and remove the finder (tests, ``uninstrument``)."""
    global _finder
    with _lock:
        _hooks.clear()
        if _finder is not None:
            try:
                sys.meta_path.remove(_finder)
            except ValueError:
                pass
            _finder = None


def _install() -> None:
    global _finder
    if _finder is None:
        _finder = _Finder()
        sys.meta_path.insert(0, _finder)


def _run(name: str, module: Any) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
    for h in hooks:
        h(module)


class _Finder:  # the meta path finder protocol: find_spec (importlib.abc is not imported, to keep start-up light)
    """Finds nothing itself: asks the finders after it and wraps the loader of a watched module."""

    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(self, fullname, path, target=None):
        if fullname not in _hooks:
            return None
        busy = getattr(self._busy, "names", None)
        if busy is None:
            busy = self._busy.names = set()
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            busy.discard(fullname)
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, fullname)
        return spec


class _Loader:
    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self._name = name

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:
        self._inner.exec_module(module)
        _run(self._name, module)

    def __getattr__(self, attr: str) -> Any:  # get_source, get_filename, is_package, resource readers, …
        return getattr(self._inner, attr)
