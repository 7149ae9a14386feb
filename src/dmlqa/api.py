"""The library API: one object for one knowledge base, the surface scripts and front ends stand on.

    import dmlqa
    kb = dmlqa.KnowledgeBase("~/kb", create=True)   # a home; settings overrides as keyword arguments
    kb.import_lists(["awesome.md"]); kb.add(["paper.pdf"]); report = kb.build(offline=False)
    hits = kb.search("pipeline bubble", k=5, kinds=["paper"], since=2020)   # list[Hit]
    answer = kb.ask("How does ZeRO-3 partition the model?")                # Answer: answer, citations, refused
    for token in kb.ask_stream("How does GPipe fill the pipeline?"): ...
    related = kb.related("1910.02054", k=10); status = kb.status()

Heavy parts (the embedding model, the index) load on first use and stay loaded; a newly published
index version is picked up by the next call, as in the app. Every error a caller can cause is a
:class:`dmlqa.errors.DmlqaError` with a message that says what and why.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dmlqa.models import Answer, Hit
from dmlqa.settings import Settings, load_settings


class KnowledgeBase:
    """A dmlqa home: its catalog, documents, index and settings.

    Args:
        home: the home folder (default: ``DMLQA_HOME`` or the current directory).
        create: make the home (``corpus/``, ``index/``, ``dmlqa.toml``) when it does not exist yet.
        **overrides: settings to override, by name (``encoder="torch"``, ``model="/path"``,
            ``allow_private_hosts=True``...), validated like ``dmlqa.toml`` values.
    """

    def __init__(self, home: str | os.PathLike[str] | None = None, *, create: bool = False, **overrides: Any) -> None:
        from dmlqa.errors import HomeError

        path = Path(home).expanduser() if home is not None else None
        if path is not None and path.exists() and not path.is_dir():
            raise HomeError(f"{path} is a file, not a dmlqa home")
        if path is not None and not path.exists() and not create:
            raise HomeError(f"no dmlqa home at {path} (create it with KnowledgeBase({str(path)!r}, create=True))")
        self.settings: Settings = load_settings(path).with_overrides(**overrides)
        if create:
            from dmlqa.pipeline.home import init_home

            init_home(self.settings)
        self._asker = None

    @property
    def home(self) -> Path:
        return self.settings.home

    # -- building -----------------------------------------------------------------------------------

    def import_lists(self, paths: Sequence[str | os.PathLike[str]], *, replace: bool = False):  # noqa: ANN201
        """Parse awesome-list markdown files into the catalog; returns a ``catalog.ImportReport``."""
        from dmlqa.catalog.store import import_lists

        return import_lists([Path(p) for p in paths], self.settings.corpus_dir, replace_lists=replace)

    def add(self, paths: Sequence[str | os.PathLike[str]]):  # noqa: ANN201
        """Copy your own files, folders or JSON Lines records into the home; returns a ``localdocs.AddReport``."""
        from dmlqa.catalog.local import add_paths

        return add_paths([Path(p) for p in paths], self.settings.corpus_dir, max_bytes=self.settings.fetch.max_bytes)

    def build(self, *, offline: bool = False, archives: Sequence[str | os.PathLike[str]] = (),
              refresh_lists: bool = False, progress: Any = None):  # noqa: ANN201
        """Fetch, extract, chunk, embed and publish a new index version; returns the ``BuildReport``."""
        from dmlqa.pipeline.build import BuildOptions, run_build

        options = BuildOptions(archives=tuple(Path(a) for a in archives), offline=offline,
                               refresh_lists=refresh_lists, executor=self.settings.build.executor)
        return run_build(self.settings, options, progress=progress)

    # -- asking ---------------------------------------------------------------------------------------

    def _asker_(self):  # noqa: ANN202
        if self._asker is None:
            from dmlqa.query.answer import Asker

            self._asker = Asker.from_settings(self.settings)
        return self._asker

    @staticmethod
    def _filters(kinds: Sequence[str] = (), since: int | None = None, until: int | None = None,
                 topics: Sequence[str] = (), hosts: Sequence[str] = (), include_undated: bool = False):  # noqa: ANN205
        from dmlqa.query.search import Filters

        return Filters(kinds=tuple(kinds), since=since, until=until, topics=tuple(topics), hosts=tuple(hosts),
                       include_undated=include_undated)

    def search(self, query: str, k: int = 10, *, kinds: Sequence[str] = (), since: int | None = None,
               until: int | None = None, topics: Sequence[str] = (), hosts: Sequence[str] = (),
               include_undated: bool = False, per_doc: bool = False, mode: str = "hybrid") -> list[Hit]:
        """Hybrid (or ``mode="dense"``/``"bm25"``) search; ``per_doc`` keeps each document's best passage."""
        from dmlqa.query.search import SearchOptions

        flt = self._filters(kinds, since, until, topics, hosts, include_undated)
        return self._asker_().searcher.search(query, SearchOptions(k=k, per_doc=per_doc, mode=mode, filters=flt))

    def ask(self, question: str, *, previous: Answer | str | None = None, use_llm: bool = True,
            kinds: Sequence[str] = (), since: int | None = None, until: int | None = None,
            topics: Sequence[str] = (), hosts: Sequence[str] = (), include_undated: bool = False) -> Answer:
        """A short answer citing its sources (the LLM when configured and ``use_llm``, else extractive).

        ``previous`` is the conversation's last answer: a follow-up ("what about stage 3?") is
        answered about its own new aspect.
        """
        return self.ask_stream(question, previous=previous, use_llm=use_llm, kinds=kinds, since=since,
                               until=until, topics=topics, hosts=hosts, include_undated=include_undated).result

    def ask_stream(self, question: str, *, previous: Answer | str | None = None, use_llm: bool = True,
                   kinds: Sequence[str] = (), since: int | None = None, until: int | None = None,
                   topics: Sequence[str] = (), hosts: Sequence[str] = (), include_undated: bool = False):  # noqa: ANN201
        """Iterate the answer's text as it is produced; ``.result`` is the final :class:`Answer`."""
        from dmlqa.query.answer import AskOptions

        flt = self._filters(kinds, since, until, topics, hosts, include_undated)
        return self._asker_().stream(question, AskOptions(filters=flt, use_llm=use_llm), previous=previous)

    def related(self, target: str, k: int = 10, *, since: int | None = None, kinds: Sequence[str] = (),
                include_undated: bool = False):  # noqa: ANN201
        """Documents related to a resource (URL, arXiv id, DOI, doc id) or to free text: a ``RelatedResult``."""
        from dmlqa.query.related import related

        return related(self._asker_().searcher, target, k=k, since=since, kinds=tuple(kinds),
                       include_undated=include_undated)

    def status(self) -> dict[str, Any]:
        """What the published index holds, what failed, coverage, and the last runs (``dmlqa status --json``)."""
        from dmlqa.pipeline.home import index_status

        return index_status(self.settings)

    def __repr__(self) -> str:
        return f"KnowledgeBase({str(self.home)!r})"
