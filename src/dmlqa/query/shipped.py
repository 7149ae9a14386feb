"""Fitted weights shipped as JSON beside the query modules (``selector.json``, ``topic.json``): read one."""

from __future__ import annotations

import json
from importlib import resources


def shipped_json(name: str, error: type[Exception], what: str) -> dict:
    """The JSON object of the package's data file ``name``; ``error`` (saying ``what`` it holds) when it cannot be
    read: a broken install, not a user's mistake, and said as such."""
    try:
        return json.loads(resources.files("dmlqa.query").joinpath(name).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise error(f"cannot read the {what} {name} ({exc})") from None
