"""Refusal by name: a question about something no indexed document mentions gets no answer.

If a user asks how "Hivemind" averages gradients and no document ever mentions Hivemind, every
passage the search returns is about something else, however close it sounds; quoting it would
answer a different question. So the names a question uses are checked against the index itself:

* **Candidate names** are the words a user writes for a specific thing: capitalised words inside
  a sentence, camel case (``DiLoCo``), identifiers (``shard_map``), acronyms of four capitals or more
  (``NCCL``), module paths (``jax.distributed.initialize``), product-like tokens with digits,
  ``+`` or hyphens (``fairseq2``, ``zero++``, ``deepspeed-ulysses``), quoted strings, runs of these
  (``Lightning Fabric``, ``Vertex AI``), lower-case words that are not English (``torchtitan``, ``pjit``;
  "lopsided" is English: see :mod:`dmlqa.query.english`), and rare English in a tool's place ("with pippy?").
* **Mentioned** means what the index can show: every BM25 token of the name is in the version's
  vocabulary (or in a document's address), and a name of several words or parts occurs as that
  phrase in one passage, title or address. Two words that each occur somewhere ("Lightning" and
  "Fabric") are not the product "Lightning Fabric"; a common word counts as a name of its own only
  where a passage holding the others writes it as one ("enter Recovery mode" for "macOS Recovery").
* A release after a name ("Horovod 1.0") is mentioned where a passage writes it right after the name, and a
  model's size ("Megatron-Turing NLG 1T") where a passage gives the model that size ("530B", "530-billion"): a
  near-miss of a model the index knows at another size is refused, not answered with the known one's figures.
* A name not mentioned is reported with the closest spelling the index holds ("Megatron-LN" →
  "Megatron-LM"), so the refusal tells the user what to ask instead.

Short acronyms (three capitals, or capitals with one run of digits) are no names on their own: users and
documents spell them differently ("FP8" vs "8-bit floating point", "GPU"), so their absence proves little; inside
a run they count ("Vertex AI"). Four capitals or more name one thing (NCCL, TACCL), as capitals and digits in turn
(2F2B) and a module path (``torch.distributed.pipelining``) do: on the 1,632 answerable questions of bench/train
and bench/heldout neither refused one, and they caught 9 more of their 213 unanswerable ones (0.901 to 0.939).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dmlqa.index.lexical import _stopwords, tokenize
from dmlqa.index.versions import IndexVersion
from dmlqa.models import Citation, Hit
from dmlqa.query.english import common_word, english_ranks, english_word
from dmlqa.query.language import other_language, other_script
from dmlqa.query.mentions import (
    ACRONYM,
    BATCH_ROWS,
    MARK,
    PIECE,
    Evidence,
    concepts,
    meets_in_address,
    one_document_holds,
    row_texts,
    rows_with,
    tokens_known,
)
from dmlqa.query.pinned import per_version

__all__ = ["Unknown", "candidate_names", "concepts", "not_english", "name_refusal", "unknown_names"]

#: How alike (difflib ratio, case-folded) a spelling in the index must be to be offered as "nearest".
NEAR_RATIO = 0.75

#: Words that open a question: capitalised there for grammar, not because they name something.
_OPENERS = frozenset(
    "what which who whom whose when where why how is are was were do does did can could should would will shall "
    "may might must has have had if in on for with and or but so also then please tell explain describe compare "
    "give list show i my we our you your a an the to of from at by as after before during since".split()
)

_WORD = re.compile(r"\w(?:[\w.+\-']*[\w+])?")
_QUOTED = re.compile(r"[\"“”‘’']([^\"“”‘’']{2,60})[\"“”‘’']")


@dataclass(frozen=True)
class Unknown:
    """A name in the question that no indexed document mentions."""

    name: str  # as the question writes it
    near: str | None = None  # the closest spelling some document holds
    near_doc: str | None = None  # a document that holds it


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int
    sentence_start: bool


# -- the question's language -----------------------------------------------------------------------------

#: The language identifier's probability above which a question of one or two lower-case words, one of them
#: spelt as no English word is, is taken for another language (:func:`_short_and_foreign`).
SHORT_CONFIDENCE = 0.2


def not_english(question: str, concept: Callable[[str], bool] = lambda word: False) -> bool:
    """Is the question in another language? Three or more lower-case words, none of them an English word
    of asking ("how", "the", "does", "with": :data:`_OPENERS`), and half of them no English word (at any
    rank of the bundled vocabulary or in the dictionary, or a regular form of one) nor the index's own
    vocabulary (``concept``),
    one spelt with a letter English does not use ("partición", "über") counting twice. Capitalised
    words are left out (but a sentence's first when so spelt: "¿Cómo"): names are the same in every
    language. Otherwise a question in Spanish or German reads as a string of names no document mentions
    ("nothing on Cómo or funciona"); an English question with typos keeps its "how" or "the", and a
    query of keywords holds the index's words.

    The bundled vocabulary alone cannot tell: English text holds "de", "la", "les" and "die" (names, quotes). Where
    it finds a foreign word but not enough of them, a language identifier decides (:mod:`dmlqa.query.language`).
    A question written mostly in another script is not English whatever its words; one of a word or two is told by
    :func:`_short_and_foreign`."""
    if other_script(question):
        return True
    found = _words(question)
    every = [w.text for w in found]
    # a sentence's capitalised first word counts when spelt with a letter English does not use ("¿Cómo ...",
    # "Über ..."): a name or an English word there ("Comment", "Horovod") would only dilute the count. But only
    # after "¿" or "¡", or beside another foreign word: else it is a name opening an English question ("Pólya urn
    # sampling", "Schrödinger bridge models"), and alone it would tip three words
    def foreign_word(w: str) -> bool:
        return not (english_word(w, limit=1 << 30) or concept(w))

    plain = [w.text for w in found if w.text.isalpha() and w.text.islower() and len(w.text) >= 2]
    opened = _inverted_opening(question) or any(foreign_word(w) for w in plain)
    words = [w.text.lower() if opened and w.sentence_start and w.text.istitle() and not w.text.isascii() else w.text
             for w in found]
    words = [w for w in words if w.isalpha() and w.islower() and len(w) >= 2]
    if len(words) < 3:
        return _short_and_foreign(question, found) or _asked_in_another_language(found, foreign_word)
    foreign = sum(1 if w.isascii() else 2 for w in words if foreign_word(w))
    if foreign >= len(words) / 2 and not any(w.lower() in _OPENERS for w in every):  # "Can ...", "How ..."
        return True
    # "die", "in" and "come" are English words too: where one word is foreign, a language identifier tells
    return foreign > 0 and other_language(question)


def _inverted_opening(question: str) -> bool:
    """Does the question open with Spanish's "¿" or "¡"? Then its capitalised first word is a plain word."""
    return question.lstrip()[:1] in ("¿", "¡")


#: Words of asking in German, French, Spanish, Italian, Portuguese and Dutch that English does not write ("Was",
#: "Comment", "Come" and "Que" it does): a question they open is in that language.
_ASKING = frozenset("wie warum weshalb wieso welche welcher welches wann woher wohin quel quelle quels quelles "
                    "pourquoi où qué cómo cuál cuáles cuándo dónde quién cuánto cuántos perché quale quali quando "
                    "como onde quem qual quais porque waarom welke wanneer".split())


#: Words of asking that English spells too ("Was macht Horovod?", "Come funziona ZeRO?"): another language's only
#: when the next word is foreign as well (:func:`_asked_in_another_language`).
_ASKING_ALSO_ENGLISH = frozenset("was wer come cosa".split())


def _asked_in_another_language(found: Sequence[_Word], foreign_word: Callable[[str], bool]) -> bool:
    """Does a short question open with another language's word of asking ("Wie skaliert Horovod?", "Warum ZeRO?")?
    Unaccented and too short for the identifier, it had been refused as naming "skaliert" or "Warum ZeRO". One that
    English spells too (:data:`_ASKING_ALSO_ENGLISH`) counts before a lower-case word that is no English word nor the
    index's ("Was macht Horovod?"), not before a name or an English word ("Was Horovod used at Uber?")."""
    if not found:
        return False
    first = found[0].text.lower()
    if first in _ASKING:
        return True
    if first not in _ASKING_ALSO_ENGLISH or len(found) < 2:
        return False
    second = found[1].text
    return second.isalpha() and second.islower() and foreign_word(second)


def _short_and_foreign(question: str, found: Sequence[_Word]) -> bool:
    """Is a question of one or two lower-case words ("qué es ZeRO", "Megatron erklären") in another language? Too
    few words to count, and too few letters for the identifier to be sure, so two signs must agree: a lower-case
    word spelt with a letter English does not use and in no English dictionary ("qué", "erklären"), and another
    language the identifier's likeliest at :data:`SHORT_CONFIDENCE` (English borrowings stay under it: "naïve
    partitioning?" 0.11, "café analogy" 0.17; "qué es ZeRO" 0.23). A capitalised word counts only after "¿" or
    "¡" ("¿Cómo funciona ZeRO-3?"): elsewhere it is a name, spelt so in English too ("Erdős graphs"). Without
    this, such a question was refused as naming "qué"."""
    opened = _inverted_opening(question)
    lower = [w.text.lower() if opened and i == 0 else w.text for i, w in enumerate(found)]
    odd = [w for w in lower if w.isalpha() and w.islower() and not w.isascii() and not english_word(w, limit=1 << 30)]
    return bool(odd) and other_language(question, confidence=SHORT_CONFIDENCE)


# -- candidate names ---------------------------------------------------------------------------------------


def _words(question: str) -> list[_Word]:
    out: list[_Word] = []
    start = True
    for m in _WORD.finditer(question):
        w = m.group(0)
        if "'" in w:
            if w.lower().endswith("n't"):  # an auxiliary: "shouldn't", "doesn't"
                start = False
                continue
            w = w.split("'")[0]
        w = w.rstrip(".-")
        if w:
            out.append(_Word(w, m.start(), m.start() + len(w), start))
        tail = question[m.end() : m.end() + 2].strip()[:1]
        start = tail in {".", "?", "!", ":"}
    return out


#: A Greek letter's name with its index: a hyperparameter's symbol written out ("Adam beta2").
_SYMBOL = re.compile(r"(?:alpha|beta|gamma|delta|epsilon|eta|theta|kappa|lambda|mu|rho|sigma|tau|phi|omega)\d{0,2}")


def _kind(w: _Word, concept: Callable[[str], bool]) -> str:
    """``name`` (names something on its own), ``alone`` (a name that joins no run), ``joiner`` (part
    of a name beside one: an acronym, "2-bit"), or ``plain``."""
    text = w.text
    low = text.lower()
    if low in _stopwords() or len(text) < 2:
        return "plain"
    letters = sum(ch.isalpha() for ch in text)
    if letters == 0:
        return "plain"
    digits = any(ch.isdigit() for ch in text)
    if digits and letters < 2:  # quantities and ports: 175B, x16, 8x
        return "plain"
    if "_" in text or "+" in text:
        return "name"  # identifiers and versions: shard_map, zero++
    if re.search(r"[a-z][A-Z]", text):
        return "name"  # camel case: DiLoCo, PyTorchJob, ZeRO
    parts = [p for p in re.split(r"[\-./]", text) if p]
    if len(parts) > 1:
        if any(p[:1].isupper() for p in parts if not ACRONYM.fullmatch(p)) and not w.sentence_start:
            return "name"  # Megatron-Turbo, Colossal-Auto
        if any(_part_is_name(p, concept) for p in parts):
            return "name"  # colossal-ai, deepspeed-ulysses, torch.distributed
        if any(p[:1].isupper() for p in parts):
            return "name" if any(not ACRONYM.fullmatch(p) for p in parts) else "joiner"
        if "." in text and all(len(p) >= 2 and p.isalpha() for p in parts):
            return "name"  # a module path: torch.distributed.pipelining, jax.distributed.initialize
        # 2-bit (Adam), data-parallel; a quantity of several words describes what follows ("17-billion-parameter")
        return "joiner" if digits and sum(p.isalpha() for p in parts) < 2 else "plain"
    if ACRONYM.fullmatch(text):
        # four capitals or more name a thing of their own (NCCL, TACCL), and so do capitals and digits in turn
        # (1F1B, 2F2B, DL4J: a schedule's or a library's code); shorter ones and those with one run of digits are
        # the field's abbreviations that users and documents spell differently (GPU, FP16, H100)
        turns = len(re.findall(r"[A-Z]+|\d+", text))
        return "name" if (len(text) >= 4 and text.isalpha() and text.isupper()) or turns >= 3 else "joiner"
    if _SYMBOL.fullmatch(text):
        return "plain"  # beta2, lambda1: a paper's symbol spelt out (it writes β2), no name
    if digits:
        return "name"  # fairseq2, float8, H100, v5e
    if text[:1].isupper():
        if not w.sentence_start:
            return "name"
        return "plain" if low in _OPENERS or english_word(low) else "name"
    # a rare lower-case word names one thing alone ("nanotron"); it joins no run: "Jeff Dean propose"
    return "plain" if len(text) < 3 or english_word(low) or concept(low) else "alone"


#: The words before the tool a question asks about ("... fine-tuning in axolotl?"), and what may follow it; endings
#: of English words made from others, which no tool's name has ("... deal with stragglers?").
_TOOL_BEFORE = frozenset({"with", "using", "via", "in", "through", "from"})
_TOOL_AFTER = re.compile(r"\s*(?:[?,.;!]|$|(?:to|for|and|or|on)\b)")
_ENGLISH_ENDING = re.compile(r"(?:(?<![ius])s|ing|ed|ly|tion|sion|ness|ment|ity|ance|ence|ism)$")


def _tool_places(question: str, words: Sequence[_Word]) -> set[int]:
    """Rare English words where a question names its tool, at its end or before "and" ("with pippy?"): names."""
    out: set[int] = set()
    for i in range(1, len(words)):
        w, before = words[i].text, words[i - 1].text.lower()
        if ((before in _TOOL_BEFORE or before in ("and", "or") and i - 2 in out) and w.islower() and len(w) >= 3
                and not _ENGLISH_ENDING.search(w) and not common_word(w) and _TOOL_AFTER.match(question, words[i].end)):
            out.add(i)
    return out


def _part_is_name(part: str, concept: Callable[[str], bool]) -> bool:
    """A part of a lower-case compound that is no English word: "ai" in colossal-ai, "ulysses"."""
    low = part.lower()
    if low.isdigit():
        return False  # "2-bit", "top-1": a quantity
    if any(ch.isdigit() for ch in low):
        return True
    if len(low) <= 3:
        return low not in english_ranks()
    return not (common_word(low) or concept(low))


#: Small words that join two names into one compound ("Dask-on-Ray", "PyTorch-to-ONNX").
_JOINING = frozenset({"on", "over", "for", "with", "to", "and", "in", "of", "via", "from", "into"})
_NAME_PREFIXES = frozenset({"non", "pre", "post", "multi", "sub", "co", "anti", "cross", "semi", "self", "un", "re"})
#: A release written after a name: "1.0", "3.1.2", "v5", "v0.7"; or a lone digit ("DeepSpeed-Ulysses 2").
_VERSION = re.compile(r"v?\d{1,3}(?:\.\d{1,3}){1,2}|v\d{1,3}(?:\.\d{1,3})?|\d")
#: A model's size written after its name: "530B", "1.3B", "1T", "350M" (parameters).
_SIZE = re.compile(r"\d{1,4}(?:\.\d{1,2})?[BMT]")
_SIZE_WORDS = {"B": r"(?:\s?B|\s?-?billion|\s?bn)", "M": r"(?:\s?M|\s?-?million)", "T": r"(?:\s?T|\s?-?trillion)"}


def _version_of(question: str, words: Sequence[_Word], j: int) -> bool:
    """Is ``words[j]`` a release of the name before it? A lone digit not before a count: not "Ray 2 nodes"."""
    w = words[j]
    if question[words[j - 1].end : w.start] != " " or not _VERSION.fullmatch(w.text):
        return False
    if w.text.isdigit():
        after = question[w.end :].lstrip()
        nxt = words[j + 1].text if j + 1 < len(words) else ""
        return not after or after[0] in "?.,;:)!" or (after.startswith(nxt) and nxt.islower() and not nxt.endswith("s"))
    return True


def _lower_release(question: str, words: Sequence[_Word], i: int) -> bool:
    """Is ``words[i]`` a lower-case project's name written with a release ("exo 2.0", "pytorch v2")? The word is in
    no English dictionary (the index may know it: "pytorch" is a concept); a dictionary word before a number is a
    part or a count ("lemma 3.2", "kernel 5.4"). The release is dotted or a "v": "Ray 2 nodes" holds no release. A
    rare word alone joins no run, but its release is still the question's."""
    w = words[i].text
    return (w.islower() and w.isalpha() and len(w) >= 3 and not english_word(w) and i + 1 < len(words)
            and not words[i + 1].text.isdigit() and _version_of(question, words, i + 1))


def candidate_names(question: str, concept: Callable[[str], bool] = lambda word: False) -> list[str]:
    """The names a question uses, as written: runs of name-like words (see the module's docstring)
    and quoted strings; a run of joiners alone ("GPU", "2-bit") is none.

    ``concept`` tells a lower-case word of the field's own vocabulary (see :func:`concepts`).
    """
    words = _words(question)
    tools = _tool_places(question, words)
    kinds = ["alone" if i in tools and k == "plain" else k for i, k in enumerate(_kind(w, concept) for w in words)]
    quoted: list[tuple[int, int, str]] = []
    for m in _QUOTED.finditer(question):
        inner = m.group(1).strip()
        apostrophe = m.group(0)[0] == "'" and m.start() > 0 and question[m.start() - 1].isalnum()  # "Adam's"
        if inner and tokenize(inner) and not apostrophe:
            quoted.append((m.start(), m.end(), inner))
    out: list[str] = []
    i = 0
    while i < len(words):
        if any(a <= words[i].start < b for a, b, _ in quoted):
            i += 1
            continue
        if kinds[i] in ("plain", "alone") and _lower_release(question, words, i):
            out.append(question[words[i].start : words[i + 1].end])  # "exo 2.0", "pytorch v2"
            i += 2
            continue
        if kinds[i] == "plain":
            i += 1
            continue
        j = i + 1
        # a run continues over plain spaces only: "Vertex AI", not "Hivemind, DiLoCo" nor "ZeRO to"
        while (j < len(words) and kinds[i] != "alone" and kinds[j] not in ("plain", "alone")
               and question[words[j - 1].end : words[j].start].strip() == ""):
            j += 1
        if j - i > 1 and "name" in kinds[i:j] and all(ACRONYM.fullmatch(w.text) for w in words[i:j]):
            # acronyms side by side are each their own: "NCCL GPU ops" are NCCL's GPU ops, no product, but
            # beside a name even a short one is checked ("CUDA MPS")
            out += [w.text for w in words[i:j]]
        elif any(k in ("name", "alone") for k in kinds[i:j]):
            if kinds[j - 1] != "alone" and j < len(words) and _version_of(question, words, j):
                j += 1  # "Horovod 1.0", "Megatron-LM v5": a release the index may not know, though it knows the name
            if (j < len(words) and _SIZE.fullmatch(words[j].text)
                    and question[words[j - 1].end : words[j].start] == " "):
                j += 1  # "Megatron-Turing NLG 1T": a size the index never gives the model, though it knows 530B
            out.append(question[words[i].start : words[j - 1].end])
        i = j
    out += [inner for _, _, inner in quoted]
    return list(dict.fromkeys(out))


def _stands_alone(word: str) -> bool:
    """Can this word of a run be a name by itself? Not a capitalised common word: "Fabric" in
    "Lightning Fabric" or "Store" in "Mooncake Store" is part of a product's name."""
    if not word[:1].isupper() or ACRONYM.fullmatch(word) or len(PIECE.findall(word)) > 1:
        return True
    if re.search(r"[a-z][A-Z]|\d", word):
        return True
    return not common_word(word.lower())


def _named_mid_sentence(word: str, text: str) -> bool:
    """Does ``text`` write this capitalised common word as a name inside running prose, between two
    lower-case words ("select Options to enter Recovery mode")? Then a passage where it meets the run's
    other words uses it as the thing the question names ("macOS Recovery"); "a cluster whose fabric is
    InfiniBand" does not make "Lightning Fabric" a mention, nor a figure's "Load and Store*" labels
    "Mooncake Store"."""
    return re.search(rf"(?<=[a-z] ){re.escape(word)}(?= [a-z])", text) is not None


def _mentioned(evidence: Evidence, name: str) -> bool:
    """Does some document mention ``name``: whole, or as a run of parts that each occur (a phrase
    of several words, a name of its own, an acronym: "Colossal-AI" + "Torch FSDP")?"""
    version = evidence.version
    words = [w for w in name.split() if w]
    last = words[-1] if len(words) > 1 else ""
    met = _size_met if _SIZE.fullmatch(last) else _release_met if _VERSION.fullmatch(last) else None
    if met is not None:
        # "PyTorch DDP v1.5", "Megatron-Turing NLG 530B": the name, and its release or size in a passage that
        # speaks of it ("PyTorch v1.5")
        return _mentioned(evidence, " ".join(words[:-1])) and met(evidence, words[:-1], last)

    def word_known(w: str) -> bool:
        if not tokenize(w):
            return True
        if tokens_known(version, w) and (len(PIECE.findall(w)) <= 1 or evidence.phrase_found(w)):
            return True
        # "Megatron-style", "GPT-3-sized": a known name with an English word hyphenated on
        head, _, tail = w.rpartition("-")
        # (a word, not an abbreviation: the "ml" of "dask-ml" is no English made of "dask"; and a lower-case
        # head only when English too: "host-authenticity" is, "llm-foundry" is a package's name)
        if (head and len(tail) >= 4 and tail.islower() and english_word(tail, limit=1 << 30) and word_known(head)
                and (not head.islower() or english_word(head))):
            return True
        # "non-Module", "multi-Megatron": a lower-case English prefix before a known name ("Multi-Instance": a name)
        prefix, _, rest = w.partition("-")
        if prefix in _NAME_PREFIXES and bool(rest) and word_known(rest):
            return True
        # "Dask-on-Ray", "Keras-on-Spark": names joined by a small word, each a name the index knows
        parts = w.split("-")
        names = [p for p in parts if p.lower() not in _JOINING]
        return len(parts) >= 3 and 0 < len(names) < len(parts) and all(p and word_known(p) for p in names)

    if not all(word_known(w) for w in words):
        return False
    if len(words) == 1:
        return True
    if evidence.phrase_found(name):
        return True
    # its words must meet in one passage (acronyms aside: "Horovod README" is the README of Horovod's page)
    met = rows_with(version, tokenize(" ".join(w for w in words if not ACRONYM.fullmatch(w))), every=True)
    if not len(met):
        return meets_in_address(evidence, words) or one_document_holds(version, words)
    met_texts: list[str] | None = None
    variant = any(ch.isdigit() for ch in name)

    def named_there(word: str) -> bool:
        nonlocal met_texts
        if met_texts is None:
            met_texts = [t for _, t in row_texts(version, met[:BATCH_ROWS])]
        return any(_named_mid_sentence(word, t) for t in met_texts)
    # split into pieces that each occur: reach[i] says words[:i] splits so
    reach = [True] + [False] * len(words)
    for end in range(1, len(words) + 1):
        for start in range(end):
            if not reach[start]:
                continue
            piece = words[start:end]
            if len(piece) == 1:
                # a version or quantity beside it ("2-bit Adam") makes the run a variant, which the
                # word's use elsewhere does not mention; a release ("1.0" of "Horovod 1.0") is nothing alone
                ok = not _VERSION.fullmatch(piece[0]) and (
                    _stands_alone(piece[0]) or (not variant and named_there(piece[0])))
            else:
                ok = len(piece) < len(words) and evidence.phrase_found(" ".join(piece))
            if ok:
                reach[end] = True
                break
    return reach[-1]


def _release_met(evidence: Evidence, words: list[str], release: str) -> bool:
    """Does a passage holding the name's words write the release ("1.5" or "v1.5") right after one of them
    ("PyTorch v1.5" for "PyTorch DDP v1.5", "Gaudi(R) 2")? A "2" a few words on is a count or a citation."""
    return _written_beside(evidence, words, rf"v?{re.escape(release.lstrip('v'))}(?![\w]|\.\d)")


def _size_met(evidence: Evidence, words: list[str], size: str) -> bool:
    """Does a passage holding the name's words give the model this size, right after or right before one of them
    ("Megatron-Turing NLG 530B", "the 530-billion-parameter MT-NLG")?"""
    number = re.escape(size[:-1]) + _SIZE_WORDS[size[-1]]
    return _written_beside(evidence, words, rf"{number}(?![\w])", rf"(?<![\w.]){number}(?:[\s\-]?param(?:eter)?s?)?")


def _written_beside(evidence: Evidence, words: list[str], after: str, before: str | None = None) -> bool:
    """Does a stored passage holding the name's words write ``after`` right after one of them (a trademark sign
    and up to three marks between), or ``before`` right before one? A name with no word to write it beside: never."""
    named = "|".join(re.escape(w) for w in words if tokenize(w)) or "(?!)"
    sides = [rf"(?:{named}){MARK}[^\w\n]{{0,3}}{after}"] + ([rf"{before}[^\w\n]{{0,3}}(?:{named})"] if before else [])
    return evidence.stored_match(tuple(tokenize(" ".join(words))), re.compile("|".join(sides), re.I))


@per_version
def _by_initial(version: IndexVersion) -> dict[str, list[str]]:
    """The index's terms by first letter: a misspelt name's part is matched against those sharing its
    first letter, and scanning the whole vocabulary for them cost 10 ms a part."""
    out: dict[str, list[str]] = {}
    for term in version.lexical.vocabulary():
        out.setdefault(term[:1], []).append(term)
    return out


def _shape(text: str) -> str:
    return re.sub(r"[a-z]+", "a", re.sub(r"[A-Z]+", "A", re.sub(r"\d+", "9", text)))


def _near(version: IndexVersion, name: str, hits: Sequence[Hit],
          concept: Callable[[str], bool]) -> tuple[str | None, str | None]:
    """The spelling in the index closest to ``name`` ("Megatron-LM" for "Megatron-LN") and a document holding it.

    Only spans that look like names themselves are offered: "Lightning from" is no spelling of
    "Lightning Fabric".
    """
    vocab = version.lexical.vocabulary()
    terms: list[str] = []
    for t in tokenize(name):
        if t in vocab:
            terms.append(t)
        else:  # a misspelt part: the closest indexed term of about its length
            pool = [v for v in _by_initial(version).get(t[:1], ()) if abs(len(v) - len(t)) <= 2]
            terms.extend(difflib.get_close_matches(t, pool, n=2, cutoff=0.7))
    texts = [(h.doc_id, f"{h.title}\n{h.text}") for h in hits]
    if terms:
        texts += row_texts(version, rows_with(version, terms, every=False)[:60])
    target, shape = name.lower(), _shape(name)
    capitals = not any(ch.islower() for ch in name)
    width = len(name.split())
    best: tuple[float, bool, str, str] | None = None
    looks_like: dict[str, bool] = {}  # the same words recur over the texts; each costs a lexicon lookup
    ratios: dict[str, float] = {}

    def namey(word: str) -> bool:
        got = looks_like.get(word)
        if got is None:
            got = looks_like[word] = (word != word.lower() or bool(re.search(r"[\d+_]", word))
                                      or not (english_word(word) or concept(word)))
        return got

    for doc_id, text in texts:
        words = list(_WORD.finditer(text))
        named = [namey(w.group(0)) for w in words]
        for n in {max(1, width - 1), width, width + 1}:
            for k in range(len(words) - n + 1):
                if not all(named[k : k + n]):
                    continue
                span = text[words[k].start() : words[k + n - 1].end()]
                low = span.lower()
                if 2 * min(len(low), len(target)) < NEAR_RATIO * (len(low) + len(target)) or low == target:
                    continue  # difflib's real_quick_ratio, without building a matcher
                gaps = (text[words[i].end() : words[i + 1].start()] for i in range(k, k + n - 1))
                if any(g != " " for g in gaps):
                    continue
                if low not in ratios:  # the same span recurs over the texts
                    matcher = difflib.SequenceMatcher(None, target, low)
                    ratios[low] = matcher.ratio() if matcher.quick_ratio() >= NEAR_RATIO else 0.0
                key = (ratios[low], _shape(span) == shape)
                if capitals and not key[1]:
                    continue  # an acronym's nearest is an acronym: "Tal" (an author) is no spelling of "TACCL"
                if key[0] >= NEAR_RATIO and (best is None or key > best[:2]):
                    best = (*key, span, doc_id)
    return (best[2], best[3]) if best else (None, None)


def unknown_names(version: IndexVersion, question: str, hits: Sequence[Hit] = ()) -> list[Unknown]:
    """The names ``question`` uses that no document of ``version`` mentions, each with its nearest spelling.

    ``hits`` (the passages the question retrieved) are read first, which settles most phrases
    without going to the store.
    """
    out: list[Unknown] = []
    evidence = Evidence(version, hits)
    concept = concepts(version)
    for name in candidate_names(question, concept):
        if _mentioned(evidence, name):
            continue
        near, doc = _near(version, name, hits, concept)
        out.append(Unknown(name, near, doc))
    return out


def name_refusal(version: IndexVersion, unknown: Sequence[Unknown], hits: Sequence[Hit],
                 n: int = 3) -> tuple[str, list[Citation]]:
    """The refusal ("the knowledge base has nothing on X; nearest: …") and the documents it lists.

    The nearest are the document holding the closest spelling, then the documents the question
    retrieved: what a user may ask about instead.
    """
    cites: list[Citation] = []
    seen: set[str] = set()
    near_doc = next((u.near_doc for u in unknown if u.near_doc in version.docs), None)
    if near_doc is not None:
        d = version.docs[near_doc]
        first = next((h for h in hits if h.doc_id == near_doc), None)
        cites.append(Citation(n=1, url=d.link, title=d.title, page=first.page if first else None, quote="",
                              doc_id=d.doc_id, chunk_id=first.chunk_id if first else "", venue=d.venue,
                              year=d.year))
        seen.add(near_doc)
    for h in hits:
        if len(cites) == n:
            break
        if h.doc_id in seen:
            continue
        seen.add(h.doc_id)
        cites.append(Citation(n=len(cites) + 1, url=h.url, title=h.title, page=h.page, quote="", doc_id=h.doc_id,
                              chunk_id=h.chunk_id, venue=h.venue, year=h.year))
    names = " or ".join(u.name for u in unknown)
    nearest = [f"[{c.n}] {c.title}" for c in cites]
    nears = [u.near for u in unknown if u.near]
    if nears and cites and near_doc is not None:
        nearest[0] = f"{', '.join(dict.fromkeys(nears))} ({nearest[0]})"
    elif nears:
        nearest.insert(0, ", ".join(dict.fromkeys(nears)))
    text = f"The knowledge base has nothing on {names}"
    return (text + (f"; nearest: {', '.join(nearest)}." if nearest else ".")), cites
