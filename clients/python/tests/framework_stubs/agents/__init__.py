"""Stand-in for the OpenAI Agents SDK: function_tool with needs_approval,
and a runner with the SDK's semantics for one tool call: needs_approval
decides; true interrupts the run until state.approve or state.reject;
an approved (or never gated) call runs the tool with a ToolContext."""

from .run_context import RunContextWrapper  # noqa: F401
from .tool_context import ToolContext


class FunctionTool:
    def __init__(self, fn, name, needs_approval):
        self.fn, self.name, self.needs_approval = fn, name, needs_approval


def function_tool(fn, *, name_override=None, needs_approval=False):
    return FunctionTool(fn, name_override or fn.__name__, needs_approval)


class RawItem:
    def __init__(self, call_id, name, arguments):
        self.call_id, self.name, self.arguments = call_id, name, arguments


class ToolApprovalItem:
    def __init__(self, raw_item):
        self.raw_item = raw_item


class RunState:
    def __init__(self, call):
        self.call, self.decision = call, None

    def approve(self, interruption):
        self.decision = True

    def reject(self, interruption):
        self.decision = False


class RunResult:
    def __init__(self, interruptions=(), output=None, state=None):
        self.interruptions, self.final_output, self.state = list(interruptions), output, state

    def to_state(self):
        return self.state


async def run_tool_call(tool, call_id, arguments, state=None):
    """One turn of Runner.run in which the model called `tool`: the SDK's approval flow."""
    if state is None:
        gate = tool.needs_approval
        needed = gate if isinstance(gate, bool) else await gate(None, dict(arguments), call_id)
        if needed:
            item = ToolApprovalItem(RawItem(call_id, tool.name, arguments))
            return RunResult([item], state=RunState(item))
    elif state.decision is False:
        return RunResult(output="rejected")
    return RunResult(output=await tool.fn(ToolContext(call_id), **arguments))
