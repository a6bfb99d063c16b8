"""A miles tracking backend (``miles/utils/tracking_utils`` registry shape: ``init`` / ``log`` / ``finish``).

Registering it fans every ``tracking_utils.log(...)`` call out to OTLP step metrics (docs/semconv.md §4)."""

from __future__ import annotations

from typing import Any

from .emitter import Emitter


class OtelTrackingBackend:
    """Duck-typed miles ``TrackingBackend``: ``log(metrics, step=None, *, step_key=None)`` → ``log_metrics``."""

    def __init__(self, emitter: Emitter | None = None) -> None:
        self._emitter = emitter

    @property
    def emitter(self) -> Emitter:
        if self._emitter is None:
            from . import get_emitter

            self._emitter = get_emitter()
        return self._emitter

    def init(self, args: Any = None, *, primary: bool = True, **kwargs: Any) -> None:
        return  # the emitter starts lazily on the first event

    def log(self, metrics: dict[str, Any], step: int | None = None, *, step_key: str | None = None, **kwargs) -> None:
        try:
            if step is None and step_key is not None:
                s = metrics.get(step_key)
                if isinstance(s, (int, float)) and not isinstance(s, bool):
                    step = int(s)
        except Exception:
            step = None
        self.emitter.log_metrics(step_key, step, metrics)

    def define_step_key_metric_group(self, prefix: str, step_key: str) -> None:
        return  # every data point carries its step key

    def finish(self) -> None:
        self.emitter.flush(self.emitter.exporter.exit_timeout)
