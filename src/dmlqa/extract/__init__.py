"""Extract stage: turn fetched bytes (HTML, PDF, text) into documents with pages, facts and sentences.

Modules, lowest first: :mod:`~dmlqa.extract.text` (decoding, cleaning, Markdown and plain text,
:class:`Extracted`), :mod:`~dmlqa.extract.facts` (years and authors a body states, merged with the
catalog's), :mod:`~dmlqa.extract.html`, :mod:`~dmlqa.extract.pdf`, :mod:`~dmlqa.extract.documents`
(what the bytes are, to the right extractor, then a :class:`~dmlqa.models.Document`),
:mod:`~dmlqa.extract.sentences` (a document's quotable sentences), :mod:`~dmlqa.extract.quoting` (how a
stored sentence reads in an answer), and :mod:`~dmlqa.extract.references` (a paper's reference list
parsed, with the sentences citing each entry; :mod:`~dmlqa.extract.reference_entries` finds the list and
cuts it into entries). It imports only the stages before it and the base modules.

The names below are loaded on first use, not when the package is imported: the query side imports
:mod:`~dmlqa.extract.sentences` to answer questions, and must not pay for loading trafilatura,
lxml and pypdf, which only extraction needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dmlqa.extract.documents import catalog_card, detect_kind, extract_bytes, extract_file, to_document
    from dmlqa.extract.facts import (
        clean_author,
        clean_authors,
        merge_authors,
        merge_facts,
        pdf_year,
        split_authors,
        valid_year,
        year_of,
    )
    from dmlqa.extract.html import extract_html
    from dmlqa.extract.pdf import dehyphenate, extract_pdf
    from dmlqa.extract.quoting import for_answer
    from dmlqa.extract.references import ParsedReferences, parse_references
    from dmlqa.extract.sentences import Sentence, split_document
    from dmlqa.extract.text import Extracted, clean_text, decode_text, extract_markdown, extract_text

#: Each name the stage offers, and the module that defines it.
_HOME = {
    "catalog_card": "documents",
    "detect_kind": "documents",
    "extract_bytes": "documents",
    "extract_file": "documents",
    "to_document": "documents",
    "clean_author": "facts",
    "clean_authors": "facts",
    "merge_authors": "facts",
    "merge_facts": "facts",
    "pdf_year": "facts",
    "split_authors": "facts",
    "valid_year": "facts",
    "year_of": "facts",
    "extract_html": "html",
    "dehyphenate": "pdf",
    "extract_pdf": "pdf",
    "ParsedReferences": "references",
    "parse_references": "references",
    "Sentence": "sentences",
    "for_answer": "quoting",
    "split_document": "sentences",
    "Extracted": "text",
    "clean_text": "text",
    "decode_text": "text",
    "extract_markdown": "text",
    "extract_text": "text",
}

__all__ = [
    "Extracted",
    "ParsedReferences",
    "Sentence",
    "catalog_card",
    "clean_author",
    "clean_authors",
    "clean_text",
    "decode_text",
    "dehyphenate",
    "detect_kind",
    "extract_bytes",
    "extract_file",
    "extract_html",
    "extract_markdown",
    "extract_pdf",
    "extract_text",
    "for_answer",
    "merge_authors",
    "merge_facts",
    "parse_references",
    "pdf_year",
    "split_authors",
    "split_document",
    "to_document",
    "valid_year",
    "year_of",
]


def __getattr__(name: str) -> Any:
    """Load the module that defines ``name`` on first use (PEP 562) and keep the name here."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
