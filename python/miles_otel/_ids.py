"""Random W3C trace and span ids as ints (hex-encoded on the worker). The ``random`` module reseeds after fork."""

from random import getrandbits


def new_trace_id() -> int:
    return getrandbits(128) or 1


def new_span_id() -> int:
    return getrandbits(64) or 1
