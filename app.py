"""Start the dmlqa chat app: ``python app.py [--home DIR] [--host 127.0.0.1] [--port 7860]``.

The same as ``dmlqa serve``. It listens on 127.0.0.1 unless ``--host`` says otherwise, needs no
network (Gradio's analytics and share tunnel are off) and asks for a password when
``DMLQA_UI_PASSWORD`` is set (user name ``dmlqa``). See README.md, "The chat app".
"""

from __future__ import annotations

import os

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"  # before anything imports gradio

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from dmlqa.app.ui import DEFAULT_HOST, DEFAULT_PORT, exposure_warning, launch, ui_password  # noqa: E402
from dmlqa.settings import load_settings  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="The dmlqa chat app (Gradio).")
    ap.add_argument("--home", type=Path, default=None, help="knowledge-base home (default: $DMLQA_HOME or .)")
    ap.add_argument("--host", default=DEFAULT_HOST, help="interface (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 7860)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        settings = load_settings(args.home)
    except ValueError as exc:
        sys.exit(f"error: {exc}")
    password = ui_password(settings, os.environ)
    warning = exposure_warning(args.host, password=bool(password))
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"dmlqa chat app: http://{args.host}:{args.port} (home {settings.home})", file=sys.stderr, flush=True)
    launch(settings, host=args.host, port=args.port, password=password)


if __name__ == "__main__":
    main()
