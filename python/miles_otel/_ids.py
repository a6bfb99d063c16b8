"""Random W3C trace and span ids as ints (hex-encoded on the worker).

The ids come from a private generator seeded from ``os.urandom``, never from the ``random`` module's global
state: miles seeds that alike on every tensor/data/context-parallel rank of a pipeline stage
(``random.seed(args.seed + 100 * pp_rank)``), which would give those ranks the same ids (docs/semconv.md §2).
A forked child reseeds, so parent and child never share ids either."""

import os
import random

_rng = random.Random(os.urandom(32))


def _reseed() -> None:
    _rng.seed(os.urandom(32))


os.register_at_fork(after_in_child=_reseed)

_bits = _rng.getrandbits


def new_trace_id() -> int:
    return _bits(128) or 1


def new_span_id() -> int:
    return _bits(64) or 1
