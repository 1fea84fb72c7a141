"""Built-in strategies, the harness's limits on packs, and loading a user's file."""

from __future__ import annotations

import os
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.retrieval.api import Item, PackError, coerce_pack, enforce_limits
from benchwarden.suites.retrieval.corpus import generate
from benchwarden.suites.retrieval.driver import RunSettings, SeedTask, score_one_seed
from benchwarden.suites.retrieval.grading import receipt_verified
from benchwarden.suites.retrieval.sandbox import ISOLATION_MODES
from benchwarden.suites.retrieval.scoring import CaseOutcome, score_seed
from benchwarden.suites.retrieval.strategies import (
    BUILTIN_STRATEGIES,
    StrategyLoadError,
    make_strategy,
    parse_strategy,
)


def test_enforce_limits_keeps_the_first_items_and_cuts_at_the_budget():
    items = [Item("a" * 40, (0, 0, 40)), Item("b" * 40, (0, 41, 81)), Item("c" * 40)]
    kept, cut = enforce_limits(items, limit=10, budget_chars=60)
    assert [len(i.text) for i in kept] == [40, 20] and cut
    assert kept[1].source == (0, 41, 61)  # an exact span shrinks with its text
    kept, cut = enforce_limits(items, limit=1, budget_chars=1000)
    assert len(kept) == 1 and cut
    kept, cut = enforce_limits(items, limit=3, budget_chars=120)
    assert len(kept) == 3 and not cut
    assert enforce_limits(items, limit=5, budget_chars=0) == ([], True)


def test_a_truncated_item_with_an_inexact_span_does_not_gain_a_receipt():
    kept, _ = enforce_limits([Item("abcdef", (0, 0, 3))], limit=1, budget_chars=4)
    assert kept[0].source == (0, 0, 3)


def test_coerce_pack_accepts_mappings_and_refuses_garbage():
    assert coerce_pack([{"text": "x", "source": [0, 1, 2]}]) == [Item("x", (0, 1, 2))]
    for bad in ("text", [{"source": [0, 1, 2]}], [{"text": "x", "status": "old"}], 5):
        with pytest.raises(PackError):
            coerce_pack(bad)


@pytest.mark.parametrize("name", sorted(BUILTIN_STRATEGIES))
def test_builtins_quote_the_corpus_exactly_and_respect_the_limits(name):
    corpus = generate(2)
    try:
        spec = parse_strategy(name)
    except StrategyLoadError as error:  # an optional extra (vouch) not installed
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    strategy = make_strategy(spec)
    try:
        strategy.index(list(corpus.sessions))
        for case in corpus.cases:
            items = strategy.pack(case.question, 10, 2000)
            assert len(items) <= 10
            assert all(receipt_verified(item, corpus.session_text) for item in items)
            if name != "dump":  # dump relies on the harness to cut its last item
                assert sum(len(i.text) for i in items) <= 2000
    finally:
        close = getattr(strategy, "close", None)
        if callable(close):
            close()


def _seed_block(name: str, seed: int) -> dict:
    result = score_one_seed(SeedTask(parse_strategy(name), seed, RunSettings()))
    assert result.failure is None
    outcomes = [CaseOutcome.from_payload(seed, case_id, payload)
                for case_id, payload, _, _ in result.cases]
    return score_seed(seed, outcomes, 2000)


def test_dump_trips_the_canary_and_sits_near_the_efficiency_floor():
    for seed in (1, 2, 3):
        guards = _seed_block("dump", seed)["guards"]
        assert guards["canary_tripped"] and guards["canary"] == 0.5
        # one window in ten or so reaches the canary's line in a corpus of ~550 lines
        assert guards["canary_leak_rate"] > 0.03
        assert guards["efficiency"] < 0.52


def test_lexical_builtins_answer_the_easy_categories_and_do_not_leak_the_canary():
    for name in ("substring", "fts5", "bm25"):
        block = _seed_block(name, 1)
        failed = {case["case"] for case in block["failed_cases"]}
        # the level-0 case of the plain categories: no distractors, asked as stated
        for case in ("01-single_session-1", "08-citation_correctness-1",
                     "09-receipt_coverage-1", "11-consolidation-1"):
            assert case not in failed, (name, case)
        assert not block["guards"]["canary_tripped"]
        assert block["composite_guarded"] > _seed_block("dump", 1)["composite_guarded"]


def test_strategy_file_loads_class_factory_or_instance(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(textwrap.dedent("""
        from benchwarden.suites.retrieval.api import Item
        class First:
            def index(self, sessions):
                self.sessions = sessions
            def pack(self, question, limit, budget_chars):
                text = self.sessions[0].text.split("\\n")[0]
                return [Item(text, (0, 0, len(text)))]
        def factory():
            return First()
        instance = First()
        not_a_strategy = 3
    """))
    for attribute in ("First", "factory", "instance"):
        spec = parse_strategy(f"{source}:{attribute}")
        assert spec.name == f"mine:{attribute}" and len(spec.source_sha256) == 64
        strategy = make_strategy(spec)
        strategy.index(list(generate(1).sessions))
        assert strategy.pack("q", 10, 2000)[0].source[0] == 0
    with pytest.raises(StrategyLoadError, match="no callable"):
        make_strategy(parse_strategy(f"{source}:not_a_strategy"))
    with pytest.raises(StrategyLoadError, match="defines no"):
        make_strategy(parse_strategy(f"{source}:missing"))


def test_unknown_strategy_names_are_refused_in_one_line(tmp_path):
    with pytest.raises(StrategyLoadError, match="neither a built-in"):
        parse_strategy("bm26")
    with pytest.raises(StrategyLoadError, match="does not exist"):
        parse_strategy(f"{tmp_path}/absent.py:Thing")


def test_a_strategy_that_raises_ends_its_run_with_a_reason(tmp_path):
    source = tmp_path / "broken.py"
    source.write_text("class Broken:\n    def index(self, s): pass\n"
                      "    def pack(self, q, l, b): raise KeyError('boom')\n")
    result = score_one_seed(SeedTask(parse_strategy(f"{source}:Broken"), 1, RunSettings()))
    assert result.cases == []
    assert result.failure["kind"] == "strategy_error" and "KeyError" in result.failure["reason"]


def test_an_oversized_pack_is_cut_by_the_harness_not_trusted(tmp_path):
    source = tmp_path / "greedy.py"
    source.write_text("class Greedy:\n    def index(self, s): pass\n"
                      "    def pack(self, q, l, b): return ['x' * 900] * 50\n")
    result = score_one_seed(SeedTask(parse_strategy(f"{source}:Greedy"), 1,
                                     RunSettings(limit=3, budget_chars=2000)))
    for _, payload, _, _ in result.cases:
        assert payload["used_chars"] == 2000 and payload["truncated"]
        assert len(payload["items"]) == 3


def test_fanning_seeds_out_through_an_executor_records_the_same_scores(tmp_path):
    from benchwarden.core.executors import make_executor
    from benchwarden.core.store import open_store
    from benchwarden.suites.retrieval.driver import run_strategy
    from benchwarden.suites.retrieval.report import build_report

    spec = parse_strategy("fts5")
    with open_store(tmp_path / "s.sqlite") as store:
        plain = build_report(store, run_strategy(store, spec, [1, 2], RunSettings()))
        with make_executor("local") as executor:
            fanned = build_report(store, run_strategy(store, spec, [1, 2], RunSettings(),
                                                      executor=executor))
    assert plain.seeds == fanned.seeds


@settings(max_examples=200, deadline=None)  # never a wall-time assertion
@given(st.lists(st.tuples(st.text(max_size=300), st.booleans()), max_size=30),
       st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=3000))
def test_enforce_limits_never_lets_a_pack_exceed_limit_or_budget(raw, limit, budget):
    items = [Item(text, (0, 10, 10 + len(text)) if exact else (0, 0, 1)) for text, exact in raw]
    kept, cut = enforce_limits(items, limit, budget)
    assert len(kept) <= limit
    assert sum(len(item.text) for item in kept) <= budget
    remaining = iter(items)
    for item in kept:  # each kept item is a prefix of the next original, in order
        original = next(o for o in remaining if o.text.startswith(item.text) and item.text)
        if original.source == (0, 10, 10 + len(original.text)):
            assert item.source == (0, 10, 10 + len(item.text))
        else:
            assert item.source == original.source
    if not cut:
        assert kept == [item for item in items if item.text]
    if len(items) <= limit and sum(len(item.text) for item in items) <= budget:
        assert not cut


def test_an_empty_item_after_the_budget_is_spent_is_not_a_cut():
    # found by the property above: a pack that fits exactly, then an empty item
    items = [Item("abc", (0, 0, 3)), Item("de", (0, 3, 5)), Item("", (0, 5, 5))]
    kept, cut = enforce_limits(items, limit=3, budget_chars=5)
    assert [item.text for item in kept] == ["abc", "de"] and not cut
    _, cut_when_text_remains = enforce_limits(items + [Item("f", None)], limit=4, budget_chars=5)
    assert cut_when_text_remains


def test_a_killed_run_resumes_with_only_the_missing_seeds(tmp_path, monkeypatch):
    from benchwarden.core.store import open_store
    from benchwarden.suites.retrieval import driver
    from benchwarden.suites.retrieval.report import build_report

    real = driver.score_one_seed
    calls = []

    def dies_on_seed_three(task, on_case=None):
        if task.seed == 3:
            raise KeyboardInterrupt
        calls.append(task.seed)
        return real(task, on_case)

    spec = parse_strategy("substring")
    with open_store(tmp_path / "s.sqlite") as store:
        monkeypatch.setattr(driver, "score_one_seed", dies_on_seed_three)
        with pytest.raises(KeyboardInterrupt):
            driver.run_strategy(store, spec, [1, 2, 3, 4], RunSettings(), run_id="retrieval-killed")
        assert store.run_info("retrieval-killed").end is None
        monkeypatch.setattr(driver, "score_one_seed", real)
        run_id, missing = driver.resume_run(store, "retrieval-killed")
        assert missing == [3, 4]
        resumed = build_report(store, run_id)
        fresh = build_report(store, driver.run_strategy(store, spec, [1, 2, 3, 4], RunSettings()))
        assert resumed.seeds == fresh.seeds
        assert store.run_info(run_id).end.status == "completed"
        with pytest.raises(ValueError, match="already ended"):
            driver.resume_run(store, run_id)
    assert calls == [1, 2]


def test_a_strategy_file_imports_helper_modules_kept_beside_it(tmp_path):
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_helper_7c1.py").write_text("PREFIX = 'from the helper: '\n")
    (folder / "adapter.py").write_text(textwrap.dedent("""
        import adapter_helper_7c1

        class Adapter:
            def index(self, sessions):
                self.line = adapter_helper_7c1.PREFIX + sessions[0].text.split("\\n")[0]

            def pack(self, question, limit, budget_chars):
                return [self.line]
    """))
    strategy = make_strategy(parse_strategy(f"{folder / 'adapter.py'}:Adapter"))
    strategy.index(list(generate(1).sessions))
    assert strategy.pack("q", 10, 2000)[0].startswith("from the helper: ")


def test_only_builtins_name_libraries_to_preload_before_workers_fork(tmp_path) -> None:
    from benchwarden.suites.retrieval.strategies import libraries_to_preload

    assert libraries_to_preload(parse_strategy("bm25")) == (
        "benchwarden.suites.retrieval.bm25_library",)
    assert libraries_to_preload(parse_strategy("substring")) == ()
    user_file = tmp_path / "mine.py"
    user_file.write_text("class Mine:\n    pass\n")
    # importing a user's file would run its code in the harness: never preloaded
    assert libraries_to_preload(parse_strategy(f"{user_file}:Mine")) == ()


@pytest.mark.parametrize("seed", [0, 1, 7, 12, 31])
def test_bm25s_numpy_index_builder_scores_every_question_as_the_scipy_one_does(seed,
                                                                               monkeypatch):
    """The bm25 strategy builds its index with bm25s' NumPy builder so it can skip
    importing scipy.sparse; that must not move a single score: every question and
    paraphrase of the seed, compared as bytes against the scipy builder's scores."""
    import bm25s
    import scipy.sparse

    # bm25s imported by the strategy (scipy.sparse hidden) has noted scipy as missing:
    # give this test's scipy builder what its own import would have found
    monkeypatch.setattr(bm25s, "sp", scipy.sparse, raising=False)
    monkeypatch.setattr(bm25s, "SCIPY_AVAILABLE", True)

    from benchwarden.suites.retrieval.strategies import line_units

    corpus = generate(seed)
    units = line_units(list(corpus.sessions))
    tokens = bm25s.tokenize([unit.text for unit in units], stopwords="en", show_progress=False)
    by_scipy, by_numpy = bm25s.BM25(csc_backend="scipy"), bm25s.BM25(csc_backend="numpy")
    by_scipy.index(tokens, show_progress=False)
    by_numpy.index(tokens, show_progress=False)
    compared = 0
    for case in corpus.cases:
        for question in (case.question, *(text for _, text in case.paraphrases)):
            words = bm25s.tokenize([question], stopwords="en", return_ids=False,
                                   show_progress=False)[0]
            ids = by_scipy.get_tokens_ids(list(words))
            assert ids == by_numpy.get_tokens_ids(list(words))
            if ids:
                compared += 1
                assert (by_scipy.get_scores_from_ids(ids).tobytes()
                        == by_numpy.get_scores_from_ids(ids).tobytes()), question
    assert compared > len(corpus.cases)  # the check really scored questions


def test_the_bm25_strategy_indexes_with_the_numpy_builder():
    strategy = make_strategy(parse_strategy("bm25"))
    strategy.index(list(generate(2).sessions))
    assert strategy.retriever.csc_backend == "numpy"


@given(st.integers(0, 100), st.integers(0, 10**6), st.booleans(),
       st.floats(0.5, 600, allow_nan=False), st.integers(1, 600), st.integers(1, 8192),
       st.sampled_from(["bwrap", "none"]), st.lists(st.text(min_size=1, max_size=8),
                                                    max_size=3))
def test_stored_settings_read_back_are_the_settings_run_with(limit, budget, sandbox, wall,
                                                             cpu, memory, isolation, hidden):
    """What `--resume` goes on with is what the run started with: the settings as the run
    start stores them (`to_json_dict`: the sandbox's parts null when it is off) read
    back through `StoredSettings`."""
    import msgspec

    from benchwarden.suites.retrieval.config import StoredSettings
    from benchwarden.suites.retrieval.sandbox import SandboxLimits

    if isolation not in ISOLATION_MODES:
        isolation = ISOLATION_MODES[0]
    made = RunSettings(limit=limit, budget_chars=budget, sandbox=sandbox,
                       sandbox_limits=SandboxLimits(wall_seconds=wall, cpu_seconds=cpu,
                                                    memory_mb=memory),
                       isolation=isolation, hidden=tuple(hidden))
    stored = msgspec.json.decode(msgspec.json.encode(made.to_json_dict()))
    read = msgspec.convert(stored, StoredSettings).run_settings()
    if sandbox:
        assert read == made
    else:  # nothing of the sandbox is stored when it is off: the defaults come back
        assert read == RunSettings(limit=limit, budget_chars=budget)


@pytest.mark.parametrize(("config", "where"), [
    ({"settings": 5}, "at `$.settings`"),
    ({"settings": {"budget_chars": "2000"}}, "at `$.settings.budget_chars`"),
    ({"strategy": ["bm25"]}, "at `$.strategy`"),
    ({"strategy": {"builtin": True, "name": 7}}, "at `$.strategy.name`"),
    ({"ladder": 3}, "at `$.ladder`"),
])
def test_a_run_config_of_another_shape_is_named_by_report_and_resume(tmp_path, config, where):
    from benchwarden.core.provenance import stamp_run
    from benchwarden.core.store import CorruptStore, open_store
    from benchwarden.suites.retrieval import driver
    from benchwarden.suites.retrieval.report import build_report

    with open_store(tmp_path / "s.sqlite") as store:
        store.begin_run(stamp_run(suite=driver.SUITE, bench_version=driver.BENCH_VERSION,
                                  config=config, seeds=(1,), run_id="odd-run"))
        for read in (build_report, driver.resume_run):
            with pytest.raises(CorruptStore) as refused:
                read(store, "odd-run")
            assert "run odd-run: its configuration is not what `retrieval run` writes" \
                in str(refused.value)
            assert where in str(refused.value)


def test_a_strategy_name_is_at_most_the_page_s_name_limit(tmp_path):
    """`file stem:object` of `NAME_LIMIT` characters loads; one more is refused in one
    line that does not repeat the whole name."""
    from benchwarden.core.html import NAME_LIMIT

    path = tmp_path / "s.py"
    path.write_text("class S:\n    def index(self, sessions): pass\n"
                    "    def pack(self, question, limit, budget_chars): return []\n")
    fits = "S" + "x" * (NAME_LIMIT - len("s:") - 1)
    assert parse_strategy(f"{path}:{fits}").name == f"s:{fits}"
    assert len(f"s:{fits}") == NAME_LIMIT
    with pytest.raises(StrategyLoadError, match=f"is {NAME_LIMIT + 1} characters") as error:
        parse_strategy(f"{path}:{fits}x")
    assert "\n" not in str(error.value) and len(str(error.value)) < 300
