"""The trainer's arguments as one ``miles.run_config`` log record (docs/semconv.md §11).

``snapshot`` runs on the caller's thread and only copies the top level of the arguments; ``body`` runs on the
exporter's worker thread and does the rest: flattening, the secret rule, the size bounds. Both mirror the rules of
``internal/semconv/runconfig.go`` (the collector applies the same secret rule again before anything is written).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Iterable

# Bounds of one record, below the collector's ingest limits (docs/semconv.md §11), so a record the emitter builds
# is never refused.
MAX_ARGS = 2048
MAX_KEY_BYTES = 256
MAX_STRING = 1024
MAX_LIST = 64
MAX_DEPTH = 4

REDACTED = "[redacted]"
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# The secret rule (docs/semconv.md §11): a key is split into lower-case words at every character that is not a
# letter or digit; it is a secret when the last word of the key, or of any of its dot-separated parts, is one of
# SECRET_LAST, or any word is one of SECRET_ANY.
SECRET_LAST = frozenset({"key", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "apikey", "auth"})
SECRET_ANY = frozenset({"password", "passwd", "secret", "secrets", "credential", "credentials", "apikey"})
_WORDS = re.compile(r"[^a-z0-9]+")
_AUTHORITY_END = re.compile(r"[/\s]")


def secret_key(key: str) -> bool:
    for part in key.lower().split("."):
        words = [w for w in _WORDS.split(part) if w]
        if words and (words[-1] in SECRET_LAST or any(w in SECRET_ANY for w in words)):
            return True
    return False


def redact_url_userinfo(s: str) -> str:
    """``scheme://user:pass@host`` → ``scheme://[redacted]@host`` (credentials in a URL)."""
    if "://" not in s or "@" not in s:
        return s
    out = []
    while True:
        i = s.find("://")
        if i < 0:
            out.append(s)
            return "".join(out)
        out.append(s[: i + 3])
        s = s[i + 3 :]
        # The authority ends at the first "/", whitespace or the end; the userinfo is what precedes its last "@".
        m = _AUTHORITY_END.search(s)
        end = m.start() if m else len(s)
        at = s.rfind("@", 0, end)
        if at > 0:
            out.append(REDACTED)
            s = s[at:]


def snapshot(args: Any) -> dict:
    """A shallow copy of the arguments: a mapping, an ``argparse.Namespace`` (or any object with ``vars()``), or
    a dataclass instance. The caller's only cost."""
    if isinstance(args, Mapping):
        return dict(args)
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        return {f.name: getattr(args, f.name, None) for f in dataclasses.fields(args)}
    try:
        return dict(vars(args))
    except TypeError:
        raise TypeError(f"record_run_config takes a mapping or an argparse.Namespace, not {type(args).__name__}")


def _scalar(v: Any) -> Any:
    """A value as an OTLP scalar (bool, int, float, str) or None; anything else becomes its ``str``."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, int):
        return int(v) if -(1 << 63) <= v < (1 << 63) else str(v)
    if isinstance(v, float):
        return float(v) if math.isfinite(v) else str(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if hasattr(v, "__index__"):  # numpy integers
        try:
            return _scalar(v.__index__())
        except Exception:
            pass
    return str(v)


def _json_text(v: Any) -> str:
    try:
        return json.dumps(v, sort_keys=True, default=str, ensure_ascii=False)
    except Exception:
        return str(v)


class _Builder:
    def __init__(self, redact: Iterable[str]) -> None:
        self.args: dict[str, Any] = {}
        self.redacted: list[str] = []
        self.truncated: list[str] = []
        self.dropped = 0
        self.extra = frozenset(redact)

    def cut(self, key: str, s: str) -> str:
        if "@" in s:
            s = redact_url_userinfo(s)
        if len(s) > MAX_STRING:
            self.truncated.append(key)
            return s[:MAX_STRING]
        return s

    def add(self, key: str, v: Any, depth: int) -> None:
        secret = secret_key(key) or key in self.extra
        t = type(v)
        if not secret and (v is None or t is bool or t is int or t is float or t is str):  # most arguments
            if len(self.args) >= MAX_ARGS or len(key) > MAX_KEY_BYTES // 4 and len(key.encode("utf-8", "replace")) > MAX_KEY_BYTES:
                self.dropped += 1
            elif t is str:
                self.args[key] = self.cut(key, v)
            elif t is float and not math.isfinite(v):
                self.args[key] = str(v)
            elif t is int and not _INT64_MIN <= v <= _INT64_MAX:
                self.args[key] = str(v)
            else:
                self.args[key] = v
            return
        if isinstance(v, Mapping) and depth < MAX_DEPTH and v and not secret:
            for k, x in v.items():
                self.add(f"{key}.{k}", x, depth + 1)
            return
        if len(self.args) >= MAX_ARGS or len(key.encode("utf-8", "replace")) > MAX_KEY_BYTES:
            self.dropped += 1
            return
        if secret:
            if v is not None and v != "" and v is not False:
                self.args[key] = REDACTED
                self.redacted.append(key)
            else:
                self.args[key] = _scalar(v)  # an unset secret says only that it is unset
            return
        if isinstance(v, Mapping):  # too deep, or empty
            self.args[key] = self.cut(key, _json_text(v))
        elif isinstance(v, (list, tuple, set, frozenset)):
            items = list(v)
            if isinstance(v, (set, frozenset)):
                items = sorted(items, key=repr)
            if len(items) > MAX_LIST:
                items = items[:MAX_LIST]
                self.truncated.append(key)
            out = []
            for x in items:
                if isinstance(x, (Mapping, list, tuple, set, frozenset)):
                    x = _json_text(x)
                x = _scalar(x)
                if isinstance(x, str):
                    x = self.cut(key, x)
                out.append(x)
            self.args[key] = out
        else:
            x = _scalar(v)
            self.args[key] = self.cut(key, x) if isinstance(x, str) else x


def body(args: Mapping[str, Any], redact: Iterable[str] = ()) -> dict:
    """The record's body (docs/semconv.md §11): ``args`` flat (nested mappings as ``a.b`` keys, up to 4 levels),
    secrets replaced by ``[redacted]`` and listed in ``redacted``, strings cut at 1024 characters and lists at 64
    items (listed in ``truncated``), at most 2048 arguments (``dropped`` counts the rest, and keys over 256 bytes)."""
    b = _Builder(redact)
    for k, v in args.items():
        if isinstance(k, str) and not k.startswith("_"):
            b.add(k, v, 1)
    out: dict[str, Any] = {"args": b.args}
    if b.redacted:
        out["redacted"] = b.redacted
    if b.truncated:
        out["truncated"] = sorted(set(b.truncated))
    if b.dropped:
        out["dropped"] = b.dropped
    return out
