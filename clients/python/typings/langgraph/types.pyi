# Typed stubs that we (writ) wrote from the framework's documentation, of the
# API surface examples/frameworks/ uses: pyright (strict) checks those examples
# against these stubs, because the real packages (langgraph 1.2, openai-agents 0.24, temporalio 1.35)
# cannot be installed where writ is developed and tested (no Python package index).
# They are not the frameworks' own type information; see typings/README.md.

from collections.abc import Hashable, Sequence
from typing import Any, Generic, Literal, TypeVar, Union

from typing_extensions import TypeAlias

from langgraph.checkpoint.base import BaseCheckpointSaver

All: TypeAlias = Literal["*"]

Checkpointer: TypeAlias = Union[None, bool, BaseCheckpointSaver[Any]]

N = TypeVar("N", bound=Hashable)

class Send:
    node: str
    arg: Any
    def __init__(self, node: str, arg: Any) -> None: ...

class Command(Generic[N]):
    graph: str | None
    update: Any | None
    resume: dict[str, Any] | Any | None
    goto: Send | Sequence[Send | N] | N
    def __init__(self, *, graph: str | None = None, update: Any | None = None,
                 resume: dict[str, Any] | Any | None = None,
                 goto: Send | Sequence[Send | N] | N = ()) -> None: ...

def interrupt(value: Any) -> Any: ...
