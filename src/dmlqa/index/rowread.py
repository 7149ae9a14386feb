"""Rows of a memory-mapped ``.npy`` array read with ``pread`` instead of through the map.

A reader ranks the stored vectors of thousands of sentences for each answer. Read through the memory map, every
page it touched stayed in its resident set, so its RSS grew with the questions asked (200k passages: +150 MiB over
30 answers, past the 600 MiB a reader may take). ``pread`` copies what is asked and leaves nothing mapped.
"""

from __future__ import annotations

import os
from typing import BinaryIO

import numpy as np


def read_rows(file: BinaryIO, array: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``array[rows]`` for a 2-D memory-mapped ``array`` whose file is open as ``file``: one ``pread`` per run
    of consecutive rows (a document's sentences are one run). ``rows`` may come in any order and repeat; one
    outside the array is an ``IndexError``. An array that is not a memory map is indexed as it is."""
    rows = np.asarray(rows, dtype=np.int64)
    if not isinstance(array, np.memmap) or not len(rows) or not hasattr(os, "pread"):
        return np.asarray(array[rows])
    width = int(array.shape[1])
    item = array.dtype.itemsize * width
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    if ordered[0] < 0 or ordered[-1] >= len(array):
        raise IndexError(f"rows outside 0..{len(array) - 1}")
    cuts = np.flatnonzero(np.diff(ordered) > 1) + 1
    out = np.empty((len(rows), width), dtype=array.dtype)
    fd = file.fileno()
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(ordered)], strict=True):
        lo, hi = int(ordered[a]), int(ordered[b - 1]) + 1
        block = np.frombuffer(os.pread(fd, (hi - lo) * item, array.offset + lo * item), dtype=array.dtype)
        out[order[a:b]] = block.reshape(hi - lo, width)[ordered[a:b] - lo]
    return out
