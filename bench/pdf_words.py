"""Benchmark: words run together by each PDF text extractor, on the snapshot's PDFs.

    .venv/bin/python bench/pdf_words.py [--warc ../shared/websnap/snapshot.warc.gz] [--examples 8]

Extractors: pypdf ``extract_text()`` (what dmlqa used before), pypdf ``extraction_mode="layout"``,
pdfplumber ``extract_text()``, PDFium (pypdfium2, as ``dmlqa.extract.pdf.pdfium_page_texts`` reads it),
and the product's ``extract_pdf`` (PDFium, pypdf as fallback, plus table rows). Every page text gets the
product's own clean-up (``dehyphenate`` + ``clean_text``), so only the extractor differs.

A token (whitespace-separated, outer punctuation stripped) is *run together* when it is not a word of
the dictionary but splits into two or more of its words ("partitionofdata", "HybridParallelism.Figure").
The dictionary comes from the corpus itself, never from the extractor judged: the words of the
snapshot's HTML pages (as dmlqa extracts them), plus the words the *other* PDF extractors write as
separate tokens in at least two PDFs (a word glued by one extractor is then no word for it, and a
word only one PDF uses cannot vouch for a split). Hyphens and slashes join legitimately and are
split on first; pieces of a split are dictionary words of three letters or more, or a short
function word ("of", "in", "the"...). Identical PDFs (an arXiv copy and a repository copy) count once.
CPU seconds are this process's, per extractor; a failure is a PDF the extractor raised on.
Writes bench/results/pdf_words.json.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WARC = ROOT.parent / "shared" / "websnap" / "snapshot.warc.gz"
RESULT = ROOT / "bench" / "results" / "pdf_words.json"

#: Words of one or two letters a run-together token may hide ("ofthe", "isa"); longer pieces must be
#: corpus words of three letters or more, else any rare name splits into junk fragments.
SHORT = frozenset("a an as at be by do if in is it no of on or so to up we".split())
_STRIP = re.compile(r"^[^\w]+|[^\w]+$")
_JOINERS = re.compile(r"[-‐‑–—/]")
_ALPHA = re.compile(r"[^\W\d_]+")


def read_snapshot(warc: Path) -> tuple[dict[str, bytes], list[tuple[str, bytes, str]]]:
    """The distinct PDF bodies (by content hash, first URL kept) and the HTML responses of the WARC."""
    from warcio.archiveiterator import ArchiveIterator

    pdfs: dict[str, tuple[str, bytes]] = {}
    html: list[tuple[str, bytes, str]] = []
    with warc.open("rb") as fh:
        for record in ArchiveIterator(fh):
            if record.rec_type != "response" or record.http_headers is None:
                continue
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            ctype = record.http_headers.get_header("Content-Type") or ""
            body = record.content_stream().read()
            if body.lstrip()[:5] == b"%PDF-":
                pdfs.setdefault(hashlib.sha256(body).hexdigest(), (url, body))
            elif "html" in ctype:
                html.append((url, body, ctype))
    return dict(pdfs.values()), html


# -- extractors: a PDF body in, its pages' raw text out ------------------------------------------------

def pypdf_plain(body: bytes) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() or "" for p in PdfReader(io.BytesIO(body), strict=False).pages]


def pypdf_layout(body: bytes) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text(extraction_mode="layout") or "" for p in PdfReader(io.BytesIO(body), strict=False).pages]


def pdfplumber_text(body: bytes) -> list[str]:
    import pdfplumber

    with pdfplumber.open(io.BytesIO(body)) as pdf:
        return [p.extract_text() or "" for p in pdf.pages]


def pdfium_text(body: bytes) -> list[str]:
    import pypdfium2 as pdfium

    from dmlqa.extract.pdf import pdfium_page_texts

    doc = pdfium.PdfDocument(body)
    n = len(doc)
    doc.close()
    pages = pdfium_page_texts(body, n)
    if pages is None:
        raise RuntimeError("PDFium cannot read it")
    return [p or "" for p in pages]


def product(body: bytes) -> list[str]:
    from dmlqa.extract.pdf import extract_pdf

    return [b.text for b in extract_pdf(body).blocks]  # already cleaned: the clean-up below changes nothing


EXTRACTORS: dict[str, Callable[[bytes], list[str]]] = {
    "pypdf": pypdf_plain,
    "pypdf-layout": pypdf_layout,
    "pdfplumber": pdfplumber_text,
    "pypdfium2": pdfium_text,
    "dmlqa (pypdfium2 + pypdf fallback + tables)": product,
}


def cleaned(pages: list[str]) -> list[str]:
    from dmlqa.extract.pdf import _hyphenated_vocabulary, dehyphenate
    from dmlqa.extract.text import clean_text

    vocab = _hyphenated_vocabulary(pages)
    return [clean_text(dehyphenate(p, vocab)) for p in pages]


# -- the measure ---------------------------------------------------------------------------------------

def words(text: str) -> Iterator[str]:
    """Lower-cased alphabetic words of ``text`` as separate tokens write them (hyphen parts apart)."""
    for token in text.split():
        token = _STRIP.sub("", token)
        for part in _JOINERS.split(token):
            if part.isalpha():
                yield part.lower()


class Judge:
    """Tells run-together tokens by a dictionary: see the module docstring."""

    def __init__(self, dictionary: set[str]) -> None:
        self.dictionary = dictionary
        self.pieces = {w for w in dictionary if len(w) >= 3} | SHORT
        self.split = lru_cache(maxsize=None)(self._split)

    def _split(self, s: str) -> int:
        """Fewest dictionary pieces that make up ``s`` (0: none)."""
        best = [0] + [10**6] * len(s)
        for end in range(1, len(s) + 1):
            for start in range(max(0, end - 30), end):
                if best[start] < 10**6 and s[start:end] in self.pieces:
                    best[end] = min(best[end], best[start] + 1)
        return best[-1] if best[-1] < 10**6 else 0

    def run_together(self, token: str) -> bool:
        token = _STRIP.sub("", token)
        if "://" in token or "@" in token or "_" in token:
            return False  # an address or an identifier, not prose
        for part in _JOINERS.split(token):
            if "." in part.strip(".") and re.search(r"\.[a-z]", part):
                continue  # torch.distributed, e.g: code or an abbreviation
            runs = _ALPHA.findall(part)
            if len(runs) > 1 and sum(r.lower() in self.dictionary and len(r) >= 3 for r in runs) >= 2 and \
                    re.search(r"[a-z][.,;:][A-Z]", part):
                return True  # "parallelism.Figure": a sentence glued to the next
            for run in runs:
                low = run.lower()
                if len(low) >= 5 and low not in self.dictionary and self.split(low) >= 2:
                    return True
        return False


def measure(warc: Path, n_examples: int) -> dict:
    from dmlqa.extract import extract_bytes

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    pdfs, html = read_snapshot(warc)
    html_words: set[str] = set()
    for url, body, ctype in html:
        try:
            html_words.update(words(extract_bytes(body, ctype, url=url).text))
        except Exception:  # noqa: BLE001 - a page the product cannot read adds no words
            continue

    texts: dict[str, dict[str, list[str]]] = {}
    runs: dict[str, dict] = {}
    for name, fn in EXTRACTORS.items():
        texts[name] = {}
        failures: list[str] = []
        cpu = time.process_time()
        for url, body in pdfs.items():
            try:
                texts[name][url] = cleaned(fn(body))
            except Exception as e:  # noqa: BLE001 - counted: a failure is a result here
                failures.append(f"{url}: {type(e).__name__}")
        runs[name] = {"cpu_s": round(time.process_time() - cpu, 1), "failures": failures}

    plain = [n for n in EXTRACTORS if not n.startswith("dmlqa")]
    results = {}
    for name in EXTRACTORS:
        judged_on = name if name in plain else "pypdfium2"  # the product is judged with PDFium's dictionary
        others = Counter()
        for other in plain:
            if other == judged_on:
                continue
            for pages in texts[other].values():
                others.update(set(words("\n".join(pages))))
        judge = Judge(html_words | {w for w, n in others.items() if n >= 2})
        tokens = glued = 0
        examples: Counter[str] = Counter()
        for pages in texts[name].values():
            for token in "\n".join(pages).split():
                tokens += 1
                if judge.run_together(token):
                    glued += 1
                    examples[_STRIP.sub("", token)] += 1
        results[name] = {
            "pdfs": len(pdfs), "failures": len(runs[name]["failures"]), "failed": runs[name]["failures"],
            "tokens": tokens, "run_together": glued, "rate": round(glued / max(1, tokens), 5),
            "cpu_s": runs[name]["cpu_s"], "examples": [w for w, _ in examples.most_common(n_examples)],
        }
    return {"warc": str(warc.name), "pdfs": len(pdfs), "html_pages": len(html), "html_words": len(html_words),
            "extractors": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warc", type=Path, default=WARC)
    ap.add_argument("--examples", type=int, default=8, help="most frequent run-together tokens kept per extractor")
    ap.add_argument("--no-save", action="store_true", help="print only, do not write results/pdf_words.json")
    args = ap.parse_args()
    if not args.warc.is_file():
        raise SystemExit(f"no snapshot at {args.warc}: pass --warc")
    result = measure(args.warc, args.examples)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if not args.no_save:
        RESULT.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
