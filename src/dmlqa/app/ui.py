"""The chat app (Gradio): ask with cited sources, explore related papers, see what the index holds.

This module is the page and its start: :func:`build_app` lays out the Blocks (Chat, Related papers
and Status tabs, plus the ``/ask`` and ``/health`` API endpoints) and wires each event to
:mod:`dmlqa.app.ui_chat`; :func:`serve` starts it over a :class:`~dmlqa.api.KnowledgeBase` and is
the one way to do so (``app.py`` and ``dmlqa serve`` both call it), with a plain ``GET /health``
route beside Gradio's (:func:`health_route`). The work behind the page is in
:mod:`dmlqa.app.ui_service`, the HTML in :mod:`dmlqa.app.ui_render`.

Gradio is imported lazily, so importing the app costs nothing until it is built. It never contacts
another host: no analytics or version check (``analytics_enabled=False``), no share tunnel, system
fonts instead of Google Fonts.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence

from dmlqa.api import KnowledgeBase
from dmlqa.app.serving import HostGuard, HostRule, SessionLimits, exposure_warning, sweep_sessions, ui_password
from dmlqa.app.ui_chat import (
    ANY_YEAR,
    MAX_INPUT_CHARS,
    api_answer,
    ask_about_question,
    chat_steps,
    make_filters,
    related_turn,
    year_choices,
)
from dmlqa.app.ui_service import ChatService

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860
#: Gradio events of one kind that may run at once (answering is CPU-bound and serialised by the
#: encoder's lock anyway; LLM answers mostly wait on the network, so several may stream together).
CONCURRENCY = 8


# -- binding ------------------------------------------------------------------------------------------


# -- the page ---------------------------------------------------------------------------------------------

CSS = """
.dmlqa-answer .dmlqa-text { line-height: 1.5; }
.dmlqa-answer .dmlqa-text p.dmlqa-p { margin: 0 0 .45em 0; }
.dmlqa-answer .dmlqa-text ul { list-style: disc outside; padding-left: 1.5em; margin: .2em 0 .5em 0; }
.dmlqa-answer .dmlqa-text ol { list-style: decimal outside; padding-left: 1.7em; margin: .2em 0 .5em 0; }
.dmlqa-answer .dmlqa-text li { margin: .15em 0; display: list-item; }
.dmlqa-answer .dmlqa-text pre.dmlqa-code { margin: .2em 0 .5em 0; padding: .4em .6em; overflow-x: auto;
  white-space: pre; font-size: .9em; background: rgba(127,127,127,.1); border-radius: 4px; }
.dmlqa-question { white-space: normal; overflow-wrap: anywhere; }
.dmlqa-cite { font-weight: 600; text-decoration: none; }
.dmlqa-notice { margin-top: .5em; padding: .3em .6em; border-left: 3px solid #d97706; background: rgba(217,119,6,.08); }
.dmlqa-sources { margin-top: .6em; font-size: .92em; }
.dmlqa-sources ul { list-style: none; padding-left: 0; margin: .3em 0; }
.dmlqa-source { margin: .35em 0; }
.dmlqa-n { font-weight: 600; }
.dmlqa-facts, .dmlqa-meta { opacity: .75; font-size: .9em; }
.dmlqa-answer blockquote.dmlqa-quote { margin: .1em 0 .4em 1.6em !important; padding: 0 0 0 .6em !important;
  border-left: 2px solid #9ca3af; font-style: italic; }
.dmlqa-meta { margin-top: .5em; }
.dmlqa-related { width: 100%; border-collapse: collapse; font-size: .92em; }
.dmlqa-related td, .dmlqa-related th { padding: .35em .5em; border-bottom: 1px solid rgba(127,127,127,.25);
  text-align: left; vertical-align: top; }
.dmlqa-ask-about { white-space: nowrap; font-size: .85em; font-weight: 400 !important; padding: .2em .6em;
  border: 1px solid rgba(127,127,127,.5); border-radius: 6px;
  cursor: pointer; background: transparent; }
.dmlqa-status-table th { text-align: left; padding-right: 1.5em; font-weight: 500; }
.dmlqa-failed table { font-size: .88em; width: 100%; table-layout: fixed; }
.dmlqa-failed th:nth-child(1) { width: 7em; }
.dmlqa-failed th:nth-child(3) { width: 40%; }
.dmlqa-failed td, .dmlqa-failed th { padding: .2em .5em !important; word-break: break-word; vertical-align: top; }
"""

#: Where the app serves plotly.js for its charts (:func:`plotly_route`): same origin, nothing fetched elsewhere.
PLOTLY_PATH = "/dmlqa-assets/plotly.min.js"
PLOTLY_HEAD = f'<script src="{PLOTLY_PATH}"></script>'

#: Draws every figure of the component (``data-figure``: plotly JSON from :mod:`dmlqa.app.ui_map`), again
#: whenever its value changes; a click on a node of the citation map becomes a ``select`` event carrying
#: that node's doc id, which re-centres the map on it.
FIGURE_JS = """
const draw = () => {
  if (!window.Plotly) { setTimeout(draw, 100); return; }
  element.querySelectorAll('.dmlqa-figure[data-figure]').forEach((div) => {
    let fig;
    try { fig = JSON.parse(div.dataset.figure); } catch (e) { return; }
    window.Plotly.react(div, fig.data, fig.layout, {displaylogo: false, responsive: true});
    if (div.id === 'citation-map' && !div.dmlqaClick) {
      div.dmlqaClick = true;
      div.on('plotly_click', (event) => {
        const point = event && event.points && event.points[0];
        const id = point && point.customdata;
        if (typeof id === 'string' && id !== div.dataset.target) trigger('select', {index: id, value: id});
      });
    }
  });
};
draw();
watch('value', draw);
new ResizeObserver(() => {
  if (window.Plotly) element.querySelectorAll('.js-plotly-plot').forEach((d) => window.Plotly.Plots.resize(d));
}).observe(element);
"""

#: Delegated clicks on the related table's buttons become a ``select`` event carrying the row.
RELATED_JS = """
element.addEventListener('click', (event) => {
  const button = event.target.closest('button.dmlqa-ask-about');
  if (!button) return;
  const row = Number(button.dataset.row);
  trigger('select', {index: row, value: row});
});
"""

#: The chat scrolls as a chat does: to the newest message as it arrives, but never so far that the
#: newest question leaves the top of the view (a long answer is then read from its start). Gradio's
#: own autoscroll (always to the bottom) is off; scrolling by hand stops the following until the
#: next question.
CHAT_JS = """
() => {
  const PAD = 8;
  let count = -1, userMoved = false, queued = false;
  const scroller = (chat, from) => {
    for (let e = from; e && e !== chat.parentElement; e = e.parentElement) {
      const oy = getComputedStyle(e).overflowY;
      if ((oy === 'auto' || oy === 'scroll') && e.scrollHeight > e.clientHeight + 1) return e;
    }
    return null;
  };
  const follow = () => {
    queued = false;
    const chat = document.getElementById('dmlqa-chat');
    if (!chat) return;
    const questions = chat.querySelectorAll('.dmlqa-question');
    if (questions.length !== count) { count = questions.length; userMoved = false; }
    if (!questions.length || userMoved) return;
    const question = questions[questions.length - 1];
    const row = question.closest('.message-row') || question;
    const box = scroller(chat, row);
    if (!box) return;
    const top = row.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop - PAD;
    const target = Math.max(0, Math.min(top, box.scrollHeight - box.clientHeight));
    if (Math.abs(box.scrollTop - target) > 1) box.scrollTop = target;
  };
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(follow); } };
  window.dmlqaFollow = follow;
  new MutationObserver(later).observe(document.body, {childList: true, subtree: true, characterData: true});
  const byHand = (event) => {
    if (event.target && event.target.closest && event.target.closest('#dmlqa-chat')) userMoved = true;
  };
  document.addEventListener('wheel', byHand, {passive: true});
  document.addEventListener('touchmove', byHand, {passive: true});
  window.addEventListener('resize', later);
}
"""

PLACEHOLDER = (
    "<strong>Ask about distributed machine learning.</strong><br>Answers cite the paper, page or doc they "
    "come from; every <code>[n]</code> opens its source."
)


def _theme(gr):  # noqa: ANN001, ANN202
    # System fonts: the default theme loads Google Fonts, which an offline machine cannot reach.
    return gr.themes.Default(font=["system-ui", "Segoe UI", "Helvetica", "Arial", "sans-serif"],
                             font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"])


def build_app(service: ChatService):  # noqa: ANN201 - gradio.Blocks
    """The Gradio Blocks app over ``service``: Chat, Related papers and Status tabs, plus an ``ask`` API."""
    import gradio as gr

    def _examples_value(items: Sequence[str]) -> list[dict[str, str]] | None:
        return [{"text": q} for q in items] or None

    # -- chat --------------------------------------------------------------------------------------------
    def respond(message: str | None, history: list | None, asked: list | None, kinds, since, until, topics,  # noqa: ANN001, ANN202
                undated=False):  # noqa: ANN001
        filters = make_filters(kinds, since, until, topics, undated)
        for turns, questions, clear_box, notice in chat_steps(service, message, history, asked, filters):
            yield turns, questions, ("" if clear_box else gr.update()), notice

    def clear():  # noqa: ANN202
        return [], [], "", ""

    def pick_example(evt):  # noqa: ANN001, ANN202
        value = evt.value
        return value.get("text", "") if isinstance(value, dict) else str(value or "")

    # -- related -----------------------------------------------------------------------------------------
    def find_related(query: str | None, since):  # noqa: ANN001, ANN202
        return related_turn(service, query, since)

    def ask_about(rows, evt):  # noqa: ANN001, ANN202
        rows = rows or []
        try:
            row = rows[int(evt.index)]
        except (TypeError, ValueError, IndexError):
            return gr.update(), gr.update()
        return ask_about_question(row), gr.Tabs(selected="chat")

    # Gradio passes event data to a parameter annotated with its class; string annotations (this
    # module's ``from __future__ import annotations``) cannot name the lazily imported gradio.
    pick_example.__annotations__ = {"evt": gr.SelectData}
    ask_about.__annotations__ = {"evt": gr.SelectData}

    def recentre(evt):  # noqa: ANN001, ANN202 - a node clicked on the map: its doc id becomes the query
        return str(evt.value or evt.index or "")

    recentre.__annotations__ = {"evt": gr.SelectData}

    # -- page load ---------------------------------------------------------------------------------------
    def on_load():  # noqa: ANN202
        f = service.facets()
        years = year_choices(f)
        return (
            gr.update(choices=list(f.kinds)),
            gr.update(choices=list(f.topics)),
            gr.update(choices=years), gr.update(choices=years), gr.update(choices=years),
            service.status(),
        )

    def load_examples():  # noqa: ANN202
        # Its own event: the page, its filters and status never wait for the examples, which are
        # computed once per index version (in the background from the app's start).
        return gr.update(examples=_examples_value(service.examples()))

    with gr.Blocks(title="dmlqa: distributed ML Q&A", analytics_enabled=False) as demo:
        gr.Markdown("## dmlqa: distributed machine learning, with sources")
        with gr.Tabs(selected="chat") as tabs:
            with gr.Tab("Chat", id="chat"):
                # No fixed height: the conversation grows with its messages up to the window's height
                # (less the input row), then scrolls inside (CHAT_JS keeps the newest question in view).
                chatbot = gr.Chatbot(
                    label="Answers", show_label=False, elem_id="dmlqa-chat", height=None, min_height=360,
                    max_height="max(360px, calc(100vh - 300px))", autoscroll=False, placeholder=PLACEHOLDER,
                    examples=_examples_value(service.examples(wait=False)), latex_delimiters=[],
                    feedback_options=None, buttons=["copy"],
                )
                notice = gr.HTML("", elem_id="dmlqa-input-notice", js_on_load=None)
                with gr.Row():
                    box = gr.Textbox(placeholder="Ask a question, e.g. how does ZeRO-3 partition the model?",
                                     show_label=False, lines=1, max_lines=6, max_length=MAX_INPUT_CHARS, scale=8,
                                     elem_id="dmlqa-question", autofocus=True, submit_btn=False)
                    send = gr.Button("Ask", variant="primary", scale=1, elem_id="dmlqa-ask")
                    clear_btn = gr.Button("New chat", scale=1)
                f0 = service.facets()
                with gr.Accordion("Filters (applied to retrieval)", open=False):
                    with gr.Row():
                        kinds = gr.CheckboxGroup(list(f0.kinds), label="kind", scale=3)
                        since = gr.Dropdown(year_choices(f0), value=ANY_YEAR, label="from year", scale=1)
                        until = gr.Dropdown(year_choices(f0), value=ANY_YEAR, label="to year", scale=1)
                        undated = gr.Checkbox(False, label="keep documents of unknown year", scale=1,
                                              elem_id="dmlqa-undated")
                    topics = gr.Dropdown(list(f0.topics), multiselect=True, label="topic (list section)",
                                         allow_custom_value=False)
                asked = gr.State([])
            with gr.Tab("Related papers", id="related"):
                with gr.Row():
                    rel_box = gr.Textbox(placeholder="Free text, a URL or an arXiv id (e.g. 1910.02054)",
                                         show_label=False, scale=8, max_length=MAX_INPUT_CHARS,
                                         elem_id="dmlqa-related-query")
                    rel_since = gr.Dropdown(year_choices(f0), value=ANY_YEAR, label="since year", scale=1,
                                            min_width=120)
                    rel_btn = gr.Button("Find related", variant="primary", scale=1, elem_id="dmlqa-related-go")
                rel_rows = gr.State([])
                rel_out = gr.HTML("", elem_id="dmlqa-related-results", js_on_load=RELATED_JS)
                rel_map = gr.HTML("", elem_id="dmlqa-citation-map", js_on_load=FIGURE_JS, head=PLOTLY_HEAD)
            with gr.Tab("Status", id="status"):
                status = gr.HTML(service.status(), elem_id="dmlqa-status")
                year_chart = gr.HTML("", elem_id="dmlqa-status-chart", js_on_load=FIGURE_JS, head=PLOTLY_HEAD)
                refresh = gr.Button("Refresh")

        chat_inputs = [box, chatbot, asked, kinds, since, until, topics, undated]
        chat_outputs = [chatbot, asked, box, notice]
        box.submit(respond, chat_inputs, chat_outputs, api_visibility="private")
        send.click(respond, chat_inputs, chat_outputs, api_visibility="private")
        clear_btn.click(clear, None, [chatbot, asked, box, notice], api_visibility="private")
        chatbot.example_select(pick_example, None, box, api_visibility="private").then(
            respond, chat_inputs, chat_outputs, api_visibility="private")
        rel_btn.click(find_related, [rel_box, rel_since], [rel_rows, rel_out], api_visibility="private")
        rel_box.submit(find_related, [rel_box, rel_since], [rel_rows, rel_out], api_visibility="private")
        rel_btn.click(service.citation_map, rel_box, rel_map, api_visibility="private")
        rel_box.submit(service.citation_map, rel_box, rel_map, api_visibility="private")
        rel_map.select(recentre, None, rel_box, api_visibility="private").then(
            find_related, [rel_box, rel_since], [rel_rows, rel_out], api_visibility="private").then(
            service.citation_map, rel_box, rel_map, api_visibility="private")
        rel_out.select(ask_about, [rel_rows], [box, tabs], api_visibility="private").then(
            respond, chat_inputs, chat_outputs, api_visibility="private")
        refresh.click(service.status, None, status, api_visibility="private")
        gr.Timer(30).tick(service.status, None, status, api_visibility="private")
        demo.load(on_load, None, [kinds, topics, since, until, rel_since, status], api_visibility="private")
        demo.load(load_examples, None, chatbot, api_visibility="private")
        demo.load(service.year_chart, None, year_chart, api_visibility="private")
        refresh.click(service.year_chart, None, year_chart, api_visibility="private")

        def ask(question: str, kinds: list[str] | None = None, since: int | None = None, until: int | None = None,
                topics: list[str] | None = None, use_llm: bool = True) -> dict:
            """Answer a question with cited sources: {"answer", "citations", "backend", "refused", ...}."""
            return api_answer(service, question, kinds, since, until, topics, use_llm)

        gr.api(ask, api_name="ask")

        def health() -> dict:
            """The index version served and the warm-up's progress: {"index_version", "warming", ...}."""
            return service.health()

        gr.api(health, api_name="health", concurrency_limit=None)
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=512)
    return demo



def plotly_route():  # noqa: ANN201 - fastapi.routing.APIRoute
    """``GET`` :data:`PLOTLY_PATH`: the plotly.js the plotly package ships, so the charts draw offline."""
    from pathlib import Path

    import plotly
    from fastapi.responses import FileResponse
    from fastapi.routing import APIRoute

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"

    def script() -> FileResponse:
        return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    return APIRoute(PLOTLY_PATH, script, methods=["GET"], include_in_schema=False)


def health_route(service: ChatService):  # noqa: ANN201 - fastapi.routing.APIRoute
    """``GET /health``: :meth:`ChatService.health` as JSON, status 200, or 503 while no index is published.

    A plain HTTP route beside Gradio's own (which are POSTs through its queue), so that a load
    balancer, ``curl`` or a container's health check can poll it. It needs no password even when the
    app has one: it tells nothing beyond the version's name, counts and build time.
    """
    from fastapi.responses import JSONResponse
    from fastapi.routing import APIRoute

    def health() -> JSONResponse:
        body = service.health()
        return JSONResponse(body, status_code=200 if body["ok"] else 503)

    return APIRoute("/health", health, methods=["GET"], include_in_schema=False)


def _logged_in(request) -> bool:  # noqa: ANN001 - starlette.requests.Request
    """Whether a request may read documents: the app has no password, or the request carries the login
    cookie Gradio set (the two cookies Gradio's own ``get_current_user`` reads)."""
    app = request.app
    if getattr(app, "auth", None) is None and getattr(app, "auth_dependency", None) is None:
        return True
    cookie = getattr(app, "cookie_id", "")
    token = request.cookies.get(f"access-token-{cookie}") or request.cookies.get(f"access-token-unsecure-{cookie}")
    return bool(token) and token in getattr(app, "tokens", {})


def source_route(service: ChatService):  # noqa: ANN201 - starlette.routing.Route
    """``GET /source/{doc_id}?page=N&q=QUOTE``: the archived view every citation links to
    (:meth:`ChatService.source_page`), a plain HTML page under a policy that runs no script.

    Unlike ``/health`` it shows documents, so with a password it needs the chat app's login.
    """
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    def source(request):  # noqa: ANN001, ANN202 - a plain Starlette endpoint (run on a worker thread)
        q = request.query_params
        status, page = service.source_page(request.path_params["doc_id"], q.get("page"), q.get("q"),
                                           logged_in=_logged_in(request))
        return HTMLResponse(page, status_code=status, headers=service.source_headers)

    return Route("/source/{doc_id:path}", source, methods=["GET"])


# -- starting it ------------------------------------------------------------------------------------------


def _to_stderr(level: str, text: str) -> None:
    print(f"warning: {text}" if level == "warning" else text, file=sys.stderr, flush=True)


def serve(kb: KnowledgeBase, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, password: str | None = None,
          block: bool = True, say: Callable[[str, str], None] = _to_stderr):  # noqa: ANN201 - gradio.Blocks
    """Serve the chat app over ``kb`` on ``host:port``: the one way to start it (``app.py``, ``dmlqa serve``).

    ``password`` (user name ``dmlqa``) defaults to the home's ``ui_password`` setting or
    ``DMLQA_UI_PASSWORD``; ``""`` serves without one. Before the app starts, ``say(level, text)`` is
    told when it listens beyond this machine (level ``"warning"``) and where it listens (``"info"``);
    by default both go to stderr. A background thread warms the app up (model, index, example
    questions, sentence vectors) and again whenever a new index version is published. Never through
    a share tunnel. ``block=False`` returns the running Blocks (its ``close()`` stops it).
    """
    import gradio as gr
    from starlette.middleware import Middleware

    if password is None:
        password = ui_password(kb.settings, os.environ)
    warning = exposure_warning(host, password=bool(password))
    if warning:
        say("warning", warning)
    say("info", f"dmlqa chat app: http://{host}:{port} (home {kb.home}); stop with Ctrl-C")
    service = ChatService(kb)
    threading.Thread(target=service.watch, args=(threading.Event(),), name="dmlqa-warm-up", daemon=True).start()
    demo = build_app(service)
    limits = SessionLimits.of(kb.settings.ui)
    threading.Thread(target=sweep_sessions, args=(demo, limits, threading.Event()), name="dmlqa-sessions",
                     daemon=True).start()
    guard = Middleware(HostGuard, rule=HostRule.serving(host, kb.settings.ui.allowed_hosts))
    demo.launch(
        server_name=host, server_port=port, share=False, auth=("dmlqa", password) if password else None,
        show_error=False, quiet=True, ssr_mode=False, mcp_server=False, pwa=False, enable_monitoring=False,
        prevent_thread_lock=not block, theme=_theme(gr), css=CSS, js=CHAT_JS, footer_links=["api"], run_history=False,
        state_session_capacity=limits.max_sessions,
        # before Gradio's routes: GET /health and GET /source/<doc_id> are ours; every request
        # passes the Host check (dmlqa.app.serving)
        app_kwargs={"routes": [health_route(service), source_route(service), plotly_route()],
                    "middleware": [guard]},
    )
    return demo
