"""A store URL is echoed in messages with its password masked, whatever else is wrong
with it: a port that is not a number (it raised ValueError from the masking itself:
"unexpected ValueError" exit 1), a password in the query (`?password=`, which libpq
reads too, was echoed whole), and a URL of a kind no backend opens (`mysql://`,
`http://`), which was read as a file path and echoed with its password as
"no store at mysql:/user:password@host"."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_USAGE
from benchwarden.core.store_postgres import redact

# characters a password may hold in a URL without percent-encoding, none of which ends
# the user-info part or the query value
PASSWORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~",
                   min_size=1, max_size=20).map(lambda text: f"Pw{text}")
PORT = st.one_of(st.integers(0, 99999).map(str), st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz:0123456789", max_size=8))


@given(password=PASSWORD, port=PORT, in_query=st.booleans(),
       name=st.sampled_from(["password", "sslpassword", "PASSWORD"]))
def test_the_password_never_shows_whatever_the_port(password, port, in_query, name):
    if in_query:
        url = f"postgresql://user@host:{port}/db?sslmode=disable&{name}={password}#frag"
    else:
        url = f"postgresql://user:{password}@host:{port}/db?sslmode=disable"
    shown = redact(url)
    assert password not in shown
    assert "***" in shown and "host" in shown and shown.startswith("postgresql://user")


def test_only_the_secrets_are_masked():
    assert redact("postgresql://u:pw@h:5432/db?x=1") == "postgresql://u:***@h:5432/db?x=1"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact("postgresql:///db?host=/run/pg&password=pw&x=1") == \
        "postgresql:///db?host=/run/pg&password=***&x=1"
    assert redact("postgresql://u:pw@h:notaport/db") == "postgresql://u:***@h:notaport/db"


def test_a_port_that_is_not_a_number_is_one_line_without_the_password(capsys):
    code = run_command(cli, ["runs", "--store", "postgresql://u:Hunter2x@127.0.0.1:notaport/db"],
                       "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code != 1 and "unexpected" not in line and "Hunter2x" not in line, line
    assert line.startswith("benchwarden: error: ") and "\n" not in line


@pytest.mark.parametrize("url", ["mysql://u:Hunter2x@h/db", "http://u:Hunter2x@h/x",
                                 "sqlite:///tmp/store.sqlite"])
def test_a_url_of_another_kind_is_refused_without_its_password(url, capsys, tmp_path,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["runs"], ["retrieval", "run", "--strategy", "substring", "--seeds", "1"]):
        code = run_command(cli, [*args, "--store", url], "benchwarden")
        line = capsys.readouterr().err.strip()
        assert code == EXIT_USAGE, line
        assert "Hunter2x" not in line and "postgresql://" in line and "\n" not in line, line
    assert list(tmp_path.iterdir()) == []  # nothing made under a name from the URL
