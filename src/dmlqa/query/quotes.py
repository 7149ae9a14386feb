"""What an extractive answer quotes, and how it reads: the third step after :mod:`dmlqa.query.extractive`
gathered and the selector rated the candidate sentences.

:func:`choose`: the answer leads with the best sentence; further ones follow while the model rates them
above its learned cut and the answer stays short. What is left as rules is about *reading*, not
relevance: no heading, caption or legend is quoted; a sentence leaning on the one before ("It uses ...")
comes with it or not at all; a sentence announcing a list or code comes with it, and a code line with
the sentence announcing it; a table row comes with its header row. :func:`dmlqa.query.compose.compose` writes
the chosen sentences out with one ``[n]`` per document page; :func:`dmlqa.query.answer.llm_context` gives the LLM
the same candidates, read by :func:`readable` too.

Sentences are whole, from the document (never cut at a chunk boundary; see
:mod:`dmlqa.extract.sentences`); the source's reference markers are removed from the quoted text,
so the only bracketed numbers in an answer are its own citations, one per document page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np

from dmlqa.extract.boundaries import ends_sentence
from dmlqa.extract.leaning import leans_forward, marker_subject
from dmlqa.extract.quoting import for_answer
from dmlqa.extract.sentences import (
    ITEM,
    LISTING,
    PROSE,
    QUOTED_CODE,
    ROW,
    SNIPPET,
)
from dmlqa.extract.tables import row_parts
from dmlqa.extract.textscan import code_comment
from dmlqa.index.lexical import tokenize
from dmlqa.query.english import english_word
from dmlqa.query.extractive import Candidate
from dmlqa.query.features import asked_kinds, furniture, refers_back, standalone, title_like
from dmlqa.query.glued import heading_end

#: Word budget of an answer when none is given: a further sentence is added only while the answer stays
#: within it (the best sentence's block is always kept). The shipped selector carries the budget chosen
#: with it by cross-validation (:attr:`dmlqa.query.selector.Selector.max_words`).
MAX_WORDS = 90
#: At most this many sentences (list items and table rows count one each) when none is given. The word
#: budget is what keeps an answer short; this only stops a run of one-line items. Cross-validated on
#: bench/train's 706 questions, 8 rather than 5 stated a key term for 5 more (0.698 → 0.705, median 83 → 86 words):
#: with 5, short items that hold the answer were cut while words were left.
MAX_SENTENCES = 8
#: A sentence the previous answer quoted goes last only when a new one scores at least this share of it:
#: a follow-up whose answer the last answer already held gets it again rather than a poor new sentence.
AVOID_RATIO = 0.5
#: How far back a chain of sentences leaning on their predecessors is followed.
LEAN_BACK_STEPS = 2
#: How far back from a table row its header row is looked for: a row further down than this from the top of its
#: table has no header it can be read under (a leaderboard's 18th row is not read under its 7th).
HEADER_STEPS = 64
#: A sentence announcing what follows ("... details are as follows:") whose list, code or next sentence is not
#: stored is still quoted when it has this many words: what it says before the colon may be the answer
#: ("The default process group has a world size of 8 and details are as follows:").
ANNOUNCER_STATES = 8
#: A sentence that points at a table: the table's best-matching row is quoted with it.
_REFERS_TABLE = re.compile(r"\bTable\s+[\dIVX]+\b|\b(?:the )?(?:following|below) table\b|\btable below\b")


# -- choosing -------------------------------------------------------------------------------------------


def readable(c: Candidate | None) -> bool:
    """Prose or a list item that is no heading, caption or legend (nor carries one glued on)."""
    return c is not None and c.role in (PROSE, ITEM) and not furniture(c.text) and not marker_subject(c.text)


def _run_above(c: Candidate, steps: int, neighbour: Callable[[Candidate, int], Candidate | None],
               ) -> tuple[Candidate | None, Candidate | None] | None:
    """Up from ``c`` over the sentences of its role and section (two lines not stored at most between them): the
    run's first one (None: ``c`` is) and the stored sentence ending the run (None: three lines not stored do).
    None when the run goes on past ``steps``: a table's or a list's rows and items, walked up to its top."""
    top, gap = None, 0
    for step in range(1, steps + 1):
        prev = neighbour(c, -step)
        if prev is None:
            gap += 1
            if gap > 2:
                return top, None
            continue
        if prev.role != c.role or prev.section != c.section:
            return top, prev  # a heading between two tables is not stored, but it starts a section
        top, gap = prev, 0
    return None


def _header_of(row: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> Candidate | None:
    """The first row of the table ``row`` is in (its header): a row alone does not say what its columns
    are. Rows between them that are not stored (a markdown separator) are skipped, two at most, but not a
    heading: a row of another section is another table's. None when the table runs on past HEADER_STEPS rows:
    the row reached there is a row of data, no header."""
    run = _run_above(row, HEADER_STEPS - 1, neighbour)
    return None if run is None else run[0]


#: How many list items or code lines after it a sentence may announce.
ANNOUNCED_STEPS = 6
#: A bracketed number, which in an answer is a citation marker.
_INDEX_MARK = re.compile(r"\[\d{1,3}\]")


def _announced(c: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> list[Candidate]:
    """What a sentence announces: the list items or code lines after it (for a sentence ending in ':'
    with no list, the next prose sentence); code lines after a comment or a short command run."""
    got: list[Candidate] = []
    for step in range(1, ANNOUNCED_STEPS + 1):
        nxt = neighbour(c, step)
        if nxt is None and (got or step == 1):
            continue  # a line between two items, or a code block's opening fence, that is not stored
        if nxt is None or nxt.role not in (ITEM, SNIPPET) or (not leans_forward(c.text) and nxt.role != SNIPPET):
            break
        if nxt.role == SNIPPET and _INDEX_MARK.search(nxt.text):
            break  # code is quoted as written: its "x[1]" would read as a citation of the answer
        got.append(nxt)
    if not got and leans_forward(c.text):
        nxt = neighbour(c, 1)
        if readable(nxt):
            got.append(nxt)
    return got


#: A list item of at most BARE_ITEM_WORDS words, naming no label ("- Python: 3.6 or higher" does), says nothing alone
#: ("- Spectrum MPI", "- NCCL >= 2.0"): it is quoted under the sentence leading into its list, looked for at most
#: LIST_STEPS sentences back, or not at all.
BARE_ITEM_WORDS, LIST_STEPS = 4, 16


def _bare(c: Candidate) -> bool:
    """Is ``c`` a list item of :data:`BARE_ITEM_WORDS` words or fewer (its bullet not counted), naming no label?"""
    words = c.text.split() or [""]
    return c.role == ITEM and ": " not in c.text and len(words) - (words[0] in ("-", "•", "*")) <= BARE_ITEM_WORDS


def _labels_code(c: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> bool:
    """Is a code block right under the item ("- DistributedOptimizer" over its listing): it names the code."""
    nxt = neighbour(c, 1) or neighbour(c, 2)  # the block's opening fence is not stored
    return nxt is not None and nxt.role in QUOTED_CODE


def _list_lead(c: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> Candidate | None:
    """The sentence leading into the list a list item is in ("Usage of horovodrun requires one of the following:"),
    over the items before it and lines not stored; None when no sentence of its section that reads alone does."""
    run = _run_above(c, LIST_STEPS, neighbour)
    lead = None if run is None else run[1]
    ok = lead is not None and lead.section == c.section and readable(lead) and standalone(lead.text)
    return lead if ok else None


def opens_in_english(text: str) -> bool:
    """Does ``text`` open on an English word in lower case ("waiting", "a"), not on a name ("fully_shard", "exo",
    "x[1]")?"""
    first = re.match(r"[a-z]+\b(?![_.\-(\[])", text)
    return first is not None and (first.group() == "a" or english_word(first.group()))


def _fragment(text: str) -> bool:
    """Does the sentence open on an English word in lower case ("a baseline by training ...", "depth, number of
    heads ... are all smaller"; not "exo is ..."): the rest of a sentence whose opening the text layer lost?"""
    return opens_in_english(text[heading_end(text):].lstrip("\"'“("))


#: A section's heading over a sentence leaning on it is named before the quote when it has at most this many words.
UNDER_WORDS = 8
#: "This schedule ...", "These plugins ...": a demonstrative before a noun, which a heading can name. Not "This is
#: ...", "This requires ..." nor "These include ...": the pronoun stands for what was said or shown before (a code
#: block under the heading, often), which the heading does not carry. A word after "This" ending in "s" is read as a
#: verb ("This process" is lost with "This reduces"); after "These", one not ending in "s" is.
_DEMONSTRATIVE = re.compile(r"^(?:(?:This|That) (?!(?:is|was|can|could|will|would|may|might|must|should|shall|does|"
                            r"did|had|has|made|led|let|lets|said|in|on|of|to|for|with|by|from|at|as|and|or|but|not|"
                            r"also|only|just|way)\b)[a-z][a-z-]*[a-rt-z]|(?:These|Those) (?!(?:are|were|can|could|will|"
                            r"would|may|might|must|should|do|did|had|has|have|include|includes)\b)[a-z][a-z-]*s)\b")


def _named_heading(c: Candidate) -> str | None:
    """``c``'s section heading when an answer can name it before a quote: there is one, of :data:`UNDER_WORDS` words
    or fewer (its colon left out)."""
    under = (c.section or "").strip().rstrip(":").strip()
    return under if under and len(under.split()) <= UNDER_WORDS else None


def _heading_over(c: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> str | None:
    """The heading ``c`` is read under when ``c`` opens its section with a demonstrative the heading answers ("This
    schedule requires ..." first under "Interleaved Schedule", "This test strong scales ..." under "Strong Scaling
    Results"): a web page's or README's heading (a PDF's sections are not stored by name), short, no sentence. The
    answer names it before the quote (:func:`dmlqa.query.compose.compose`). None otherwise: a sentence later in
    the section leans on the one before, which the heading does not carry."""
    under = _named_heading(c)
    rest = c.text[heading_end(c.text):]
    if under is None or ends_sentence(under) or not _DEMONSTRATIVE.match(rest):
        return None
    if not standalone("The" + rest[rest.index(" "):]):  # the determiner alone is what the heading answers
        return None  # it leans on more than its opening ("This method, as above, ...")
    prev = neighbour(c, -1)
    return under if prev is None or prev.section != c.section else None


def _block(c: Candidate, question_tokens: set[str], pool: Sequence[Candidate],
           neighbour: Callable[[Candidate, int], Candidate | None], *, names: bool = False,
           titles: Mapping[str, str] | None = None) -> list[Candidate] | None:
    """The sentences quoting ``c`` takes, in reading order, or None when it cannot be quoted readably. ``names``: the
    question asks for a name, which a short list item may be all of. ``titles``: the documents' titles, by id (see
    :func:`_under`)."""
    if c.role == ROW:
        if row_parts(c.text) is not None:
            return [c]  # a PDF table's row names its table and columns: it reads alone
        head = _header_of(c, neighbour)
        if head is not None and head.text.startswith("|") and neighbour(head, 1) is not None:
            return None  # a markdown header stands over its unstored |---| line: this "top" is a row of data
        return None if head is None else [head, c]
    if c.role == LISTING:  # a line of a listing comes under the sentence (or comment) saying what the code is
        if _INDEX_MARK.search(c.text):
            return None  # as for an announced line (_announced): its "datasets[0]" reads as a citation marker
        return _under(c, question_tokens, pool, neighbour, titles)
    if c.role == SNIPPET:  # a code line comes with the sentence announcing it, which says what it is for
        prev, gap = c, False
        for step in range(1, ANNOUNCED_STEPS + 2):
            prev = neighbour(c, -step)
            if prev is None and not gap:
                gap = True  # the code block's opening fence, which is not stored
                continue
            if prev is None or prev.role != SNIPPET:
                break
        block = None if prev is None else _block(prev, question_tokens, pool, neighbour, titles=titles)
        return block if block is not None and any(b.ordinal == c.ordinal for b in block) else None
    if not readable(c):
        return None
    if _bare(c) and not names and not _labels_code(c, neighbour):
        lead = _list_lead(c, neighbour)
        return None if lead is None else [lead, c]
    block = [c]
    head = c
    for _ in range(LEAN_BACK_STEPS):  # "That is to say, ..." after "Though ..." after the fact
        if not refers_back(head.text):
            break
        prev = neighbour(head, -1)
        if not readable(prev) or prev.section != head.section or _fragment(head.text) and ends_sentence(prev.text):
            # "However, ..." after a heading reads alone; "It ..." does not (below); nor does "a baseline by
            # training ..." after a sentence that ended: its opening was lost at a page or column break. The
            # last sentence of the section before is about something else: the heading between is what it leans on
            break
        block.insert(0, prev)
        head = prev
    if not standalone(block[0].text) and (under := _heading_over(block[0], neighbour)) is not None:
        block[0] = replace(block[0], under=under)  # "This schedule requires ..." reads under "Interleaved Schedule"
    while block and block[0].under is None and not standalone(block[0].text):
        # the chain back ends on a sentence leaning on more than we carry ("This improvement ..."): the
        # quote starts after it ("For example, DeepSpeed attains 64 teraflops ..." reads alone), or, when
        # the sentence itself cannot be read alone ("It ..."), there is none
        block.pop(0)
    if not block:
        return None
    announced = _announced(c, neighbour)
    if leans_forward(c.text) and not announced and len(c.text.split()) < ANNOUNCER_STATES:
        return None  # "The major components are:" says nothing without what it announces
    block += announced
    if _REFERS_TABLE.search(c.text):  # the row of the table it points at that holds most question terms
        rows: list[tuple[Candidate, Candidate | None]] = []  # each row with the header it is read under
        for r in (r for r in pool if r.role == ROW and r.doc_id == c.doc_id):
            if row_parts(r.text) is not None:  # a PDF table's row carries its headers
                rows.append((r, None))
            elif (h := _header_of(r, neighbour)) is not None:  # a header row is no row of figures
                rows.append((r, h))
        best = max(rows, key=lambda rh: len(set(tokenize(rh[0].text)) & question_tokens), default=None)
        if best is not None and set(tokenize(best[0].text)) & question_tokens:
            block += [best[0]] if best[1] is None else [best[1], best[0]]
    return block


#: How far back from a line of a listing the sentence over its code block (or a comment in it) is looked for.
LISTING_STEPS = 60


def _under(c: Candidate, question_tokens: set[str], pool: Sequence[Candidate],
           neighbour: Callable[[Candidate, int], Candidate | None],
           titles: Mapping[str, str] | None = None) -> list[Candidate] | None:
    """A LISTING line's quote: the comment right above it in its code, or else the sentence right over the
    block, then the line (the code between is left out); or the line alone, read under its section's heading,
    for a block right under that heading ("3.4 Do forward" over ``p.Forward()``), when the heading names something
    the question asks about: the heading is all that says what the line is for, and "Under “Examples”:" over a
    flag says nothing of why it answers. A word the heading shares with its document's title (``titles``) does not
    count: every heading of a page is about what the page is about, so "Under “1.2 Get mxnet and build”:" over a
    build command of the MXNet Go bindings' README says nothing of a question about MXNet. Lines of code not stored
    (the fence, long lines, short comments) and comments over other lines are stepped over; any other stored
    sentence ends the search."""
    prev = _over(c, neighbour)
    if prev is None or prev.section != c.section:  # nothing stored over the block in its section: its heading
        under = _named_heading(c)
        if not under:
            return None
        shared = (set(tokenize(under)) & question_tokens) - set(tokenize((titles or {}).get(c.doc_id, "")))
        return [replace(c, under=under)] if shared else None
    if prev.role not in (PROSE, ITEM):
        return None
    block = _block(prev, question_tokens, pool, neighbour, titles=titles)
    if block is None:
        return None
    if any(b.ordinal == c.ordinal for b in block):
        return block  # announced by it after all
    return [b for b in block if b.ordinal <= prev.ordinal] + [c]


def _over(c: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> Candidate | None:
    """The stored sentence right over a LISTING line's code (or the comment right above the line), stepping over
    the block's unstored lines and its other code lines: what :func:`_under` quotes the line under."""
    for step in range(1, LISTING_STEPS + 1):
        prev = neighbour(c, -step)
        if prev is None or prev.role in QUOTED_CODE or step > 1 and code_comment(prev.text):
            continue  # a comment says what the line right under it does, not what the lines further down do
        return prev
    return None


#: A sentence sharing this much of its terms (Jaccard) with one already quoted says nothing new: two copies of a paper
#: differ in a ligature, a marker or a few words ("We deploy Capuchin in [a widely-used ...] Tensorflow ..."); a line
#: of code at SAME_CODE, its exact form being what it shows.
SAME_SENTENCE, SAME_CODE = 0.7, 0.8
#: A sentence of at least this many terms, every one of them in a sentence already quoted, says nothing new
#: either: a docs page's "Wrap the optimizer in hvd.DistributedOptimizer." under its longer list item.
CONTAINED_TERMS = 4


def _said(text: str, said: Sequence[set[str]], *, code: bool = False) -> bool:
    """Does a quoted sentence say this already (nearly the same terms, or all of its terms and more)? Not
    when this one holds a number or version the other lacks: two releases of a README ("g++-5 or above"
    and "g++-4.9 or above") differ in just that, and which one holds the answer is what the question asks.
    The source's reference markers ("[12]") are no figures: the arXiv and the proceedings copy number their
    references apart. A sentence announcing what follows ("To run on a machine with 4 GPUs:") is never
    contained in another: what it announces differs; nor is a line of ``code``, whose exact form is what
    it shows (a sentence naming "mpirun -np 16 -H ..." inline does not quote the command's lines)."""
    terms = set(tokenize(text))
    contained = len(terms) >= CONTAINED_TERMS and not code and not leans_forward(text)
    figures: set[str] | None = None
    for s in said:
        if len(terms & s) >= (SAME_CODE if code else SAME_SENTENCE) * len(terms | s) or contained and terms <= s:
            if figures is None:  # only for a near repeat: for_answer and tokenize cost 20 µs a candidate
                figures = {t for t in tokenize(for_answer(text)) if any(ch.isdigit() for ch in t)}
            if figures <= s:
                return True
    return False


def _words(block: Sequence[Candidate]) -> int:
    return sum(len(c.text.split()) for c in block)


def _announcer_alone(c: Candidate, block: list[Candidate], max_words: int) -> list[Candidate] | None:
    """``block`` up to ``c`` when ``c`` announces what follows it in the block and states something alone
    (:data:`ANNOUNCER_STATES` words or more) within ``max_words``; else None."""
    at = next((k for k, b in enumerate(block) if b.doc_id == c.doc_id and b.ordinal == c.ordinal), None)
    if at is None or not leans_forward(c.text) or len(c.text.split()) < ANNOUNCER_STATES:
        return None
    return block[:at + 1] if _words(block[:at + 1]) <= max_words else None


#: How many of the best-scored candidates :func:`choose` orders by marginal relevance when asked for diversity.
DIVERSE_TOP = 20


def _in_turn(rank: np.ndarray, heads: Sequence[int], diversity: float,
             vectors: Callable[[Sequence[int]], np.ndarray] | None) -> Iterator[int]:
    """Candidate indices in the order :func:`choose` tries them: by ``rank``, or, with ``diversity``, the
    :data:`DIVERSE_TOP` best by maximal marginal relevance against ``heads`` (which the caller extends with
    each sentence it takes, between the steps), then the rest by rank."""
    order = np.argsort(-rank, kind="stable")
    if diversity <= 0 or vectors is None or len(order) < 2:
        yield from order.tolist()
        return
    top = order[:DIVERSE_TOP]
    v = np.asarray(vectors(top.tolist()), np.float32)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
    near = v @ v.T
    at = {int(c): k for k, c in enumerate(top)}
    left = list(range(len(top)))
    while left:
        chosen = [at[h] for h in heads if h in at]
        gain = rank[top[left]] - (diversity * near[np.ix_(left, chosen)].max(axis=1) if chosen else 0.0)
        yield int(top[left.pop(int(np.argmax(gain)))])
    yield from order[DIVERSE_TOP:].tolist()


def _far_documents(cands: Sequence[Candidate], scores: np.ndarray, focus: float) -> set[str]:
    """The documents whose best candidate scores under ``focus`` times the best candidate's score."""
    best: dict[str, float] = {}
    for c, v in zip(cands, scores.tolist(), strict=True):
        if v > best.get(c.doc_id, -np.inf):
            best[c.doc_id] = v
    top = max(best.values())
    return {d for d, v in best.items() if v < focus * top}


def choose(question: str, cands: Sequence[Candidate], scores: np.ndarray, *,
           neighbour: Callable[[Candidate, int], Candidate | None] = lambda c, step: None,
           add_above: float = 0.5, avoid: set[str] = frozenset(), max_sentences: int = MAX_SENTENCES,
           max_words: int = MAX_WORDS, read_on: int = 0, diversity: float = 0.0, focus: float = 0.0,
           vectors: Callable[[Sequence[int]], np.ndarray] | None = None,
           titles: Mapping[str, str] | None = None) -> list[Candidate]:
    """The answer's sentences, in answer order: the best-scored quotable sentence's block first (with
    the ``read_on`` readable sentences after it), then the blocks of further sentences scoring at least
    ``add_above`` while the answer stays within ``max_words`` and ``max_sentences``, grouped by
    document in reading order.

    A line written as a title (a menu entry, a heading kept as a list item) is quoted only for a question
    asking for a name or a source, which such a line may be.

    ``avoid`` are sentences the previous answer quoted: ranked last when another sentence reaches
    ``add_above`` and :data:`AVOID_RATIO` of their score, so they are said again only when nothing
    else answers.

    ``diversity`` > 0 with ``vectors`` (the candidates' sentence vectors, by index): among the
    :data:`DIVERSE_TOP` best, the next sentence tried is the one whose score, less ``diversity`` times its
    greatest cosine with a sentence already chosen, is highest (maximal marginal relevance), so that the
    answer's few sentences do not all say one thing.

    ``focus`` > 0: a further sentence is taken only from a document whose best-scored candidate reaches
    ``focus`` times the best one's score: a document that is not about the question lends the answer no filler.

    ``titles``: the candidates' documents' titles, by id (what a code line's heading must say more than, to
    label it: :func:`_under`).
    """
    if not len(cands):
        return []
    rank = np.asarray(scores, np.float64)
    far = _far_documents(cands, rank, focus) if focus > 0 else set()  # by the scores, before what was said goes last
    repeated = np.array([c.text in avoid for c in cands], bool)
    if repeated.any() and (~repeated).any() and rank[~repeated].max() >= max(add_above,
                                                                            AVOID_RATIO * rank[repeated].max()):
        rank = rank - 2.0 * repeated  # something new answers nearly as well: what was said goes last
    qtokens = set(tokenize(question))
    # a line written as a title ("Smart Gradient Accumulation") answers only a question asking for a name
    named = asks_for_resource(question) or "name" in asked_kinds(question)
    blocks: list[list[Candidate]] = []
    taken: set[tuple[str, int]] = set()
    words = 0
    said: list[set[str]] = []
    heads: list[int] = []  # the candidates whose blocks were taken
    listed: set[tuple[str, object]] = set()  # the sentences (or headings) a line of a listing was quoted under
    for i in _in_turn(rank, heads, diversity, vectors):
        c = cands[i]
        if blocks and len(taken) >= max_sentences:
            break
        if blocks and (rank[i] < add_above or c.doc_id in far):
            continue
        if (c.doc_id, c.ordinal) in taken or _said(c.text, said, code=c.role in QUOTED_CODE):
            continue  # the same sentence in a second copy of the work (arXiv and proceedings) says nothing new
        if blocks and words + _words([c]) > max_words:
            continue  # its block holds it: over the budget before its neighbours are read
        heading = title_like(c.text) and c.role not in QUOTED_CODE  # "Total GPUs = TP × PP × DP" is no title
        block = None if heading and not named else _block(c, qtokens, cands, neighbour, names=named, titles=titles)
        over = None if block is None else (block[0].doc_id, block[0].under or block[0].ordinal)
        if block is None or c.role == LISTING and over in listed:
            continue  # one line of a listing under its sentence: more would quote the code line by line
        if c.role == LISTING:
            listed.add(over)
        block = [b for b in block if (b.doc_id, b.ordinal) not in taken]
        if blocks and (words + _words(block) > max_words or any(
                b.role == ROW and x.role == ROW and b.doc_id == x.doc_id for b in block for bl in blocks for x in bl)):
            continue  # over the budget, or a second row of a table already quoted
        if not blocks and _words(block) > 2 * max_words:
            # a best sentence that needs a page of context is no answer, unless the page is the list it announces
            # and it states something alone ("... can be categorized into three main components:"): then it alone
            block = _announcer_alone(c, block, max_words)
            if block is None:
                continue
        if not blocks:  # a passage often states the answer right after the sentence naming what was asked
            for _ in range(read_on):
                nxt = neighbour(block[-1], 1)
                if not readable(nxt):
                    break
                more = [nxt]
                if leans_forward(nxt.text):  # "The major components are:" comes with what it announces, or not at all
                    announced = _announced(nxt, neighbour)
                    if not announced:
                        break
                    more += announced
                if _words(block) + _words(more) > max_words:
                    break
                block += more
        blocks.append(block)
        heads.append(i)
        said += [set(tokenize(b.text)) for b in block]
        taken |= {(b.doc_id, b.ordinal) for b in block}
        words += _words(block)
    if not blocks:
        return []
    lead, rest = blocks[0], [b for bl in blocks[1:] for b in bl]
    # the lines of a listing quoted under a sentence of the lead follow it, not the rest in reading order: "Run
    # the following commands to install KubeSphere ...:" then its command, which is too long to be announced
    lead_at = {(x.doc_id, x.ordinal) for x in lead}
    follow = [c for c in rest if c.role == LISTING and (over := _over(c, neighbour)) is not None
              and (over.doc_id, over.ordinal) in lead_at]
    rest = [c for c in rest if c not in follow]
    first: dict[str, int] = {}
    for i, c in enumerate(rest):
        first.setdefault(c.doc_id, i)
    return lead + follow + sorted(rest, key=lambda c: (first[c.doc_id], c.ordinal))


# -- what the question asks for -------------------------------------------------------------------------------

_ASKS_RESOURCE = re.compile(r"^\W*(?:which|what|(?:is|are) there (?:a|an|any)|what(?:'s| is) the name of the)\b"
                            r"(?:\s+[\w-]+){0,3}?\s+(?:paper|project|work|library|framework|system|tool|report|"
                            r"tech report|package|repo|repository|method|approach|technique)s?\b", re.I)


def asks_for_resource(question: str) -> bool:
    """"Which paper/project/tool ...?", "Is there a library that ...?": the answer is a source's name, so the
    answer leads with it."""
    return asked_resource(question) is not None


def asked_resource(question: str) -> str | None:
    """The words asking for a source ("Which papers"), or None. Not "What speedup does X report ...?": there
    "report" is what X does."""
    found = _ASKS_RESOURCE.search(question)
    return found.group(0) if found is not None and _ASKED_VERB.search(found.group(0)) is None else None


_ASKED_VERB = re.compile(r"\b(?:do|does|did)\b", re.I)
