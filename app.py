"""Start the dmlqa chat app: ``python app.py [--home DIR] [--host 127.0.0.1] [--port 7860]``.

The same as ``dmlqa serve`` (both call :func:`dmlqa.app.ui.serve`). It listens on 127.0.0.1 unless
``--host`` says otherwise, needs no network (Gradio's analytics and share tunnel are off) and asks
for a password when ``DMLQA_UI_PASSWORD`` is set (user name ``dmlqa``). See README.md, "The chat app".
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from dmlqa.api import KnowledgeBase
from dmlqa.app.ui import DEFAULT_HOST, DEFAULT_PORT, serve
from dmlqa.errors import DmlqaError


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="The dmlqa chat app (Gradio).")
    ap.add_argument("--home", type=Path, default=None, help="knowledge-base home (default: $DMLQA_HOME or .)")
    ap.add_argument("--host", default=DEFAULT_HOST, help="interface (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 7860)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        kb = KnowledgeBase(args.home)
    except (ValueError, DmlqaError) as exc:  # a missing home, an invalid dmlqa.toml
        sys.exit(f"error: {exc}")
    serve(kb, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
