"""Connections go to the address that was checked (issue 19, item 1), and a Location that is not a URL is
one specific, unretried failure.

The guard resolves a host once and checks every address; a second lookup at connect time could be
answered differently by a hostile DNS server (rebinding: a public address first, 127.0.0.1 next).
Proved three ways, each with real sockets:

* :class:`PinnedTransport` alone, over plain HTTP and TLS: the socket goes to the pinned address
  while the Host header, the SNI and the certificate check keep the name, and the name is never
  looked up;
* the fetcher with its one lookup stubbed to change its answer: it connects (robots.txt included)
  to the first answer only;
* end to end in a network namespace (root only): a real DNS server that answers a public address
  first and 127.0.0.1 after, a "public" server on that address (bound to the namespace's loopback)
  and a secret one on 127.0.0.1; a child process fetches through the system resolver.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from httpserver import LocalServer, Reply

from dmlqa.acquire import http as http_module
from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.http import PinnedTransport
from dmlqa.errors import FetchError
from dmlqa.settings import FetchConfig

ROOT = Path(__file__).resolve().parents[1]
#: A global address (documentation ranges are not global, so the guard would refuse them).
PUBLIC = "93.184.216.34"


@pytest.fixture()
def server() -> Iterator[LocalServer]:
    s = LocalServer()
    yield s
    s.close()


@pytest.fixture()
def name_lookups(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every lookup that reaches the system resolver, by host; names ending in ``.test`` answer 127.0.0.1,
    as a rebinding DNS server would on a second asking."""
    calls: Counter[str] = Counter()
    real = socket.getaddrinfo

    def counting(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        calls[name] += 1
        if name.endswith(".test"):
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    return calls


def pin_to(*addresses: str) -> Any:
    async def pin(host: str, port: int) -> Sequence[str]:
        return addresses

    return pin


# -- the transport alone -----------------------------------------------------------------------------------


def test_the_transport_connects_to_the_pinned_address_and_keeps_the_name(
    server: LocalServer, name_lookups: Counter[str]
) -> None:
    server.route("/page", Reply(200, body=b"pinned"))
    port = server.url("/").split(":")[-1].strip("/")

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=PinnedTransport(pin_to("127.0.0.1"))) as client:
            return await client.get(f"http://pinned.test:{port}/page")

    response = asyncio.run(asyncio.wait_for(go(), 120))
    assert response.status_code == 200 and response.content == b"pinned"
    assert server.seen("/page")[0].headers["Host"] == f"pinned.test:{port}"
    assert name_lookups["pinned.test"] == 0


def test_the_transport_tries_the_next_checked_address_and_no_other(server: LocalServer) -> None:
    """A refused address is followed by the next checked one (as socket.create_connection does); when
    every checked address refuses, the request fails rather than asking DNS."""
    server.route("/page", Reply(200, body=b"second"))
    port = int(server.url("/").split(":")[-1].strip("/"))
    dead = "127.0.0.2"  # loopback too on Linux, but the server listens on 127.0.0.1 only: refused

    async def get(*addresses: str) -> httpx.Response:
        async with httpx.AsyncClient(transport=PinnedTransport(pin_to(*addresses))) as client:
            return await client.get(f"http://pinned.test:{port}/page")

    response = asyncio.run(asyncio.wait_for(get(dead, "127.0.0.1"), 120))
    assert response.content == b"second"
    with pytest.raises(httpx.ConnectError):
        asyncio.run(asyncio.wait_for(get(dead), 120))
    assert server.hits("/page") == 1


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` only (no IP address in it): verifying it against the
    pinned IP would fail, so success proves the check used the name."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_tls_keeps_the_server_name_while_the_socket_is_pinned(tmp_path: Path, name_lookups: Counter[str]) -> None:
    cert, key = _certificate(tmp_path, "secure.test")
    names: list[str | None] = []
    hosts: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            hosts.append(self.headers.get("Host"))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]
    trust = ssl.create_default_context(cafile=str(cert))

    async def go(url: str) -> httpx.Response:
        transport = PinnedTransport(pin_to("127.0.0.1"), verify=trust)
        async with httpx.AsyncClient(transport=transport) as client:
            return await client.get(url)

    try:
        response = asyncio.run(asyncio.wait_for(go(f"https://secure.test:{port}/"), 120))
        assert response.content == b"ok"
        assert names == ["secure.test"] and hosts == [f"secure.test:{port}"]
        # The control: the same certificate does not pass for another name pinned to the same socket.
        with pytest.raises(httpx.ConnectError, match="certificate"):
            asyncio.run(asyncio.wait_for(go(f"https://other.test:{port}/"), 120))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert name_lookups["secure.test"] == 0 and name_lookups["other.test"] == 0


# -- the fetcher: one lookup, and every connection to its answer -------------------------------------------


def test_the_fetcher_connects_to_the_first_answer_not_a_second_lookup(
    server: LocalServer, name_lookups: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard's lookup answers a public address, any later one 127.0.0.1. No connection may go to
    127.0.0.1: robots.txt and the page both go to the public address. Leaving the machine is
    not allowed in a test, so the connect layer under the pin records the address and refuses."""
    server.route("/secret", Reply(200, body=b"the user's secret"))
    port = int(server.url("/").split(":")[-1].strip("/"))
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return [PUBLIC] if len(asked) == 1 else ["127.0.0.1"]

    connects: list[tuple[str, int]] = []

    async def no_network(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        connects.append((host, port))
        if ipaddress.ip_address(host).is_loopback:  # would be the rebinding: let it through, to be seen
            return await real_connect(self, host, port, *args, **kwargs)
        raise httpcore.ConnectError("test: no network beyond this machine")

    real_connect = httpcore.AnyIOBackend.connect_tcp
    monkeypatch.setattr(http_module, "_getaddrinfo", rebinding)
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", no_network)

    async def go() -> list[str]:
        cfg = FetchConfig(allow_private_hosts=False, respect_robots=True, retries=1, backoff=0.01, timeout=60.0)
        reasons = []
        async with Fetcher(cfg) as fetcher:
            for path in ("/secret", "/secret?again"):
                with pytest.raises(FetchError) as info:
                    await fetcher.fetch(f"http://rebind.test:{port}{path}")
                reasons.append(info.value.reason)
        return reasons

    reasons = asyncio.run(asyncio.wait_for(go(), 120))
    assert server.requests == []
    assert asked == ["rebind.test"] and name_lookups["rebind.test"] == 0
    assert connects and set(connects) == {(PUBLIC, port)}
    assert all(r.startswith("could not connect to rebind.test") for r in reasons), reasons


def test_the_fetcher_refuses_a_private_first_answer_before_connecting(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def private(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    monkeypatch.setattr(http_module, "_getaddrinfo", private)
    port = int(server.url("/").split(":")[-1].strip("/"))

    async def go() -> str:
        async with Fetcher(FetchConfig(allow_private_hosts=False, retries=0)) as fetcher:
            with pytest.raises(FetchError) as info:
                await fetcher.fetch(f"http://rebind.test:{port}/secret")
        return info.value.reason

    reason = asyncio.run(asyncio.wait_for(go(), 120))
    assert reason == (
        "refused: rebind.test resolves to 127.0.0.1, a loopback address (pass --allow-private-hosts to allow)"
    )
    assert server.requests == []


# -- a Location that is not a URL --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("http://[bad/", "'http://[bad/' (Invalid IPv6 URL)"),
        ("http://a.example:99999/", "'http://a.example:99999/' (Port out of range 0-65535)"),
        ("http://\x01x/", "Invalid non-printable ASCII character in URL"),  # refused by httpx while parsing
        ("http://xn--a.test/", "Codepoint U+0080"),  # punycode that decodes to a forbidden character
    ],
)
def test_an_unparsable_location_fails_once_and_says_so(server: LocalServer, location: str, why: str) -> None:
    server.route("/moved", Reply(302, headers=[("Location", location)]))
    cfg = FetchConfig(allow_private_hosts=True, respect_robots=False, retries=2, backoff=0.01, timeout=60.0)

    async def go() -> str:
        async with Fetcher(cfg) as fetcher:
            with pytest.raises(FetchError) as info:
                await fetcher.fetch(server.url("/moved"))
        return info.value.reason

    reason = asyncio.run(asyncio.wait_for(go(), 120))
    assert reason.startswith(f"redirect to an unparsable Location: {why}"), reason
    assert server.hits("/moved") == 1  # not retried: the server would say the same again


# -- end to end: a DNS server that changes its answer, in a network namespace --------------------------------

CHILD = textwrap.dedent(
    """
    import asyncio, json, subprocess, sys, threading
    from collections import Counter
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dnslib import QTYPE, RR, A, DNSRecord
    from dnslib.server import BaseResolver, DNSServer

    from dmlqa.acquire.fetch import Fetcher
    from dmlqa.errors import FetchError
    from dmlqa.settings import FetchConfig

    public, resolv, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", f"{public}/32", "dev", "lo"],
                ["mount", "--bind", resolv, "/etc/resolv.conf"]):
        subprocess.run(cmd, check=True)

    queries = Counter()

    class Rebinding(BaseResolver):
        # "public-first": the public address once, 127.0.0.1 ever after; "private": 127.0.0.1 always.
        def resolve(self, request, handler):
            reply = request.reply()
            name = str(request.q.qname).rstrip(".")
            if request.q.qtype == QTYPE.A and name == "rebind.test":
                queries[name] += 1
                first = mode == "public-first" and queries[name] == 1
                reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(public if first else "127.0.0.1"), ttl=0))
            return reply

    dns = DNSServer(Rebinding(), address="127.0.0.1", port=53)
    dns.start_thread()
    seen = {"public": [], "secret": []}

    def server(address, who, port=0):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                seen[who].append(self.path)
                body = who.encode()
                self.send_response(404 if self.path == "/robots.txt" else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *args):
                pass
        httpd = ThreadingHTTPServer((address, port), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        return httpd.server_address[1]

    port = server("127.0.0.1", "secret")
    server(public, "public", port)  # the same port on the public address: only the address tells them apart

    async def go():
        config = FetchConfig(allow_private_hosts=False, respect_robots=True, retries=1, backoff=0.01, timeout=60.0)
        async with Fetcher(config) as fetcher:
            try:
                result = await fetcher.fetch(f"http://rebind.test:{port}/secret")
                return {"body": result.body.decode()}
            except FetchError as exc:
                return {"error": exc.reason}

    out = asyncio.run(go())
    print(json.dumps({**out, "seen": seen, "queries": queries["rebind.test"]}))
    """
)


def _namespace_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make a network namespace and bind-mount /etc/resolv.conf"
    for tool in ("unshare", "ip", "mount"):
        if shutil.which(tool) is None:
            return f"needs the {tool!r} command"
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        return f"cannot make a network namespace here: {probe.stderr.strip()[:200]}"
    return None


@pytest.mark.parametrize("mode", ["public-first", "private"])
def test_dns_rebinding_in_a_network_namespace(tmp_path: Path, mode: str) -> None:
    pytest.importorskip("dnslib")
    reason = _namespace_unavailable()
    if reason:
        pytest.skip(reason)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions attempts:1\n")
    done = subprocess.run(
        ["unshare", "--net", "--mount", sys.executable, "-c", CHILD, PUBLIC, str(resolv), mode],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["seen"]["secret"] == []  # nothing ever reached 127.0.0.1
    if mode == "public-first":
        assert out.get("body") == "public", out
        assert out["seen"]["public"] == ["/robots.txt", "/secret"]
        assert out["queries"] == 1  # robots.txt and the page: one lookup
    else:
        assert out.get("error") == (
            "refused: rebind.test resolves to 127.0.0.1, a loopback address (pass --allow-private-hosts to allow)"
        )
        assert out["seen"]["public"] == []
