"""What the client returns and raises: a task's result, and the API's refusals as exceptions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional

#: The statuses a task ends in.
TERMINAL = frozenset({"succeeded", "failed", "killed"})


class ChimeError(Exception):
    """Anything this client raises."""


class ApiError(ChimeError):
    """The API refused a call: its HTTP status and its message (what is wrong, and what is
    accepted)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message


class WaitTimeout(ChimeError, TimeoutError):
    """A wait ran out of time before the task ended (the task goes on)."""


@dataclass(frozen=True)
class Result:
    """How a task ended."""

    #: The task's id.
    id: str
    #: ``succeeded``, ``failed``, ``killed``, …
    status: str
    #: The last attempt's exit code (a shell task), or HTTP status (an http task).
    exit_code: Optional[int]
    #: The tail of the last attempt's output (stdout and stderr as written).
    output: str
    #: The JSON the task wrote to ``$CHIME_RESULT_FILE`` (or an http task's JSON body).
    result: Any
    #: Why it did not succeed.
    error: Optional[str]
    #: How many attempts it took.
    attempts: int
    started_at: Optional[datetime]
    finished_at: Optional[datetime]
    #: The task as the API answered it.
    task: Dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @classmethod
    def from_task(cls, task: Dict[str, Any]) -> "Result":
        outcome = task.get("result") or {}
        attempts: List[Dict[str, Any]] = task.get("attempts") or []
        return cls(
            id=str(task.get("id")),
            status=str(task.get("status")),
            exit_code=outcome.get("exit_code"),
            output=outcome.get("output") or "",
            result=outcome.get("value"),
            error=outcome.get("error"),
            attempts=len(attempts) or int(task.get("attempt") or 0),
            started_at=_time(task.get("started_at")),
            finished_at=_time(task.get("finished_at")),
            task=task,
        )


class TaskFailed(ChimeError):
    """A waited task ended without succeeding: failed, killed, or its upstream failed."""

    def __init__(self, result: Result) -> None:
        why = result.error or result.status
        super().__init__(f"task {result.id} {result.status}: {why}")
        self.result = result
        self.status = result.status
        self.exit_code = result.exit_code
        self.output = result.output
        self.error = result.error


def _time(text: Optional[str]) -> Optional[datetime]:
    if not text:
        return None
    # RFC 3339 with Z and any number of fraction digits; Python 3.10's fromisoformat takes
    # +00:00 and only 3 or 6 digits.
    text = text.replace("Z", "+00:00")
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)$", text)
    if match:
        whole, fraction, zone = match.groups()
        text = whole + (f".{(fraction + '000000')[:6]}" if fraction else "") + zone
    return datetime.fromisoformat(text)
