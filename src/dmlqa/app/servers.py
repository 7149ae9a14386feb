"""Starting the two servers of the front ends: the chat app (``dmlqa serve``) and the MCP server
(``dmlqa mcp``).

Both listen on a port a person chose, so both check it first and fail in one line (a busy port, a
host name that is no address) instead of deep inside Gradio or uvicorn, and both warn when they
listen beyond this machine. Kept out of the CLI so that it stays a thin layer of options, and so
that Gradio and the MCP SDK are imported only by the command that runs them.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from dmlqa.app import render

if TYPE_CHECKING:
    from dmlqa.api import KnowledgeBase

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_listen(host: str, port: int) -> None:
    """Fail in one line (exit 2 for a bad host, 1 for a port in use) when ``host:port`` cannot be listened on."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not host or all(ch.isdigit() or ch == "." for ch in host) or any(ch.isspace() for ch in host):
            render.fail(f"invalid --host {host!r}: not an IP address or a host name", 2)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        render.fail(f"invalid --host {host!r}: {getattr(exc, 'strerror', None) or exc}", 2)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            render.fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def serve_chat(kb: KnowledgeBase, host: str, port: int) -> None:
    """``dmlqa serve``: the Gradio chat app over ``kb`` until Ctrl-C (the password: the home's ``ui.password``)."""
    from dmlqa.app import ui  # gradio: only this command pays for it

    check_listen(host, port)

    def say(level: str, text: str) -> None:  # the exposure warning and where the app listens, on stderr
        (render.warning if level == "warning" else render.say)(text)

    try:
        ui.serve(kb, host=host, port=port, say=say)
    except OSError as exc:
        render.fail(f"cannot listen on {host}:{port}: {exc}")


def serve_mcp(open_kb: Callable[[], KnowledgeBase], http_port: int | None, host: str) -> None:
    """``dmlqa mcp``: the MCP server on stdio, or streamable HTTP on ``host:http_port``; the knowledge base is
    opened on the first tool call (so a client sees a missing home as a tool error) and then kept."""
    from dmlqa.app import mcp  # the MCP SDK: only this command pays for it

    if http_port is not None:
        check_listen(host, http_port)
        if host not in LOOPBACK:
            render.warning(f"--host {host}: the MCP server is reachable from other machines, without a password")
        shown = f"[{host}]" if ":" in host else host
        render.say(f"dmlqa mcp: http://{shown}:{http_port}{mcp.HTTP_PATH} (stop with Ctrl-C)")
    mcp.run(open_kb, http_port=http_port, host=host)
