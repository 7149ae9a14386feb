"""Shared fixtures. Tests that need ../shared (the real snapshot) skip when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "websnap" / "snapshot.warc.gz").is_file():
        pytest.skip("../shared/websnap is not present (a user's clone): end-to-end snapshot tests need it")
    return SHARED


@pytest.fixture(scope="session", autouse=True)
def _encoder_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One ONNX export per test session, shared by every home the tests create."""
    if "DMLQA_ENCODER_CACHE" not in os.environ:
        os.environ["DMLQA_ENCODER_CACHE"] = str(tmp_path_factory.mktemp("encoders"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Tests never touch the network: builds of test homes do not look for open copies on the real
    # arXiv/OpenAlex (tests/test_openaccess.py turns it on against local servers).
    os.environ.setdefault("DMLQA_FETCH_OPEN_ACCESS", "0")


@pytest.fixture(scope="session")
def encoder():  # noqa: ANN201
    from dmlqa.index.embed import load_encoder
    from dmlqa.settings import BUNDLED_MODEL

    return load_encoder(BUNDLED_MODEL, "onnx-int8", Path(os.environ["DMLQA_ENCODER_CACHE"]))
