"""Stand-in for langgraph.types: Command, interrupt() and the Checkpointer type."""

import contextvars
from dataclasses import dataclass
from typing import Any, Generic, Optional, TypeVar, Union

_resume = contextvars.ContextVar("resume", default=None)

N = TypeVar("N")


class BaseCheckpointSaver:
    pass


Checkpointer = Union[None, bool, BaseCheckpointSaver]


@dataclass
class Command(Generic[N]):
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
