"""A document's citation neighbourhood, as a graph to draw or export: the map of the Related tab and
``dmlqa related TARGET --format graphml|dot``.

The neighbourhood of a target is what a reader of Connected Papers or Litmaps expects at a glance:

* the **target**;
* what it **cites** and what is **cited by** it, in the knowledge base (every one: the map exists to
  show them all, where the tables stop at ``k``);
* the ``k`` documents most **co-cited** with it (Small 1973): those that the most papers citing the
  target also cite. Only documents not already on the map count, so that ``k`` always adds new nodes.

Edges are every citation among those nodes (citing → cited), not only the ones touching the target:
a co-cited document is joined to the map through the papers citing both, which is why it is there.
Each node carries the number of documents of the knowledge base citing it (its size on the map) and
its year (its colour). Everything is read from one index version's citation graph
(:func:`dmlqa.query.graph.citation_graph`).

GraphML goes through networkx (what Gephi and networkx read back); DOT is written here, as networkx's
own DOT writer needs pydot or pygraphviz for a dozen lines of output.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from dmlqa.index.versions import IndexVersion
from dmlqa.query.graph import _no_graph_notice, citation_graph, short_name

#: How many co-cited documents a map adds by default.
CO_CITED = 10
#: Roles in the order a node that plays several takes the first (a cycle: the target cites a paper citing it).
ROLES = ("target", "cites", "cited_by", "co_cited")

# XML 1.0 cannot carry these at all (not even escaped): a title is text, so they go.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True)
class MapNode:
    """A document on the map: ``label`` is its short title and year, ``citations`` how many documents of
    the knowledge base cite it, ``cocited`` how many papers citing the target also cite it."""

    doc_id: str
    title: str
    label: str
    year: int | None
    url: str
    citations: int
    role: str
    cocited: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "title": self.title, "label": self.label, "year": self.year, "url": self.url,
                "citations": self.citations, "role": self.role, "cocited": self.cocited}


@dataclass(frozen=True)
class CitationMap:
    """The neighbourhood of ``target``: its nodes (the target first, then by role) and citation edges."""

    target: str
    nodes: tuple[MapNode, ...]
    edges: tuple[tuple[str, str], ...]  # (citing, cited), both doc ids of ``nodes``
    notice: str | None = None

    def count(self, role: str) -> int:
        return sum(n.role == role for n in self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "nodes": [n.to_json() for n in self.nodes],
                "edges": [{"source": a, "target": b} for a, b in self.edges]}

    def to_networkx(self) -> Any:  # networkx.DiGraph
        """The map as a ``networkx.DiGraph``; node attributes as in :meth:`MapNode.to_json` (no ``None``
        values: GraphML has no null, so an unknown year is left out)."""
        import networkx as nx

        g = nx.DiGraph(name=f"citation map of {self.target}")
        for n in self.nodes:
            attrs = {k: _NOT_XML.sub("", v) if isinstance(v, str) else v for k, v in n.to_json().items()}
            g.add_node(n.doc_id, **{k: v for k, v in attrs.items() if v is not None and k != "doc_id"})
        g.add_edges_from(self.edges)
        return g

    def to_graphml(self) -> str:
        """GraphML (Gephi, yEd, ``networkx.read_graphml``)."""
        import networkx as nx

        buf = io.BytesIO()
        nx.write_graphml(self.to_networkx(), buf, encoding="utf-8")
        return buf.getvalue().decode("utf-8")

    def to_dot(self) -> str:
        """Graphviz DOT: one statement per node (label, role, year, citations, URL), then the edges."""
        lines = [f"digraph {_dot_id('citation map of ' + self.target)} {{"]
        for n in self.nodes:
            attrs = {"label": n.label, "tooltip": n.title, "role": n.role, "citations": str(n.citations),
                     "URL": n.url, **({"year": str(n.year)} if n.year else {})}
            lines.append(f"  {_dot_id(n.doc_id)} [{', '.join(f'{k}={_dot_id(v)}' for k, v in attrs.items())}];")
        lines += [f"  {_dot_id(a)} -> {_dot_id(b)};" for a, b in self.edges]
        return "\n".join([*lines, "}"]) + "\n"


def _dot_id(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped (a title's ``\\N`` or ``"`` stays text),
    line breaks as DOT's ``\\n``, other control characters dropped."""
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r\n", "\n").replace("\n", "\\n")
    return '"' + re.sub("[\x00-\x1f\x7f]", "", text) + '"'


def label(title: str, year: int | None) -> str:
    """What a node is called on the map: "GPipe (2019)"."""
    name = short_name(title)
    return f"{name} ({year})" if year else name


def neighbourhood(version: IndexVersion, target: str, *, k: int = CO_CITED) -> CitationMap:
    """The citation map of ``target`` (a doc id of ``version``): itself, what it cites, what cites it and
    the ``k`` documents most co-cited with it, with every citation among them."""
    graph = citation_graph(version)
    docs = version.docs
    roles: dict[str, str] = {target: "target"}
    for role, ids in (("cites", graph.cites.get(target, ())), ("cited_by", graph.cited_by.get(target, ()))):
        for d in ids:
            if d in docs:
                roles.setdefault(d, role)
    citers = graph.cited_by.get(target, ())
    cocited = Counter(d for p in citers for d in graph.cites.get(p, ()) if d in docs)
    ranked = sorted((d for d in cocited if d not in roles),
                    key=lambda d: (-cocited[d], -len(graph.cited_by.get(d, ())), docs[d].title.lower(), d))
    # the target, what it cites and what cites it newest first, then the co-cited most co-cited first
    order = sorted(roles, key=lambda d: (ROLES.index(roles[d]), -(docs[d].year or 0), docs[d].title.lower(), d))
    order += ranked[:k]
    roles.update((d, "co_cited") for d in ranked[:k])
    nodes = tuple(
        MapNode(d, docs[d].title, label(docs[d].title, docs[d].year), docs[d].year, docs[d].link,
                len(graph.cited_by.get(d, ())), roles[d], cocited[d] if d != target else 0)
        for d in order)
    edges = tuple((a, b) for a in order for b in graph.cites.get(a, ()) if b in roles and b != a)
    return CitationMap(target, nodes, edges, notice=_no_graph_notice(version, docs[target], "map"))
