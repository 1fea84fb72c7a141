"""Every configuration the contamination suite refuses is a `ConfigurationError`, so the
CLI says it in one line with exit 2: a --url of another scheme was the client's bare
ValueError, which the CLI printed as "unexpected ValueError" exit 1. Infinite bounds
(no bound at all, and nothing JSON can record) and a seed past 64 bits are refused too,
before anything is asked of the server or written."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_USAGE, ConfigurationError
from benchwarden.suites.contamination.config import ContaminationConfig

URL = "http://127.0.0.1:9"


@pytest.mark.parametrize("changes, words", [
    ({"url": "ftp://x"}, "--url"),
    ({"url": "localhost:8000"}, "--url"),
    ({"request_timeout": math.inf}, "--request-timeout"),
    ({"retry_429_max_wait": math.inf}, "--retry-429-max-wait"),
    ({"stall_timeout": math.inf}, "--stall-timeout"),
    ({"max_chunks_per_token": math.inf}, "--max-chunks-per-token"),
    ({"seed": 2**63}, "--seed"),
])
def test_each_refusal_is_a_configuration_error(changes, words):
    with pytest.raises(ConfigurationError, match=words) as caught:
        ContaminationConfig(**{"url": URL, **changes}).validate()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("options", [["--url", "ftp://x"], ["--url", "x"],
                                     ["--url", URL, "--request-timeout", "inf"],
                                     ["--url", URL, "--seed", str(2**70)]])
def test_the_cli_says_it_in_one_line_exit_2(options, tmp_path, capsys):
    store = tmp_path / "c.sqlite"
    code = run_command(cli, ["contamination", *options, "--model", "m", "--any-model",
                             "--store", str(store)], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, line
    assert line.startswith("benchwarden: error: ") and "unexpected" not in line, line
    assert "unreachable" not in line, line  # refused before the server is asked
    assert not store.exists()


@given(url=st.text(max_size=30))
def test_any_url_text_is_accepted_or_refused_as_configuration(url):
    try:
        ContaminationConfig(url=url).validate()
    except ConfigurationError as error:
        assert "\n" not in str(error)
