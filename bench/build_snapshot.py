"""Benchmark: build the knowledge base from the web snapshot, then rebuild with no change.

Reports seconds per stage, chunks embedded per second, peak memory (RSS) of each build process
and the no-change rebuild time as a fraction of the full build. Each build runs as its own
`dmlqa build` process, as a user runs it, so peak memory is that process's own.

    .venv/bin/python bench/build_snapshot.py [--shared ../shared] [--home /tmp/dmlqa-bench] [--encoder onnx-int8]

Needs ../shared/websnap (skips with a message otherwise). Writes bench/results/build_snapshot.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_build(home: Path, archive: Path, encoder: str) -> tuple[dict, float, float]:
    """One `dmlqa build` subprocess; returns its report, wall seconds and peak RSS (MiB)."""
    cmd = [sys.executable, str(ROOT / "bench" / "measure.py"), "--home", str(home), "build", "--offline",
           "--archive", str(archive), "--json", "--encoder", encoder]
    rss_file = home / "rss.txt"
    rss_file.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, "DMLQA_BENCH_RSS_FILE": str(rss_file)})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"build failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), wall, float(rss_file.read_text().split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--home", type=Path, default=Path("/tmp/dmlqa-bench-home"))
    ap.add_argument("--encoder", default="onnx-int8")
    args = ap.parse_args()
    snap = args.shared / "websnap" / "snapshot.warc.gz"
    if not snap.is_file():
        sys.exit(f"skipped: {snap} not found (needs ../shared/websnap)")
    if args.home.exists():
        shutil.rmtree(args.home)
    env_home = args.home
    subprocess.run([sys.executable, "-m", "dmlqa.app.cli", "--home", str(env_home), "init"], check=True,
                   capture_output=True)
    lists = sorted((args.shared / "seeds").glob("*")) + [args.shared / "websnap" / "extra-resources.md"]
    subprocess.run([sys.executable, "-m", "dmlqa.app.cli", "--home", str(env_home), "catalog", "import",
                    *map(str, lists)], check=True, capture_output=True)
    # A fresh encoder cache would add the one-time ONNX export to the first build: do it first.
    subprocess.run([sys.executable, "-c", "from dmlqa.settings import load_settings; from dmlqa.index.embed import "
                    f"load_encoder; s=load_settings({str(env_home)!r}); load_encoder(s.embed.model, {args.encoder!r}, "
                    "s.encoders_dir)"], check=True)

    full, full_wall, full_rss = run_build(env_home, snap, args.encoder)
    again, again_wall, again_rss = run_build(env_home, snap, args.encoder)
    embed_s = full["seconds"].get("embed", 0.0)
    result = {
        "machine": {"cpus": os.cpu_count()},
        "encoder": args.encoder,
        "full": {"wall_s": round(full_wall, 1), "seconds": full["seconds"], "peak_rss_mib": round(full_rss),
                 "documents": full["documents"], "cards": full["cards"], "chunks": full["chunks"],
                 "embedded": full["embedded"], "failed": len(full["failed"]),
                 "chunks_per_s": round(full["embedded"] / embed_s, 1) if embed_s else None},
        "no_change": {"wall_s": round(again_wall, 1), "seconds": again["seconds"],
                      "embedded": again["embedded"], "reused_embeddings": again["reused_embeddings"],
                      "peak_rss_mib": round(again_rss)},
        "no_change_ratio": round(again_wall / full_wall, 3),
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "build_snapshot.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
