"""Issue 19, items 2 and 6: the HTTP servers answer only the host names they serve, and the chat app's
per-session state is capped and expires."""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from test_index_search import build_index

from dmlqa.app.serving import HostRule, SessionLimits, expire_sessions, host_name
from dmlqa.errors import SettingsError
from dmlqa.settings import load_settings

# -- the rule -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "name"), [
    ("127.0.0.1:7860", "127.0.0.1"), ("LocalHost:80", "localhost"), ("[::1]:7860", "::1"), ("[::1]", "::1"),
    ("kb.example.", "kb.example"), ("kb.example", "kb.example"), (None, None), ("", None), ("a b", None),
    ("x:port", None), ("evil.example/x", None), ("user@127.0.0.1", None), ("127.0.0.1:7860\r\nX: y", None),
])
def test_host_name_of_a_header(value: str | None, name: str | None) -> None:
    assert host_name(value) == name


def test_loopback_server_answers_only_local_names() -> None:
    rule = HostRule.serving("127.0.0.1")
    for ok in ("127.0.0.1:7860", "localhost:7860", "localhost", "[::1]:7860", "127.0.0.2:1"):
        assert rule.allows(ok), ok
    for bad in ("evil.example", "evil.example:7860", "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.5:7860",
                "", None, "0.0.0.0:7860"):
        assert not rule.allows(bad), bad
    assert rule.allows_origin(None) and rule.allows_origin("http://127.0.0.1:7860")
    assert rule.allows_origin("https://localhost")
    for bad in ("http://evil.example:7860", "null", "file://", "chrome-extension://abc"):
        assert not rule.allows_origin(bad), bad


def test_listen_name_configured_names_and_wildcards() -> None:
    named = HostRule.serving("kb.lan", ["Docs.Example.org", "[fe80::1]"])
    assert named.allows("kb.lan:7860") and named.allows("docs.example.org") and named.allows("[fe80::1]:80")
    assert not named.allows("evil.example") and not named.allows("192.168.1.5")
    # on every interface any address of this machine may be named; names still must be ours
    wild = HostRule.serving("0.0.0.0")
    assert wild.allows("192.168.1.5:7860") and wild.allows("[2001:db8::1]:7860")
    assert not wild.allows("evil.example") and not wild.allows("0.0.0.0.evil.example")
    assert HostRule.serving("192.168.1.5").allows("192.168.1.5:8080")
    assert not HostRule.serving("192.168.1.5").allows("192.168.1.6:8080")


def test_allowed_hosts_setting(tmp_path: Path) -> None:
    (tmp_path / "dmlqa.toml").write_text('[ui]\nallowed_hosts = ["kb.lan", "10.0.0.5"]\nmax_sessions = 7\n')
    ui = load_settings(tmp_path, env={}).ui
    assert ui.allowed_hosts == ("kb.lan", "10.0.0.5") and ui.max_sessions == 7 and ui.session_max_age_s == 3600
    env = {"DMLQA_UI_ALLOWED_HOSTS": "a.example, b.example", "DMLQA_UI_SESSION_MAX_AGE_S": "60"}
    ui = load_settings(tmp_path, env=env).ui
    assert ui.allowed_hosts == ("a.example", "b.example") and SessionLimits.of(ui) == SessionLimits(7, 60.0)
    for bad, said in (("http://kb.lan", "without scheme or port"), ("kb.lan:80", "without scheme or port")):
        with pytest.raises(SettingsError, match=f"ui.allowed_hosts from DMLQA_UI_ALLOWED_HOSTS.*{said}"):
            load_settings(tmp_path, env={"DMLQA_UI_ALLOWED_HOSTS": bad})
    (tmp_path / "dmlqa.toml").write_text("[ui]\nallowed_hosts = [1]\n")
    with pytest.raises(SettingsError, match="expected a list of strings"):
        load_settings(tmp_path, env={})
    (tmp_path / "dmlqa.toml").write_text("[ui]\nmax_sessions = 0\n")
    with pytest.raises(SettingsError, match="ui.max_sessions"):
        load_settings(tmp_path, env={})


# -- sessions ---------------------------------------------------------------------------------------------


def test_sessions_are_capped_and_idle_ones_expire() -> None:
    """Gradio's own session holder, given our capacity, keeps the most recent; our sweep drops the idle."""
    import gradio as gr
    from gradio.state_holder import StateHolder

    with gr.Blocks(analytics_enabled=False) as blocks:
        gr.State([])
        gr.Textbox()
    blocks.state_session_capacity = 3
    holder = StateHolder()
    holder.set_blocks(blocks)
    for sid in ("a", "b", "c", "d", "e"):
        holder[sid]  # noqa: B018 - a request of session ``sid``
    holder["c"]  # noqa: B018 - used again: now the most recent
    assert list(holder.session_data) == ["d", "e", "c"]  # "a" and "b" dropped, least recently used first

    now = datetime.datetime.now()
    holder.time_last_used["d"] = now - datetime.timedelta(seconds=120)
    holder.time_last_used["e"] = now - datetime.timedelta(seconds=30)
    holder.time_last_used["c"] = now
    assert expire_sessions(holder, 60.0, now=now) == 1
    assert set(holder.session_data) == set(holder.time_last_used) == {"e", "c"}
    assert expire_sessions(holder, 10.0, now=now + datetime.timedelta(seconds=11)) == 2
    assert not holder.session_data and not holder.time_last_used
    assert SessionLimits(5, 3600).sweep_every == 60 and SessionLimits(5, 4).sweep_every == 2


# -- the real app on 127.0.0.1 ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, encoder):  # noqa: ANN001, ANN201
    from dmlqa.api import KnowledgeBase
    from dmlqa.app.ui import serve

    home = tmp_path_factory.mktemp("hosts-home")
    build_index(home, encoder)
    (home / "dmlqa.toml").write_text('[ui]\nallowed_hosts = ["kb.example"]\nmax_sessions = 3\n')
    port = _free_port()
    demo = serve(KnowledgeBase(home), host="127.0.0.1", port=port, password="", block=False,
                 say=lambda level, text: None)
    try:
        yield demo, port
    finally:
        demo.close()


def _ask(client: httpx.Client, base: str, host: str, question: str) -> httpx.Response:
    return client.post(f"{base}/gradio_api/call/ask", headers={"Host": host},
                       json={"data": [question, None, None, None, None, False]})


def test_app_refuses_foreign_host_names(app) -> None:  # noqa: ANN001
    _demo, port = app
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(timeout=60) as client:
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
            for method, path in (("GET", "/"), ("GET", "/health"), ("GET", "/gradio_api/info"),
                                 ("GET", "/config"), ("POST", "/gradio_api/call/ask")):
                r = client.request(method, base + path, headers={"Host": host},
                                   json={"data": ["What is GPipe?"]} if method == "POST" else None)
                assert r.status_code == 421, (host, path, r.status_code)
                assert "does not answer for host" in r.text and len(r.text) < 200
        # a page of another site posting to the app (the browser adds its Origin) is refused too
        r = client.post(base + "/gradio_api/call/ask", headers={"Origin": "http://evil.example"},
                        json={"data": ["What is GPipe?"]})
        assert r.status_code == 403
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"kb.example:{port}"):
            assert client.get(base + "/", headers={"Host": host}).status_code == 200, host
            assert client.get(base + "/health", headers={"Host": host}).status_code == 200, host
        r = _ask(client, base, f"kb.example:{port}", "What does GPipe split a mini-batch into?")
        assert r.status_code == 200
        body = client.get(f"{base}/gradio_api/call/ask/{r.json()['event_id']}",
                          headers={"Host": f"kb.example:{port}"}).text
        assert "event: complete" in body and "https://arxiv.org/abs/1811.06965" in body


def test_app_keeps_at_most_max_sessions(app) -> None:  # noqa: ANN001
    demo, port = app
    base = f"http://127.0.0.1:{port}"
    assert demo.state_holder.capacity == 3
    with httpx.Client(timeout=60) as client:
        for _ in range(6):  # each API call is a session of its own
            r = _ask(client, base, f"127.0.0.1:{port}", "What does GPipe split a mini-batch into?")
            assert "event: complete" in client.get(f"{base}/gradio_api/call/ask/{r.json()['event_id']}").text
    assert 1 <= len(demo.state_holder.session_data) <= 3


# -- the MCP server over HTTP: the same rule -------------------------------------------------------------


def test_mcp_http_refuses_foreign_host_names(tmp_path: Path) -> None:
    """``dmlqa mcp --http`` on 0.0.0.0 (where the SDK checked nothing) answers its addresses, not other names."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dmlqa.app.cli", "--home", str(tmp_path), "mcp", "--http",
                             str(port), "--host", "0.0.0.0"], env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "dmlqa mcp --http did not listen"
                time.sleep(0.2)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        with httpx.Client(timeout=60) as client:
            url = f"http://127.0.0.1:{port}/mcp"
            bad = client.post(url, json=init, headers={**headers, "Host": f"evil.example:{port}"})
            assert bad.status_code == 421 and "evil.example" in bad.text
            good = client.post(url, json=init, headers={**headers, "Host": f"localhost:{port}"})
            assert good.status_code == 200 and "serverInfo" in good.text
            assert client.post(url, json=init, headers=headers).status_code == 200  # Host: 127.0.0.1:PORT
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
