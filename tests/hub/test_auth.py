from __future__ import annotations

import os

import pytest

from rrsi.errors import Unauthorized
from rrsi.hub.auth import hub_token, token_matches, token_path


@pytest.fixture
def no_env_tokens(monkeypatch):
    for name in ("RRSI_HUB_TOKEN", "RAY_AUTH_TOKEN", "RAY_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)


def test_the_token_is_made_once_in_a_file_only_its_owner_reads(tmp_path, no_env_tokens):
    token = hub_token(tmp_path)
    assert len(token) >= 32 and hub_token(tmp_path) == token
    assert token_path(tmp_path).stat().st_mode & 0o777 == 0o600


def test_a_token_file_others_can_read_is_refused(tmp_path, no_env_tokens):
    hub_token(tmp_path)
    os.chmod(token_path(tmp_path), 0o644)
    with pytest.raises(Unauthorized, match="0600"):
        hub_token(tmp_path)


def test_the_environment_and_rays_token_come_first(tmp_path, no_env_tokens, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "ray-secret")
    assert hub_token(tmp_path) == "ray-secret"
    monkeypatch.setenv("RRSI_HUB_TOKEN", "hub-secret")
    assert hub_token(tmp_path) == "hub-secret"
    assert not token_path(tmp_path).exists()


def test_a_presented_token_matches_bare_or_as_a_bearer_header():
    assert token_matches("Bearer abc", "abc") and token_matches("abc", "abc")
    assert not token_matches("Bearer abd", "abc") and not token_matches(None, "abc") and not token_matches("", "abc")


def test_a_process_that_turned_rays_token_auth_on_gets_the_same_token_as_a_shell(tmp_path, no_env_tokens, monkeypatch):
    shell = hub_token(tmp_path)
    (tmp_path / "home" / ".ray").mkdir(parents=True)
    (tmp_path / "home" / ".ray" / "auth_token").write_text("ray-file-token")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # what ray.init sets inside the hub's own process
    assert hub_token(tmp_path) == shell
