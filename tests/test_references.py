"""Reference lists parsed (issue 12, item 1), on reference sections written here as PDF documents.

Each document is what the PDF extractor makes of a paper: one block per page, lines as the text
layer wraps them, with running headers and page numbers where the pages break.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlqa.extract.reference_entries import reference_zone
from dmlqa.extract.references import ParsedReferences, parse_references
from dmlqa.models import ET_AL, Block, Document, Reference

BODY = ("Training giant models needs more memory than one accelerator has, and the systems below split it in "
        "different ways. ")


def paper(*pages: str, content_type: str = "pdf") -> Document:
    """A paper whose pages are the given texts (page numbers from 1)."""
    return Document(doc_id="p", url="https://arxiv.org/abs/2000.00001", title="A Paper",
                    blocks=tuple(Block(t, page=i) for i, t in enumerate(pages, 1)), content_type=content_type)


def by_marker(parsed: ParsedReferences) -> dict[str, Reference]:
    return {r.marker: r for r in parsed.references}


NUMBERED_BODY = (
    BODY * 3 + "Pipeline parallelism splits the layers into stages [3, 12].\n"
    "Several systems offload state to the host [10–14].\n"
    "Tensor parallelism [2] splits each layer; ZeRO [12,13] partitions the optimizer state.\n"
)
NUMBERED_REFS = """References
[1] M. Abadi, P. Barham, J. Chen, and X. Zheng. Tensorflow: A system for large-scale machine learning. In
12th USENIX Symposium on Operating Systems Design and Implementation (OSDI 16), pages 265–283, 2016.
[2] Mohammad Shoeybi, Mostofa Patwary, Raul Puri, Patrick LeGresley, Jared Casper, and Bryan Catanzaro.
Megatron-lm: Training multi-billion parameter language models using model parallelism. arXiv preprint
arXiv:1909.08053, 2019.
[3] Yanping Huang, Youlong Cheng, Ankur Bapna, et al. GPipe: Efficient training of giant neural networks
using pipeline parallelism. CoRR, abs/1811.06965, 2018.
[4] Deepak Narayanan, Aaron Harlap, Amar Phanishayee, Vivek Seshadri, Nikhil R. Devanur, Gregory R.
Ganger, Phillip B. Gibbons, and Matei Zaharia. 2019. PipeDream: Generalized Pipeline Parallelism for DNN
Training. In Proceedings of the 27th ACM Symposium on Operating Systems Principles. 1–15.
https://doi.org/10.1145/3341301.3359646.
[5] Dmitry Lepikhin et al. GShard: Scaling giant models with conditional computation and automatic sharding.
https://arxiv.org/abs/2006.16668v2, 2020.
"""
MORE_REFS = "\n".join(
    f"[{n}] Ann {chr(64 + n)}. Person and Other Person. An ef-\nficient system number {n} for large-scale training. "
    f"In MLSys, {2000 + n}." for n in range(6, 15)
)


def test_numbered_list_entries_are_split_and_parsed() -> None:
    parsed = parse_references(paper(NUMBERED_BODY, NUMBERED_REFS + MORE_REFS))
    refs = by_marker(parsed)
    assert [r.ordinal for r in parsed.references] == list(range(1, 15))
    assert [r.marker for r in parsed.references] == [str(n) for n in range(1, 15)]
    assert parsed.skipped == 0

    tf = refs["1"]
    assert tf.authors == ("M. Abadi", "P. Barham", "J. Chen", "X. Zheng")
    assert tf.title == "Tensorflow: A system for large-scale machine learning"
    assert tf.venue == "12th USENIX Symposium on Operating Systems Design and Implementation (OSDI 16)"
    assert tf.year == 2016 and tf.page == 2
    assert tf.raw.startswith("M. Abadi, P. Barham") and "\n" not in tf.raw

    assert refs["2"].arxiv_id == "1909.08053" and refs["2"].venue == "arXiv preprint"
    assert refs["2"].title.startswith("Megatron-lm: Training multi-billion parameter")
    gpipe = refs["3"]
    assert gpipe.arxiv_id == "1811.06965" and "GPipe" in gpipe.title and gpipe.year == 2018
    assert gpipe.authors == ("Yanping Huang", "Youlong Cheng", "Ankur Bapna", ET_AL)
    # ACM style: the year right after the authors, a DOI link at the end
    pipedream = refs["4"]
    assert pipedream.year == 2019 and pipedream.doi == "10.1145/3341301.3359646"
    assert pipedream.title == "PipeDream: Generalized Pipeline Parallelism for DNN Training"
    assert pipedream.url == "https://doi.org/10.1145/3341301.3359646"
    assert refs["5"].arxiv_id == "2006.16668" and refs["5"].authors == ("Dmitry Lepikhin", ET_AL)
    # a word hyphenated at a line end is joined again
    assert refs["6"].title == "An efficient system number 6 for large-scale training"


def test_numbered_citations_give_each_reference_its_sentence() -> None:
    parsed = parse_references(paper(NUMBERED_BODY, NUMBERED_REFS + MORE_REFS))
    ctx = {int(r.marker): parsed.contexts.get(r.ordinal) for r in parsed.references}
    assert ctx[3] == ctx[12] == "Pipeline parallelism splits the layers into stages [3, 12]."
    assert all(ctx[n] == "Several systems offload state to the host [10–14]." for n in (10, 11, 13, 14))
    assert ctx[2].startswith("Tensor parallelism [2] splits each layer")
    assert ctx[1] is None and ctx[5] is None  # never cited in the body
    assert all(len(c) <= 400 for c in parsed.contexts.values())


AUTHOR_YEAR_BODY = (
    BODY * 3 + "GPipe pipelines micro-batches (Huang et al., 2019).\n"
    "Huang et al. (2019) report near-linear speedups, and so do others (Narayanan et al., 2019a; Shoeybi et al., "
    "2019).\nRematerialization was studied early (Chen and Guestrin, 2016) and later by Jain et al. (2020).\n"
    "PipeDream-2BW followed (Narayanan et al., 2019b).\n"
)
AUTHOR_YEAR_REFS = """REFERENCES
Chen, T. and Guestrin, C. Training deep nets with sublinear memory cost. arXiv preprint arXiv:1604.06174,
2016.
Huang, Y., Cheng, Y., Bapna, A., Firat, O., Chen, M. X., Chen, D., Lee, H., Ngiam, J., Le, Q. V., Wu,
Y., and Chen, Z. GPipe: Efficient training of giant neural networks using pipeline parallelism. In
Advances in Neural Information Processing Systems, pp. 103–112, 2019.
Paras Jain, Ajay Jain, Aniruddha Nrusimha, Amir Gholami, Pieter Abbeel, Kurt Keutzer, Ion Stoica, and
Joseph E. Gonzalez. Checkmate: Breaking the memory wall with optimal tensor rematerialization. In
Proceedings of Machine Learning and Systems, 2020.
Deepak Narayanan, Aaron Harlap, Amar Phanishayee, Vivek Seshadri, Nikhil R. Devanur, Gregory R.
Ganger, Phillip B. Gibbons, and Matei Zaharia. Pipedream: generalized pipeline parallelism for dnn
training. In SOSP, 2019a.
Deepak Narayanan, Amar Phanishayee, Kaiyu Shi, Xie Chen, and Matei Zaharia. Memory-efficient
pipeline-parallel dnn training. arXiv preprint arXiv:2006.09503, 2019b.
Shoeybi, M., Patwary, M., Puri, R., LeGresley, P., Casper, J., and Catanzaro, B. Megatron-lm: Training
multi-billion parameter language models using model parallelism. CoRR, abs/1909.08053, 2019.
"""


def test_author_year_list_entries_and_markers() -> None:
    parsed = parse_references(paper(AUTHOR_YEAR_BODY, AUTHOR_YEAR_REFS))
    assert [r.marker for r in parsed.references] == [
        "Chen and Guestrin, 2016", "Huang et al., 2019", "Jain et al., 2020", "Narayanan et al., 2019a",
        "Narayanan et al., 2019b", "Shoeybi et al., 2019"]
    refs = by_marker(parsed)
    gpipe = refs["Huang et al., 2019"]
    assert gpipe.authors[:3] == ("Y. Huang", "Y. Cheng", "A. Bapna") and len(gpipe.authors) == 11
    assert gpipe.title == "GPipe: Efficient training of giant neural networks using pipeline parallelism"
    assert gpipe.venue == "Advances in Neural Information Processing Systems" and gpipe.year == 2019
    assert refs["Chen and Guestrin, 2016"].arxiv_id == "1604.06174"
    assert refs["Shoeybi et al., 2019"].arxiv_id == "1909.08053"
    checkmate = refs["Jain et al., 2020"]
    assert checkmate.authors[0] == "Paras Jain" and checkmate.title.startswith("Checkmate: Breaking")
    assert refs["Narayanan et al., 2019b"].title == "Memory-efficient pipeline-parallel dnn training"


def test_author_year_citations_find_their_sentences() -> None:
    parsed = parse_references(paper(AUTHOR_YEAR_BODY, AUTHOR_YEAR_REFS))
    ctx = {r.marker: parsed.contexts.get(r.ordinal) for r in parsed.references}
    assert ctx["Huang et al., 2019"] == "GPipe pipelines micro-batches (Huang et al., 2019)."
    assert ctx["Narayanan et al., 2019a"].startswith("Huang et al. (2019) report near-linear speedups")
    assert ctx["Shoeybi et al., 2019"] == ctx["Narayanan et al., 2019a"]
    assert ctx["Chen and Guestrin, 2016"].startswith("Rematerialization was studied early")
    assert ctx["Jain et al., 2020"] == ctx["Chen and Guestrin, 2016"]  # narrative "Jain et al. (2020)"
    assert ctx["Narayanan et al., 2019b"] == "PipeDream-2BW followed (Narayanan et al., 2019b)."


def test_an_entry_split_across_a_page_break_with_running_header_and_page_number() -> None:
    header = "Scaling Giant Models: A Study"
    pages = [
        f"{header}\n{BODY * 4}\n1",
        f"{header}\n{BODY * 4}\n2",
        f"{header}\nReferences\n[1] A. Author. First paper title here. In OSDI, 2018.\n"
        "[2] B. Writer, C. Coauthor, and D. Third. A paper whose entry runs over the page break\n3",
        f"{header}\nand ends on the next page. In NSDI, 2020.\n[3] E. Last. The final paper. In SOSP, 2021.\n4",
    ]
    parsed = parse_references(paper(*pages))
    split = by_marker(parsed)["2"]
    assert split.title == "A paper whose entry runs over the page break and ends on the next page"
    assert split.venue == "NSDI" and split.year == 2020 and split.page == 3
    assert header not in split.raw and " 3 " not in split.raw
    assert by_marker(parsed)["3"].page == 4 and len(parsed.references) == 3


def test_lines_are_joined_as_the_entry_was_printed() -> None:
    refs = ("References\n[1]\nA. Author. Large-\nScale training of ef-\nficient models. https://www.deep\n"
            "speed.ai/news/2020/05/27/fastest-bert-\ntraining.html, 2020.\n"
            "[2] B. Author. Baidu ring allreduce. URL http://research.baidu.com/\nbringing-hpc-techniques/, 2017.\n")
    r = by_marker(parse_references(paper(BODY * 5, refs)))
    assert r["1"].authors == ("A. Author",) and r["1"].title == "Large-Scale training of efficient models"
    assert r["1"].url == "https://www.deepspeed.ai/news/2020/05/27/fastest-bert-training.html"
    assert r["2"].url == "http://research.baidu.com/bringing-hpc-techniques/" and r["2"].year == 2017


def test_identifiers_in_their_many_spellings() -> None:
    refs = """References
[1] A. One. Title one. arXiv:2006.16668, 2020.
[2] B. Two. Title two. https://arxiv.org/abs/2006.16668v2.
[3] C. Three. Title three. CoRR abs/1811.06965, 2018.
[4] D. Four. Title four. arXiv preprint arXiv:1909.08053, 2019.
[5] E. Five. Title five. In SC, 2021. doi: 10.1145/3458817.3476205.
[6] F. Six. Title six. Journal of Things, 3(2), 2019. https://doi.org/10.1098/rsta.2019.0049).
[7] G. Seven. Title seven. http://proceedings.mlr.press/v97/zhao19c.html, 2019.
[8] H. Eight. Title eight. arXiv:cs/0112017, 2001.
"""
    r = by_marker(parse_references(paper(BODY * 5, refs)))
    assert [r[str(n)].arxiv_id for n in range(1, 5)] == ["2006.16668", "2006.16668", "1811.06965", "1909.08053"]
    assert r["2"].year == 2020  # dated by the arXiv id when the entry names no year
    assert r["5"].doi == "10.1145/3458817.3476205" and r["5"].venue == "SC"
    assert r["6"].doi == "10.1098/rsta.2019.0049" and r["6"].year == 2019
    assert r["7"].url == "http://proceedings.mlr.press/v97/zhao19c.html" and r["7"].year == 2019
    assert r["8"].arxiv_id == "cs/0112017"


def test_a_reference_list_of_2000_entries_is_parsed_whole() -> None:
    # Speed is the scale bench's business (bench/scale.py times the graph step); a wall-clock bound here
    # failed CI on a busy machine, so this checks only what the parser returns.
    lines = []
    for n in range(1, 2001):
        lines.append(f"[{n}] Alice Author{n}, Bob Builder, and Carol Coder. A study of pipeline parallelism {n}")
        lines.append(f"for giant models. In Proceedings of OSDI, pages 1–12, {1990 + n % 30}. arXiv:2006.{10000 + n}.")
    pages = [BODY * 10 + "We build on [1, 2] and on [1990–2000]."]
    for k in range(0, len(lines), 80):
        pages.append(("References\n" if k == 0 else "") + "\n".join(lines[k : k + 80]) + "\nA Running Header\n")
    doc = paper(*pages)
    parsed = parse_references(doc)
    assert len(parsed.references) == 2000 and parsed.skipped == 0
    assert parsed.references[1999].arxiv_id == "2006.12000" and parsed.references[1999].marker == "2000"
    assert "A Running Header" not in parsed.references[79].raw
    assert len(parsed.contexts) == 13


def test_junk_after_the_list_is_not_taken_for_entries() -> None:
    refs = ("References\n[1] A. Author. A real paper about pipelines. In OSDI, 2019.\n"
            "[2] B. Author. Another real paper about memory. In SOSP, 2020.\n"
            "Model Layers Hidden Heads GPUs\n1.5B 48 1600 16 64\n8B 72 3072 24 256\n20B 98 4096 32 512\n"
            "40B 88 5120 40 1024\n100B 125 8192 64 1024\n170B 212 8192 64 2048\n"
            + "These measurements were taken on the machines described in the evaluation section above. " * 4)
    appendix = ("A Proofs of the Theorems\nIn this appendix we prove Theorem 1 by induction over the stages, which "
                "needs the lemma on memory. " * 3)
    parsed = parse_references(paper(BODY * 5, refs + "\n" + appendix))
    assert [r.title for r in parsed.references] == ["A real paper about pipelines", "Another real paper about memory"]
    assert parsed.references[1].year == 2020 and parsed.skipped == 1  # the table and prose after [2]
    assert "Proofs" not in parsed.references[-1].raw and "1.5B" not in parsed.references[-1].raw


def test_the_list_ends_at_an_appendix_heading_but_not_at_an_author_initial() -> None:
    text = (BODY * 5 + "\nReferences\n[1] A. Ahmed, M. Aly, and\nA. J. Smola. Scalable inference. In WSDM, 2012.\n"
            "[2] D. Blei, A. Ng, and M. Jordan. Latent Dirichlet allocation. JMLR, 2003.\n"
            "A Scalable Framework for Everything\n[3] C. Bishop. Pattern recognition. Springer, 2006.\n"
            "[4] J. Dean and S. Ghemawat. MapReduce. In OSDI, 2004.\n"
            "A Proof of Theorem 3.1\nWe prove the theorem for linear networks first, then for all of them.")
    start, end = reference_zone(text)
    assert text[start:end].lstrip().startswith("[1] A. Ahmed")
    assert text[end:].lstrip().startswith("A Proof of Theorem 3.1")
    assert reference_zone("References\n1 Introduction\n2 Design\n3 Evaluation\n" + BODY * 20) is None  # contents


def test_two_column_interleaving_and_non_latin_titles() -> None:
    refs = ("References\n[1] A. Author. First title. In OSDI, 2018.\n[3] C. Author. Third title. In SOSP, 2019.\n"
            "[2] 王小明, 李华. 大规模分布式训练综述. 计算机学报, 2021.\n"
            "[4] Д. Иванов. Параллельное обучение нейронных сетей. Вестник, 2020.\n")
    parsed = parse_references(paper(BODY * 5 + " As shown in [2] and [4], it works.", refs))
    assert [r.marker for r in parsed.references] == ["1", "3", "2", "4"]
    assert [r.ordinal for r in parsed.references] == [1, 2, 3, 4]
    cjk, cyr = by_marker(parsed)["2"], by_marker(parsed)["4"]
    assert cjk.title == "大规模分布式训练综述" and cjk.authors == ("王小明", "李华") and cjk.year == 2021
    assert cyr.title == "Параллельное обучение нейронных сетей" and cyr.year == 2020
    assert parsed.contexts[3] == parsed.contexts[4] == "As shown in [2] and [4], it works."


def test_superscript_like_digits_are_not_taken_for_citations() -> None:
    body = BODY * 5 + "We train resnet50 in fp16 on the cluster and report the throughput per device."
    refs = "References\n" + "\n".join(f"{n}. A. Author. Title number {n}. In OSDI, 2019." for n in range(1, 60))
    parsed = parse_references(paper(body, refs))
    assert len(parsed.references) == 59 and parsed.contexts == {}


def test_documents_without_a_list_and_bad_input_give_empty_results() -> None:
    html = paper(BODY, NUMBERED_REFS, content_type="html")
    assert parse_references(html) == ParsedReferences()
    assert parse_references(paper(BODY * 10)) == ParsedReferences()
    assert parse_references(paper()) == ParsedReferences()
    weird = parse_references(paper(BODY, "References\n[1]\n[2] ###\n[3] 1 2 3 4 5 6 7 8 9\x00\n" + "(" * 5000))
    assert weird.references == () and weird.skipped >= 1


# -- the real snapshot --------------------------------------------------------------------------------------


def _warc_pdf(warc: Path, url: str) -> bytes | None:
    """The body of the WARC response record for ``url`` (the source data, not a product store)."""
    from warcio.archiveiterator import ArchiveIterator

    with warc.open("rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type == "response" and record.rec_headers.get_header("WARC-Target-URI") == url:
                return record.content_stream().read()
    return None


@pytest.mark.snapshot
def test_zero_offload_references_in_the_snapshot_name_zero_gpipe_and_megatron(shared_dir: Path) -> None:
    from dmlqa.extract.pdf import extract_pdf

    body = _warc_pdf(shared_dir / "websnap" / "snapshot.warc.gz", "https://arxiv.org/pdf/2101.06840")
    if body is None:
        pytest.skip("the snapshot does not hold the ZeRO-Offload PDF")
    extracted = extract_pdf(body, url="https://arxiv.org/pdf/2101.06840")
    doc = Document(doc_id="arxiv:2101.06840", url="https://arxiv.org/abs/2101.06840", title="ZeRO-Offload",
                   blocks=extracted.blocks, content_type="pdf")
    parsed = parse_references(doc)
    titles = [r.title.lower() for r in parsed.references]
    assert len(parsed.references) >= 30 and parsed.skipped <= 2
    assert any(t.startswith("zero: memory optimizations") for t in titles)
    assert any(r.arxiv_id == "1909.08053" and "megatron" in r.title.lower() for r in parsed.references)
    assert any("gpipe" in t for t in titles)
    assert sum(bool(r.year) for r in parsed.references) >= 0.9 * len(parsed.references)
    assert len(parsed.contexts) >= 0.8 * len(parsed.references)
