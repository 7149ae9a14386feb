"""A stored sentence as an answer quotes it (:func:`for_answer`): the source's text, less what would misread
in an answer. Its reference markers would read as the answer's own citations; print stamps, markdown bold
markers, links to translations, a glued heading and a footnote's number are the page's furniture. Kept apart
from :mod:`dmlqa.extract.sentences`, which decides what a sentence is, because this only decides how one reads.
"""

from __future__ import annotations

import re

from dmlqa.extract.sentences import _HEADING_LEAD  # the one rule for glued headings
from dmlqa.extract.textscan import COMMENT, COMMENT_MARK  # and for comments

#: The source's own reference markers: [12], [3, 14], [5–7], [12, 13, 21], and superscript digits
#: glued to a word. In an answer they would read as the answer's own citations.
_REF_MARK = re.compile(r"\s?\[\s*\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\s*\]")
#: A marker that is the object of a preposition ("Similar to [21], we ...", "as in [5]."): removed, it would
#: leave "Similar to, we"; it is written out as "ref. 21" instead, which no reader takes for a citation.
_OBJECT_MARK = re.compile(r"(?i:\b(to|in|of|by|from|with|than|see|like|following|cf\.|e\.g\.,?|for example,?))"
                          r"\s*\[\s*(\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*)\s*\]")
#: A bracketed list of numbers that may be data, not references: after "shape", "list" or "=" ("num_experts as a
#: list e.g. [4, 8]"), or out of order as below (a tensor's shape "[100, 14, 7, 3]").
_NUMBER_LIST = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)+\s*\]")
_VALUE_LEAD = re.compile(r"(?:\bshapes?|\blists?|\barray|\btuple|\bsizes?|=)\s*(?:e\.g\.,?|of|like)?\s*$", re.I)
#: Out of order, a list is still references ("Theano [5, 4] is ...", "used for NLP [33, 15, 34, 35, 36].") unless a
#: number repeats, the sentence states it as a value ("CNT2 is [8, 1]", "viewed as [8, 1, 1, 1]", "reshaping a tensor
#: from [3, 2]") or the phrase goes on after it ("a tile [100, 14, 7, 3] of the image").
_VALUE_VERB = re.compile(r"\b(?:is|are|was|were|be|becomes?|became|equals?|as|from|into)\s*$", re.I)
_VALUE_GOES_ON = re.compile(r"\s*(?:(?:of|to|by|for|x)\b|×)")
#: How far before a list its lead or verb is looked for: each ends right at the list and is a few words long, and
#: reading from the sentence's start made a sentence of many lists quadratic.
VALUE_LEAD_CHARS = 48
_SUPERSCRIPT = re.compile(r"(?<=[A-Za-z\)])[\u00b9\u00b2\u00b3\u2070-\u2079]+")
#: A README's links to a translation, after a news entry ("... Inference [English] [中文] [日本語]"): the
#: link texts are kept in the page's text, and quoted they read as noise after the entry.
_LANGUAGE_LINKS = re.compile(r"(?:\s*\[(?:English|中文|日本語|한국어|Chinese|Japanese|Korean|Français|Deutsch|Español|"
                             r"Русский|Português)\])+(?=\s*$|\s*[.;,]|\s+[-–—])")


#: A footnote's number glued to its first word by the PDF text layer ("6Gopher uses ...", "3The activation ...").
_FOOTNOTE_MARK = re.compile(r"^\d{1,2}(?=[A-Z][a-z]{2,}\b)")
#: A browser's print stamp glued into PDF text ("11/23/26, 3:16 AM"), with the page counter after it.
_STAMP = re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4},?\s+\d{1,2}:\d{2}\s*(?:AM|PM)?\b(?:\s+\d{1,3}/\d{1,3}\b)?", re.I)


#: The PDF text layer's gaps inside brackets and after a root sign ("O( √ n)", "(τ )"), closed in a quote.
_OPEN_GAP, _CLOSE_GAP, _ROOT_GAP = re.compile(r"\(\s+(?=\S)"), re.compile(r"(?<=\S)\s+\)"), re.compile(r"√\s+")
#: An address the PDF text layer wrapped over two lines, read with a space at the wrap ("https://github.com/uber/
#: horovod.", "https://developer.nvidia. com/nccl"): the piece before the space ends as an address may go on.
_URL_WRAP = re.compile(r"(https?://\S*?[/.\-_=?&#])\s+(\S+)")


def _unwrapped_urls(text: str) -> str:
    """``text`` with each address's wraps (:data:`_URL_WRAP`) closed where what follows reads as the address's rest:
    a path or a host (it holds "/", ".", "=", a digit, ...) or a last word right before a stop or a comma ("uber/
    horovod."). "https://x.org/ for details" stays as it is: "for" goes on as prose."""
    def join(m: re.Match[str]) -> str:
        rest = m[2]
        core = rest.rstrip(".,;:)")
        if core and (re.search(r"[/._=?&#\d]", core) or (core != rest and re.fullmatch(r"[\w\-~%]+", core))):
            return m[1] + rest
        return m[0]
    for _ in range(4):  # an address wrapped twice is closed a wrap a pass
        mended = _URL_WRAP.sub(join, text)
        if mended == text:
            break
        text = mended
    return text


def for_answer(text: str) -> str:
    """A sentence as an answer quotes it: the source's reference markers, print stamps, markdown bold
    markers, links to translations, a glued heading and a footnote's glued number removed, and an address
    wrapped over lines made whole."""
    t = _STAMP.sub("", text)
    if "://" in text:
        t = _unwrapped_urls(t)
    if COMMENT.match(t):  # a code comment reads as prose without its markers and step label ("# [5a]")
        t = re.sub(r"^\[\w{1,4}\]\s*", "", COMMENT_MARK.sub(" ", t).strip())
    values: list[str] = []  # data lists stand aside, as \x00n\x00, while the markers go

    def aside(m: re.Match) -> str:
        n = [int(x) for x in re.findall(r"\d+", m[0])]
        before = max(0, m.start() - VALUE_LEAD_CHARS)  # the words right before it, not the text up to it again
        if not _VALUE_LEAD.search(m.string, before, m.start()) and (all(a < b for a, b in zip(n, n[1:], strict=False))
                or len(set(n)) == len(n) and not _VALUE_VERB.search(m.string, before, m.start())
                and not _VALUE_GOES_ON.match(m.string, m.end())):
            return m[0]
        values.append(m[0])
        return f"\x00{len(values) - 1}\x00"
    t = _NUMBER_LIST.sub(aside, t)
    t = _OBJECT_MARK.sub(lambda m: f"{m[1]} ref{'s' if re.search(r'[,;–-]', m[2]) else ''}. {m[2]}", t)
    t = re.sub("\x00(\\d+)\x00", lambda m: values[int(m[1])], _REF_MARK.sub("", t))
    t = _SUPERSCRIPT.sub("", t)
    t = _LANGUAGE_LINKS.sub("", t)
    # markdown bold markers a README's raw text keeps ("**Scalable Training**"); "__" stays: as often a dunder name
    t = t.replace("**", "")
    m = _HEADING_LEAD.match(t)  # "3 DESIGN In this section": a heading glued on
    if m:
        t = t[m.end():].lstrip()
    t = _FOOTNOTE_MARK.sub("", t)
    t = re.sub(r"\s+([,.;:])", r"\1", t)
    t = _ROOT_GAP.sub("√", _CLOSE_GAP.sub(")", _OPEN_GAP.sub("(", t)))
    return " ".join(t.split())
