"""SIGTERM handled like Ctrl-C: both raise :class:`~dmlqa.errors.Interrupted` while a build runs.

Why: a service manager (systemd, a container runtime, a CI timeout) stops a process with SIGTERM,
whose default action ends it on the spot: no ``finally`` runs, the run is mended into the history
only by the next build, and the embedding cache holds only what its last periodic write had. Raised
as an exception instead, the stop takes the way Ctrl-C takes: the embed loop writes the vectors it
made, the run is recorded as interrupted, the locks are released and the command says so.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from dmlqa.errors import Interrupted

__all__ = ["stop_on_signals"]

#: The signals that stop a build or a scheduler: Ctrl-C and a service manager's stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: Callable[[str], BaseException] = Interrupted) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise ``stop(signal name)`` in the main thread.

    The handlers that were there before come back on the way out. Python delivers signals to the
    main thread only, so anywhere else this changes nothing (a caller's thread keeps its own ways).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: object) -> None:
        raise stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            # None: a handler not installed from Python; the default is the nearest thing to it.
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
