"""Every third-party package the code imports is declared in pyproject.toml (checked by deptry).

Why: a package that works only because another dependency happens to pull it in breaks the day that
dependency drops it, on a user's install and not on ours. deptry maps each import to its installed
distribution and compares with the declared list, so these tests run against the venv's real metadata.
Two runs, because the rules differ (see ``[tool.deptry]`` in pyproject.toml):

* the product (src/, app.py, bench/): imports must be main dependencies (or the ``ray`` extra); the
  ``test`` extra is development-only there, so product code importing pytest would be flagged;
* tests/: imports must be declared too, the ``test`` extra included.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"


def deptry(*args: str, config: Path = PYPROJECT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deptry", *args, "--config", str(config), "--no-ansi"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # deptry reports on stderr
        text=True,
        timeout=300,  # it takes about a second; generous for a busy machine
    )


def check_product(config: Path = PYPROJECT) -> subprocess.CompletedProcess[str]:
    return deptry(".", config=config)


def check_tests(config: Path = PYPROJECT) -> subprocess.CompletedProcess[str]:
    # "x^" matches nothing, replacing deptry's default exclusion of tests/. Test code may use the test
    # extra (DEP004) and need not use every dependency (DEP002, judged on the product run).
    return deptry("tests", "--exclude", "x^", "--ignore", "DEP002,DEP004", config=config)


def test_product_imports_are_declared() -> None:
    result = check_product()
    assert result.returncode == 0, result.stdout
    assert re.search(r"Scanning [1-9]\d* files", result.stdout)


def test_test_imports_are_declared() -> None:
    result = check_tests()
    assert result.returncode == 0, result.stdout
    assert re.search(r"Scanning [1-9]\d* files", result.stdout)


def without(text: str, requirement: str) -> str:
    """pyproject.toml's text with the one requirement string starting ``requirement`` taken out."""
    pattern = rf'"{re.escape(requirement)}[^"]*",\s*'
    assert len(re.findall(pattern, text)) == 1, f"{requirement} is not declared exactly once"
    return re.sub(pattern, "", text)


@pytest.mark.parametrize(
    ("requirement", "check", "where"),
    [
        ("pydantic", check_product, "src/dmlqa/app/mcp.py"),  # installed anyway: mcp, gradio and typer need it
        ("charset-normalizer", check_product, "src/dmlqa/extract/text.py"),  # trafilatura pulls it in
        ("anyio", check_tests, "tests/test_mcp.py"),  # httpx pulls it in
    ],
)
def test_an_undeclared_import_is_caught(
    tmp_path: Path, requirement: str, check: Callable[[Path], subprocess.CompletedProcess[str]], where: str
) -> None:
    """The checks can fail: drop a declaration whose package is installed anyway, and it is named."""
    config = tmp_path / "pyproject.toml"
    config.write_text(without(PYPROJECT.read_text(encoding="utf-8"), requirement), encoding="utf-8")
    result = check(config)
    assert result.returncode != 0, result.stdout
    module = requirement.replace("-", "_")
    assert re.search(rf"{re.escape(where)}:\d+:\d+: DEP003 '{module}' imported but it is a transitive", result.stdout)
