"""Benchmark: the real pipeline on N generated passages, and what a rebuild and a query cost at that size.

    .venv/bin/python bench/scale.py --chunks 20000 [--json] [--save] [--home DIR] [--shipped-text]

Papers are generated deterministically (seeded) from sentences: the web snapshot's own (its HTML and
PDF records extracted once by the product's extractor and cached in ``bench/.cache/``) when
``../shared/websnap`` exists, else the text shipped in ``bench/data/scale_sentences.txt``
(``--shipped-text`` forces that). Each paper has a title, authors, a year (2012-2025), a kind (mostly
``paper``) and text for 45-60 passages; they go into the home's ``corpus/local/scale/`` as JSON Lines
files of records, the product's offline way in for documents that come with their metadata.

Embedding is done by a fast deterministic stand-in (``bench/standin.py``, feature hashing), swapped in
inside this benchmark's own processes only: the numbers are of everything but the model, whose cost
``embed_throughput.py`` measures. Settings are otherwise the product's defaults.

Steps, each in its own process so that CPU and peak memory are its own:

1. a full build (``KnowledgeBase.build(offline=True)``); 2. a no-change rebuild; 3. a rebuild after
1 % of the papers changed a few sentences (same ids); 4. a fresh reader process: open the published
version, work out the off-topic check's background (:func:`dmlqa.query.topic.background`, what ``prewarm``
does for a version with its sentence vectors), then 100 searches, 100 searches filtered by kind and year and
30 extractive asks, one at a time. A build step's ``cpu_s`` is user + system time of its process and every
child it waited for, ``peak_rss_mib`` the kernel's high-water mark (``ru_maxrss``, the larger of itself and
its children); ``embed_cpu_s`` is the stand-in encoder's own CPU time and ``cpu_s_minus_embedding`` the rest,
the figure issue 20's build targets are stated in.

Prints one JSON object (``--json``) or a table; ``--save`` merges it into ``bench/results/scale.json``
under the requested chunk count.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SHIPPED = BENCH / "data" / "scale_sentences.txt"
CACHE = BENCH / ".cache"
RESULTS = BENCH / "results" / "scale.json"
DEFAULT_SHARED = ROOT.parent / "shared"
#: Changing what is harvested from the snapshot changes this, so an old cache is not read.
HARVEST_FORMAT = "1"
#: The folder under corpus/local that holds the generated papers.
SCALE_DIR = "scale"
PAPERS_PER_FILE = 100
CHUNKS_PER_PAPER = (45, 60)
YEARS = (2012, 2025)
KINDS = (("paper", 0.80), ("article", 0.12), ("docs", 0.08))
SEARCHES, ASKS = 100, 30
FILTER = {"kinds": ["paper"], "since": 2018}
#: Sentences a changed paper gets rewritten.
CHANGED_SENTENCES = 5

_TITLE_A = ("Scalable", "Efficient", "Elastic", "Adaptive", "Hierarchical", "Asynchronous", "Decentralised",
            "Communication-Efficient", "Memory-Efficient", "Fault-Tolerant", "Sparse", "Overlapped", "Sharded",
            "Heterogeneous", "Compressed", "Pipelined", "Robust", "Topology-Aware", "Low-Precision", "Federated")
_TITLE_B = ("Gradient Aggregation", "Pipeline Scheduling", "Tensor Partitioning", "Parameter Sharding",
            "Collective Communication", "Checkpointing", "Optimizer State Partitioning", "Expert Routing",
            "Activation Recomputation", "Data Loading", "Job Scheduling", "Model Averaging", "Gradient Compression",
            "Mixed-Precision Training", "Sequence Parallelism", "Embedding Sharding", "Cluster Placement",
            "Straggler Mitigation", "Batch Size Scaling", "Kernel Fusion")
_TITLE_C = ("Large Language Models", "Recommendation Models", "Vision Transformers", "Graph Neural Networks",
            "Mixture-of-Experts Models", "Speech Recognition", "Reinforcement Learning", "Commodity Clusters",
            "Supercomputers", "Edge Devices", "Multi-Tenant Clusters", "Geo-Distributed Data Centres")
_HEADINGS = ("Introduction", "Background", "Related Work", "Design", "Method", "Implementation", "System Overview",
             "Evaluation", "Experiments", "Results", "Discussion", "Limitations", "Conclusion")
_NAMES = ("Ada", "Bo", "Chen", "Dana", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lena", "Mira",
          "Nils", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Vera", "Wei", "Yusuf", "Zofia")
_SURNAMES = ("Abe", "Berg", "Costa", "Dahl", "Eze", "Fischer", "Gupta", "Horvat", "Ito", "Jensen", "Kowalski",
             "Laine", "Moreau", "Nakamura", "Okafor", "Petrov", "Quispe", "Rossi", "Silva", "Tanaka", "Usman",
             "Varga", "Weber", "Xu", "Yilmaz", "Zhou")


# -- sentences -----------------------------------------------------------------------------------------


def snapshot_sentences(websnap: Path) -> list[str]:
    """The quotable prose sentences of the snapshot's documents, extracted once and cached.

    The cache is keyed by the WARC's size and modification time, so a new snapshot is read again.
    """
    warc = websnap / "snapshot.warc.gz"
    st = warc.stat()
    key = hashlib.sha256(f"{HARVEST_FORMAT}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    cached = CACHE / f"scale_sentences-{key}.txt"
    if cached.is_file():
        return cached.read_text(encoding="utf-8").splitlines()
    sentences = list(_harvest(warc))
    CACHE.mkdir(parents=True, exist_ok=True)
    ignore = CACHE / ".gitignore"
    if not ignore.exists():  # the cache ignores itself, as .pytest_cache does: nothing here is committed
        ignore.write_text("# derived from ../shared by bench/scale.py\n*\n", encoding="utf-8")
    tmp = cached.with_suffix(".tmp")
    tmp.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    os.replace(tmp, cached)
    return sentences


def _harvest(warc: Path) -> Iterator[str]:
    """Every distinct sentence of the archived pages and PDFs that reads as prose worth quoting."""
    import logging

    from warcio.archiveiterator import ArchiveIterator

    from dmlqa.extract import extract_bytes, split_document, to_document
    from dmlqa.models import Resource

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    seen: set[str] = set()
    with warc.open("rb") as fh:
        for record in ArchiveIterator(fh):
            if record.rec_type != "response" or record.http_headers is None:
                continue
            if record.http_headers.get_statuscode() != "200":
                continue
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            body = record.content_stream().read()
            try:
                extracted = extract_bytes(body, record.http_headers.get_header("Content-Type") or "", url=url)
            except Exception:  # noqa: BLE001 - a page the product cannot read gives no sentences, as in a build
                continue
            doc = to_document(Resource(id=url, url=url, title=extracted.title or url), extracted,
                              source_url=url, sha256="")
            for s in split_document(doc):
                text = s.text
                if s.role != "prose" or text in seen or not _plain_sentence(text):
                    continue
                seen.add(text)
                yield text


def _plain_sentence(text: str) -> bool:
    """A sentence a generated paper can carry: one line of prose, no link, mostly letters."""
    if not 40 <= len(text) <= 300 or len(text.split()) < 6 or "http" in text or "\n" in text:
        return False
    if not (text[0].isupper() and text[-1] in ".?!"):
        return False
    letters = sum(c.isalpha() or c == " " for c in text)
    return letters >= 0.85 * len(text)


def load_sentences(shared: Path | None) -> tuple[list[str], str]:
    """(sentences, where they came from): the snapshot's when ``shared`` has it, else the shipped text."""
    if shared is not None and (shared / "websnap" / "snapshot.warc.gz").is_file():
        sentences = snapshot_sentences(shared / "websnap")
        if len(sentences) >= 200:
            return sentences, "snapshot"
    lines = [line.strip() for line in SHIPPED.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")], "shipped"


# -- papers --------------------------------------------------------------------------------------------


@dataclass
class Paper:
    """One generated paper: its record fields and its text as (heading, sentence indexes) sections."""

    doc_id: str
    title: str
    year: int
    kind: str
    authors: list[str]
    sections: list[tuple[str, list[int]]]

    def record(self, pool: Sequence[str]) -> dict[str, Any]:
        # A record's text is one block with whitespace collapsed (the product reads records so), so headings
        # run into the text as they do in a PDF's text layer; unnumbered, as "1. Intro" would start a list item.
        parts = [f"{heading}\n" + " ".join(pool[i] for i in sentences) for heading, sentences in self.sections]
        return {"id": self.doc_id, "title": self.title, "year": self.year, "kind": self.kind,
                "authors": self.authors, "text": "\n\n".join(parts)}


class Generator:
    """Papers of a target size from a sentence pool, each a pure function of (seed, index)."""

    def __init__(self, pool: Sequence[str], tokens: Sequence[int], tokens_per_chunk: float, seed: int) -> None:
        self.pool = pool
        self.tokens = tokens
        self.tokens_per_chunk = tokens_per_chunk
        self.seed = seed

    def paper(self, i: int) -> Paper:
        rng = random.Random(f"{self.seed}:paper:{i}")
        budget = rng.randint(*CHUNKS_PER_PAPER) * self.tokens_per_chunk
        headings = ["Introduction", *rng.sample(_HEADINGS[1:-1], rng.randint(2, 5)), "Conclusion"]
        per_section = budget / len(headings)
        sections = []
        for heading in headings:
            picked: list[int] = []
            used = 0
            while used < per_section:
                j = rng.randrange(len(self.pool))
                picked.append(j)
                used += self.tokens[j]
            sections.append((heading, picked))
        title = (f"{rng.choice(_TITLE_A)} {rng.choice(_TITLE_B)} for {rng.choice(_TITLE_C)}: "
                 f"Study {i + 1}")  # the number keeps titles distinct: equal titles are merged as one work
        authors = [f"{rng.choice(_NAMES)} {rng.choice(_SURNAMES)}" for _ in range(rng.randint(1, 4))]
        kind = rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS])[0]
        return Paper(f"scale-{i:06d}", title, rng.randint(*YEARS), kind, authors, sections)

    def changed(self, paper: Paper, revision: int) -> Paper:
        """``paper`` with a few sentences rewritten: new content under the same id."""
        rng = random.Random(f"{self.seed}:change:{revision}:{paper.doc_id}")
        sections = [(h, list(s)) for h, s in paper.sections]
        for _ in range(CHANGED_SENTENCES):
            _, sentences = rng.choice(sections)
            k = rng.randrange(len(sentences))
            sentences[k] = (sentences[k] + 1 + rng.randrange(len(self.pool) - 1)) % len(self.pool)
        return Paper(paper.doc_id, paper.title, paper.year, paper.kind, paper.authors, sections)


def _chunker() -> Any:
    """The product's chunker at the default settings (sizes in the bundled model's tokens)."""
    from dmlqa.index.chunk import Chunker, TokenCounter
    from dmlqa.index.embed import model_dir
    from dmlqa.settings import BUNDLED_MODEL, IndexConfig

    cfg = IndexConfig()
    counter = TokenCounter.from_model_dir(model_dir(BUNDLED_MODEL))
    return Chunker(counter, chunk_tokens=cfg.chunk_tokens, overlap=cfg.chunk_overlap)


def make_generator(pool: Sequence[str], seed: int) -> Generator:
    """A generator whose papers chunk to 45-60 passages: tokens per passage measured with the product's
    chunker on sample papers parsed as the build parses them."""
    from dmlqa.catalog.local import parse_record

    chunker = _chunker()
    tokens = [chunker.counter.count(s) for s in pool]
    probe = Generator(pool, tokens, 150.0, seed)
    sample_tokens = sample_chunks = 0
    for i in range(8):
        paper = probe.paper(10_000_000 + i)  # indexes no real paper uses
        doc = parse_record(paper.record(pool), f"{SCALE_DIR}/probe.jsonl")
        sample_tokens += sum(tokens[j] for _, s in paper.sections for j in s)
        sample_chunks += len(chunker.chunk(doc))
    return Generator(pool, tokens, sample_tokens / max(sample_chunks, 1), seed)


def write_papers(folder: Path, papers: Sequence[Paper], pool: Sequence[str],
                 files: Sequence[int] | None = None) -> None:
    """JSON Lines files of :data:`PAPERS_PER_FILE` records each, replaced atomically; ``files``: only those."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = set(range((len(papers) + PAPERS_PER_FILE - 1) // PAPERS_PER_FILE)) if files is None else set(files)
    for f in sorted(wanted):
        path = folder / f"papers-{f:05d}.jsonl"
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for paper in papers[f * PAPERS_PER_FILE : (f + 1) * PAPERS_PER_FILE]:
                fh.write(json.dumps(paper.record(pool), ensure_ascii=False) + "\n")
        os.replace(tmp, path)


def make_queries(pool: Sequence[str], seed: int) -> dict[str, list[str]]:
    """Searches (4-7 consecutive words of a pool sentence) and questions, deterministic."""
    rng = random.Random(f"{seed}:queries")

    def phrase(lo: int, hi: int) -> str:
        words = pool[rng.randrange(len(pool))].rstrip(".?!").split()
        n = min(len(words), rng.randint(lo, hi))
        start = rng.randrange(len(words) - n + 1)
        return " ".join(words[start : start + n])

    searches = [phrase(4, 7) for _ in range(SEARCHES)]
    filtered = [phrase(4, 7) for _ in range(SEARCHES)]
    asks = [f"What is known about {phrase(3, 6).lower()}?" for _ in range(ASKS)]
    return {"searches": searches, "filtered": filtered, "asks": asks}


# -- measuring -----------------------------------------------------------------------------------------


def disk_mib(path: Path) -> float:
    """Space the files under ``path`` take on disk, a hard-linked file counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:  # pruned while we walked
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return round(total / 2**20, 1)


def _usage(wall_start: float) -> dict[str, float]:
    """CPU seconds of this process and its waited children, wall seconds, and the kernel's peak RSS."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return {"cpu_s": round(cpu, 2), "wall_s": round(time.perf_counter() - wall_start, 2),
            "peak_rss_mib": round(max(me.ru_maxrss, kids.ru_maxrss) / 1024, 1)}


def _status_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS: now, VmHWM: its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _percentile(values: Sequence[float], q: float) -> float:
    import numpy as np

    return round(float(np.percentile(values, q)), 2) if values else 0.0


def current_meta(home: Path) -> dict[str, Any]:
    """The published version's meta.json (the home's layout, as the README documents it)."""
    index = home / "index"
    name = (index / "CURRENT").read_text(encoding="utf-8").strip()
    return json.loads((index / "versions" / name / "meta.json").read_text(encoding="utf-8"))


# -- the steps (each runs in its own process) ---------------------------------------------------------


def step_build(home: Path) -> dict[str, Any]:
    start = time.perf_counter()
    import standin

    import dmlqa

    encoder = standin.install()
    report = dmlqa.KnowledgeBase(home).build(offline=True).to_json()
    out = _usage(start)
    # the targets are stated "minus embedding": the stand-in counts its own CPU (a real model's is ~20 CPU-hours
    # at 1M passages, and is the Ray executor's and the GPU's business)
    out["embed_cpu_s"] = round(encoder.cpu_s, 2)
    out["cpu_s_minus_embedding"] = round(out["cpu_s"] - encoder.cpu_s, 2)
    out.update({key: report.get(key) for key in ("documents", "chunks", "embedded", "reused_embeddings",
                                                  "sentences", "embedded_sentences", "index_version", "seconds")})
    out["failed"] = len(report.get("failed", []))
    out["changes"] = {k: len(v) for k, v in (report.get("changes") or {}).items()}
    return out


def step_read(home: Path, queries_file: Path) -> dict[str, Any]:
    queries = json.loads(queries_file.read_text(encoding="utf-8"))
    import standin

    import dmlqa

    standin.install()
    t0 = time.perf_counter()
    kb = dmlqa.KnowledgeBase(home)
    kb.index_version()  # opens the published version: searching can start
    open_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    kb.search("warm up the query path", k=10)
    first_search_ms = (time.perf_counter() - t1) * 1000

    def timed(calls: Sequence[str], run: Any) -> tuple[list[float], int]:
        ms: list[float] = []
        results = 0
        for text in calls:
            c = time.process_time()
            got = run(text)
            ms.append((time.process_time() - c) * 1000)
            results += bool(got)
        return ms, results

    c0 = time.process_time()
    kb.prewarm()  # a version with its sentence vectors: only the off-topic check's background (16 probe questions)
    background_cpu_s = time.process_time() - c0
    plain, plain_hits = timed(queries["searches"], lambda q: kb.search(q, k=10))
    filtered, filtered_hits = timed(queries["filtered"], lambda q: kb.search(q, k=10, **FILTER))
    asks, answered = timed(queries["asks"], lambda q: not kb.ask(q, use_llm=False).refused)
    return {
        "open_s": round(open_s, 3), "first_search_ms": round(first_search_ms, 1),
        "off_topic_background_cpu_s": round(background_cpu_s, 3),
        "reader_rss_mib": _status_mib("VmRSS"), "reader_hwm_mib": _status_mib("VmHWM"),
        "search_p50_cpu_ms": _percentile(plain, 50), "search_p95_cpu_ms": _percentile(plain, 95),
        "filtered_search_p50_cpu_ms": _percentile(filtered, 50),
        "filtered_search_p95_cpu_ms": _percentile(filtered, 95),
        "ask_p50_cpu_ms": _percentile(asks, 50), "ask_p95_cpu_ms": _percentile(asks, 95),
        "searches_with_hits": plain_hits, "filtered_with_hits": filtered_hits, "asks_answered": answered,
    }


def run_step(args: list[str]) -> dict[str, Any]:
    """One step in a fresh interpreter; its last stdout line is its JSON."""
    # The product's defaults: no DMLQA_* setting of the caller's shell leaks into the measured home.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLQA_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")  # standin.py is found beside this script
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True,
                          env=env, check=False)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        sys.exit(f"error: step {' '.join(args[:2])} failed with status {proc.returncode}: {tail[0]}\n"
                 f"{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the whole benchmark -------------------------------------------------------------------------------


def run(chunks: int, home: Path, shared: Path | None, seed: int) -> dict[str, Any]:
    import dmlqa

    pool, source = load_sentences(shared)
    gen = make_generator(pool, seed)
    n_papers = max(1, round(chunks / (sum(CHUNKS_PER_PAPER) / 2)))
    papers = [gen.paper(i) for i in range(n_papers)]
    kb = dmlqa.KnowledgeBase(home, create=True)  # writes the default settings file: defaults it is
    folder = kb.settings.corpus_dir / "local" / SCALE_DIR
    write_papers(folder, papers, pool)
    fd, name = tempfile.mkstemp(prefix="dmlqa-scale-queries-", suffix=".json")
    queries = Path(name)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(make_queries(pool, seed), fh)

    try:
        full = run_step(["--step", "build", "--home", str(home)])
        no_change = run_step(["--step", "build", "--home", str(home)])
        rng = random.Random(f"{seed}:which-change")
        changed = sorted(rng.sample(range(n_papers), max(1, round(n_papers / 100))))
        before = disk_mib(home)
        for i in changed:
            papers[i] = gen.changed(papers[i], revision=1)
        write_papers(folder, papers, pool, files=sorted({i // PAPERS_PER_FILE for i in changed}))
        one = run_step(["--step", "build", "--home", str(home)])
        one["changed_documents"] = len(changed)
        one["added_mib"] = round(disk_mib(home) - before, 1)
        reader = run_step(["--step", "read", "--home", str(home), "--queries", str(queries)])
    finally:
        queries.unlink(missing_ok=True)

    meta = current_meta(home)
    versions = home / "index" / "versions"
    return {
        "chunks": full["chunks"], "documents": full["documents"],
        "full": full, "no_change": no_change, "one_percent": one,
        "version_mib": disk_mib(versions / meta["version"]), "home_mib": disk_mib(home),
        **{k: reader[k] for k in ("open_s", "reader_rss_mib", "search_p50_cpu_ms", "search_p95_cpu_ms",
                                  "filtered_search_p95_cpu_ms", "ask_p95_cpu_ms", "off_topic_background_cpu_s")},
        "reader": reader,
        "requested_chunks": chunks, "papers": n_papers, "sentence_source": source, "sentence_pool": len(pool),
        "sentences": one.get("sentences"), "encoder_key": meta.get("encoder_key"),
        "versions": sorted(p.name for p in versions.iterdir() if p.is_dir()),
        "nproc": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d"),
    }


def table(r: dict[str, Any]) -> str:
    rows = [("chunks / documents", f"{r['chunks']:,} / {r['documents']:,} ({r['sentence_source']} sentences)")]
    for name, key in (("full build", "full"), ("no-change rebuild", "no_change"), ("1 % changed", "one_percent")):
        s = r[key]
        share = f" ({100 * s['cpu_s'] / r['full']['cpu_s']:.1f} % of full)" if key != "full" else ""
        rows.append((name, f"{s['cpu_s']:.1f} CPU s{share} ({s['cpu_s_minus_embedding']:.1f} minus embedding), "
                           f"{s['wall_s']:.1f} s wall, peak {s['peak_rss_mib']:.0f} MiB, embedded {s['embedded']:,}"))
    rows += [
        ("1 % change adds", f"{r['one_percent']['added_mib']} MiB"),
        ("one version / home", f"{r['version_mib']} MiB / {r['home_mib']} MiB ({len(r['versions'])} versions)"),
        ("open / reader RSS", f"{r['open_s']} s / {r['reader_rss_mib']} MiB"),
        ("search p50 / p95", f"{r['search_p50_cpu_ms']} / {r['search_p95_cpu_ms']} CPU ms"),
        ("filtered search p95", f"{r['filtered_search_p95_cpu_ms']} CPU ms"),
        ("ask p95", f"{r['ask_p95_cpu_ms']} CPU ms"),
        ("off-topic background", f"{r['off_topic_background_cpu_s']} CPU s, once per version"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def save(result: dict[str, Any]) -> None:
    saved = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}
    saved[str(result["requested_chunks"])] = result
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(dict(sorted(saved.items(), key=lambda kv: int(kv[0]))), indent=2) + "\n",
                       encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, help="passages to generate (the result is within 10 %% of it)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ap.add_argument("--save", action="store_true", help=f"merge the result into {RESULTS.relative_to(ROOT)}")
    ap.add_argument("--home", type=Path, help="build here and keep it (a new or empty folder); default: a temp dir")
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="where websnap/ is (default: ../shared)")
    ap.add_argument("--shipped-text", action="store_true", help="generate from bench/data, even with the snapshot")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--note", help="a line saved with the result (which code, what else ran)")
    ap.add_argument("--step", choices=("build", "read"), help=argparse.SUPPRESS)  # one step, in its own process
    ap.add_argument("--queries", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.step:
        if args.home is None or (args.step == "read" and args.queries is None):
            ap.error("--step needs --home (and --queries for read)")
        out = step_build(args.home) if args.step == "build" else step_read(args.home, args.queries)
        print(json.dumps(out))
        return
    if args.chunks is None:
        ap.error("--chunks N is required")
    if args.chunks < 500:
        ap.error(f"--chunks must be at least 500 (about 10 papers), got {args.chunks}")
    if args.home is not None and args.home.exists() and (not args.home.is_dir() or any(args.home.iterdir())):
        ap.error(f"--home {args.home} is not a new or empty folder: the benchmark builds from nothing")

    keep = args.home is not None
    work = None if keep else Path(tempfile.mkdtemp(prefix="dmlqa-scale-"))
    home = args.home.resolve() if keep else work / "home"
    try:
        result = run(args.chunks, home, None if args.shipped_text else args.shared, args.seed)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    if args.note:
        result["note"] = args.note
    if args.save:
        save(result)
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
