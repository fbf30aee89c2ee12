"""Stand-in for langgraph.types: Command and interrupt()."""

import contextvars
from dataclasses import dataclass
from typing import Any, Optional

_resume = contextvars.ContextVar("resume", default=None)


@dataclass
class Command:
    goto: Optional[str] = None
    update: Optional[dict] = None
    resume: Any = None


class GraphInterrupt(Exception):
    def __init__(self, value):
        super().__init__("interrupted")
        self.value = value


def interrupt(value):
    """Pauses the graph with value; when the graph resumes, returns the resume value."""
    resumed = _resume.get()
    if resumed is None:
        raise GraphInterrupt(value)
    return resumed
