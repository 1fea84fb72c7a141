"""Lazy modules: nothing is imported until an attribute is read, then the attribute is
the real module's; and the statistics module leaves scipy alone until it computes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.lazy import lazy_module, modules_hidden


def run_python(source: str, extra_path: str | None = None) -> str:
    environment = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [extra_path, environment.get("PYTHONPATH"), root]))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True,
                          text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_module_is_imported_on_the_first_attribute_read_only(tmp_path):
    (tmp_path / "noisy_module.py").write_text("import sys\nsys.modules['__main__'].imports += 1\n"
                                               "VALUE = 41\n")
    output = run_python("""
        import sys
        imports = 0
        from benchwarden.core.lazy import lazy_module
        noisy = lazy_module("noisy_module")
        before = (imports, "noisy_module" in sys.modules)
        first, second = noisy.VALUE, noisy.VALUE
        print(before, imports, first + 1, second)
    """, str(tmp_path))
    assert output == "(0, False) 1 42 41"


def test_a_missing_attribute_is_an_attribute_error_of_the_real_module():
    math = lazy_module("math")
    assert math.sqrt(16.0) == 4.0
    try:
        _ = math.no_such_function
    except AttributeError as error:
        assert "no_such_function" in str(error)
    else:
        raise AssertionError("a missing attribute must raise AttributeError")
    assert "math" in repr(math)


def test_importing_the_statistics_module_leaves_scipy_and_numpy_out():
    output = run_python("""
        import sys
        import benchwarden.core.stats as stats
        import benchwarden.suites.arms.views, benchwarden.suites.retrieval.scoring
        print("scipy" in sys.modules, "numpy" in sys.modules)
        estimate = stats.mean_se([1.0, 2.0, 4.0])  # its t quantile is in the table
        print("scipy" in sys.modules, estimate.low < estimate.mean < estimate.high)
        stats.mean_se([float(value % 5) for value in range(2000)])  # in the packed part
        print("scipy" in sys.modules)
        stats.mean_se([float(value % 5) for value in range(25_000)])  # beyond it
        print("scipy" in sys.modules)
    """)
    assert output.splitlines() == ["False False", "False True", "False", "True"]


@given(degrees_of_freedom=st.integers(1, 10_000), confidence=st.floats(0.01, 0.9999))
def test_the_t_interval_uses_exactly_scipy_stats_t_quantile(degrees_of_freedom, confidence):
    from scipy import stats as scipy_stats

    from benchwarden.core.stats import _t_interval

    low, high = _t_interval(10.0, 2.0, degrees_of_freedom, confidence)
    half_width = float(scipy_stats.t.ppf(0.5 + confidence / 2.0, degrees_of_freedom)) * 2.0
    assert (low, high) == (10.0 - half_width, 10.0 + half_width)


def test_import_in_background_imports_once_and_the_lazy_module_then_reads_it(tmp_path):
    (tmp_path / "slow_module.py").write_text(
        "import sys, threading\nsys.modules['__main__'].imports += 1\n"
        "IMPORTED_IN = threading.current_thread().name\n")
    output = run_python("""
        import sys
        imports = 0
        from benchwarden.core.lazy import import_in_background, lazy_module
        slow = lazy_module("slow_module")
        import_in_background(slow).join()
        print(imports, "slow_module" in sys.modules, slow.IMPORTED_IN, imports)
    """, str(tmp_path))
    assert output == "1 True benchwarden-import 1"


def test_a_background_import_that_fails_fails_again_where_the_module_is_used(tmp_path):
    (tmp_path / "broken_module.py").write_text("raise RuntimeError('broken on purpose')\n")
    output = run_python("""
        import threading
        from benchwarden.core.lazy import import_in_background, lazy_module
        broken = lazy_module("broken_module")
        import_in_background(broken).join()
        try:
            broken.anything
        except RuntimeError as error:
            print("raised:", error)
    """, str(tmp_path))
    assert output == "raised: broken on purpose"


def test_modules_hidden_refuses_a_new_import_inside_and_restores_sys_modules(tmp_path,
                                                                               monkeypatch):
    (tmp_path / "optional_dependency.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("optional_dependency", None)
    before = dict(sys.modules)
    with modules_hidden("optional_dependency", "json"):
        with pytest.raises(ModuleNotFoundError):
            import optional_dependency  # noqa: F401
        import json  # already imported before the block: never hidden

        assert json.dumps(1) == "1"
    assert "optional_dependency" not in sys.modules and dict(sys.modules) == before
    import optional_dependency  # importable again once the block ends

    assert optional_dependency.VALUE == 1
    del sys.modules["optional_dependency"]


def test_modules_hidden_restores_sys_modules_when_the_block_raises():
    name = "benchwarden_never_imported_module"
    with pytest.raises(RuntimeError), modules_hidden(name):
        assert sys.modules[name] is None
        raise RuntimeError("the import inside failed")
    assert name not in sys.modules
