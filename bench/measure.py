"""Run a dmlqa CLI command in this process and append its peak RSS (MiB) to $DMLQA_BENCH_RSS_FILE.

Used by the benchmarks so that each measured command's peak memory is its own process's.
"""

import os
import resource
import sys

from dmlqa.app.cli import app

code = 0
try:
    app(args=sys.argv[1:], prog_name="dmlqa")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
finally:
    path = os.environ.get("DMLQA_BENCH_RSS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}\n")
sys.exit(code)
