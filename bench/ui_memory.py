"""Benchmark: the chat app's resident memory over many ``/ask`` requests (issue 19, item 6).

    .venv/bin/python bench/ui_memory.py [--home DIR] [--requests 10000] [--warm-up 2000] [--max-sessions N]

Starts ``app.py`` on 127.0.0.1 over ``--home`` (by default a small home it builds in a temporary
folder from six generated notes: ``dmlqa init``, ``add``, ``build``), sends ``--warm-up`` questions
and then ``--requests`` more through Gradio's HTTP API (``POST /gradio_api/call/ask``, then the
server-sent events until ``complete``; see bench/ui_load.py) from ``--threads`` clients, and samples
the server's VmRSS every ``--every`` requests. Every API call is a Gradio session of its own, which
is what grew the app before sessions were capped (``[ui] max_sessions``, default 1000): the warm-up
is longer than that cap so that the measured part starts at the steady state. ``--max-sessions``
overrides the cap (10000 was Gradio's own default: the behaviour before). Prints JSON and writes
bench/results/ui_memory.json (``--out``). Not a timed test: the figure that matters is the growth
after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from ui_load import ask, free_port, proc_mem_mib, wait_ready

ROOT = Path(__file__).resolve().parents[1]
DMLQA = [sys.executable, "-m", "dmlqa.app.cli"]
QUESTIONS = ["What does GPipe split a mini-batch into?", "How does ZeRO save memory?",
             "What does Horovod use to average gradients?", "How does Megatron-LM split transformer layers?",
             "Why do pipeline bubbles shrink?"]
NOTE = ("# Topic {i}: notes on distributed training\n\nGPipe splits a mini-batch into micro-batches and pipelines "
        "them across {i} accelerators. ZeRO partitions optimizer states, gradients and parameters across "
        "data-parallel workers to save memory. Horovod uses ring-allreduce to average gradients. Megatron-LM "
        "splits transformer layers with tensor parallelism.\n\n## Details\n\nMicro-batches fill the pipeline; "
        "bubbles shrink as their number grows. Stage {i} of ZeRO removes more redundancy.\n")


def small_home(root: Path) -> Path:
    """A home of six short notes, built with the CLI (a few seconds)."""
    home, docs = root / "home", root / "notes"
    docs.mkdir()
    for i in range(1, 7):
        (docs / f"note{i}.md").write_text(NOTE.format(i=i), encoding="utf-8")
    for args in (["init", "--home", str(home)], ["--home", str(home), "add", str(docs)],
                 ["--home", str(home), "build"]):
        subprocess.run([*DMLQA, *args], check=True, stdout=subprocess.DEVNULL)
    return home


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=None, help="a built home (default: a small one, built here)")
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--warm-up", type=int, default=2_000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--every", type=int, default=500, help="sample RSS every this many requests")
    ap.add_argument("--max-sessions", type=int, default=None, help="the app's [ui] max_sessions (default: its own)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ui_memory.json")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="dmlqa-ui-memory-") as tmp:
        home = args.home or small_home(Path(tmp))
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
        if args.max_sessions is not None:
            env["DMLQA_UI_MAX_SESSIONS"] = str(args.max_sessions)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with (Path(tmp) / "app.log").open("w") as log:
            proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--home", str(home), "--port", str(port)],
                                    env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(base, proc)
            errors: list[str] = []
            samples: list[dict[str, float]] = []
            done = [0]
            lock = threading.Lock()

            def run(total: int, sample: bool) -> None:
                def client_loop(t: int) -> None:
                    with httpx.Client(timeout=120) as client:
                        for i in range(t, total, args.threads):
                            _, err = ask(client, base, QUESTIONS[i % len(QUESTIONS)])
                            with lock:
                                done[0] += 1
                                if err:
                                    errors.append(err)
                                if sample and done[0] % args.every == 0:
                                    samples.append({"requests": done[0],
                                                    "rss_mib": round(proc_mem_mib(proc.pid).get("VmRSS", 0.0), 1)})

                threads = [threading.Thread(target=client_loop, args=(t,)) for t in range(args.threads)]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()

            idle = proc_mem_mib(proc.pid).get("VmRSS", 0.0)
            t0 = time.perf_counter()
            run(args.warm_up, sample=False)
            after_warm_up = proc_mem_mib(proc.pid).get("VmRSS", 0.0)
            done[0] = 0
            run(args.requests, sample=True)
            wall = time.perf_counter() - t0
            mem = proc_mem_mib(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    end = mem.get("VmRSS", 0.0)
    result = {
        "machine": {"cpus": os.cpu_count(), "load_average_end": round(os.getloadavg()[0], 2)},
        "home": str(args.home) if args.home else "six generated notes (built by this script)",
        "max_sessions": args.max_sessions or "the app's default (1000)",
        "threads": args.threads,
        "warm_up_requests": args.warm_up,
        "requests": args.requests,
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:5],
        "wall_s": round(wall, 1),
        "rss_mib": {"idle": round(idle, 1), "after_warm_up": round(after_warm_up, 1), "end": round(end, 1),
                    "peak_kernel_hwm": round(mem.get("VmHWM", 0.0), 1)},
        "growth_after_warm_up_mib": round(end - after_warm_up, 1),
        "growth_kib_per_request": round((end - after_warm_up) * 1024 / max(1, args.requests), 2),
        "samples": samples,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
