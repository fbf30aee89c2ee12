# Typed stubs that we (writ) wrote from the framework's documentation, of the
# API surface examples/frameworks/ uses: pyright (strict) checks those examples
# against these stubs, because the real packages (langgraph 1.2, openai-agents 0.24, temporalio 1.35)
# cannot be installed where writ is developed and tested (no Python package index).
# They are not the frameworks' own type information; see typings/README.md.

from typing import Any

from agents.run_context import RunContextWrapper, TContext

class ToolContext(RunContextWrapper[TContext]):
    tool_name: str
    tool_call_id: str
    tool_arguments: str
    def __init__(self, context: TContext, usage: Any = ..., *, tool_name: str, tool_call_id: str,
                 tool_arguments: str) -> None: ...
