"""The library API: one object for one knowledge base, the surface scripts and front ends stand on.

    import dmlqa
    kb = dmlqa.KnowledgeBase("~/kb", create=True)   # a home; settings overrides as keyword arguments
    kb.import_lists(["awesome.md"]); kb.add(["paper.pdf"]); report = kb.build(offline=False)
    hits = kb.search("pipeline bubble", k=5, kinds=["paper"], since=2020)   # list[Hit]
    answer = kb.ask("How does ZeRO-3 partition the model?")                # Answer: answer, citations, refused
    for token in kb.ask_stream("How does GPipe fill the pipeline?"): ...
    related = kb.related("1910.02054", k=10); status = kb.status()
    kb.related(["GPipe", "PipeDream"]); kb.cites("ZeRO-Offload"); kb.cited_by("GPipe"); kb.suggest(k=15)

Every ``dmlqa`` command is one call here (``kb.schedule``, ``kb.evaluate``, ``kb.search_file``...), so
the CLI, the chat app and any later server only parse their input and render what comes back; how
the stages are wired (the ``Asker``, the filters, the build options) is decided in this module alone.
Data flows one way: this module imports the stages, front ends import this module, never the reverse.

Heavy parts (the embedding model, the index) load on first use and stay loaded; a newly published
index version is picked up by the next call, as in the app. Each call reads one index version from
start to end; :meth:`KnowledgeBase.pinned` gives a view whose calls all read the same one (one per
request of a server, so an answer and the documents its links come from never straddle a publish).
Every error a caller can cause is a :class:`dmlqa.errors.DmlqaError` with a message that says what
and why.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dmlqa.models import Answer, Hit
from dmlqa.settings import Settings, load_settings, resolve_home
from dmlqa.textsafe import mend_input

if TYPE_CHECKING:
    from dmlqa.catalog.local import AddReport
    from dmlqa.catalog.remove import Removal
    from dmlqa.catalog.store import ImportReport
    from dmlqa.index.versions import DocRecord, IndexVersion
    from dmlqa.models import Resource
    from dmlqa.pipeline.report import BuildOptions, BuildReport, Progress
    from dmlqa.pipeline.schedule import RunOutcome
    from dmlqa.query.answer import AskStream
    from dmlqa.query.citemap import CitationMap
    from dmlqa.query.graph import CitationsResult, Suggestions
    from dmlqa.query.prewarm import Prewarm
    from dmlqa.query.related import RelatedResult
    from dmlqa.query.search import Filters
    from dmlqa.query.show import SourceView

PathLike = str | os.PathLike[str]

#: The catalog list ``suggest(add=True)`` puts works under.
SUGGESTED_LIST = "suggested"


class KnowledgeBase:
    """A dmlqa home: its catalog, documents, index and settings.

    Args:
        home: the home folder (default: ``DMLQA_HOME`` or the current directory).
        create: make the home (``corpus/``, ``index/``, ``dmlqa.toml``) when it does not exist yet.
        **overrides: settings to override, by name (``encoder="torch"``, ``model="/path"``,
            ``allow_private_hosts=True``...), validated like ``dmlqa.toml`` values.
    """

    #: How the "no dmlqa home" error tells the user to make one. A front end words the remedy its own
    #: way (the CLI: ``run `dmlqa init --home DIR```) by overriding this in a subclass.
    create_hint: ClassVar[str] = "create it with KnowledgeBase({home!r}, create=True)"

    def __init__(self, home: PathLike | None = None, *, create: bool = False, **overrides: Any) -> None:
        from dmlqa.errors import HomeError

        root = self.locate(home)
        shown = home if home is not None else root  # the user's spelling, or where the default led
        if root.exists() and not root.is_dir():
            raise HomeError(f"{shown} is a file, not a dmlqa home")
        if not create and not root.exists():
            raise HomeError(f"no dmlqa home at {shown} ({self.create_hint.format(home=str(shown))})")
        self.settings: Settings = load_settings(root).with_overrides(**overrides)
        #: What ``create=True`` made (``corpus/``, ``dmlqa.toml``...); empty when the home was complete.
        self.created: tuple[str, ...] = ()
        if create:
            from dmlqa.pipeline.home import init_home

            self.created = tuple(init_home(self.settings))
        self._asker = None
        self._asker_lock = threading.Lock()
        self._pin: list[IndexVersion] | None = None  # a view's version (pinned()), once it has read one

    @staticmethod
    def locate(home: PathLike | None = None) -> Path:
        """The folder a home argument names: ``home``, else ``$DMLQA_HOME``, else the current directory."""
        return resolve_home(home)

    @property
    def home(self) -> Path:
        return self.settings.home

    # -- the catalog and your own documents ------------------------------------------------------------

    def import_lists(self, paths: Sequence[PathLike], *, replace: bool = False) -> ImportReport:
        """Parse awesome-list markdown files into the catalog (``dmlqa catalog import``).

        ``replace`` withdraws the re-imported lists' previous entries first. Every file must exist:
        naming one that does not fails the whole import before anything is written.
        """
        from dmlqa.catalog.store import import_lists
        from dmlqa.errors import InputFileError

        missing = [str(p) for p in paths if not Path(p).is_file()]
        if missing:
            raise InputFileError(f"no such file: {', '.join(missing)}")
        return import_lists([Path(p) for p in paths], self.settings.corpus_dir, replace_lists=replace)

    def catalog(self) -> list[Resource]:
        """Every resource of the catalog, as imported from the lists (fetched or not)."""
        from dmlqa.catalog.store import read_catalog

        return read_catalog(self.settings.catalog_path)

    def add(self, paths: Sequence[PathLike]) -> AddReport:
        """Copy your own files, folders or JSON Lines records into the home (``dmlqa add``).

        A reference library named on its own (BibTeX ``.bib``, CSL-JSON ``.json``: a Zotero export)
        adds its entries: those with an attached PDF as documents carrying the library's metadata,
        the others to the catalog (list ``library:<file name>``) for the next build to fetch.
        Every path is tried; the report lists what was added, skipped or refused (``failed``), the
        catalog ids added (``cataloged``) and the library entries skipped (``bad_entries``).
        """
        from dmlqa.catalog.library import add_files

        return add_files([Path(p) for p in paths], self.settings.corpus_dir, catalog_path=self.settings.catalog_path,
                         max_bytes=self.settings.fetch.max_bytes)

    def remove(self, target: str) -> Removal:
        """Take a local document or a catalog entry out (``dmlqa remove``); the next build drops it from the index.

        ``target``: a path under corpus/local (or ``local:PATH``, or the file that was added), or a
        catalog entry or indexed document as :meth:`related` reads it (URL, arXiv id, DOI, id, title);
        every catalog entry of that work goes. :class:`~dmlqa.errors.UnknownTargetError` (closest
        matches named) when it names nothing or is unclear (see :mod:`dmlqa.query.removal`).
        """
        from dmlqa.catalog.remove import apply_removal
        from dmlqa.catalog.store import read_catalog
        from dmlqa.errors import EmptyQueryError, IndexMissingError
        from dmlqa.query.removal import find_removal

        if not isinstance(target, str) or not target.strip():
            raise EmptyQueryError("the target is empty: name a local document or a catalog entry to remove")
        try:
            version = self._version_()
        except IndexMissingError:  # not built yet (or damaged): the catalog and corpus/local still answer
            version = None
        removal = find_removal(target.strip(), self.settings.corpus_dir, read_catalog(self.settings.catalog_path),
                               version)
        apply_removal(self.settings.corpus_dir, self.settings.catalog_path, removal)
        return removal

    # -- building ---------------------------------------------------------------------------------------

    def _build_options(self, offline: bool, archives: Sequence[PathLike], refresh_lists: bool) -> BuildOptions:
        """The options of a build or a scheduled one (where it runs is the ``build.executor`` setting)."""
        from dmlqa.errors import InputFileError
        from dmlqa.pipeline.report import BuildOptions

        for archive in archives:
            if not Path(archive).is_file():
                raise InputFileError(f"archive not found: {archive}")
        return BuildOptions(archives=tuple(Path(a) for a in archives), offline=offline, refresh_lists=refresh_lists)

    def build(self, *, offline: bool = False, archives: Sequence[PathLike] = (), refresh_lists: bool = False,
              progress: Progress | None = None, handle_signals: bool = False) -> BuildReport:
        """Fetch, extract, chunk, embed and publish a new index version (``dmlqa build``).

        ``archives`` are WARC files to replay responses from; ``progress`` receives each long stage's
        progress (``start(stage, total)`` returns the function that advances it; ``done(stage)``).
        Raises a :class:`~dmlqa.errors.DmlqaError` only when no version could be published at all
        (:class:`~dmlqa.errors.NoNetworkError` when no fetch reached any server).
        Ctrl-C raises :class:`~dmlqa.errors.Interrupted` (a ``KeyboardInterrupt``) saying how many
        vectors are kept for the next build, which embeds only the rest; with ``handle_signals`` (in
        the main thread) SIGTERM does the same, instead of ending the process where it stands.
        """
        from contextlib import nullcontext

        from dmlqa.pipeline.build import run_build
        from dmlqa.pipeline.signals import stop_on_signals
        from dmlqa.query.selector import prepare_question_encoder

        with stop_on_signals() if handle_signals else nullcontext():
            report = run_build(self.settings, self._build_options(offline, archives, refresh_lists), progress=progress)
            prepare_question_encoder(self.settings)  # the answers' second encoder, before the first question
            return report

    def schedule(self, *, every: str | None = None, cron: str | None = None, run_now: bool = False,
                 max_runs: int | None = None, offline: bool = False, archives: Sequence[PathLike] = (),
                 refresh_lists: bool = False, on_start: Callable[[str], None] | None = None,
                 on_run: Callable[[RunOutcome], None] | None = None, handle_signals: bool = True) -> str | None:
        """Rebuild on a schedule (``every="24h"`` or ``cron="0 3 * * *"``) until stopped (``dmlqa schedule``).

        Each run is incremental and a failed one keeps the published version; ``on_run`` hears of
        each run as it ends, ``on_start`` gets the schedule's spelling once it is understood.
        ``run_now`` builds once right away; ``max_runs`` stops after that many runs. With
        ``handle_signals`` (and in the main thread) SIGTERM and SIGINT stop it at once, mid-build
        included (a build is crash-safe and the history records it stopped). Returns why it stopped
        early ("stopped by SIGTERM"), or None once ``max_runs`` runs are done.
        """
        from contextlib import nullcontext

        from dmlqa.pipeline.schedule import Schedule, SchedulerStopped, run_scheduler
        from dmlqa.pipeline.signals import stop_on_signals
        from dmlqa.query.selector import prepare_question_encoder

        plan = Schedule.parse(every=every, cron=cron)
        options = self._build_options(offline, archives, refresh_lists)
        try:
            with stop_on_signals(SchedulerStopped) if handle_signals else nullcontext():
                if on_start is not None:
                    on_start(plan.spec)
                prepare_question_encoder(self.settings)  # as a build does: the answers' second encoder
                run_scheduler(self.settings, plan, options, run_now=run_now, max_runs=max_runs, on_run=on_run)
        except SchedulerStopped as exc:
            return str(exc)
        return None

    def status(self) -> dict[str, Any]:
        """What the published index holds, what failed, coverage, and the last runs (``dmlqa status --json``).

        Raises :class:`~dmlqa.errors.IndexMissingError` before the first build; :meth:`run_history`
        still answers then.
        """
        from dmlqa.pipeline.home import index_status

        return index_status(self.settings)

    def run_history(self, limit: int = 10) -> dict[str, Any]:
        """The last build runs (newest first, failed ones too) and the running scheduler's next slot."""
        from dmlqa.pipeline.home import run_history

        return run_history(self.settings, limit)

    def last_failures(self) -> dict[str, Any]:
        """Every failure of the last build run (``dmlqa status --failures``): ``{"started_at", "failed":
        [{"url", "stage", "error"}]}``; ``started_at`` is None and the list empty before any run."""
        from dmlqa.pipeline.runs import read_failures

        return read_failures(self.settings.index_dir) or {"started_at": None, "failed": []}

    # -- asking ---------------------------------------------------------------------------------------
    # Filters, every method below: ``kinds`` (paper, docs, ...), ``since``/``until`` (years; documents of
    # unknown year are left out unless ``include_undated``), ``topics`` (list topics), ``hosts``.

    def _asker_(self):  # noqa: ANN202 - dmlqa.query.answer.Asker
        """The one Asker (searcher, encoder, LLM client) of this knowledge base, made on first use.

        Made under a lock: a server's first requests arrive together, and two Askers would load the
        model and the index twice.
        """
        with self._asker_lock:
            if self._asker is None:
                from dmlqa.query.answer import Asker

                self._asker = Asker.from_settings(self.settings)
            return self._asker

    def _version_(self) -> IndexVersion:
        """The index version this call reads: a view's (pinned at its first read), else the one published now.

        Every query method takes it once and hands it to each read it makes, so a call never mixes
        two versions; :class:`~dmlqa.errors.IndexMissingError` before the first build.
        """
        searcher = self._asker_().searcher
        if self._pin is None:
            return searcher.pin()
        with self._asker_lock:
            if not self._pin:
                self._pin.append(searcher.pin())
            return self._pin[0]

    def pinned(self) -> KnowledgeBase:
        """A view of this knowledge base whose every call reads one index version (the one published at
        its first read), sharing the loaded model and index.

        A server takes one per request: an answer, the documents its links are drawn from and the
        notes beside it then come from one version even when a build publishes meanwhile, and the
        next request's view reads the new one. Making a view reads nothing, so it works before the
        first build too (its calls then raise as this knowledge base's do).
        """
        self._asker_()  # the view shares the Asker: made here, not once per view
        view = copy.copy(self)
        view._pin = []
        return view

    def index_version(self) -> str:
        """The name of the index version this call (or this view) reads; opens it when not open yet."""
        return self._version_().name

    def documents(self) -> Mapping[str, DocRecord]:
        """Every document and card of the index version read (doc id → its record: title, URL, year, topics...)."""
        return self._version_().docs

    def document(self, doc_id: str) -> DocRecord | None:
        """One document's record in the index version read, or None when that version does not hold it."""
        return self._version_().docs.get(doc_id)

    @property
    def llm_backend(self) -> str | None:
        """The configured LLM backend (``llm:MODEL``) that writes answers; None: answers are extractive."""
        llm = self._asker_().llm
        return llm.name if llm is not None else None

    @staticmethod
    def _filters(kinds: Sequence[str] | None = None, since: int | None = None, until: int | None = None,
                 topics: Sequence[str] | None = None, hosts: Sequence[str] | None = None,
                 include_undated: bool = False) -> Filters:
        from dmlqa.query.search import Filters

        return Filters.from_options(kinds=kinds, since=since, until=until, topics=topics, hosts=hosts,
                                    include_undated=include_undated)

    @staticmethod
    def _mode(mode: str) -> str:
        """``mode`` if it names a retrieval mode; an unknown one would silently retrieve nothing."""
        from dmlqa.errors import SettingsError, quoted
        from dmlqa.query.search import MODES

        if mode not in MODES:
            raise SettingsError(f"mode must be one of {', '.join(MODES)}, got {quoted(mode)}")
        return mode

    @staticmethod
    def check_text(text: str, what: str = "question") -> str:
        """``text`` unless it is empty or white space (:class:`~dmlqa.errors.EmptyQueryError`) or past its length
        limit (:class:`~dmlqa.errors.TextTooLongError`, see :mod:`dmlqa.query.limits`; both ``ValueError``): a
        mistake to tell, not an empty result; lone surrogates (valid JSON, not text) come back as U+FFFD.
        Query methods check first and go on with what it returns; a front end may, before loading."""
        from dmlqa.query.limits import check_text

        return mend_input(check_text(text, what))

    def undated_excluded(self, **filters: Any) -> int:
        """How many documents of unknown year the year filters leave out (0 without ``since``/``until``), for
        front ends to say so beside the results, with how to keep them (``include_undated``)."""
        from dmlqa.query.search import undated_excluded

        return undated_excluded(self._version_(), self._filters(**filters))

    def search(self, query: str, k: int = 10, *, kinds: Sequence[str] = (), since: int | None = None,
               until: int | None = None, topics: Sequence[str] = (), hosts: Sequence[str] = (),
               include_undated: bool = False, per_doc: bool = False, mode: str = "hybrid") -> list[Hit]:
        """Hybrid (or ``mode="dense"``/``"bm25"``) search; ``per_doc`` keeps each document's best passage."""
        from dmlqa.query.search import SearchOptions

        query = self.check_text(query, "query")
        flt = self._filters(kinds, since, until, topics, hosts, include_undated)
        options = SearchOptions(k=k, per_doc=per_doc, mode=self._mode(mode), filters=flt)
        return self._asker_().searcher.search(query, options, version=self._version_())

    def spelling(self, text: str) -> str | None:
        """``text`` as :meth:`ask` reads it, typos corrected ("pipline", :mod:`dmlqa.query.spelling`), or None: a front
        end offers it as "did you mean"; :meth:`search` matches the words as typed, never corrected unsaid."""
        from dmlqa.query.spelling import corrected

        fixed, fixes = corrected(self._version_(), self.check_text(text, "query"))
        return fixed if fixes else None

    def search_file(self, queries: PathLike, k: int = 10, *, per_doc: bool = False, mode: str = "hybrid",
                    what: str = "queries", **filters: Any) -> Iterator[tuple[str, list[Hit]]]:
        """Search every query of a JSON Lines file of ``{"id", "text"}`` (BEIR's ``"_id"`` too): ``(id, hits)``;
        the whole file is read (and a bad one refused, ``what`` naming it) before the first search."""
        from dmlqa.query.batch import read_queries

        items = read_queries(queries, what)
        return ((qid, self.search(text, k, per_doc=per_doc, mode=mode, **filters)) for qid, text in items)

    def ask(self, question: str, *, previous: Answer | str | None = None, use_llm: bool = True,
            kinds: Sequence[str] = (), since: int | None = None, until: int | None = None,
            topics: Sequence[str] = (), hosts: Sequence[str] = (), include_undated: bool = False,
            mode: str = "hybrid") -> Answer:
        """A short answer citing its sources (the LLM when configured and ``use_llm``, else extractive);
        ``previous``: the last answer, so that a follow-up ("what about stage 3?") is read in its light."""
        return self.ask_stream(question, previous=previous, use_llm=use_llm, kinds=kinds, since=since, until=until,
                               topics=topics, hosts=hosts, include_undated=include_undated, mode=mode).result

    def ask_stream(self, question: str, *, previous: Answer | str | None = None, use_llm: bool = True,
                   kinds: Sequence[str] = (), since: int | None = None, until: int | None = None,
                   topics: Sequence[str] = (), hosts: Sequence[str] = (), include_undated: bool = False,
                   mode: str = "hybrid") -> AskStream:
        """Iterate the answer's text as it is produced; ``.result`` is the final, checked :class:`Answer`.

        With an LLM the pieces are its raw tokens (the result may differ: invented citations are
        removed); without one there is a single piece, the extractive answer.
        """
        from dmlqa.query.answer import AskOptions

        question, previous = self.check_text(question, "question"), mend_input(previous)
        flt = self._filters(kinds, since, until, topics, hosts, include_undated)
        options = AskOptions(filters=flt, use_llm=use_llm, mode=self._mode(mode))
        return self._asker_().stream(question, options, previous=previous, version=self._version_())

    def ask_file(self, questions: PathLike, *, use_llm: bool = True, what: str = "questions",
                 **filters: Any) -> Iterator[tuple[str, Answer]]:
        """Answer every question of a JSON Lines file of ``{"id", "question"}``: ``(id, answer)`` pairs; the
        whole file is read (and a bad one refused, ``what`` naming it) before the first answer. A question
        with ``"previous"`` (the id of one before it) is a follow-up, asked after that question's answer."""
        from dmlqa.query.batch import ask_in_turn, read_question_file

        return ((q.id, a) for q, a in ask_in_turn(read_question_file(questions, what), lambda text, previous: self.ask(
            text, previous=previous, use_llm=use_llm, **filters)))

    def related(self, target: str | Sequence[str], k: int = 10, *, since: int | None = None,
                kinds: Sequence[str] = (), include_undated: bool = False) -> RelatedResult:
        """Documents related to a resource (URL, arXiv id, DOI, doc id, title) or to free text: a ``RelatedResult``;
        several targets give their combined neighbourhood (content and citations), the targets excluded."""
        from dmlqa.query.related import related

        self.check_text(target if isinstance(target, str) else " ".join(t for t in target if isinstance(t, str)),
                        "query")
        return related(self._asker_().searcher, mend_input(target), k=k, since=since, kinds=tuple(kinds),
                       include_undated=include_undated, version=self._version_())

    # -- the citation graph ----------------------------------------------------------------------------

    def _named(self, target: str) -> tuple[IndexVersion, str, str | None]:
        """The published version, the doc id ``target`` names in it (as ``related`` resolves it) and, when
        it was named by title, which document it was read as."""
        from dmlqa.errors import NotInIndexError, quoted
        from dmlqa.query.limits import check_length
        from dmlqa.query.related import identify, resolve_target, resolve_title

        target = check_length(target, "target").strip()  # before the index loads: one line, not minutes
        version = self._version_()
        doc_id = resolve_target(version, target)
        if doc_id is None:
            raise NotInIndexError(
                f"{quoted(target)} names no document of the index: give its URL, arXiv id, DOI, doc id or title "
                "(`dmlqa search` shows doc ids)" if target else "give a document: URL, arXiv id, DOI, doc id or title")
        notice = None
        if identify(target) is None and target != doc_id:
            _, others = resolve_title(version, target)
            also = f" (also {', '.join(others)})" if others else ""
            notice = f"read {target!r} as {version.docs[doc_id].title} ({doc_id}){also}"
        return version, doc_id, notice

    def _on_graph(self, query: Callable[..., Any], target: str, **options: Any) -> Any:
        """``query(version, doc_id, **options)`` on the document ``target`` names, with how it was read noted."""
        from dataclasses import replace

        version, doc_id, notice = self._named(target)
        res = query(version, doc_id, **options)
        return replace(res, notice="; ".join(n for n in (notice, res.notice) if n) or None)

    def cites(self, target: str, k: int | None = None) -> CitationsResult:
        """The documents of the knowledge base ``target`` cites, with the citing sentences, and its references
        that name nothing in it (``dmlqa cites``). :class:`~dmlqa.errors.NotInIndexError` when ``target``
        names no indexed document."""
        from dmlqa.query.graph import cites

        return self._on_graph(cites, target, k=k)

    def cited_by(self, target: str, k: int | None = None) -> CitationsResult:
        """The documents citing ``target``, newest first, each with its citing sentence (``dmlqa cited-by``)."""
        from dmlqa.query.graph import cited_by

        return self._on_graph(cited_by, target, k=k)

    def citation_map(self, target: str, k: int = 10) -> CitationMap:
        """``target``, what it cites, what cites it and the ``k`` papers most co-cited with it, as nodes and
        citation edges (the Related tab's map; ``dmlqa related --format graphml|dot``)."""
        from dmlqa.query.citemap import neighbourhood

        return self._on_graph(neighbourhood, target, k=k)

    def show(self, target: str, page: int | None = None, quote: str | None = None, *,
             image: bool = False) -> SourceView:
        """The archived text of ``target``'s page ``page`` (PDF) or passage (HTML), ``quote`` located (``dmlqa
        show``); ``image``: the PDF page as PNG too. Works offline (see :mod:`dmlqa.query.show`)."""
        from dmlqa.query.show import show

        quote = self.check_text(quote, "quote") if isinstance(quote, str) and quote.strip() else None
        version, doc_id, notice = self._named(target)
        return show(self.settings, version, doc_id, page=page, quote=quote, image=image, notice=notice)

    def suggest(self, k: int = 15, *, add: bool = False) -> Suggestions:
        """Works cited by at least two documents that no list names, most cited first (``dmlqa suggest``).

        ``add`` puts those that can be fetched (an arXiv id, a DOI or a URL) in the catalog under the list
        ``suggested``, so that the next build fetches them; title-only ones are named in ``not_added``.
        """
        from dmlqa.catalog.suggested import add_suggested
        from dmlqa.query.graph import Suggestions, suggest

        version = self._version_()
        found = tuple(suggest(version, k=k))
        notice = None if version.has_citations else (
            f"index version {version.name} was built before citations were read; run `dmlqa build`")
        if not add:
            return Suggestions(found, notice=notice)
        added, not_added = add_suggested(self.settings.catalog_path, found, SUGGESTED_LIST)
        return Suggestions(found, added, not_added, SUGGESTED_LIST, notice)

    @staticmethod
    def bibtex(items: Sequence[Any], *, ascii_only: bool = False) -> str:
        """BibTeX entries for documents (``related(...).items``, hits, citations), keys unique among them."""
        from dmlqa.query.bibtex import to_bibtex

        return to_bibtex(items, ascii_only=ascii_only)

    def evaluate(self, questions: PathLike, *, llm: bool | None = None, mode: str = "hybrid",
                 what: str = "questions") -> dict[str, Any]:
        """Score retrieval (recall@k, MRR), citations, refusals and latency on a question set (``dmlqa eval``).

        ``llm``: True scores the configured LLM (an error when none is set), False the extractive
        answerer, None the LLM when one is set. Returns the scores with ``backend`` and ``retrieval``.
        """
        from dmlqa.query.batch import evaluate, read_question_file

        items = read_question_file(questions, what)
        return evaluate(self._asker_(), items, llm=llm, mode=self._mode(mode), version=self._version_())

    def __repr__(self) -> str:
        return f"KnowledgeBase({str(self.home)!r})"

    # -- for the chat app --
    # What the chat app needs beyond asking and searching, so that it imports this module and not
    # the stages below it (its rules stay in one place: the answerer's, the index's).

    @classmethod
    def from_settings(cls, settings: Settings, *, asker: Any = None) -> KnowledgeBase:
        """A knowledge base over settings already loaded (the app's), optionally with its ``Asker``.

        The app is handed its settings; reloading them from the home would drop what the caller
        changed, and tests hand in an ``Asker`` whose LLM is a stand-in.
        """
        kb = cls.__new__(cls)  # what __init__ sets, without reading the home again
        kb.settings = settings
        kb.created = ()
        kb._asker = asker
        kb._asker_lock = threading.Lock()
        kb._pin = None
        return kb

    @property
    def asker(self):  # noqa: ANN201 - dmlqa.query.answer.Asker
        """The one ``Asker`` of this knowledge base (searcher, encoder caches, LLM client), made on first use.

        For scripts and benchmarks that drive the query stage directly; front ends use the methods
        above, which read one index version per call.
        """
        return self._asker_()

    def prewarm(self, *, step: int | None = None, on_progress: Callable[[int, int], None] | None = None) -> Prewarm:
        """Embed the sentences the extractive answer may quote into the vector cache, ahead of questions.

        Only a version built without its sentence vectors needs it (see :mod:`dmlqa.query.prewarm`);
        ``on_progress(done, total)`` hears of each ``step`` sentences embedded.
        """
        from dmlqa.query.prewarm import STEP, prewarm

        return prewarm(self._asker_().searcher, self._version_(), step=step or STEP, on_progress=on_progress)

    def published_version(self) -> str | None:
        """The name of the index version now published (None before the first build); opens nothing."""
        from dmlqa.index.versions import current_version

        return current_version(self.settings.index_dir)

    def health(self) -> dict[str, Any]:
        """The published version's ``{"version", "documents", "cards", "chunks", "built_at"}`` from its
        ``meta.json`` alone (a health check polls it; the index is not opened); ``IndexMissingError``
        before the first build (``IndexDamagedError`` when that file cannot be read)."""
        from dmlqa.errors import IndexMissingError
        from dmlqa.index.versions import read_meta
        from dmlqa.paths import VERSIONS

        name = self.published_version()
        if name is None:
            raise IndexMissingError(f"no index in {self.home} yet: run `dmlqa build` first")
        meta = read_meta(self.settings.index_dir / VERSIONS / name)
        return {"version": meta["version"], "documents": meta.get("documents", 0), "cards": meta.get("cards", 0),
                "chunks": meta.get("chunks", 0), "built_at": meta.get("built_at")}

    @staticmethod
    def search_filters(kinds: Sequence[str] | None = None, since: int | None = None, until: int | None = None,
                       topics: Sequence[str] | None = None, include_undated: bool = False) -> Filters:
        """Retrieval filters from a front end's already checked options (a ``query.search.Filters``)."""
        from dmlqa.query.search import Filters

        return Filters.from_options(kinds=kinds, since=since, until=until, topics=topics,
                                    include_undated=include_undated)

    @staticmethod
    def is_follow_up(question: str) -> bool:
        """Whether ``question`` leans on the one before ("what about stage 3?"): the answerer's own rule."""
        from dmlqa.query.answer import is_follow_up

        return is_follow_up(question)
