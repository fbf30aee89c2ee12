from .run_context import RunContextWrapper


class ToolContext(RunContextWrapper):
    def __init__(self, tool_call_id):
        self.tool_call_id = tool_call_id
