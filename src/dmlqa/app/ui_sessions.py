"""Bounded per-session state of the chat app.

Gradio keeps, per session, its own copy of the page's configuration plus every ``gr.State`` (the
chat's asked questions): about 80 KB. A browser tab is one session, and so is every call of the
HTTP ``/ask`` API, and Gradio forgets a session only past 10,000 of them, so a busy app grew by
hundreds of MB. The app caps them at ``[ui] max_sessions`` (Gradio's own least-recently-used
eviction, given that capacity) and drops those idle longer than ``[ui] session_max_age_s`` (this
module, from a background thread). A dropped session loses only its follow-up context: the chat
shown in the browser is sent with every question.
"""

from __future__ import annotations

import datetime
import logging
import threading
from dataclasses import dataclass
from typing import Any

from dmlqa.settings import UIConfig

log = logging.getLogger(__name__)

#: The longest pause between two sweeps for idle sessions (seconds).
SWEEP_EVERY = 60.0


@dataclass(frozen=True)
class SessionLimits:
    """How many sessions the app keeps, and for how long after their last request (seconds)."""

    max_sessions: int = UIConfig.max_sessions
    max_age_s: float = UIConfig.session_max_age_s

    @classmethod
    def of(cls, ui: UIConfig) -> SessionLimits:
        return cls(ui.max_sessions, ui.session_max_age_s)

    @property
    def sweep_every(self) -> float:
        """Seconds between sweeps: often enough that a session outlives its age by at most half of it."""
        return max(1.0, min(SWEEP_EVERY, self.max_age_s / 2))


def expire_sessions(holder: Any, max_age_s: float, now: datetime.datetime | None = None) -> int:
    """Drop the sessions of Gradio's ``StateHolder`` unused for more than ``max_age_s``; returns how many.

    ``now`` is for tests; Gradio stamps each use with the naive local ``datetime.now()``, so it is compared with that.
    """
    now = now or datetime.datetime.now()
    limit = datetime.timedelta(seconds=max_age_s)
    dropped = 0
    with holder.lock:
        for session, used in list(holder.time_last_used.items()):
            if now - used > limit:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
                dropped += 1
    return dropped


def sweep_sessions(demo: Any, limits: SessionLimits, stop: threading.Event) -> None:
    """Until ``stop`` is set, drop the idle sessions of the running Blocks ``demo`` (a daemon thread's loop)."""
    while not stop.wait(limits.sweep_every):
        holder = getattr(demo, "state_holder", None)  # set when the app starts
        if holder is None:
            continue
        if not getattr(demo, "is_running", True):  # closed (``block=False`` callers, tests)
            return
        try:
            dropped = expire_sessions(holder, limits.max_age_s)
        except Exception:  # noqa: BLE001 - a Gradio change must not end the app; the log says why
            log.warning("dropping idle sessions failed", exc_info=True)
            continue
        if dropped:
            log.info("dropped %d idle sessions (kept %d)", dropped, len(holder.session_data))
