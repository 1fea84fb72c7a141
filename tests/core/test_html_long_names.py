"""Names past the page's limit (`core.html.clip_long_names`): a store written by another
tool can name an arm, a task or a run with any number of characters, and every drawn
and embedded occurrence repeated it. Clipped, each stays one name, distinct from every
other, and names within the limit are untouched."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core import html as h

LIMIT = h.NAME_LIMIT

# short alphabets so names share long starts and sit inside one another
_names = st.text(alphabet="ab", min_size=1, max_size=3).flatmap(
    lambda stem: st.integers(0, 2 * LIMIT).map(lambda length: (stem * (length + 1))[:length + 1]))


def renamed(tree: Any, names: dict[str, str]) -> Any:
    """`tree` with every string equal to a key of `names` (as a key or a value) renamed:
    a report as a store written by another tool, naming things its own way, could hold
    it (the suites' long-name tests use it)."""
    if isinstance(tree, str):
        return names.get(tree, tree)
    if isinstance(tree, dict):
        return {names.get(key, key): renamed(item, names) for key, item in tree.items()}
    if isinstance(tree, list):
        return [renamed(item, names) for item in tree]
    return tree


def _strings(tree: Any) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    if isinstance(tree, dict):
        return [*tree, *(text for item in tree.values() for text in _strings(item))]
    if isinstance(tree, list):
        return [text for item in tree for text in _strings(item)]
    return []


def _tree(names: list[str], extra: list[str]) -> dict[str, Any]:
    """A report-like tree naming `names` as keys, values, in lists and inside sentences."""
    return {
        "arms": list(names),
        "coverage": {name: {"samples": {other: 3 for other in names}} for name in names},
        "sentences": [f"{a} beats {b} on {len(names)} tasks" for a in names for b in names[:2]],
        "numbers": [1, 2.5, None, True],
        "other": list(extra),
    }


@settings(max_examples=150, deadline=None)
@given(names=st.lists(_names, min_size=1, max_size=6, unique=True),
       extra=st.lists(st.text(max_size=40), max_size=3))
def test_every_long_name_is_clipped_everywhere_and_stays_one_distinct_name(names, extra) -> None:
    tree = _tree(names, extra)
    clipped, count, _ = h.clip_long_names(tree, names)
    long_names = {name for name in names if len(name) > LIMIT}
    assert count == len(long_names)
    if not long_names:
        assert clipped is tree
        return
    for text in _strings(clipped):
        assert not any(name in text for name in long_names)
    arms = clipped["arms"]
    assert all(len(arm) <= LIMIT for arm in arms)
    assert len(set(arms)) == len(names)  # distinct from each other and from the short names
    for before, after in zip(names, arms, strict=True):
        assert (after == before) == (len(before) <= LIMIT)
        if after != before:
            assert after.startswith(before[:LIMIT - 13]) and "…" in after
    # one name is one name everywhere: keys and values agree
    assert list(clipped["coverage"]) == arms
    assert all(list(row["samples"]) == arms for row in clipped["coverage"].values())
    assert clipped["sentences"][0].startswith(f"{arms[0]} beats ")
    assert clipped["numbers"] == [1, 2.5, None, True]
    # clipping again changes nothing
    again, again_count, _ = h.clip_long_names(clipped, arms)
    assert again == clipped and again_count == 0


def test_a_clipped_name_already_taken_gets_a_wider_digest() -> None:
    name = "n" * (LIMIT + 50)
    digest = hashlib.sha256(name.encode()).hexdigest()
    first = f"{name[:LIMIT - 13]}…{digest[:12]}"
    assert h.clipped_name(name, set()) == first
    wider = h.clipped_name(name, {first})
    assert wider != first and len(wider) <= LIMIT and wider.endswith(digest[:24])
    clipped = h.clip_long_names([name, first], [name, first]).tree
    assert clipped[1] == first and clipped[0] != first


def test_a_name_inside_a_longer_name_does_not_break_it() -> None:
    short = "s" * (LIMIT + 1)
    longer = short + "-and-more" * 40
    clipped, count, _ = h.clip_long_names({"names": [longer, short], "text": f"[{longer}]"},
                                          [short, longer])
    assert count == 2
    kept_longer, kept_short = clipped["names"]
    assert clipped["text"] == f"[{kept_longer}]" and kept_longer != kept_short


def test_names_with_lone_surrogates_are_clipped() -> None:
    name = "\ud800" * (LIMIT + 1)
    clipped, count, _ = h.clip_long_names([name], [name])
    assert count == 1 and len(clipped[0]) <= LIMIT


def test_texts_are_left_whole_and_sentences_cut_with_names_replaced_inside() -> None:
    name = "topic-" + "t" * 20_000
    reply = f"the reply names {name} at its start" + "r" * 5_000
    tree = {"probes": [{"topic": name}], "reply": {"text": reply, "finish_reason": name},
            "why": f"probe {name} failed: " + "e" * 30_000, "ok": "short"}
    names = h.names_in(tree, texts={"text"}, sentences={"why"})
    assert name in names and reply not in names and "short" in names
    assert not any(value.startswith("probe ") for value in names)
    clipped, count, sentences = h.clip_long_names(tree, names, texts={"text"},
                                                  sentences={"why"})
    assert (count, sentences) == (1, 1)
    short = clipped["probes"][0]["topic"]
    assert len(short) <= LIMIT and clipped["reply"]["finish_reason"] == short
    assert clipped["reply"]["text"] is reply  # a text is left exactly as it is
    why = clipped["why"]
    assert why.startswith(f"probe {short} failed: eee") and name not in why
    assert len(why) <= h.SENTENCE_LIMIT and why.endswith(
        f"… ({len(short) + 15 + 30_000 - (h.SENTENCE_LIMIT - 60):,} more characters in the "
        "report file)")
    # cut once is cut for good
    assert h.clip_long_names(clipped, names, texts={"text"}, sentences={"why"}).tree == clipped
    assert clipped["ok"] == "short"
    # a sentence within its limit naming nothing long: the tree itself comes back
    calm = {"why": "w" * h.SENTENCE_LIMIT, "text": "x" * 50_000}
    assert h.clip_long_names(calm, h.names_in(calm, texts={"text"}, sentences={"why"}),
                             texts={"text"}, sentences={"why"}).tree is calm
