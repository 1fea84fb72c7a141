"""Verdicts: pass, fail or info, always with a one-line reason a person can act on.

Invariant: a verdict's reason is one line (newlines are folded), and "nothing
measured" is built only as a fail (`nothing_measured`), never as a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

VerdictKind = Literal["pass", "fail", "info"]


def one_line(text: str, limit: int | None = None) -> str:
    """Fold whitespace runs (newlines included) into single spaces; cut to `limit`."""
    folded = " ".join(str(text).split())
    if limit is not None and len(folded) > limit:
        folded = folded[: max(0, limit - 1)].rstrip() + "…"
    return folded


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    reason: str

    def __post_init__(self) -> None:
        if self.kind not in ("pass", "fail", "info"):
            raise ValueError(f"verdict kind must be pass, fail or info, not {self.kind!r}")
        object.__setattr__(self, "reason", one_line(self.reason))

    @classmethod
    def passed(cls, reason: str) -> Verdict:
        return cls("pass", reason)

    @classmethod
    def failed(cls, reason: str) -> Verdict:
        return cls("fail", reason)

    @classmethod
    def info(cls, reason: str) -> Verdict:
        return cls("info", reason)

    @classmethod
    def nothing_measured(cls, detail: str) -> Verdict:
        return cls("fail", f"nothing measured: {detail}")

    @property
    def exit_code(self) -> int:
        """What a gating command exits with: 1 only on fail."""
        return 1 if self.kind == "fail" else 0

    def to_json_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "reason": self.reason}
