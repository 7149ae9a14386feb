"""URL identity rules: one canonical spelling and one id per resource, whatever form a list uses."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlqa.catalog.urls import (
    address,
    arxiv_id,
    arxiv_year,
    bare_arxiv_id,
    canonicalize,
    doi,
    github_repo,
    guess_kind,
    is_non_resource,
    is_url_title,
    resource_id,
    spelling_key,
    url_title,
)
from dmlqa.models import KINDS


@pytest.mark.parametrize(
    "url",
    [
        "https://arxiv.org/abs/1910.02054",
        "http://arxiv.org/abs/1910.02054",
        "https://arxiv.org/abs/1910.02054v3",
        "https://arxiv.org/pdf/1910.02054",
        "https://arxiv.org/pdf/1910.02054v3",
        "https://arxiv.org/pdf/1910.02054v3.pdf",
        "https://arxiv.org/pdf/1910.02054.pdf",
        "https://www.arxiv.org/abs/1910.02054/",
        "https://export.arxiv.org/abs/1910.02054v1#section",
    ],
)
def test_arxiv_forms_are_one_resource(url: str) -> None:
    assert canonicalize(url) == "https://arxiv.org/abs/1910.02054"
    assert arxiv_id(url) == "1910.02054"
    assert resource_id(canonicalize(url)) == "arxiv:1910.02054"


def test_old_style_arxiv_ids() -> None:
    assert arxiv_id("https://arxiv.org/abs/cs/0112017v2") == "cs/0112017"
    assert canonicalize("http://arxiv.org/pdf/math.GT/0309136.pdf") == "https://arxiv.org/abs/math.GT/0309136"
    assert arxiv_id("https://arxiv.org/list/cs.LG/recent") is None
    assert arxiv_id("https://example.com/abs/1910.02054") is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://www.dmtk.io/", "https://dmtk.io"),  # http → https, www. dropped, bare host kept
        ("HTTPS://WWW.Example.COM", "https://example.com"),
        ("https://example.com/a/b/", "https://example.com/a/b"),  # trailing slash
        ("https://example.com/Case/Path", "https://example.com/Case/Path"),  # paths are case-sensitive
        ("https://example.com/p#frag", "https://example.com/p"),
        ("https://example.com/p?utm_source=x&id=3&utm_medium=y", "https://example.com/p?id=3"),
        ("https://example.com/p?a=1&b=2", "https://example.com/p?a=1&b=2"),
        ("https://example.com:443/p", "https://example.com/p"),
        ("http://example.com:8080/p", "https://example.com:8080/p"),
        ("www.oneflow.org", "https://oneflow.org"),  # seed 003 writes it without a scheme
        ("www.deepspeed.ai/", "https://deepspeed.ai"),  # seed 004, nested bare URL
        ("<https://example.com/x>", "https://example.com/x"),
        ("https://github.com/Shenggan/awesome-distributed-ml", "https://github.com/shenggan/awesome-distributed-ml"),
        ("https://github.com/NVIDIA/Megatron-LM.git", "https://github.com/nvidia/megatron-lm"),
        (
            "https://github.com/NVIDIA/Megatron-LM/blob/main/docs/README.md",
            "https://github.com/nvidia/megatron-lm/blob/main/docs/README.md",
        ),
        ("http://dx.doi.org/10.1145/3341301.3359646", "https://doi.org/10.1145/3341301.3359646"),
        ("https://example.com/대용량.pdf", "https://example.com/%EB%8C%80%EC%9A%A9%EB%9F%89.pdf"),
    ],
)
def test_canonicalize(url: str, expected: str) -> None:
    assert canonicalize(url) == expected
    assert canonicalize(expected) == expected  # idempotent


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "unsupported URL scheme 'file'"),
        ("javascript:alert(1)", "unsupported URL scheme 'javascript'"),
        ("mailto:someone@example.com", "unsupported URL scheme 'mailto'"),
        ("ftp://example.com/x", "unsupported URL scheme 'ftp'"),
        ("AI/DS%20and%20DataEng/Horovod.md", "relative link"),
        ("../notes/x.md", "relative link"),
        ("#contents", "anchor"),
        ("", "empty URL"),
        ("   ", "empty URL"),
        ("http://", "no host"),
        ("https://exa mple.com", "whitespace"),
        ("https://bad_host!/x", "not a valid domain"),
        ("https://[::1", "garbled"),
        ("https://localhostx/x", "not a valid domain"),
    ],
)
def test_canonicalize_rejects_with_a_specific_reason(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        canonicalize(url)


def test_doi_forms() -> None:
    d = "10.1145/3341301.3359646"
    for url in (
        f"https://doi.org/{d}",
        f"https://dl.acm.org/doi/{d}",
        f"https://dl.acm.org/doi/abs/{d}",
        f"https://dl.acm.org/doi/pdf/{d}",
        f"https://dl.acm.org/doi/full/{d}",
    ):
        assert doi(url) == d
        assert resource_id(canonicalize(url)) == f"doi:{d}"
    assert doi("https://dl.acm.org/profile/81100") is None
    assert doi("https://example.com/doi/10.1/x") is None


def test_github_repo_and_ids() -> None:
    assert github_repo("https://github.com/NVIDIA/Megatron-LM") == "nvidia/megatron-lm"
    assert github_repo("https://github.com/rileyhun/llm_finetuning_metaflow/tree/main/ray-distributed") == (
        "rileyhun/llm_finetuning_metaflow"
    )
    assert github_repo("https://github.com/topics/deep-learning") is None
    assert github_repo("https://github.com/someone") is None
    assert github_repo("https://gitlab.com/a/b") is None
    # Only the repository root is the repo; a folder or file in it is another resource.
    assert resource_id(canonicalize("https://github.com/Horovod/Horovod/")) == "github:horovod/horovod"
    folder = canonicalize("https://github.com/rileyhun/llm_finetuning_metaflow/tree/main/ray-distributed")
    assert re.fullmatch(r"web:github\.com/[0-9a-f]{10}", resource_id(folder))


def test_web_ids_are_stable_and_readable() -> None:
    url = canonicalize("https://www.deepspeed.ai/")
    rid = resource_id(url)
    assert rid == resource_id("https://deepspeed.ai")
    assert re.fullmatch(r"web:deepspeed\.ai/[0-9a-f]{10}", rid)
    assert resource_id("https://deepspeed.ai/tutorials/zero") != rid


def test_url_titles() -> None:
    url = "https://d2l.ai/chapter/multiple-gpus.html"
    assert url_title(url) == "d2l.ai/chapter/multiple-gpus.html"
    assert is_url_title(url_title(url), url)
    assert is_url_title("https://other.example/x", url)
    assert is_url_title("", url)
    assert not is_url_title("Dive into Deep Learning", url)


@pytest.mark.parametrize(
    ("url", "kwargs", "kind"),
    [
        ("https://www.youtube.com/watch?v=cRjiwIi_kuc", {"tag": "TALK"}, "video"),
        ("https://www.youtube.com/watch?v=x", {"tag": "PAPER"}, "video"),
        ("https://youtu.be/x", {}, "video"),
        ("https://github.com/ray-project/ray", {}, "repo"),
        ("https://github.com/rileyhun/llm_finetuning_metaflow/tree/main/ray-distributed", {}, "repo"),
        ("https://github.com/NVIDIA/Megatron-LM/blob/main/docs/user-guide/parallelism-guide.md", {}, "docs"),
        ("https://arxiv.org/abs/1910.02054", {}, "paper"),
        ("https://dl.acm.org/doi/10.1145/3341301.3359646", {}, "paper"),
        ("https://www.usenix.org/conference/osdi22/presentation/unger", {}, "paper"),
        ("https://openreview.net/forum?id=qrwe7XHTmYb", {}, "paper"),
        ("https://proceedings.mlsys.org/paper/2020/hash/x-Abstract.html", {}, "paper"),
        ("https://ieeexplore.ieee.org/document/8752892", {}, "paper"),
        ("https://people.cs.vt.edu/~butta/docs/cluster2019-DL.pdf", {"section": "References"}, "paper"),
        ("https://www.alcf.anl.gov/files/Zheng_SDL_ML_Frameworks_1.pdf", {"tag": "TALK"}, "slides"),
        ("https://example.com/AWS+Summit/Track5_Session1.pdf", {"section": "Usecases"}, "slides"),
        ("https://insidehpc.com/2019/04/scaling-deep-learning/", {"tag": "TALK"}, "article"),
        ("https://analytics-zoo.readthedocs.io/en/latest/index.html", {}, "docs"),
        ("https://docs.ray.io/en/latest/index.html", {}, "docs"),
        ("https://pytorch.org/tutorials/beginner/dist_overview.html", {}, "docs"),
        ("https://www.deepspeed.ai/", {"section": "Open Source Projects"}, "docs"),
        ("https://www.deepspeed.ai/", {"section": "References", "parent_tag": "CODE"}, "docs"),
        ("https://www.deepspeed.ai/", {"tag": "CODE"}, "docs"),
        ("https://github.com/intel-analytics/analytics-zoo", {"tag": "CODE"}, "repo"),
        ("https://www.microsoft.com/en-us/research/blog/zero/", {"parent_tag": "PAPER"}, "article"),
        ("https://www.ibm.com/university/power/images/Evaluation.pdf", {"tag": "PAPER"}, "paper"),
        ("https://example.com/some-page", {"section": "Papers / Survey"}, "paper"),
        ("https://medium.com/x/keras-horovod", {"section": "Blogs"}, "article"),
        ("https://example.com/some-page", {}, "article"),
    ],
)
def test_guess_kind(url: str, kwargs: dict, kind: str) -> None:
    got = guess_kind(url, **kwargs)
    assert got in KINDS
    assert got == kind


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("https://img.shields.io/badge/stars-0-brightgreen.svg?style=flat", "badge"),
        ("https://awesome.re/badge.svg", "badge"),
        ("https://mybinder.org/badge_logo.svg", "badge"),
        ("https://readthedocs.org/projects/horovod/badge/?version=latest", "badge"),
        ("https://codecov.io/gh/x/y/branch/master/graph/badge.svg", "badge"),
        ("https://github.com/x/y/actions/workflows/ci.yml/badge.svg", "badge"),
        ("https://mybinder.org/v2/git/https%3A%2F%2Fgit.sr.ht%2F~h%2Fray/master?filepath=notebook.ipynb", "binder"),
        ("https://example.com/logo.png", "image"),
        ("#contents", "anchor"),
        ("AI/DS%20and%20DataEng/Horovod.md", "relative link"),
        ("https://github.com/shenggan/awesome-distributed-ml/issues", "issues page"),
        ("https://github.com/shenggan/awesome-distributed-ml/pulls", "pulls page"),
    ],
)
def test_non_resources(url: str, fragment: str) -> None:
    reason = is_non_resource(url)
    assert reason is not None and fragment in reason


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/shenggan/awesome-distributed-ml",
        "https://github.com/rileyhun/llm_finetuning_metaflow/tree/main/ray-distributed",
        "https://arxiv.org/abs/1910.02054",
        "www.oneflow.org",
        "https://example.com/paper.pdf",
        "https://colab.research.google.com/drive/abc",
        "https://readthedocs.org/projects/horovod/",
        "https://example.com/blog/badges-for-ml",
    ],
)
def test_resources_are_not_non_resources(url: str) -> None:
    assert is_non_resource(url) is None


# -- properties (issue 9, item 8) ---------------------------------------------------------------------

_HOST_PART = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
_PATH_PART = st.text(alphabet="abcXYZ019-._~%/:@!$&'()*+,;=", max_size=12)
_URLISH = st.builds(
    lambda scheme, www, labels, port, path, query, frag: (
        f"{scheme}{'www.' if www else ''}{'.'.join(labels)}{port}/{path}{query}{frag}"
    ),
    st.sampled_from(["http://", "https://", "HTTP://", "", "//"]),
    st.booleans(),
    st.lists(_HOST_PART, min_size=1, max_size=3),
    st.sampled_from(["", ":80", ":443", ":8080"]),
    _PATH_PART,
    st.sampled_from(["", "?a=1", "?utm_source=x&b=2", "?fbclid=1"]),
    st.sampled_from(["", "#x"]),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_URLISH, st.text(max_size=40)))
def test_canonicalize_is_idempotent_and_accepts_its_own_output(raw: str) -> None:
    try:
        once = canonicalize(raw)
    except ValueError:
        return
    assert canonicalize(once) == once  # never a URL it would reject, never a different spelling
    assert resource_id(once) == resource_id(canonicalize(once))


def test_canonicalize_keeps_www_when_stripping_it_would_leave_no_domain() -> None:
    assert canonicalize("www.ww") == "https://www.ww"
    assert canonicalize(canonicalize("www.ww")) == "https://www.ww"
    assert canonicalize("http://www.example.org/a/") == "https://example.org/a"


def test_address_is_the_link_as_written_and_identity_is_canonical() -> None:
    assert address("http://www.vldb.org/pvldb/vol13/p3005-li.pdf") == "http://www.vldb.org/pvldb/vol13/p3005-li.pdf"
    assert address("https://github.com/NVIDIA/Megatron-LM#readme") == "https://github.com/NVIDIA/Megatron-LM"
    assert address("www.oneflow.org") == "https://www.oneflow.org"
    assert canonicalize("https://github.com/NVIDIA/Megatron-LM") == "https://github.com/nvidia/megatron-lm"
    with pytest.raises(ValueError):
        address("file:///etc/passwd")


def test_spelling_key_meets_scheme_www_slash_and_github_case_but_not_abs_and_pdf() -> None:
    assert spelling_key("https://github.com/NVIDIA/Megatron-LM/blob/main/docs/A.md") == spelling_key(
        "http://www.github.com/nvidia/megatron-lm/blob/main/docs/A.md/")
    assert spelling_key("https://github.com/o/r/blob/main/A.md") != spelling_key("https://github.com/o/r/blob/main/a.md")
    assert spelling_key("https://arxiv.org/abs/1910.02054") != spelling_key("https://arxiv.org/pdf/1910.02054")


def test_arxiv_year() -> None:
    assert arxiv_year("1910.02054") == 2019 and arxiv_year("2205.05198v1") == 2022
    assert arxiv_year("cs/0112017") == 2001 and arxiv_year("math.GT/9903123") == 1999
    assert arxiv_year("2213.00001") is None and arxiv_year(None) is None


@pytest.mark.parametrize(("written", "ident"), [
    ("1910.02054", "1910.02054"), ("arXiv:1910.02054v3", "1910.02054"), ("arXiv : 1910.02054", "1910.02054"),
    ("https://arxiv.org/pdf/1910.02054v2", "1910.02054"), ("hep-th/9901001v2", "hep-th/9901001"),
    ("math.GT/0309136", "math.GT/0309136"), ("1910.02054 v2", None), ("10.1145/3341301", None), ("", None),
    (None, None), ("https://example.org/abs/1910.02054", None),
])
def test_bare_arxiv_id_reads_what_references_libraries_and_pages_write(written: str | None, ident: str | None) -> None:
    assert bare_arxiv_id(written) == ident
