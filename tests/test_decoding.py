"""Any bytes decode and any text is accepted (issue 19, items 4 and 5, and the file name with a newline).

A page may declare a charset that is no text encoding (``hex``, ``base64``, ``rot13``...) or one
Python reads oddly (``utf-7``, ``unicode_escape``); valid JSON may carry a lone surrogate
(``"\\ud800"``); a file name may hold a newline. Each reaches a real component here: the decoder,
a real build of real files, the API on the index it published, and the installed ``dmlqa`` command
in a subprocess (the honest test of "no traceback").
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import dmlqa
from dmlqa.catalog.local import parse_record, safe_id
from dmlqa.extract.documents import extract_bytes
from dmlqa.extract.text import decode_text
from dmlqa.query.batch import read_queries, read_question_file
from dmlqa.textsafe import mend_input, replace_lone_surrogates

DMLQA = str(Path(sys.executable).with_name("dmlqa"))

#: Labels that name no text charset: Python's bytes-to-bytes and str-to-str codecs, its own escape and
#: host-name codecs, UTF-7 (barred by WHATWG), "undefined", and names that are no codec at all.
NOT_CHARSETS = ["hex", "base64", "uu", "zlib", "bz2", "rot13", "quopri", "idna", "punycode", "utf-7",
                "unicode_escape", "raw_unicode_escape", "undefined", "nonsense", "x" * 500]

PAGE = ("<html><head><meta charset=\"{label}\"><title>Pipeline notes</title></head><body>"
        "<p>Pipeline parallelism splits a model into stages; caf\u00e9 \\ud800 +2AA- stays as written.</p>"
        "</body></html>")


def has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


# -- the one rule for lone surrogates ---------------------------------------------------------------


def test_lone_surrogates_are_replaced_and_pairs_joined() -> None:
    assert replace_lone_surrogates("a\ud800b") == "a\ufffdb"
    assert replace_lone_surrogates("x\udcff") == "x\ufffd"
    assert replace_lone_surrogates("\ud83d\ude00") == "\U0001f600"  # JSON's "\ud83d\ude00" is one emoji
    assert replace_lone_surrogates("\ude00\ud83d") == "\ufffd\ufffd"  # the wrong order pairs nothing
    assert replace_lone_surrogates("caf\u00e9 \u4e2d") == "caf\u00e9 \u4e2d"
    assert mend_input(["a\ud800", None, 3]) == ["a\ufffd", None, 3]
    assert mend_input(None) is None


# -- decoding: every declared charset, any bytes ----------------------------------------------------


@pytest.mark.parametrize("label", NOT_CHARSETS)
def test_a_charset_that_is_no_text_encoding_falls_back_to_detection(label: str) -> None:
    body = PAGE.format(label=label).encode("utf-8")
    for text in (decode_text(body, html=True), decode_text(body, label), decode_text(body, label, html=True)):
        assert text == body.decode("utf-8")  # read as the UTF-8 it is, escapes left as written
    # the fetched path: the charset comes from the Content-Type header
    got = extract_bytes(body, f"text/html; charset={label}", url="https://example.org/p")
    text = " ".join(b.text for b in got.blocks)
    assert "caf\u00e9" in text and "Pipeline parallelism" in text and not has_surrogate(text)


def test_a_real_declared_charset_is_still_honoured() -> None:
    russian = "Параллелизм конвейера делит модель на стадии между устройствами."
    body = f'<html><head><meta charset="koi8-r"></head><body><p>{russian}</p></body></html>'.encode("koi8-r")
    assert russian in decode_text(body, html=True)
    assert decode_text("caf\u00e9".encode("cp1252"), "iso-8859-1") == "caf\u00e9"


def test_random_bytes_under_every_python_codec_name_decode_to_text() -> None:
    import encodings
    import pkgutil

    names = sorted({m.name for m in pkgutil.iter_modules(encodings.__path__)} - {"aliases"})
    rnd = random.Random(19)
    bodies = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300))) for _ in range(12)]
    bodies += [b"+2AA- \\ud800", b"\xff\xfe\x00\xd8x\x00", b"\xfe\xff\xd8\x00\x00x"]  # utf-7, escapes, BOMs
    for name in names:
        for body in bodies:
            for text in (decode_text(body, name), decode_text(b'<meta charset="%s">' % name.encode() + body,
                                                               html=True)):
                assert isinstance(text, str) and not has_surrogate(text), (name, body)


# -- batch files and records ------------------------------------------------------------------------


def test_query_and_question_files_mend_lone_surrogates(tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q\\ud800", "text": "fusion \\ud800 buffer \\ud83d\\ude00"}\n', encoding="utf-8")
    assert read_queries(queries) == [("q\ufffd", "fusion \ufffd buffer \U0001f600")]
    questions = tmp_path / "qs.jsonl"
    questions.write_text('{"id": 1, "question": "what is \\udfff ZeRO?"}\n', encoding="utf-8")
    assert read_question_file(questions)[0].question == "what is \ufffd ZeRO?"


def test_ids_carry_no_control_characters() -> None:
    assert safe_id("notes/a\nb.txt") == "notes/a%0Ab.txt"
    assert safe_id("x\udcffy.md") == "x%FFy.md"  # an undecodable byte of a file name, as Python keeps it
    assert safe_id("tab\there\u2028") == "tab%09here%E2%80%A8"
    assert safe_id("100% caf\u00e9.md") == "100% caf\u00e9.md"
    doc = parse_record({"id": "rec\r\n1", "text": "some text"}, "r.jsonl")
    assert not isinstance(doc, str) and doc.doc_id == "rec%0D%0A1"


# -- a real build, the API on it, the installed command ---------------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[dmlqa.KnowledgeBase, Any]:
    root = tmp_path_factory.mktemp("decoding")
    notes = root / "notes"
    notes.mkdir()
    (notes / "fusion.md").write_text(
        "# Tensor Fusion\n\nHorovod batches small allreduce operations into one larger fusion buffer. "
        "The fusion buffer is 128 MB by default.\n", encoding="utf-8")
    (notes / "hex.html").write_bytes(PAGE.format(label="hex").encode("utf-8"))
    (notes / "rot.html").write_bytes(PAGE.format(label="rot13").replace("Pipeline parallelism", "Sharded "
                                                                         "checkpoints").encode("utf-8"))
    (notes / "a\nb.txt").write_text("Gradient compression reduces communication in data parallel training.\n",
                                    encoding="utf-8")
    kb = dmlqa.KnowledgeBase(root / "kb", create=True)
    assert len(kb.add([notes]).added) == 4
    return kb, kb.build(offline=True)


def test_a_build_with_non_text_charsets_and_a_newline_file_name(home) -> None:  # noqa: ANN001
    kb, report = home
    assert report.index_version
    failed = {f.url: f.error for f in report.failed}
    assert all(f and "\n" not in f for f in failed), failed
    assert kb.search("fusion buffer default size", k=1)[0].doc_id == "local:notes/fusion.md"
    # the pages that declare hex and rot13 are read by detection (or, at worst, one failure with a reason)
    for name, words in (("hex.html", "pipeline parallelism stages"), ("rot.html", "sharded checkpoints")):
        if f"corpus/local/notes/{name}" in failed:
            assert failed[f"corpus/local/notes/{name}"]
        else:
            assert kb.search(words, k=1)[0].doc_id == f"local:notes/{name}"
    hit = kb.search("gradient compression communication", k=1)[0]
    assert hit.doc_id == "local:notes/a%0Ab.txt" and "\n" not in hit.title
    assert all(not any(ord(c) < 32 for c in d) for d in kb.documents())
    # the escaped id names the file, which is still there under its own name
    removal = kb.remove("local:notes/a%0Ab.txt")
    assert removal.files == ("notes/a\nb.txt",)
    assert not (kb.home / "corpus" / "local" / "notes" / "a\nb.txt").exists()


def test_api_entry_points_take_lone_surrogates(home) -> None:  # noqa: ANN001
    kb, _ = home
    hits = kb.search("fusion \ud800 buffer", k=3)
    assert hits[0].doc_id == "local:notes/fusion.md"
    answer = kb.ask("What is the default size of the fusion \udfff buffer?")
    assert "128 MB" in answer.answer and not has_surrogate(answer.question)
    follow = kb.ask("what about its size?", previous="fusion buffer \ud800")
    assert not has_surrogate(follow.question)
    related = kb.related(["fusion \ud800 buffer", "\udfffTensor Fusion"], k=3)
    assert not has_surrogate(json.dumps(related.targets, ensure_ascii=False))
    assert kb.related("\ud800 fusion buffer", k=3).query is not None


def run_dmlqa(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([DMLQA, *args], capture_output=True, text=True, env=env, timeout=600, errors="replace")


def test_cli_query_and_question_files_with_a_lone_surrogate(home, tmp_path: Path) -> None:  # noqa: ANN001
    kb, _ = home
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q\\ud800", "text": "fusion \\ud800 buffer"}\n'
                       '{"id": "two", "text": "\\udfff"}\n', encoding="utf-8")  # the second: a mended non-word
    out = run_dmlqa("--home", str(kb.home), "search", "--queries", str(queries), "--json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert [r["query_id"] for r in rows] == ["q\ufffd", "two"]
    assert rows[0]["hits"][0]["doc_id"] == "local:notes/fusion.md"
    plain = run_dmlqa("--home", str(kb.home), "search", "--queries", str(queries))
    assert plain.returncode == 0 and "Traceback" not in plain.stderr and "fusion" in plain.stdout.lower()
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "q\\ud800", "question": "What is the default size of the fusion \\ud800 '
                         'buffer?"}\n', encoding="utf-8")
    asked = run_dmlqa("--home", str(kb.home), "ask", "--questions", str(questions))
    assert asked.returncode == 0 and "Traceback" not in asked.stderr, asked.stderr
    assert "128 MB" in asked.stdout
