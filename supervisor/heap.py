"""The service's garbage collector: freeze what startup built, collect the young rarely.

A full collection walks every tracked object while holding the GIL, so it stalls every
request and every pass at once. On this project's reference machine it costs ~0.3 µs an
object: 35 ms for the ~115k objects the imports alone leave (modules, functions, types),
100-145 ms with 1,000 supervisors' loops, every few seconds under load
(bench/control_plane.py; that stall was most of the REST p99). Startup's objects live as
long as the process, so they are moved out of the collector's sight (`gc.freeze`), and the
youngest generation is collected every `young` net allocations instead of Python's 700, so
the older generations (and the full collections they lead to) come ~15 times less often.
"""

from __future__ import annotations

import gc


def settle(young: int) -> None:
    """Collect once, freeze every surviving object, then collect the youngest generation every
    `young` net allocations. Call once, after startup's imports, before serving."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
