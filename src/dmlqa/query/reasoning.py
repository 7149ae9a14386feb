"""Reasoning filter: what a "thinking" model says before its answer never reaches the user.

Reasoning models stream their thoughts in ``<think>`` blocks, or (with chat templates that open the
block in the prompt) as untagged text closed by a lone ``</think>``. Streamed deltas cut tags at any
character, so the filter is a small state machine over the stream, kept apart from the HTTP client
(:mod:`dmlqa.query.llm`) so that every way of cutting a stream can be tested without an endpoint.
"""

from __future__ import annotations

import re

from dmlqa.query.citations import REASONING_TAG, REASONING_TAGS

# How reasoning opens ("Okay, so the user asks ...", "Let me check the sources", "The user wants ...");
# an answer under our rules opens with its subject.
REASONING_OPENERS = (
    "okay", "ok", "alright", "all right", "hmm", "hmmm", "so", "well", "wait", "first", "now", "thinking",
    "let me", "let's", "let us", "we need", "we are asked", "we have", "i need", "i should", "i'll", "i will",
    "i must", "i think", "i recall", "i remember", "i'm", "the user", "the question", "looking at", "to answer",
)
_TAG_TEXTS = tuple(f"<{slash}{name}>" for name in REASONING_TAGS for slash in ("", "/"))


class ReasoningFilter:
    """Removes reasoning from streamed answer text, however the deltas cut it.

    * ``<think>…</think>`` (also ``<thinking>``) anywhere, its tags split across deltas at any character;
      an unclosed block at the start swallows the rest (the model ran out of tokens while thinking).
    * A ``</think>`` with no opening tag (chat templates such as DeepSeek-R1's open the block in the
      prompt): the text before it is reasoning. Such text cannot be told from an answer until the tag
      comes, so its first words decide: an opening that reads like reasoning (:data:`REASONING_OPENERS`:
      "Okay, so", "Let me", "The user ...") is held until a ``</think>`` (and dropped) or the end of the
      stream (and shown); anything else streams at once. With ``expect_close`` (this endpoint sent an
      orphan ``</think>`` before) every opening is held until the tag or the end. A ``</think>`` that
      comes after text was shown is dropped, and :func:`dmlqa.query.citations.strip_reasoning` removes the
      reasoning from the checked answer.

    ``feed`` returns the text that may be shown now; ``flush`` what is left at the end.
    """

    #: Longest opening looked at to decide whether it reads like reasoning.
    PROBE_LIMIT = 40

    def __init__(self, *, expect_close: bool = False) -> None:
        self.state = "start"  # start → probe | held | think → answer
        self.buffer = ""
        self.expect_close = expect_close
        self.saw_orphan_close = False  # a </think> without <think>: the template opened the block
        self.reasoning_chars = 0  # characters of reasoning dropped
        self._trim = False  # drop the blank lines between a think block and the answer
        self.emitted = False  # some answer text has been returned

    # -- helpers ---------------------------------------------------------------------------------------
    def _drop_reasoning(self, upto: int) -> None:
        self.reasoning_chars += len(self.buffer[:upto].strip())
        self.buffer = self.buffer[upto:]
        self._trim = not self.emitted  # the blank lines after a leading block; mid-answer spacing stays

    def _partial_tag(self) -> int:
        """Where a tag that may be completed by the next delta starts at the end of the buffer (else len)."""
        i = self.buffer.rfind("<")
        if i >= 0:
            tail = self.buffer[i:].lower()
            if any(t.startswith(tail) and t != tail for t in _TAG_TEXTS):
                return i
        return len(self.buffer)

    def _answer(self, final: bool = False) -> str:
        """Pass answer text through, cutting out think blocks and orphan close tags."""
        out: list[str] = []
        while True:
            if self.state == "think":
                m = REASONING_TAG.search(self.buffer)
                while m and not m.group(1):  # a nested/repeated opening tag: still thinking
                    m = REASONING_TAG.search(self.buffer, m.end())
                if m is None:
                    keep = 0 if final else max(len(t) for t in _TAG_TEXTS) - 1
                    cut = max(0, len(self.buffer) - keep)
                    self.reasoning_chars += len(self.buffer[:cut])
                    self.buffer = self.buffer[cut:]
                    break
                self._drop_reasoning(m.end())
                self.state = "answer"
                continue
            if self._trim:
                self.buffer = self.buffer.lstrip()
                if not self.buffer:
                    break
                self._trim = False
            m = REASONING_TAG.search(self.buffer)
            if m is None:
                cut = len(self.buffer) if final else self._partial_tag()
                out.append(self.buffer[:cut])
                self.buffer = self.buffer[cut:]
                break
            out.append(self.buffer[: m.start()])
            self.emitted = self.emitted or bool("".join(out).strip())
            self.buffer = self.buffer[m.end() :]
            if m.group(1):  # an orphan </think> mid-answer: what came before is already shown
                self.saw_orphan_close = True
            else:
                self.state = "think"
        text = "".join(out)
        self.emitted = self.emitted or bool(text.strip())
        return text

    def _probe(self) -> str:
        """From its first words: does an untagged opening read like reasoning (held) or an answer (shown)?"""
        head = re.sub(r"\s+", " ", self.buffer.lstrip(" \t\n*_>#\"'“").lower())
        undecided = False
        for opener in REASONING_OPENERS:
            if head.startswith(opener) and len(head) > len(opener):
                if not (head[len(opener)].isalnum() or head[len(opener)] in "'’"):
                    return "held"  # the whole opener word(s), then a space or punctuation
            elif opener.startswith(head):
                undecided = True  # "Oka", "The ", "Let": may still become an opener
        if undecided and len(self.buffer) < self.PROBE_LIMIT:
            return "probe"
        return "answer"

    # -- the interface ---------------------------------------------------------------------------------
    def feed(self, delta: str) -> str:
        self.buffer += delta
        if self.state == "start":
            head = self.buffer.lstrip().lower()
            if not head or any(t.startswith(head) and t != head for t in _TAG_TEXTS):
                return ""  # could still become a tag: wait for more
            m = REASONING_TAG.match(self.buffer.lstrip())
            if m and not m.group(1):
                self.buffer = self.buffer.lstrip()[m.end() :]
                self.state = "think"
            elif m:  # "</think>" first: an empty reasoning block opened by the template
                self.buffer = self.buffer.lstrip()[m.end() :]
                self.saw_orphan_close, self._trim, self.state = True, True, "answer"
            else:
                self.state = "held" if self.expect_close else "probe"
        if self.state in ("probe", "held"):
            # Look only at what is new (and a tag's length before it): held reasoning can grow long.
            tag = REASONING_TAG.search(self.buffer, max(0, len(self.buffer) - len(delta) - max(map(len, _TAG_TEXTS))))
            if tag and tag.group(1):  # an orphan </think>: all before it was reasoning
                self.saw_orphan_close = True
                self._drop_reasoning(tag.end())
                self.state = "answer"
            elif tag:  # a think block after some text: the answer state cuts it out
                self.state = "answer"
            elif self.state == "probe":
                self.state = self._probe()
            if self.state in ("probe", "held"):
                return ""
        return self._answer()

    def flush(self) -> str:
        """What is left at the end: held text (it was no reasoning after all), never an unclosed think block."""
        if self.state == "start":
            self.state = "answer"
        if self.state in ("probe", "held"):
            self.state = "answer"
        return self._answer(final=True)
