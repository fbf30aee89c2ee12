# Typed stubs that we (writ) wrote from the framework's documentation, of the
# API surface examples/frameworks/ uses: pyright (strict) checks those examples
# against these stubs, because the real packages (langgraph 1.2, openai-agents 0.24, temporalio 1.35)
# cannot be installed where writ is developed and tested (no Python package index).
# They are not the frameworks' own type information; see typings/README.md.

from typing import Any, Callable, TypeVar, overload

CallableType = TypeVar("CallableType", bound=Callable[..., Any])

@overload
def defn(fn: CallableType) -> CallableType: ...
@overload
def defn(*, name: str | None = None, no_thread_cancel_exception: bool = False
         ) -> Callable[[CallableType], CallableType]: ...
@overload
def defn(*, no_thread_cancel_exception: bool = False, dynamic: bool = False
         ) -> Callable[[CallableType], CallableType]: ...

def heartbeat(*details: Any) -> None: ...
