"""What the app offers from the index before anyone asks: the filters' choices and example questions.

Both are read from the published version's document records, pure and without index access:
:func:`facets` gives the kinds, topics and years the filters list; :func:`example_candidates`
turns titles into questions a person would ask ("GPipe: Efficient Training of Giant Neural
Networks" → "How does GPipe train giant neural networks?"), and :func:`answers_example` says
whether an answer to one is about its subject (the service keeps only those).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from dmlqa.models import KINDS, Answer


class IndexDoc(Protocol):
    """What is read of an index's document record (a ``DocRecord``)."""

    doc_id: str
    title: str
    kind: str
    topics: tuple[str, ...]
    year: int | None
    is_card: bool
    n_chunks: int


# -- the filters' choices --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facets:
    """What the filters can offer, read from the published index."""

    kinds: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()  # most documents first
    years: tuple[int, int] | None = None


def facets(docs: Iterable[IndexDoc]) -> Facets:
    """The kinds (in :data:`~dmlqa.models.KINDS` order), topics (most documents first) and year span of ``docs``."""
    docs = list(docs)
    kinds = {d.kind for d in docs}
    topic_counts = Counter(t.strip() for d in docs for t in dict.fromkeys(d.topics) if t.strip())
    years = [d.year for d in docs if d.year]
    return Facets(
        kinds=tuple(k for k in KINDS if k in kinds) + tuple(sorted(kinds - set(KINDS))),
        topics=tuple(t for t, _ in sorted(topic_counts.items(), key=lambda kv: (-kv[1], kv[0].lower()))),
        years=(min(years), max(years)) if years else None,
    )


# -- example questions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """A candidate example question, the document it was made from, and the name it asks about."""

    question: str
    doc_id: str | None = None
    subject: str | None = None


#: List sections that name a kind of resource, not a subject ("Papers", "Horovod documentation").
_GENERIC_TOPIC_WORDS = {
    "papers", "paper", "resources", "resource", "references", "reference", "code", "frameworks", "framework",
    "projects", "project", "documentation", "docs", "tools", "libraries", "library", "misc", "miscellaneous",
    "other", "others", "general", "blogs", "blog", "tutorials", "videos", "courses", "talks", "books", "links",
    "related", "awesome", "contents", "contributing", "license", "news", "surveys", "survey", "open", "source",
}
#: Page titles that say what kind of page it is, not what it is about ("Getting Started", "Overview").
_GENERIC_TITLE_WORDS = {
    "overview", "introduction", "intro", "concepts", "concept", "features", "started", "start", "quickstart",
    "installation", "install", "installing", "faq", "api", "examples", "example", "tutorial", "tutorials", "guide",
    "guides", "summary", "contents", "index", "home", "readme", "documentation", "docs", "changelog", "release",
    "notes", "contributing", "license", "next", "steps", "welcome", "exercises", "reference", "references",
}
#: Words dropped in front of a nominal ("Efficient Training of …", "Auto Parallelization for …").
_ADJECTIVES = {
    "a", "an", "the", "and", "efficient", "fast", "faster", "easy", "simple", "scalable", "automatic", "automated",
    "auto", "high-performance", "high-throughput", "extremely", "flexible", "general", "generalized", "practical",
    "unified", "new", "novel", "dynamic", "adaptive", "optimal", "system", "systems",
}
#: Nouns of action a title is built on, and their verbs ("Memory Optimizations" → "optimize memory").
_NOMINALS = {
    "optimization": "optimize", "optimizations": "optimize", "management": "manage", "parallelization": "parallelize",
    "partitioning": "partition", "scheduling": "schedule", "compression": "compress", "rematerialization":
    "rematerialize", "offloading": "offload", "sharding": "shard", "checkpointing": "checkpoint", "swapping": "swap",
    "tuning": "tune", "training": "train", "placement": "place", "synchronization": "synchronize",
    "recomputation": "recompute", "quantization": "quantize", "pruning": "prune", "caching": "cache",
    "balancing": "balance", "acceleration": "accelerate",
}
_NOT_GERUNDS = {"learning", "computing", "processing", "programming", "networking", "getting", "string", "during",
                "everything", "nothing", "something", "thing", "things", "king", "spring", "ring", "bring"}
_IRREGULAR = {"us": "use", "reus": "reuse", "mak": "make", "tak": "take", "hav": "have", "giv": "give", "sav": "save",
              "tun": "tune", "scal": "scale", "schedul": "schedule", "shar": "share", "stor": "store", "fus": "fuse",
              "writ": "write", "compar": "compare", "achiev": "achieve", "improv": "improve", "mov": "move",
              "remov": "remove", "leverag": "leverage", "manag": "manage", "overcom": "overcome", "prun": "prune",
              "pipelin": "pipeline", "cach": "cache", "combin": "combine", "serv": "serve", "solv": "solve",
              "resolv": "resolve", "increas": "increase", "decreas": "decrease", "encod": "encode", "decod": "decode",
              "releas": "release", "rul": "rule", "rethink": "rethink"}
#: Imperative page titles ("Run Horovod", "Analyze Performance") become "How do I …?".
_IMPERATIVES = {"run", "analyze", "analyse", "install", "use", "configure", "deploy", "launch", "restore", "debug",
                "monitor", "train", "tune", "scale", "profile", "choose", "save", "load", "enable", "migrate"}
#: Where an object phrase ends ("… giant neural networks using pipeline parallelism" → "giant neural networks").
_CUT_WORDS = {"for", "via", "using", "with", "through", "toward", "towards", "at", "on", "in", "into", "from", "by",
              "without", "that", "which"}
_GITHUB_TITLE = re.compile(r"^GitHub\s*-\s*[\w.-]+/([\w.-]+)\s*(?::\s*(.*))?$", re.IGNORECASE)
_NAME_RE = re.compile(r"[A-Za-z][\w+.\-]*(?: [A-Z0-9][\w+.\-]*){0,2}")
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*(?:-[A-Za-z][a-z]*)*|\d[A-Z]|[a-z]+")
#: Characters an example never contains: markup, and markdown's emphasis and links.
_MARKUP = re.compile(r"[<>\"`*_\[\]{}|\\]")
_URLISH = re.compile(r"/|\bwww\.|\.(?:com|org|io|ai|net|html?|md)\b", re.IGNORECASE)


def _base_verb(word: str) -> str | None:
    """``Breaking`` → ``break``, ``Democratizing`` → ``democratize``; None when not a verb in -ing form."""
    w = word.lower().strip(",;:.")
    if not w.endswith("ing") or not w.isalpha() or w in _NOT_GERUNDS:
        return None
    stem = w[:-3]
    if len(stem) < 2 or not re.search(r"[aeiouy]", stem):
        return None
    if stem in _IRREGULAR:
        return _IRREGULAR[stem]
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsfz":  # running → run
        return stem[:-1]
    if stem.endswith(("iz", "yz", "at", "ut", "uc", "ac", "ic", "bl", "pl", "tl", "dl", "gl", "kl", "rg", "rv", "iv",
                      "av", "ov", "ag", "ur")):  # reducing → reduce, handling → handle
        return stem + "e"
    return stem


def _is_plural(word: str) -> bool:
    w = word.lower()
    return w.endswith("s") and not w.endswith(("ss", "is", "us", "ism", "ics"))


def _lower(words: Sequence[str], keep: set[str]) -> str:
    """Title Case words in lower case, as a person types them; names, acronyms and numbers kept."""
    out = []
    for w in words:
        parts = w.split("-")
        if (w in keep or any(p in keep for p in parts)
                or any(ch.isupper() or ch.isdigit() for p in parts for ch in p[1:]) or any(c.isdigit() for c in w)):
            out.append(w)
        else:
            out.append(w.lower())
    return " ".join(out)


def _object(words: Sequence[str], keep: set[str], *, cut: bool = True, max_words: int = 8) -> str | None:
    """The phrase a verb takes: up to a comma, a preposition (with ``cut``), at most ``max_words``."""
    out: list[str] = []
    for w in words:
        bare = w.strip(",;:.!?()\"'")
        if not bare:
            break
        if cut and out and bare.lower() in _CUT_WORDS:
            break
        if bare.lower() in ("your", "you"):
            bare = {"your": "my", "you": "me"}[bare.lower()]
        out.append(bare)
        if w.rstrip().endswith((",", ";", ":")):
            break
    while out and out[-1].lower() in ("and", "or", "of", "the", "a", "an", "to", "with", "for", "in", "on"):
        out.pop()
    if not out or len(out) > max_words:
        return None
    return _lower(out, keep)


def _split_title(title: str) -> tuple[str | None, str]:
    """(name, description) of ``Name: description`` or ``GitHub - owner/name: description`` titles."""
    t = " ".join(title.split())
    m = _GITHUB_TITLE.match(t)
    if m:
        return m.group(1), (m.group(2) or "").strip()
    for sep in (":", " - ", " – ", " — "):
        head, found, tail = t.partition(sep)
        if found:
            head = re.sub(r"^(?:Meet|Introducing|Announcing)\s+", "", head.strip())
            if (_NAME_RE.fullmatch(head) and any(ch.isupper() for ch in head)
                    and not {w.lower() for w in re.findall(r"[A-Za-z]+", head)} & _GENERIC_TITLE_WORDS):
                return head, tail.strip()
            break
    return None, t


def _named_question(name: str, desc: str, keep: set[str]) -> str | None:
    """A question about what the system ``name`` does, from its title's description (None: no pattern fits)."""
    does = "do" if " " in name and _is_plural(name.split()[-1]) else "does"
    words = desc.split()
    if not words:
        return None
    verb = _base_verb(words[0])
    if verb and verb != "get":  # "breaking the GPU memory wall for …" → "break the GPU memory wall"
        obj = _object(words[1:], keep)
        return f"How {does} {name} {verb} {obj}?" if obj else None
    for i, w in enumerate(words[:5]):  # "Memory Optimizations Toward …" → "optimize memory"
        verb = _NOMINALS.get(w.lower().strip(",;"))
        if verb is None:
            continue
        mods = [m for m in words[:i] if m.lower() not in _ADJECTIVES]
        rest = words[i + 1 :]
        obj = None
        if rest and rest[0].lower() == "of":
            obj = _object(rest[1:], keep)
        elif mods and (not rest or rest[0].lower() in _CUT_WORDS):
            obj = _lower(mods[-2:], keep)
        elif not mods and rest and rest[0].lower() in ("for", "toward", "towards"):
            obj = _object(rest[1:], keep)
        if obj:
            return f"How {does} {name} {verb} {obj}?"
        break
    m = re.search(r"\b(?:using|via)\s+(.+)$", desc, re.IGNORECASE)
    obj = _object(m.group(1).split(), keep, max_words=4) if m else None
    return f"How {does} {name} use {obj}?" if obj else None


def _framework(d: IndexDoc) -> str | None:
    """The project a documentation page belongs to, from its list section ("Horovod documentation")."""
    for t in d.topics:
        m = re.fullmatch(r"\s*(.+?)\s+(?:documentation|docs)\s*", t, re.IGNORECASE)
        if m and len(m.group(1).split()) <= 3:
            return m.group(1)
    return None


def _docs_question(title: str, fw: str, keep: set[str]) -> str | None:
    """A question from a documentation page's title, asked about its project ``fw``."""
    t = " ".join(title.split())
    words = t.split()
    lowered = {w.lower() for w in re.findall(r"[A-Za-z]+", t)}
    if not words or len(words) > 8 or lowered & _GENERIC_TITLE_WORDS or _URLISH.search(t) or ":" in t:
        return None
    has_fw = fw.lower() in t.lower()
    m = re.fullmatch(r"(\S+(?: \S+){0,2}) (with|on) (\S+(?: \S+){0,2})", t)
    if m and not _base_verb(words[0]):  # "Horovod with PyTorch", "AdaSum with Horovod", "Horovod on Ray"
        return f"How do I use {m.group(1)} {m.group(2)} {m.group(3)}?"
    verb = _base_verb(words[0])
    if verb and verb != "get":  # "Handling Failures and Node Preemption"
        obj = _object(words[1:], keep, cut=not has_fw)
        if not obj:
            return None
        return f"How can I {verb} {obj}?" if has_fw else f"How does {fw} {verb} {obj}?"
    if words[0].lower() in _IMPERATIVES:  # "Run Horovod", "Analyze Performance"
        obj = _object(words[1:], keep, cut=False)
        if not obj:
            return None
        return f"How do I {words[0].lower()} {obj}?" if has_fw else f"How do I {words[0].lower()} {obj} in {fw}?"
    if has_fw:  # "Elastic Horovod"
        return f"What is {t}?" if len(words) <= 4 else None
    if len(words) == 1:
        if t in keep:  # another project's name: "Horovod" in the Ray Train docs
            return f"How do I use {t} with {fw}?"
        return f"What is {t} in {fw}?" if re.fullmatch(r"[A-Za-z][\w+\-]*", t) else None
    if len(words) > 5 or not all(_PLAIN_WORD.fullmatch(w) for w in words):
        return None
    head = words[words.index("of") - 1] if "of" in words[1:] else words[-1]
    return f"What {'are' if _is_plural(head) else 'is'} {_lower(words, keep)} in {fw}?"


def _topic_question(topic: str) -> str | None:
    """``Pipeline Parallelism`` → ``What is pipeline parallelism?`` (only sections that name a technique)."""
    words = re.findall(r"[A-Za-z]+", topic)
    if (len(words) < 2 or len(words) > 3 or "/" in topic or "&" in topic
            or {w.lower() for w in words} & (_GENERIC_TOPIC_WORDS | {"and", "or", "training", "learning"})):
        return None
    if not words[-1].lower().endswith(("ism", "tion", "ing")):
        return None
    return f"What is {' '.join(w if w.isupper() and len(w) > 1 else w.lower() for w in topic.split())}?"


def example_candidates(docs: Iterable[IndexDoc]) -> list[Example]:
    """Questions a person would ask that the index should answer, made from its documents, best first.

    * a title ``Name: description`` gives a question about what ``Name`` does, read from the
      description (``ZeRO: Memory Optimizations Toward …`` → "How does ZeRO optimize memory?",
      ``GPipe: Efficient Training of Giant Neural Networks …`` → "How does GPipe train giant neural
      networks?"), else "How does Name work?";
    * a documentation page's title, asked about its project ("Tensor Fusion" in the Horovod docs →
      "What is tensor fusion in Horovod?", "Handling Failures …" in the Ray Train docs → "How does
      Ray Train handle failures …?");
    * a paper title that opens with a verb ("Reducing Activation Recomputation in …" → "How can I
      reduce activation recomputation in …?");
    * a list section naming a technique that several documents share ("What is pipeline parallelism?").

    The four kinds alternate so that the first few candidates cover different documents; catalog
    cards (no text) and titles that are URLs or file paths give nothing. Pure: no index access.
    """
    full = sorted((d for d in docs if not d.is_card), key=lambda d: (d.kind != "paper", -(d.n_chunks or 0), d.title))
    names: dict[str, IndexDoc] = {}
    for d in full:
        name, _ = _split_title(d.title)
        if name:
            names.setdefault(name.lower(), d)
    # Words kept as written (case-sensitive): the names, their first words ("Megatron" of
    # Megatron-LM) and the projects; every other Title Case word is lower-cased.
    keep = {n for d in full if (n := _split_title(d.title)[0] or _framework(d))}
    keep |= {re.split(r"[-\s]", n)[0] for n in keep}

    specific: list[Example] = []
    plain: list[Example] = []
    titled: list[Example] = []
    by_fw: dict[str, list[Example]] = {}
    used: set[str] = set()
    for d in full:
        fw = _framework(d)
        name, desc = _split_title(d.title)
        if name and name.lower() not in used:
            used.add(name.lower())
            q = _named_question(name, desc, keep)
            if q:
                specific.append(Example(q, d.doc_id, name))
            elif len(name) <= 30:
                does = "do" if " " in name and _is_plural(name.split()[-1]) else "does"
                plain.append(Example(f"How {does} {name} work?", d.doc_id, name))
            continue
        if name:
            continue
        if fw and d.kind == "docs":
            q = _docs_question(d.title, fw, keep)
            if q and not _MARKUP.search(q):
                by_fw.setdefault(fw, []).append(Example(q, d.doc_id, fw))
            continue
        words = d.title.split()
        verb = _base_verb(words[0]) if words and not _URLISH.search(d.title) else None
        if verb and verb != "get" and d.kind == "paper":
            obj = _object(words[1:], keep, cut=False, max_words=7)
            if obj:
                titled.append(Example(f"How can I {verb} {obj}?", d.doc_id))
        elif d.kind == "paper" and 2 <= len(words) <= 4 and all(_PLAIN_WORD.fullmatch(w) for w in words) and (
                words[-1].lower() in _NOMINALS or words[-1].lower().endswith(("ism", "tion", "ing"))):
            titled.append(Example(f"What is {_lower(words, keep)}?", d.doc_id))  # "Dynamic Tensor Rematerialization"

    docs_qs: list[Example] = []  # one page per project in turn: the largest projects first
    queues = sorted(by_fw.values(), key=len, reverse=True)
    while any(queues):
        for queue in queues:
            if queue:
                docs_qs.append(queue.pop(0))

    counts = Counter(t.strip() for d in full for t in dict.fromkeys(d.topics) if t.strip())
    topic_qs = [Example(q) for t, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].lower()))
                if n >= 2 and (q := _topic_question(t))]

    groups = [[e for e in g if not _MARKUP.search(e.question)] for g in (specific + plain, docs_qs, titled, topic_qs)]
    out: list[Example] = []
    seen: set[str] = set()
    for i in range(max(map(len, groups), default=0)):
        for group in groups:
            if i < len(group) and group[i].question.lower() not in seen:
                seen.add(group[i].question.lower())
                out.append(group[i])
    return out


def answers_example(example: Example, answer: Answer) -> bool:
    """Whether ``answer`` answers the example question: not refused, cited, and about its subject."""
    if answer.refused or not answer.citations:
        return False
    if example.doc_id is None and example.subject is None:
        return True
    if any(c.doc_id == example.doc_id for c in answer.citations):
        return True
    subject = (example.subject or "").lower()
    return bool(subject) and (subject in answer.answer.lower() or any(subject in (c.title or "").lower()
                                                                      for c in answer.citations))
