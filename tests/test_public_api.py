"""`benchwarden.__all__` is the public API: sorted, importable, and exactly the names
docs/api.md lists under "## Names"."""

from __future__ import annotations

import re
from pathlib import Path

import benchwarden

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def documented_names(text: str) -> list[str]:
    """The `name` of every `- \\`name\\`: ...` line in the "## Names" section."""
    section = text.split("\n## Names\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `([^`]+)`:", section, flags=re.MULTILINE)


def test_all_is_sorted_and_has_no_repeats():
    assert benchwarden.__all__ == sorted(set(benchwarden.__all__))


def test_every_name_in_all_exists():
    missing = [name for name in benchwarden.__all__ if not hasattr(benchwarden, name)]
    assert missing == []


def test_all_is_exactly_what_the_docs_list():
    documented = documented_names(API_DOC.read_text(encoding="utf-8"))
    assert len(documented) == len(set(documented)), "a name is documented twice"
    assert sorted(documented) == benchwarden.__all__


def test_the_doc_reader_sees_a_missing_or_extra_name():
    text = "intro\n## Names\n- `open_store`: x\n- `Store`: y\n## Next\n- `hidden`: z\n"
    assert documented_names(text) == ["open_store", "Store"]


def test_the_public_names_are_the_core_objects():
    from benchwarden.core.errors import ConfigurationError
    from benchwarden.core.store import open_store
    from benchwarden.core.suite import get_suite

    assert benchwarden.open_store is open_store
    assert benchwarden.get_suite is get_suite
    assert issubclass(benchwarden.ConfigurationError, ValueError)
    assert benchwarden.ConfigurationError is ConfigurationError
