# Typed stubs that we (writ) wrote from the framework's documentation, of the
# API surface examples/frameworks/ uses: pyright (strict) checks those examples
# against these stubs, because the real packages (langgraph 1.2, openai-agents 0.24, temporalio 1.35)
# cannot be installed where writ is developed and tested (no Python package index).
# They are not the frameworks' own type information; see typings/README.md.

from collections.abc import Awaitable
from typing import Any, Callable, Generic, overload

from agents.run_context import RunContextWrapper as RunContextWrapper, TContext
from agents.tool_context import ToolContext as ToolContext

class FunctionTool:
    name: str

@overload
def function_tool(func: Callable[..., Any], *, name_override: str | None = None,
                  description_override: str | None = None, docstring_style: str | None = None,
                  use_docstring_info: bool = True, failure_error_function: Callable[..., Any] | None = ...,
                  strict_mode: bool = True, is_enabled: bool | Callable[..., Any] = True,
                  needs_approval: bool | Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]] = False
                  ) -> FunctionTool: ...
@overload
def function_tool(*, name_override: str | None = None, description_override: str | None = None,
                  docstring_style: str | None = None, use_docstring_info: bool = True,
                  failure_error_function: Callable[..., Any] | None = ..., strict_mode: bool = True,
                  is_enabled: bool | Callable[..., Any] = True,
                  needs_approval: bool | Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]] = False
                  ) -> Callable[[Callable[..., Any]], FunctionTool]: ...

class ToolApprovalItem:
    # The real raw_item is a union of OpenAI Responses types (ResponseFunctionToolCall,
    # McpCall, McpApprovalRequest, LocalShellCall) and dict[str, Any]; those types are
    # not stubbed here, so it is Any. For a function tool it is a ResponseFunctionToolCall,
    # whose call_id the example reads.
    raw_item: Any

# The real RunState is also generic in the agent type (defaulting to Agent[Any]).
class RunState(Generic[TContext]):
    def approve(self, approval_item: ToolApprovalItem, always_approve: bool = False) -> None: ...
