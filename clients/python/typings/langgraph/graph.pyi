# Typed stubs that we (writ) wrote from the framework's documentation, of the
# API surface examples/frameworks/ uses: pyright (strict) checks those examples
# against these stubs, because the real packages (langgraph 1.2, openai-agents 0.24, temporalio 1.35)
# cannot be installed where writ is developed and tested (no Python package index).
# They are not the frameworks' own type information; see typings/README.md.

from typing import Any, Callable, Generic, Sequence, TypeVar

from typing_extensions import Self

from langgraph.types import All, Checkpointer

START: str  # "__start__"
END: str  # "__end__"

StateT = TypeVar("StateT")

# A node's action: the real StateNode is a union of callables taking the
# state (and optionally a config or runtime) and of Runnables.
StateNode = Callable[..., Any]

class CompiledStateGraph(Generic[StateT]): ...  # invoke, stream, …: not used by the examples

class StateGraph(Generic[StateT]):
    def __init__(self, state_schema: type[StateT], context_schema: type[Any] | None = None, *,
                 input_schema: type[Any] | None = None, output_schema: type[Any] | None = None) -> None: ...
    def add_node(self, node: str | StateNode, action: StateNode | None = None, *, defer: bool = False,
                 metadata: dict[str, Any] | None = None, input_schema: type[Any] | None = None,
                 retry_policy: Any | None = None, cache_policy: Any | None = None,
                 destinations: dict[str, str] | tuple[str, ...] | None = None) -> Self: ...
    def add_edge(self, start_key: str | list[str], end_key: str) -> Self: ...
    def compile(self, checkpointer: Checkpointer = None, *, cache: Any | None = None, store: Any | None = None,
                interrupt_before: All | Sequence[str] | None = None,
                interrupt_after: All | Sequence[str] | None = None, debug: bool = False,
                name: str | None = None) -> CompiledStateGraph[StateT]: ...
