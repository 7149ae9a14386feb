"""Headings the PDF text layer glues before a sentence: where the sentence proper begins, or that it cannot be cut.

A paper's text layer runs a section's number and title, a running header, a paragraph's run-in title or a figure's
text into the first sentence under it ("5.2 Comparison to ZeRO-3 We compare ...", "Bandwidth w.r.t. activation
memory Figure 3c also shows ...", "... 12 GB/s 2 GB/s Our focus is ..."). Where a clear point says where the
sentence begins, :func:`heading_end` gives it and the answer quotes the sentence from there; where none does,
:func:`glued_heading` says so and the sentence is furniture (:func:`dmlqa.query.features.furniture`).
"""

from __future__ import annotations

import re

#: Words a title leaves in lower case.
SMALL_WORDS = frozenset("a an and as at by for from in into of on or per the to via vs with".split())


def _section_then_sub(name: str) -> str:
    """A section's number and title, then its first subsection's number, the two agreeing ("5 Experiments 5.1", "6.2
    Experimental Results 6.2.1"; group ``name`` holds the section's number): one spelling for the headings cut off and
    those that make a sentence furniture."""
    return r"(?P<" + name + r">\d+(?:\.\d+)?)\.?\s+[A-Z](?:[\w-]*\s+){1,6}?(?P=" + name + r")\.\d+"


def _numbered(name: str) -> str:
    """A numbered heading opening a sentence ("5.2 ", or :func:`_section_then_sub` and more levels) up to its
    title."""
    return r"^(?:" + _section_then_sub(name) + r"|\d+\.\d+)(?:\.\d+)*\.?\s+"


#: The word before a figure's or table's number.
_FIGURE_WORD = r"(?:Figure|Fig\.|Table)"
#: Words that lead into a figure's number within a sentence ("shown in Figure 3", "than Table 2").
_INTO_FIGURE = r"(?i:in|of|see|from|by|to|and|at|on|with|for|the|a|an|than|as|is|are|was|were|shown|plotted|listed)"
#: A heading glued before a sentence that can be cut off at a clear point: the match ends where the sentence
#: proper begins, and :func:`heading_end` gives that offset.
_CUT_HEADING = re.compile(
    # "TECHNICAL REPORT Tip 7: We suggest ...": a running header in capitals (two words at least) before a sentence
    r"^[A-Z]{2,}(?:[ &-]+[A-Z]{2,})+(?=\s+[A-Z][a-z])|"
    # "3 SYSTEM DESIGN In this section ...": a numbered section title in capitals
    r"^(?:\d+(?:\.\d+)*\.?|[IVX]+\.)\s+[A-Z][A-Z &-]{3,}\b(?=\s+[A-Z][a-z])|"
    # "5.2 Pg: Gradient Partitioning As each ...", "6.2 CB: Constant Size Buffers ZeRO carefully ...": a numbered
    # heading naming its label, then the sentence from the capitalised word before the first lower-case one
    r"^\d+\.\d+\.?\s+[\w.+-]{1,30}:\s+(?:[A-Z][\w-]*\s+){1,5}?(?=[A-Z][\w-]*\s+[a-z])|"
    # "5.2 Comparison to ZeRO-3 We compare ...": a numbered heading before the sentence, after its section's
    # own ("5 Experiments 5.1 Experiment Setup We evaluate ...")
    + _numbered("sec") + r"[A-Z][\w-]*(?:\s+[\w-]+){0,6}?(?=\s+(?:We|In|This|The|Our|Here|To)\s)|"
    # "5.2 Pipeline Parallelism Pipeline parallelism divides ...": the heading said again
    + _numbered("sec2") + r"(?P<head>[A-Z][\w-]*)(?:\s+[A-Z][\w-]*){0,5}(?=\s+(?i:(?P=head))\s)|"
    # "3D Parallelism Tutorial A generic tutorial on ...": a title, then the sentence
    r"^(?:[A-Z0-9][\w-]*\s+){1,5}[A-Z0-9][\w-]*(?=\s+(?:The|This|These|We|Our|An?(?!\s+(?:for|of|in|to|and|or|as|"
    r"is|was|at|on|with|by)\b))\s+[a-z])|"
    # "Model Speed Figure 5a shows ...", "Bandwidth w.r.t. activation memory Figure 3c also shows ...": a paragraph's
    # run-in title before the sentence, opening in a capital; a word leading into the figure ("Results in Figure 3
    # show ...") says it is one sentence
    r"^(?!(?:As|In|See|From|And|The|This|Both|Our|We|Also|Then|Thus|Here|Unlike|Like|Compared|Similarly)\b)"
    r"[A-Z][\w-]*(?:\s+(?!" + _INTO_FIGURE + r"\s+" + _FIGURE_WORD + r")(?:[\w-]+|w\.r\.t\.|vs\.)){0,5}?"
    r"(?=\s+" + _FIGURE_WORD + r"\s*\d+[a-z]?\s+[a-z])")
#: A heading glued before a sentence where no clear point says where it ends, or before a page's continuation:
#: such a sentence is furniture.
_GLUED_HEADING = re.compile(r"^[\w.+-]{2,30}:\s+(?:[A-Z][\w-]*\s+){2,5}[A-Z][\w-]*\s+[a-z]|"
                            # "TECHNICAL REPORT causal mask has not ...": a running header before a page's continuation
                            r"^[A-Z]{4,}(?:\s+[A-Z]{4,})+\s+[a-z]|"
                            # "4.2.3 Pipeline Parallelism ...": a number of three levels is a section's, never a figure
                            r"^\d+\.\d+\.\d+\.?\s+[A-Z]|"
                            # "2 Related Work 2.1 Data, Model and Pipeline Parallelism Parallelization is ...": a
                            # section's title, then its first subsection's
                            r"^" + _section_then_sub("sec3") + r"\.?\s+[A-Z]")
#: "ABSTRACT We propose ...", "3 DESIGN In this section ...": a section title in capitals before a sentence,
#: when the word is English (:func:`_caps_heading`); "NVIDIA Megatron Core is ..." opens with a name.
_CAPS_LEAD = re.compile(r"^(?:\d+(?:\.\d+)*\.?\s+)?([A-Z][A-Z -]{4,})\s+[A-Z][a-z]")


def heading_end(text: str) -> int:
    """Where the sentence proper begins after a heading glued before it by the PDF text layer that can be
    cut off cleanly ("TECHNICAL REPORT Tip 7: ...", "5.2 Comparison to ZeRO-3 We compare ..."); 0 for none.
    The answer quotes the sentence from there (:func:`dmlqa.query.compose.compose`): it states what it
    states, and a heading glued into a quote is no answer."""
    m = _CUT_HEADING.match(text)
    if m is None:
        return _heading_said_again(text) or _figure_text_end(text)
    rest = len(text) - len(text[m.end():].lstrip())
    return rest if rest < len(text) else 0


#: Where a sentence may begin after a figure's or table's text run into it: a word opening a sentence after one
#: that could end a cell ("... Timestamp-based This section evaluates ...", "... 2 GB/s Our focus is ...").
_SENTENCE_OPENS = re.compile(r"(?<=[\w%)\]/])\s+(?=(?:This|These|We|Our|The|In this|To|As|For|It)\s+[a-z])")
#: A figure's or table's text: at least this many words, this many of them figures.
FIGURE_TEXT_WORDS, FIGURE_TEXT_NUMBERS = 8, 3
_FIGURE_NUMBER = re.compile(r"[~<>≈]?\d[\d.,]*[%×xkKMBG]?,?")


def _figure_text_end(text: str) -> int:
    """Where the sentence begins after a figure's or table's text the PDF text layer ran into it ("Dataset Avg Input
    Length ... ArXiv Summarization 8088 229 ~0% Poisson Process ... This section evaluates ..."): the words before
    are cells and labels, no word in lower case, no sentence's end, and several figures; 0 for none."""
    first_words = text.split(None, FIGURE_TEXT_WORDS)[:FIGURE_TEXT_WORDS]  # what any cut must step over
    if not (text[:1].isupper() or text[:1].isdigit()) or _prose_word(first_words):
        return 0  # prose there: no opening further on is cut (this runs for every candidate, several times)
    for m in _SENTENCE_OPENS.finditer(text, 0, 400):
        words = text[:m.start()].split()
        if _prose_word(words):
            return 0  # prose before it: a sentence already, or a word no cell holds
        numbers = sum(bool(_FIGURE_NUMBER.fullmatch(w)) for w in words)
        if len(words) >= FIGURE_TEXT_WORDS and numbers >= FIGURE_TEXT_NUMBERS:
            return m.end()
    return 0


def _prose_word(words: list[str]) -> bool:
    """Is one of ``words`` no cell's or label's: in lower case, or ending a sentence or clause?"""
    return any(w[:1].islower() or w[-1:] in ".;:!?" for w in words)


def _heading_said_again(text: str) -> int:
    """Where the sentence begins after a run-in heading in title case whose words its subject says again ("Hybrid
    Model and Data Parallelism Model parallelism is orthogonal ...", "Tensor Model Parallelism Tensor model
    parallelism (or, tensor parallelism) is ..."): the heading's words are all English, so that a name opening
    the sentence ("NVIDIA Megatron Core is ...") is left whole; 0 for none."""
    words = text[:200].split(None, 11)[:11]  # split in C: this runs for every candidate, several times
    # the sentence's first word is the capitalised one before the first lower-case word that is not a small one
    first = next((k - 1 for k, w in enumerate(words[:10]) if w[:1].islower() and w not in SMALL_WORDS), 0)
    head = words[:first]
    if first < 2 or head[-1] in SMALL_WORDS or not words[first].istitle() and not words[first].isupper():
        return 0
    from dmlqa.query.english import english_word  # loads a dictionary: only for a sentence opening so

    said = {w.lower() for w in words[first : first + 2]}
    plain = [w.lower() for w in head if w not in SMALL_WORDS]
    if not all(w.isalpha() and english_word(w) for w in [*plain, words[first].lower()]) or not said & set(plain):
        return 0
    return len(text) - len(text.split(None, first)[-1])


def _caps_heading(text: str) -> bool:
    m = _CAPS_LEAD.match(text)
    if m is None:
        return False
    from dmlqa.query.english import english_word  # loads a dictionary: only for a sentence opening in capitals

    return all(english_word(w.lower()) for w in m.group(1).split() if w.isalpha())


def glued_heading(text: str) -> bool:
    """A heading glued before the sentence that cannot be cut off (:func:`heading_end` cuts the others)."""
    rest = text[heading_end(text):]
    return bool(_GLUED_HEADING.search(rest) or (rest[:1].isupper() and rest[1:2].isupper() and _caps_heading(rest)))


#: A figure's or table's label closing a line of its text ("... BRNN-4-8K 99GB 9034 9 Table 1.").
_LABEL_AT_END = re.compile(_FIGURE_WORD + r"\s*\d+[a-z]?\.?\s*$")
#: Words prose cannot go a dozen words without; a figure's labels and a table's cells do.
_FUNCTION_WORDS = frozenset("a an the of in on to and or is are was were be by for with from as at that this which it "
                            "its we our their than".split())
#: How many words before the label are read, and how many there must be.
LABEL_WORDS, LABEL_MIN_WORDS = 12, 6
#: The words prose points at a figure or table with, right before its label: "in Table 1.", "of Figure 9.", "shown
#: as Figure 7.", "see Fig. 2.", "Table 17 and Table 18.". Any other word there ("Weak scaling is typically Table
#: 1.", "we have substantial experience Figure 9.") is a sentence the page cut off, the label glued on at the break.
_POINTING = frozenset("in of as on at for from and or see to with by within under per like".split())


def labelled_figure_text(text: str) -> bool:
    """Is the sentence a figure's or table's text closed by its label ("Model MemUsage OPs ... 9034 9 Table 1.",
    "Token 0 Token 1 Token 2 layer Dataset (infinite) batch Figure 2.")? The words before the label hold no function
    word, where prose ending on a figure says "... as shown in Table 1."; or a cut sentence with the label glued on
    (:data:`_POINTING`)."""
    m = _LABEL_AT_END.search(text)
    if m is None:
        return False
    words = text[:m.start()].split()
    if words and words[-1].lower() not in _POINTING and not (len(words) > 1 and re.fullmatch(
            _FIGURE_WORD, words[-2])):  # "... in Table 1, Table 2.": a list of labels
        return True
    return len(words) >= LABEL_MIN_WORDS and not any(
        w.lower().strip(",.;:()") in _FUNCTION_WORDS for w in words[-LABEL_WORDS:])
