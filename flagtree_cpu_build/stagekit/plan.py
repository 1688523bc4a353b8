"""What each stage would do, item by item: the one place that decides whether a thing is current.

Every stage has a ``plan_<stage>`` here (links keep theirs in ``links.plan_links``, the python
environment in ``python_stage``). A plan is a list of ``PlanItem``: what is there (``state``),
what the stage's run would report for it (``will``: the same words a ``StageResult`` uses, or
``stop`` when the run would refuse), the action in words and why. ``status``, ``setup
--dry-run``, build's preflight and doctor's workspace checks only read plans; the stages act
on them. A contract test holds ``will`` against what ``setup`` then reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..errors import FlagtreeCpuError

Will = Literal["ok", "created", "updated", "skipped", "stop"]
_RANK = {"ok": 0, "skipped": 0, "updated": 1, "created": 2, "stop": 3}


@dataclass(frozen=True)
class PlanItem:
    area: str  # sources, artifacts, links, python, build, validation
    subject: str
    state: str  # ok, missing, differs, dirty, conflict, stale, failed, skipped
    detail: str
    action: str = ""  # what the stage would do, in words; "" when nothing
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    will: Will = "ok"  # what the stage's run would report for this item
    stop: type[FlagtreeCpuError] | None = None  # with will == "stop": the error the run would stop with

    @property
    def exit_code(self) -> int | None:
        """The exit code the run would stop with (the error class carries it); None unless ``will`` is stop."""
        return int(self.stop.exit_code) if self.stop is not None else None

    @property
    def current(self) -> bool:
        return self.state in ("ok", "skipped")

    def to_json(self) -> dict[str, Any]:
        return {"area": self.area, "subject": self.subject, "state": self.state, "detail": self.detail,
                "action": self.action or None, "reason": self.reason or None, "will": self.will, **self.data}


def stage_will(items: list[PlanItem]) -> Will | None:
    """What the stage as a whole would report (as ``StageResult.status`` ranks its actions); None: no items."""
    if not items:
        return None
    return max((i.will for i in items), key=lambda w: _RANK[w])
