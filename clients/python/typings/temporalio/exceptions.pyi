# Typed stubs that we (writ) wrote from the framework's documentation, of the
# API surface examples/frameworks/ uses: pyright (strict) checks those examples
# against these stubs, because the real packages (langgraph 1.2, openai-agents 0.24, temporalio 1.35)
# cannot be installed where writ is developed and tested (no Python package index).
# They are not the frameworks' own type information; see typings/README.md.

from datetime import timedelta
from typing import Any

class TemporalError(Exception): ...

class FailureError(TemporalError):
    def __init__(self, message: str) -> None: ...

class ApplicationError(FailureError):
    def __init__(self, message: str, *details: Any, type: str | None = None, non_retryable: bool = False,
                 next_retry_delay: timedelta | None = None) -> None: ...
