"""What is worked out once per index version: a version never changes, so what is read of all its
documents, its whole vocabulary or many searches of it is kept while the version lives."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from dmlqa.index.versions import IndexVersion

_T = TypeVar("_T")


def per_version(build: Callable[..., _T]) -> Callable[..., _T]:
    """``build(version, *args)``'s result kept for each version while the version lives (a weak key: a
    version a rebuild replaced is let go). ``args`` are what ``build`` reads the version through (a
    searcher), never what changes its result."""
    kept: weakref.WeakKeyDictionary[IndexVersion, _T] = weakref.WeakKeyDictionary()

    @functools.wraps(build)
    def get(version: IndexVersion, *args: Any) -> _T:
        got = kept.get(version)
        if got is None:
            got = kept[version] = build(version, *args)
        return got

    return get
