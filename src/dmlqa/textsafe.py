"""Text that every later stage can encode: the one rule for lone surrogates.

A Python ``str`` may hold UTF-16 surrogates on their own: ``json.loads('"\\ud800"')`` gives one
(valid JSON, not valid Unicode text), so do Python's escape codecs and file names read with
``surrogateescape``. Nothing downstream accepts them: the tokenizer raises, ``str.encode("utf-8")``
raises, a terminal write raises. Every place where outside text enters (the API's query entry, the
files of queries and questions, decoded document bodies) passes it through :func:`replace_lone_surrogates`
(or :func:`mend_input`) once, so no stage past the entry needs its own guard.
"""

from __future__ import annotations

import re
from typing import TypeVar

__all__ = ["REPLACEMENT", "mend_input", "replace_lone_surrogates"]

T = TypeVar("T")

#: What a lone surrogate becomes: U+FFFD says "a character was here and could not be read", where
#: dropping it would silently join the words on either side.
REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; a high+low pair becomes its one character.

    A pair is joined rather than replaced because ``"\\ud83d\\ude00"`` in JSON or a Python literal means
    the emoji it encodes. Text without surrogates (nearly all) is returned as it is, after one scan.
    """
    if _SURROGATE.search(text) is None:
        return text
    # UTF-16 round trip: "surrogatepass" writes each code unit as it is; decoding then pairs what
    # pairs and leaves U+FFFD for each unit that has no partner.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def mend_input(value: T) -> T:
    """An argument of the API as it came, its text mended: a ``str``, or each ``str`` of a list or tuple
    (``related`` takes several targets), with lone surrogates replaced; anything else (None, an
    :class:`~dmlqa.models.Answer`, a wrong type the callee reports) untouched."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        return type(value)(mend_input(v) for v in value)  # type: ignore[return-value]
    return value
