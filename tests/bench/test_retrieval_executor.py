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
