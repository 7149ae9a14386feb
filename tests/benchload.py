"""The bench scripts some tests read: scripts beside each other, not a package, so loaded from their files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_script(name: str) -> ModuleType:
    """``bench/<name>.py`` as a module: with bench/ on the path while it loads (a script imports the scripts
    beside it) and registered in ``sys.modules`` (its dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(f"dmlqa_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module
