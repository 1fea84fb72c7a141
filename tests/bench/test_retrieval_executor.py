"""The retrieval_executor bench's own arithmetic: how it reads the CPU other processes
used while a timed command ran (the figure that says whether a round's wall times mean
anything on a shared machine)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.bench.test_bench_contract import load

bench = load("retrieval_executor")

TICKS = st.integers(min_value=0, max_value=10**12)


@given(user=TICKS, nice=TICKS, system=TICKS, idle=TICKS, iowait=TICKS, irq=TICKS,
       softirq=TICKS, steal=TICKS, guest=TICKS, guest_nice=TICKS,
       hertz=st.sampled_from([100, 250, 1000]))
def test_busy_time_is_every_field_but_idle_and_iowait_and_counts_guests_once(
        user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice, hertz):
    line = (f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} "
            f"{guest} {guest_nice}\n")
    expected = (user + nice + system + irq + softirq + steal) / hertz
    assert bench.busy_seconds(line, hertz) == pytest.approx(expected)


def test_busy_time_reads_an_old_kernel_line_without_steal():
    assert bench.busy_seconds("cpu 100 0 50 900 10 5 5", 100) == pytest.approx(1.6)


@pytest.mark.parametrize("line", ["cpu0 1 2 3 4 5 6 7 8", "intr 1 2 3", ""])
def test_a_line_that_is_not_the_machine_total_is_refused(line):
    with pytest.raises(ValueError):
        bench.busy_seconds(line, 100)


@given(before=st.floats(min_value=0, max_value=1e9),
       busy=st.floats(min_value=0, max_value=1e4),
       own=st.floats(min_value=0, max_value=1e4))
def test_others_cpu_is_the_busy_time_not_ours_and_never_negative(before, busy, own):
    others = bench.others_seconds(before, before + busy, own)
    assert others is not None and others >= 0
    assert others == pytest.approx(max(0.0, (before + busy) - before - own), abs=1e-6)


def test_others_cpu_is_unknown_without_a_reading():
    assert bench.others_seconds(None, 5.0, 1.0) is None
    assert bench.others_seconds(5.0, None, 1.0) is None


def test_the_machine_counter_reads_where_proc_stat_exists():
    seconds = bench.machine_busy_seconds()
    assert seconds is None or seconds > 0


@pytest.mark.parametrize("others, wall, cores, quiet", [
    (0.0, 1.0, 2, True), (0.1, 1.0, 2, True), (0.11, 1.0, 2, False),
    (0.05, 1.0, 1, True), (0.06, 1.0, 1, False), (None, 1.0, 2, False)])
def test_a_round_is_undisturbed_when_others_used_under_five_percent_of_the_machine(
        others, wall, cores, quiet):
    assert bench.undisturbed(others, wall, cores) is quiet


PHASE_SECONDS = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


@given(startup=PHASE_SECONDS, scoring=PHASE_SECONDS, report=PHASE_SECONDS, exit=PHASE_SECONDS,
       library=PHASE_SECONDS, workers=st.integers(min_value=1, max_value=64))
def test_the_pool_bound_splits_only_the_scoring_work(startup, scoring, report, exit, library,
                                                     workers):
    phases = {"startup": startup, "executor": 0.0, "scoring": scoring, "report": report,
              "exit": exit}
    bound, whole = bench.pool_bound(phases, library, workers)
    assert whole == pytest.approx(startup + scoring + report + exit)
    serial = startup + report + exit + min(library, scoring)
    assert serial - 1e-9 <= bound <= whole + 1e-9
    assert bound == pytest.approx(serial + max(0.0, scoring - library) / workers)
    if workers == 1:
        assert bound == pytest.approx(whole)


def test_the_pool_bound_of_the_readme_s_phases():
    # start-up 0.15 s, scoring 0.90 s of which the bm25s import 0.10 s, report 0.06 s,
    # exit 0.02 s: two workers halve only the 0.80 s of work
    phases = {"startup": 0.15, "executor": 0.0, "scoring": 0.90, "report": 0.06, "exit": 0.02}
    bound, whole = bench.pool_bound(phases, 0.10, 2)
    assert whole == pytest.approx(1.13)
    assert bound == pytest.approx(0.73)
