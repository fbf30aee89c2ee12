# Typed stubs that we (writ) wrote from the framework's documentation, of the
# API surface examples/frameworks/ uses: pyright (strict) checks those examples
# against these stubs, because the real packages (langgraph 1.2, openai-agents 0.24, temporalio 1.35)
# cannot be installed where writ is developed and tested (no Python package index).
# They are not the frameworks' own type information; see typings/README.md.

import uuid
from collections.abc import Awaitable, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, Callable, TypeVar, overload

ClassType = TypeVar("ClassType", bound=type)
CallableAsyncType = TypeVar("CallableAsyncType", bound=Callable[..., Awaitable[Any]])
SelfType = TypeVar("SelfType")
ParamType = TypeVar("ParamType")
ReturnType = TypeVar("ReturnType")

@overload
def defn(cls: ClassType) -> ClassType: ...
@overload
def defn(*, name: str | None = None, sandboxed: bool = True, failure_exception_types: Sequence[type[BaseException]] = []
         ) -> Callable[[ClassType], ClassType]: ...

def run(fn: CallableAsyncType) -> CallableAsyncType: ...

def uuid4() -> uuid.UUID: ...

class unsafe:
    @staticmethod
    def imports_passed_through() -> AbstractContextManager[None]: ...

# execute_activity has one overload per activity shape in temporalio; these are
# the two the examples use (a method activity with one argument, and any
# activity with args=[...]), with the keyword options they and the docs name.
@overload
async def execute_activity(activity: Callable[[SelfType, ParamType], ReturnType], arg: ParamType, *,
                           task_queue: str | None = None, schedule_to_close_timeout: timedelta | None = None,
                           schedule_to_start_timeout: timedelta | None = None,
                           start_to_close_timeout: timedelta | None = None,
                           heartbeat_timeout: timedelta | None = None, retry_policy: Any | None = None,
                           activity_id: str | None = None, summary: str | None = None) -> ReturnType: ...
@overload
async def execute_activity(activity: Callable[..., Awaitable[ReturnType]] | Callable[..., ReturnType], *,
                           args: Sequence[Any], task_queue: str | None = None,
                           schedule_to_close_timeout: timedelta | None = None,
                           schedule_to_start_timeout: timedelta | None = None,
                           start_to_close_timeout: timedelta | None = None,
                           heartbeat_timeout: timedelta | None = None, retry_policy: Any | None = None,
                           activity_id: str | None = None, summary: str | None = None) -> ReturnType: ...
