from pathlib import Path

import pytest

from dmlqa.settings import BUNDLED_MODEL, load_settings


def test_defaults_home_is_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings(env={})
    assert s.home == tmp_path.resolve()
    assert s.corpus_dir == tmp_path.resolve() / "corpus"
    assert s.index_dir == tmp_path.resolve() / "index"
    assert s.embed.model == BUNDLED_MODEL
    assert s.fetch.allow_private_hosts is False


def test_precedence_toml_then_env(tmp_path: Path) -> None:
    (tmp_path / "dmlqa.toml").write_text('chunk_tokens = 150\nencoder = "torch"\n[fetch]\ntimeout = 5\n')
    s = load_settings(tmp_path, env={})
    assert (s.index.chunk_tokens, s.embed.encoder, s.fetch.timeout) == (150, "torch", 5.0)
    s = load_settings(tmp_path, env={"DMLQA_CHUNK_TOKENS": "120", "DMLQA_ALLOW_PRIVATE_HOSTS": "1",
                                     "DMLQA_FETCH_TIMEOUT": "2.5"})
    assert (s.index.chunk_tokens, s.fetch.allow_private_hosts, s.fetch.timeout) == (120, True, 2.5)


def test_home_from_env_and_flag(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert load_settings(env={"DMLQA_HOME": str(a)}).home == a.resolve()
    assert load_settings(b, env={"DMLQA_HOME": str(a)}).home == b.resolve()


def test_bad_values_are_specific(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="DMLQA_CHUNK_TOKENS: expected an integer"):
        load_settings(tmp_path, env={"DMLQA_CHUNK_TOKENS": "lots"})
    (tmp_path / "dmlqa.toml").write_text("colour = 'blue'\n")
    with pytest.raises(ValueError, match="unknown setting 'colour'"):
        load_settings(tmp_path, env={})
    (tmp_path / "dmlqa.toml").write_text("chunk_tokens = [\n")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_settings(tmp_path, env={})


def test_openai_key_fallback_and_overrides(tmp_path: Path) -> None:
    s = load_settings(tmp_path, env={"OPENAI_API_KEY": "sk-x"})
    assert s.llm.api_key == "sk-x"
    s2 = s.with_overrides(allow_private_hosts=True, model=None, encoder="torch")
    assert s2.fetch.allow_private_hosts and s2.embed.encoder == "torch" and s2.embed.model == s.embed.model


def test_ui_password_from_toml_or_env(tmp_path: Path) -> None:
    from dmlqa.app.ui import ui_password

    assert ui_password(load_settings(tmp_path, env={}), {}) is None
    (tmp_path / "dmlqa.toml").write_text('ui_password = "s3cret"\n')
    assert ui_password(load_settings(tmp_path, env={}), {}) == "s3cret"
    assert load_settings(tmp_path, env={"DMLQA_UI_PASSWORD": "other"}).ui.password == "other"


def test_sections_nested_and_flat_keys_agree(tmp_path: Path) -> None:
    """The TOML tables of each concern and the flat keys of earlier releases name the same settings."""
    (tmp_path / "dmlqa.toml").write_text(
        '[embed]\nbatch_size = 8\n[index]\nchunk_tokens = 120\n[llm]\nbase_url = "http://x/v1"\nmodel = "m"\n'
        '[build]\nexecutor = "ray"\n[ray]\nembed_actors = 2\n[ui]\npassword = "p"\n'
    )
    s = load_settings(tmp_path, env={})
    assert (s.embed.batch_size, s.index.chunk_tokens, s.llm.base_url, s.llm.model) == (8, 120, "http://x/v1", "m")
    assert (s.build.executor, s.ray.embed_actors, s.ui.password) == ("ray", 2, "p")
    (tmp_path / "dmlqa.toml").write_text('batch_size = 8\nchunk_tokens = 120\nllm_base_url = "http://x/v1"\n')
    flat = load_settings(tmp_path, env={"DMLQA_EMBED_MODEL": "bundled:all-MiniLM-L6-v2", "DMLQA_RAY_ADDRESS": "auto"})
    assert (flat.embed.batch_size, flat.index.chunk_tokens, flat.llm.base_url) == (8, 120, "http://x/v1")
    assert flat.ray.address == "auto" and flat.get("ray_address") == "auto" and flat.get("ray.address") == "auto"
    (tmp_path / "dmlqa.toml").write_text("[index]\nchunk_tokens = 4\n")
    with pytest.raises(ValueError, match=r"^setting index.chunk_tokens from .*dmlqa.toml: expected an integer from 16"):
        load_settings(tmp_path, env={})
    (tmp_path / "dmlqa.toml").write_text("[embed]\ncolour = 1\n")
    with pytest.raises(ValueError, match="unknown setting embed.colour"):
        load_settings(tmp_path, env={})
    with pytest.raises(ValueError, match="unknown setting 'colour'"):
        load_settings(tmp_path / "none", env={}).with_overrides(colour="blue")
    assert load_settings(tmp_path / "none", env={}).with_overrides(llm__model="q").llm.model == "q"
