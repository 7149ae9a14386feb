"""Benchmark: simulated users asking extractive questions through the chat app's HTTP API.

    DMLQA_ENCODER_CACHE=/tmp/enc .venv/bin/python bench/ui_load.py --home /tmp/e2e [--users 20] [--per-user 10]

Starts ``app.py`` on 127.0.0.1 (or uses ``--url`` of a running app), waits for it to answer and (unless
``--cold``) for its background pre-embedding of the index's sentences to finish (``/health``), asks one
warm-up question, then runs ``--users`` threads at once, each asking ``--per-user`` questions from the dev set
back to back (``--think 0``, the default: the worst case for the server) or after a think time
(uniform in 0.5–1.5 × ``--think`` seconds, as a person reading the last answer). One request is Gradio's HTTP API as any
client sees it: ``POST /gradio_api/call/ask`` then reading the server-sent events until ``complete``.
A request counts as an error when the HTTP call fails, the event is ``error``, or the answer carries
an ``error``. The app's resident memory is sampled every 0.2 s (VmRSS; VmHWM is the kernel's peak).
Writes bench/results/ui_load.json. Aims: p95 < 1.5 s, no errors, peak RSS < 1.5 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from dmlqa.query.evaluate import percentile

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def proc_mem_mib(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return out


def ask(client: httpx.Client, base: str, question: str) -> tuple[float, str | None]:
    """One question through the HTTP API: (seconds, error or None)."""
    t0 = time.perf_counter()
    try:
        r = client.post(f"{base}/gradio_api/call/ask", json={"data": [question, None, None, None, None, False]})
        r.raise_for_status()
        event_id = r.json()["event_id"]
        event, data = None, None
        with client.stream("GET", f"{base}/gradio_api/call/ask/{event_id}") as resp:
            resp.raise_for_status()
            for line in resp.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event in ("complete", "error"):
                    data = line.split(":", 1)[1].strip()
                    break
        seconds = time.perf_counter() - t0
        if event != "complete":
            return seconds, f"event {event}: {data}"
        body = json.loads(data)[0]
        if body.get("error"):
            return seconds, str(body["error"])
        if not body.get("answer"):
            return seconds, "empty answer"
        return seconds, None
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        return time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"


def start_app(home: Path, port: int, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = log_path.open("w")
    return subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--home", str(home), "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


def health(client: httpx.Client, base: str) -> dict:
    r = client.post(f"{base}/gradio_api/call/health", json={"data": []})
    r.raise_for_status()
    text = client.get(f"{base}/gradio_api/call/health/{r.json()['event_id']}").text
    data = [line.split(":", 1)[1] for line in text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])[0]


def wait_warm(base: str, timeout: float = 900) -> float:
    """Wait until the app has pre-embedded its index's sentences (its steady state); returns the seconds waited."""
    t0 = time.perf_counter()
    with httpx.Client(timeout=30) as client:
        while time.perf_counter() - t0 < timeout:
            if health(client, base).get("ready"):
                return time.perf_counter() - t0
            time.sleep(1)
    raise SystemExit(f"the app was not warm within {timeout:.0f} s")


def wait_ready(base: str, proc: subprocess.Popen | None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the app exited with {proc.returncode}")
        try:
            if httpx.get(base + "/", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the app did not answer within {timeout:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/e2e"))
    ap.add_argument("--url", default=None, help="benchmark an app already running there instead of starting one")
    ap.add_argument("--questions", type=Path, default=ROOT.parent / "shared" / "eval" / "dev.jsonl")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--per-user", type=int, default=10)
    ap.add_argument("--think", type=float, default=0.0, help="mean seconds a user waits before each question")
    ap.add_argument("--cold", action="store_true", help="do not wait for the app's sentence pre-warm to finish")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ui_load.json")
    args = ap.parse_args()

    questions = [json.loads(x)["question"] for x in args.questions.read_text().splitlines() if x.strip()]
    proc = None
    if args.url:
        base = args.url.rstrip("/")
    else:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = start_app(args.home, port, Path("/tmp") / f"dmlqa-ui-load-{port}.log")
    try:
        t_start = time.perf_counter()
        wait_ready(base, proc)
        startup_s = time.perf_counter() - t_start
        warm_wait_s = wait_warm(base) if not args.cold else 0.0
        with httpx.Client(timeout=60) as client:
            warm_s, warm_err = ask(client, base, questions[0])
        if warm_err:
            raise SystemExit(f"warm-up question failed: {warm_err}")
        idle = proc_mem_mib(proc.pid) if proc else {}
        load_before = os.getloadavg()[0]  # other processes on the machine slow every figure

        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(args.users)
        peak_rss = [idle.get("VmRSS", 0.0)]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                if proc:
                    peak_rss[0] = max(peak_rss[0], proc_mem_mib(proc.pid).get("VmRSS", 0.0))

        def user(u: int) -> None:
            rng = random.Random(u)
            with httpx.Client(timeout=60) as client:
                barrier.wait()
                for i in range(args.per_user):
                    if args.think:
                        time.sleep(rng.uniform(0.5, 1.5) * args.think)
                    q = questions[(u * args.per_user + i) % len(questions)]
                    seconds, err = ask(client, base, q)
                    with lock:
                        latencies.append(seconds)
                        if err:
                            errors.append(err)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        threads = [threading.Thread(target=user, args=(u,)) for u in range(args.users)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
        mem = proc_mem_mib(proc.pid) if proc else {}
        ms = [x * 1000 for x in latencies]
        result = {
            "machine": {"cpus": os.cpu_count()},
            "home": str(args.home),
            "users": args.users,
            "think_s": args.think,
            "load_average_before": round(load_before, 2),
            "requests": len(latencies),
            "errors": len(errors),
            "error_examples": sorted(set(errors))[:5],
            "latency_ms": {"p50": round(percentile(ms, 50), 1), "p95": round(percentile(ms, 95), 1),
                           "max": round(max(ms), 1), "mean": round(sum(ms) / len(ms), 1)},
            "throughput_rps": round(len(latencies) / wall, 2),
            "wall_s": round(wall, 2),
            "startup_s": round(startup_s, 2),
            "waited_for_prewarm_s": round(warm_wait_s, 1),
            "warm_up_question_s": round(warm_s, 3),
            "app_rss_mib": {"idle_after_warm_up": round(idle.get("VmRSS", 0.0)),
                            "peak_sampled": round(peak_rss[0]), "peak_kernel_hwm": round(mem.get("VmHWM", 0.0)),
                            "end": round(mem.get("VmRSS", 0.0))} if proc else None,
            "aims": {"p95_ms": 1500, "errors": 0, "rss_mib": 1536},
        }
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
