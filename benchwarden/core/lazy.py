"""A module imported on first attribute use, for heavy libraries (scipy, numpy) that
only some commands need.

Why: scipy costs about a second to import on the project's machines; a command that
computes no statistics (`runs`, `show` of a plain run, `verify`, `export`, `--help`)
must not pay it, and worker processes must not pay it per task.

Invariant: `lazy_module(name).attribute` is exactly `importlib.import_module(name).attribute`;
the import happens at most once (Python's module cache), on the first attribute read.
`import_in_background` only moves that import earlier, into a thread, for a process
that would otherwise sit idle (waiting on worker processes) before it needs the module.
`modules_hidden` makes an *optional* import of a library fail for the length of a
`with` block, for a third-party package that can do without it (bm25s without
scipy.sparse): it never hides a module already imported, and restores `sys.modules`
exactly as it found it.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands in for a module until an attribute is read, then forwards to it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):  # keep introspection (copy, pickle) off the import
            raise AttributeError(attribute)
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name} ({state})>"


def lazy_module(name: str) -> Any:
    """`name`, imported the first time one of its attributes is read."""
    return LazyModule(name)


def import_in_background(*modules: LazyModule) -> threading.Thread:
    """Start importing `modules` in a daemon thread and return it.

    For a parent process whose workers do the work (a `local:N` pool): it imports what
    its report will need while it waits on them, instead of after. Only call it once the
    pool's workers are forked (a fork while the thread holds an import lock would leave
    the child that lock). An import that fails here fails again, with its own message,
    where the module is used.
    """

    def load_all() -> None:
        for module in modules:
            try:
                # a method on LazyModule could shadow the module's own attribute of
                # that name (numpy has `load`): the name is read directly instead
                importlib.import_module(module._name)
            except Exception:  # noqa: BLE001 - reported where the module is used
                pass

    thread = threading.Thread(target=load_all, name="benchwarden-import", daemon=True)
    thread.start()
    return thread


@contextmanager
def modules_hidden(*names: str) -> Iterator[None]:
    """Inside the block, `import NAME` raises ModuleNotFoundError for each name not yet
    imported (Python's own rule for a `None` entry in `sys.modules`).

    For a library that imports an optional dependency at its top in a `try` block
    (bm25s does `try: import scipy.sparse`): importing it inside this block skips that
    dependency's cost, and the library takes its documented fallback. A module already
    imported is left alone (hiding it would change nothing already bound to it), so the
    block only ever saves work. Call it from the thread that imports: another thread
    importing a hidden name meanwhile would be refused too.
    """
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "refuse"
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]
