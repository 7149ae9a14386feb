"""Benchmark: CPU seconds (this process and its children) that hostile inputs cost (issue 19, item 5).

    .venv/bin/python bench/hostile_inputs.py [--tables 30000] [--anchors 20000] [--steps 4000] [--limit 60]
        [--pages 400] [--links 40000] [--rows 20000] [--spans 20000] [--lists 20000]

- a markdown list with ``--anchors`` unclosed ``<a href>`` tags, through ``parse_list`` (target: ≤ 2 s);
- a page of ``--tables`` one-cell tables, through extraction under the build's time limit (the
  ``--limit`` seconds, in the child process a build uses), with the page's text or the failure reason
  (target: ≤ 30 s). The cells hold random letters so the page is not refused as one repeated pattern;
- a page of ``--steps`` list items, each a paragraph, a one-line code block and a paragraph, which trafilatura
  writes on one line and extraction cuts apart again (``dmlqa.extract.html._unglued``), in this process: its CPU
  seconds should grow with the page, not with its square;
- a PDF of ``--pages`` pages, each under the same running header and holding a table of contents' run, a line of
  100,000 spaces between a section number and a page number, and prose, through ``split_document`` (the layout
  furniture of ``dmlqa.extract.layout``): its CPU seconds should grow with the pages;
- a markdown file whose one line holds ``--links`` unclosed links and images (``[a](``, ``![a](``) among words, in
  random order so that it is not refused as one repeated pattern, through extraction: its CPU seconds should grow
  with the line (a regex retried from each "[" took 42 s for 20,000);
- a markdown table of ``--rows`` rows, and one row of that many empty cells before a filled one, through
  ``split_document``: its CPU seconds should grow with the rows (a regex cutting the empty cells took 8.6 s for one
  row of 20,000, and each row's next line was read by copying the rest of the page);
- paragraphs of ``--spans`` inline formulas ("$x$"), of as many version bounds ("a >= 1") and of a numbered heading
  with that many title words, through ``split_document``: the math and version-bound reading of a sentence and the
  glued-heading cut (``dmlqa.query.glued.heading_end``) should grow with the paragraph;
- a sentence of ``--lists`` bracketed lists, references and values, through ``for_answer``: each list is read by the
  words right before it, so its CPU seconds should grow with the lists (reading from the sentence's start up to
  each list again was quadratic).
Prints one line per case; timings vary with the machine's load.
"""

from __future__ import annotations

import argparse
import random
import resource
import time

from dmlqa.catalog.lists import parse_list
from dmlqa.errors import ExtractError
from dmlqa.extract.documents import extract_bytes
from dmlqa.extract.html import extract_html
from dmlqa.extract.quoting import for_answer
from dmlqa.extract.sentences import split_document
from dmlqa.extract.worker import TimedExtractor
from dmlqa.models import Block, Document
from dmlqa.query import features, glued


def cpu_seconds() -> float:
    """User + system CPU of this process and of its children that have ended."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--anchors", type=int, default=20_000)
    ap.add_argument("--tables", type=int, default=30_000)
    ap.add_argument("--steps", type=int, default=4_000)
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--links", type=int, default=40_000)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--spans", type=int, default=20_000)
    ap.add_argument("--lists", type=int, default=20_000)
    ap.add_argument("--limit", type=float, default=60.0, help="extraction time limit, seconds")
    args = ap.parse_args()

    tags = "".join('<a href="x">' for _ in range(args.anchors))
    for name, text in (
        ("one line", f"# Hostile\n\n- {tags}\n"),
        ("one per line",
         "# Hostile\n\n" + "".join(f'- <a href="https://e.org/{i}">Paper {i}\n' for i in range(args.anchors))),
    ):
        t0 = cpu_seconds()
        parsed = parse_list(text, "hostile")
        print(f"parse_list, {args.anchors:,} unclosed <a href> ({name}, {len(text):,} chars): "
              f"{cpu_seconds() - t0:.2f} CPU s, {len(parsed.resources)} resources")

    rng = random.Random(0)
    cells = "".join(f"<table><tr><td>{rng.choice('abcdefghijklmnopqrstuvwxyz')}</td></tr></table>"
                    for _ in range(args.tables))
    page = f"<html><body>{cells}</body></html>".encode()
    t0, w0 = cpu_seconds(), time.monotonic()
    with TimedExtractor(args.limit) as extractor:
        try:
            got = extractor.run(extract_bytes, page, "text/html", url="https://example.org/t", where="tables")
            outcome = f"{sum(len(b.text.split()) for b in got.blocks):,} words extracted"
        except ExtractError as exc:
            outcome = f"failed: {exc.reason}"
    print(f"extraction, {args.tables:,} one-cell tables ({len(page):,} bytes, limit {args.limit:g} s): "
          f"{cpu_seconds() - t0:.2f} CPU s incl. the child, {time.monotonic() - w0:.1f} s wall; {outcome}")

    for n in (args.steps // 4, args.steps):
        steps = "".join(f"<li><p>Step {i} runs the tool:</p><pre><code>$ tool{i} --flag {i}</code></pre>"
                        f"<p>Then step {i} ends.</p></li>" for i in range(n))
        t0 = cpu_seconds()
        got = extract_html(f"<html><body><article><ul>{steps}</ul></article></body></html>".encode(),
                           url="https://example.org/steps")
        fenced = sum(b.text.count("```") for b in got.blocks) // 2
        print(f"extraction, {n:,} list items with a code block each: {cpu_seconds() - t0:.2f} CPU s, "
              f"{fenced:,} blocks fenced")

    contents = "".join(f"{k} Section Title Number {k} . . . . . . . . {k + 2}\n" for k in range(1, 30))
    for n in (args.pages // 4, args.pages):
        pages = tuple(Block(f"A Hostile Paper Header\n{contents}3 A{' ' * 100_000}7\nThe method splits the model "
                            f"across {i} devices. It works well.", page=i + 1) for i in range(n))
        doc = Document(doc_id="h", url="https://example.org/h.pdf", title="Hostile", blocks=pages, content_type="pdf")
        t0 = cpu_seconds()
        got = split_document(doc)
        furniture = sum(s.role == "furniture" for s in got)
        print(f"sentences of a {n:,}-page PDF with a running header, a contents run and a 100,000-space line a page: "
              f"{cpu_seconds() - t0:.2f} CPU s, {furniture:,} furniture lines")

    for n in (args.links // 4, args.links):
        line = "".join(rng.choice(("[a](", "![a](", "x")) for _ in range(n))
        t0 = cpu_seconds()
        got = extract_bytes(f"# Hostile\n\nA sentence of words to read.\n\n{line}\n".encode(), "text/markdown")
        print(f"extraction, a markdown line of {n:,} unclosed links and images ({len(line):,} chars): "
              f"{cpu_seconds() - t0:.2f} CPU s, {len(got.text):,} chars extracted")

    for n in (args.rows // 4, args.rows):
        rows = "".join(f"| model-{i} | {i} tokens | score {i} |\n" for i in range(n))
        padded = "|" + " |" * n + " a |"
        text = f"Scores of the models.\n| Model | Tokens | Score |\n|---|---|---|\n{rows}\nA padded row.\n{padded}\n"
        doc = Document(doc_id="r", url="https://example.org/r", title="Rows", blocks=(Block(text),),
                       content_type="html")
        t0 = cpu_seconds()
        got = split_document(doc)
        print(f"sentences of a markdown table of {n:,} rows and a row of {n:,} empty cells ({len(text):,} chars): "
              f"{cpu_seconds() - t0:.2f} CPU s, {sum(s.role == 'row' for s in got):,} rows")

    for n in (args.spans // 4, args.spans):
        for what, para in (("inline formulas", "we use $x$ and " * n + "stop."),
                           ("version bounds", "a >= 1 " * n + "."),
                           ("title words of a numbered heading", "5.2 Pg: " + "Gradient " * n + "As each rank does.")):
            doc = Document(doc_id="m", url="https://example.org/m", title="M", blocks=(Block(para),),
                           content_type="html")
            t0 = cpu_seconds()
            got = split_document(doc)
            cut = [glued.heading_end(x.text) > 0 or features.furniture(x.text) for x in got]
            print(f"sentences of a paragraph of {n:,} {what} ({len(para):,} chars): {cpu_seconds() - t0:.2f} CPU s, "
                  f"{len(got):,} sentences, {sum(cut)} with a heading cut off or furniture")

    for n in (args.lists // 4, args.lists):
        text = "Theano [5, 4] and a tensor of shape [8, 1] and " * n + "so on."
        t0 = cpu_seconds()
        quoted = for_answer(text)
        print(f"a sentence of {2 * n:,} bracketed lists ({len(text):,} chars) as quoted: "
              f"{cpu_seconds() - t0:.2f} CPU s, {quoted.count('[8, 1]'):,} values kept")


if __name__ == "__main__":
    main()
