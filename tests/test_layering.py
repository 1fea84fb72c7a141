"""The package's layering, read from the source: core <- targets <- suites <- cli.

- `benchwarden.core` imports nothing of benchwarden outside core;
- `benchwarden.targets` imports core and targets only;
- a suite (`benchwarden.suites.<name>`) imports core, targets and itself, never another
  suite and never the CLI;
- `benchwarden.cli` imports core, targets and cli, never a suite: it knows the suites
  only through the registry (`core.suite`), as it would know a third-party one;
- the module-level import graph has no cycle (no function-level import needed to dodge one).

Every `import` statement counts, at any depth (a function-level import is still an
arrow); `if TYPE_CHECKING:` imports count too for the layering, not for cycles.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "benchwarden"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, bool]]:
    """(imported module, at module level and not under TYPE_CHECKING) for every import."""
    found: list[tuple[str, bool]] = []
    base = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST, top_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, top_level) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    anchor = base[: len(base) - (child.level - 1)]
                    target = ".".join(anchor + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append((target, top_level))
                # `from benchwarden.core import store` imports the module core.store
                found.extend((f"{target}.{alias.name}", top_level) for alias in child.names)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child, False)
            else:
                visit(child, top_level)

    visit(tree, True)
    return found


def layer(module: str) -> tuple[str, str | None]:
    """The layer of a benchwarden module, and for a suite its name."""
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ("core", "targets", "cli"):
        return parts[1], None
    if len(parts) >= 3 and parts[1] == "suites":
        return "suite", parts[2]
    if len(parts) == 2 and parts[1] == "suites":
        return "suites-package", None
    return "top", None


ALLOWED = {
    "core": {"core"},
    "targets": {"core", "targets"},
    "suite": {"core", "targets", "suite", "suites-package"},
    "suites-package": {"core"},
    "cli": {"core", "targets", "cli"},
}


def violations(modules: dict[str, tuple[ast.AST, bool]]) -> list[str]:
    problems = []
    for module, (tree, is_package) in sorted(modules.items()):
        own_layer, own_suite = layer(module)
        if own_layer not in ALLOWED:
            continue  # the top-level package may import anything
        for target, _ in imported_names(tree, module, is_package):
            if not target.startswith("benchwarden.") and target != "benchwarden":
                continue
            target_layer, target_suite = layer(target)
            if target == "benchwarden":
                problems.append(f"{module} imports the top-level package benchwarden")
            elif target_layer not in ALLOWED[own_layer]:
                problems.append(f"{module} ({own_layer}) imports {target} ({target_layer})")
            elif own_layer == "suite" and target_layer == "suite" and target_suite != own_suite:
                problems.append(f"suite {own_suite}: {module} imports another suite: {target}")
    return problems


def cycles(modules: dict[str, tuple[ast.AST, bool]]) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for module, (tree, is_package) in modules.items():
        graph[module] = {
            target
            for target, top_level in imported_names(tree, module, is_package)
            if top_level and target in modules and target != module
        }
        # importing a submodule runs its package's __init__ first; that is no cycle of ours
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                found.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def parse_package(root: Path = PACKAGE) -> dict[str, tuple[ast.AST, bool]]:
    return {
        module_name(path, root): (
            ast.parse(path.read_text(encoding="utf-8")),
            path.name == "__init__.py",
        )
        for path in sorted(root.rglob("*.py"))
    }


@pytest.fixture(scope="module")
def package() -> dict[str, tuple[ast.AST, bool]]:
    return parse_package()


def test_the_check_sees_the_whole_package(package):
    assert {
        "benchwarden.core.store",
        "benchwarden.cli.main",
        "benchwarden.suites.arms.command",
        "benchwarden.targets.openai_client",
    } <= set(package)


def test_core_targets_suites_cli_layering_and_no_suite_imports_another(package):
    assert violations(package) == []


def test_the_module_level_import_graph_has_no_cycle(package):
    assert cycles(package) == []


def test_the_checks_catch_what_they_claim_to(tmp_path):
    """A package with each forbidden arrow, and one cycle: every one is reported."""
    root = tmp_path / "benchwarden"
    files = {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "from benchwarden.suites.alpha import thing\nimport benchwarden.core.b\n",
        "core/b.py": "from benchwarden.core import a\n",
        "targets/__init__.py": "",
        "targets/t.py": "def later():\n    from benchwarden.cli import main\n",
        "suites/__init__.py": "",
        "suites/alpha/__init__.py": "from benchwarden.suites.beta.report import x\n",
        "suites/beta/__init__.py": "from . import report\nfrom ..alpha import y\n",
        "suites/beta/report.py": "",
        "cli/__init__.py": "",
        "cli/main.py": "from benchwarden.suites.alpha import z\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    package = parse_package(root)
    problems = "\n".join(violations(package))
    assert "benchwarden.core.a (core) imports benchwarden.suites.alpha" in problems
    assert "benchwarden.targets.t (targets) imports benchwarden.cli.main (cli)" in problems
    assert "suite alpha: benchwarden.suites.alpha imports another suite" in problems
    assert (
        "suite beta: benchwarden.suites.beta imports another suite: benchwarden.suites.alpha"
        in problems
    )
    assert "benchwarden.cli.main (cli) imports benchwarden.suites.alpha (suite)" in problems
    assert ["benchwarden.core.a", "benchwarden.core.b", "benchwarden.core.a"] in cycles(package)
