"""Hard-wrapped lines of prose: where a line of extracted text stops mid-sentence and the next goes on with it.

Source files and some pages wrap prose at ~80 columns, and trafilatura keeps those line breaks inside a paragraph.
:mod:`dmlqa.extract.sentences` joins such lines before it splits sentences; this is its test of one line against
the next, apart so that the splitter's own module stays within its length.
"""

from __future__ import annotations

import re

from dmlqa.extract.textscan import CODE_TOKENS, COMMENT, LINKING

#: A list item's line: a bullet, "1." / "1)" or "a." / "a)" opening it.
ITEM_LINE = re.compile(r"^\s*(?:[-*•▪●◦‣]|\d{1,2}[.)]|[a-z][.)])\s+(?=\S)")

#: A line that stops mid-sentence: no closing punctuation, or a dangling comma, hyphen or small word.
_OPEN_END = re.compile(rf"(?:[,\-–(]|\b(?:{LINKING}|its|their|this|these|when|where|if|not|can|may|will|should)|"
                       r"[^.!?:;\"'”’)\]|])$", re.I)
#: A line ending on a linking word (or on a determiner, or "between"): the sentence surely goes on.
_ENDS_LINKED = re.compile(rf"\b(?:{LINKING}|its|their|this|these|between|among|across|within|including|whether)$",
                          re.I)
#: A line that cannot continue prose: a list item, a table row, a quote, a heading mark, or code. A Python keyword
#: opens code only as code is written ("with open(f) as g:", "from x import y"): a wrapped sentence goes on with
#: "with LayerSpecs.", "for the CPU-Adam implementation." or "from a checkpoint.".
_NOT_CONTINUATION = re.compile(r"^\s*(?:[|#>`{}<$]|[-*•▪●◦‣]\s|\d{1,2}[.)]\s|[a-z][.)]\s|"
                               r"import\s+[\w.]+\s*(?:,|as\b|$)|from\s+[\w.]+\s+import\b|(?:def|class)\s+\w+\s*[(:]|"
                               r"print\s*\(|return\b[^.]*$|(?:for|if|elif|else|while|with|try)\b.*:\s*$)")

#: What a sentence goes on with after its subject, and no heading or sentence opens with: "Here" / "is an example
#: ...", "torch.nn.Sequential" / "is a convenient container ..." (a link or a code span set on a line of its own).
_GOES_ON = re.compile(r"^(?:is|are|was|were|has|have|had|can|could|will|would|should|must|may|might|does|do|did)\s")
#: A line opening on one word that ends its sentence ("TensorFlow. We recommend ..."): no sentence of one word, but
#: the last word of the line before.
_LAST_WORD = re.compile(r"^[\w+-]+(?:\.\w+)*[.!?](?:\s+[A-Z]|$)")

#: An aside the sentence before goes on with ("(e.g. images, h, logits) is split ..."); "(optional) CUDA 12" is none.
_ASIDE = re.compile(r"\((?:e\.g\.|i\.e\.|see|such as|for example|for instance)[\s,]")

#: A line that ends a sentence and stops a few words into the next ("... instruction sets. DeepSpeed uses"): prose,
#: no heading, and the rest of that sentence is on the next line whatever its first letter ("AVX-2 by default ...").
_MID_SENTENCE = re.compile(r"[a-z)][.!?]\s+[A-Z][\w-]*(?:\s+[\w,-]+){0,6}\s+[a-z]+$")


def continues(line: str, nxt: str) -> bool:
    """Is ``nxt`` the rest of the sentence ``line`` stopped in (a hard-wrapped line of HTML text)?

    Source files and some pages wrap prose at ~80 columns ("DeepSpeed provides a TiedLayerSpec that
    is an extension of / LayerSpec."). Taken as paragraphs, each half was a "heading" or a fragment,
    and the fact in it could never be quoted. Only prose wraps this way: a line that ends a sentence,
    a heading followed by a capitalised line, a list item, a table row or code stays apart.
    """
    head, tail = line.rstrip(), nxt.strip()
    if COMMENT.match(head) and COMMENT.match(tail):
        # A code comment wrapped over lines ("# If running in a multi-node cluster, this is where you /
        # # should configure the run's persistent storage ...") is one sentence, as prose is.
        h, t = COMMENT.sub("", head), COMMENT.sub("", tail)
        return len(h.split()) >= 4 and t[:1].islower() and not re.search(r"[.!?:;]$", h)
    if not head or not tail or _NOT_CONTINUATION.match(nxt):
        return False
    if len(head.split()) < 4:
        # a line too short to tell wrapped prose by its end, but one no heading is: it ends on a comma or a linking
        # word ("The" / "objective is to ...", "Instead," / "fully_shard receives ..."), or the next goes on with a
        # verb its words are the subject of ("Here" / "is an example ...")
        return (tail[:1].islower() and not _NOT_CONTINUATION.match(head)
                and (head.endswith(",") or _ENDS_LINKED.search(head) is not None or _GOES_ON.match(tail) is not None))
    if _NOT_CONTINUATION.match(head) and not ITEM_LINE.match(head):
        return False  # a table row, code or a quote does not wrap into prose (a list item may)
    if not _OPEN_END.search(head) or CODE_TOKENS.search(head) and not tail[:1].islower():
        return False
    letters = sum(ch.isalpha() or ch.isspace() for ch in head)
    if letters < 0.85 * len(head):
        return False  # code or a formula, not wrapped prose
    if (_LAST_WORD.match(tail) or _ASIDE.match(tail)) and re.search(r"\b[a-z]+$", head):
        # "... or update" / "TensorFlow.", "... a \"batch\" dimension" / "(e.g. images, ...) is split"; a heading in
        # capitals ("Getting Started with Horovod" / "Note. ...") stays apart
        return True
    return tail[:1].islower() or re.search(r"[,\-–(]$|\b[a-z]+$", head) is not None and (
        _ENDS_LINKED.search(head) is not None or _MID_SENTENCE.search(head) is not None)
