"""Store behaviour that is SQLite's own or pure. The behaviour both backends share
(append-only, unique addresses, the hash chain, resume numbering) is tested once per
backend in test_store_backends.py."""

from __future__ import annotations

import pytest

from benchwarden.core.store import CorruptStore, StoreError, find_secrets, open_store


def test_find_secrets_spares_env_var_names_and_token_counts():
    assert find_secrets({"api_key_env": "OPENAI_API_KEY", "max_tokens": 256}) == []
    assert find_secrets({"headers": {"Authorization": "Bearer x"}}) == ["headers.Authorization"]
    assert find_secrets({"extra": ["sk-abcdefghijkl"]}) == ["extra[0]"]
    assert find_secrets({"nested": {"password": ""}}) == []  # empty is not a secret


def test_a_file_that_is_not_a_store_gives_one_clear_line(tmp_path):
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(CorruptStore, match="cannot be opened as a benchwarden store") as caught:
        open_store(bogus)
    assert "\n" not in str(caught.value)
    assert bogus.read_bytes() == b"this is not sqlite at all" * 100  # nothing was written


def test_a_folder_is_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        open_store(tmp_path)


def test_a_new_store_path_gets_its_folders(tmp_path):
    with open_store(tmp_path / "deep" / "er" / "store.sqlite") as store:
        assert store.runs() == [] and store.verify().ok
