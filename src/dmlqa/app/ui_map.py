"""The chat app's charts: the Related tab's citation map and the Status tab's documents per year.

Both are plotly figures built here as JSON and drawn in the page by plotly.js, which the app serves
itself (``dmlqa.app.ui.PLOTLY_PATH``, from the plotly package: the page loads nothing from
another host). A figure travels in its container's ``data-figure`` attribute, HTML-escaped, and is
read with ``JSON.parse``: no text of a document is ever parsed as markup or run as script. Plotly
reads a few tags in its text (``<b>``, ``<a href>``), so titles are entity-escaped for it as well,
which plotly shows as the characters they stand for.

The map (a :meth:`dmlqa.api.KnowledgeBase.citation_map` as JSON) is laid out by role, so that it
reads at a glance: the target in the middle, what it cites on the left, what cites it on the right,
the papers most co-cited with it on an outer ring. Nodes are sized by citations within the knowledge
base and coloured by year; clicking one re-centres the map on it (the page's script sends its doc id).
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: Arcs (degrees, counter-clockwise from the right) and radii per role.
ARCS = {"cites": (110.0, 250.0, 1.0), "cited_by": (-70.0, 70.0, 1.0), "co_cited": (-160.0, 160.0, 1.75)}
#: The status chart shows this many list sections (the rest are summed as "other sections").
MAX_SECTIONS = 12


def _text(value: Any) -> str:
    return html.escape(str(value), quote=False)


def _container(elem_id: str, figure: dict[str, Any], **attrs: Any) -> str:
    extra = "".join(f' data-{k}="{html.escape(str(v))}"' for k, v in attrs.items())
    return (f'<div id="{elem_id}" class="dmlqa-figure"{extra} '
            f'data-figure="{html.escape(json.dumps(figure, ensure_ascii=False))}"></div>')


def _positions(nodes: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for n in nodes:
        if n["role"] == "target":
            out[n["doc_id"]] = (0.0, 0.0)
    for role, (start, end, radius) in ARCS.items():
        ids = [n["doc_id"] for n in nodes if n["role"] == role]
        for i, d in enumerate(ids):
            angle = math.radians(start + (end - start) * (i + 0.5) / len(ids)) if len(ids) > 1 else math.radians(
                (start + end) / 2)
            out[d] = (radius * math.cos(angle), radius * math.sin(angle))
    return out


def citation_map_html(cmap: Mapping[str, Any] | None) -> str:
    """``<div id="citation-map" data-nodes="N" data-edges="M">`` holding the map's figure ("" when none)."""
    if not cmap or not cmap.get("nodes"):
        return ""
    nodes, edges = cmap["nodes"], cmap["edges"]
    pos = _positions(nodes)
    xs: list[float | None] = []
    ys: list[float | None] = []
    for e in edges:
        (x0, y0), (x1, y1) = pos[e["source"]], pos[e["target"]]
        xs += [x0, x1, None]
        ys += [y0, y1, None]
    arrows = [{"x": pos[e["target"]][0], "y": pos[e["target"]][1], "ax": pos[e["source"]][0],
               "ay": pos[e["source"]][1], "xref": "x", "yref": "y", "axref": "x", "ayref": "y", "showarrow": True,
               "arrowhead": 2, "arrowsize": 1, "arrowwidth": 1, "standoff": 9, "arrowcolor": "rgba(120,120,120,.55)",
               "text": ""} for e in edges]
    roles = {"target": "this paper", "cites": "cited by this paper", "cited_by": "cites this paper",
             "co_cited": "co-cited with it"}
    years = [n["year"] for n in nodes if n.get("year")]
    traces: list[dict[str, Any]] = [{"type": "scatter", "mode": "lines", "x": xs, "y": ys, "hoverinfo": "skip",
                                     "line": {"width": 1, "color": "rgba(120,120,120,.35)"}, "showlegend": False}]
    for dated in (True, False):
        group = [n for n in nodes if bool(n.get("year")) == dated]
        if not group:
            continue
        marker: dict[str, Any] = {"size": [12 + 5 * math.sqrt(n["citations"]) for n in group],
                                  "line": {"width": [3 if n["role"] == "target" else 1 for n in group],
                                           "color": "#222"}}
        if dated:
            marker.update(color=[n["year"] for n in group], colorscale="Viridis", cmin=min(years), cmax=max(years),
                          showscale=True, colorbar={"title": {"text": "year"}, "thickness": 12})
        else:
            marker["color"] = "#bbbbbb"
        traces.append({
            "type": "scatter", "mode": "markers+text", "showlegend": False, "marker": marker,
            "x": [pos[n["doc_id"]][0] for n in group], "y": [pos[n["doc_id"]][1] for n in group],
            "text": [_text(n["label"]) for n in group], "textposition": "top center", "textfont": {"size": 11},
            "customdata": [n["doc_id"] for n in group],
            "hovertext": [f"{_text(n['title'])}<br>{roles.get(n['role'], '')} · cited by {n['citations']} in the "
                          "knowledge base" for n in group],
            "hoverinfo": "text",
        })
    axis = {"visible": False, "range": [-2.3, 2.3], "fixedrange": True}
    layout = {"height": 560, "margin": {"l": 10, "r": 10, "t": 10, "b": 10}, "xaxis": axis,
              "yaxis": {**axis, "range": [-2.1, 2.1]}, "annotations": arrows, "hovermode": "closest",
              "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)"}
    return _container("citation-map", {"data": traces, "layout": layout}, nodes=len(nodes), edges=len(edges),
                      target=cmap.get("target", ""))


def year_chart_html(docs: Iterable[Any]) -> str:
    """Documents per year for each list section (the largest :data:`MAX_SECTIONS`), as stacked bars."""
    counts: Counter[tuple[str, int]] = Counter()
    for d in docs:
        if d.year:
            for section in dict.fromkeys(t.strip() for t in d.topics if t.strip()) or ("(no section)",):
                counts[(section, d.year)] += 1
    if not counts:
        return ""
    totals = Counter()
    for (section, _), n in counts.items():
        totals[section] += n
    shown = [s for s, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0].lower()))[:MAX_SECTIONS]]
    years = sorted({y for _, y in counts})
    traces = [{"type": "bar", "name": _text(s), "x": years, "y": [counts[(s, y)] for y in years]} for s in shown]
    rest = [sum(n for (s, yy), n in counts.items() if yy == y and s not in shown) for y in years]
    if any(rest):
        traces.append({"type": "bar", "name": "other sections", "x": years, "y": rest})
    layout = {"barmode": "stack", "height": 380, "margin": {"l": 40, "r": 10, "t": 30, "b": 40},
              "title": {"text": "Documents per year, by list section", "font": {"size": 14}},
              "xaxis": {"title": {"text": "year"}, "dtick": 1}, "yaxis": {"title": {"text": "documents"}},
              "legend": {"font": {"size": 10}}}
    return _container("dmlqa-year-chart", {"data": traces, "layout": layout}, sections=len(shown))
