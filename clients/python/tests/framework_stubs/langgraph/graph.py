"""Stand-in for langgraph.graph: StateGraph, START, END, and a runner with
LangGraph's semantics for what the mapping uses (a node's dict update or
Command, fixed edges, interrupt() and resuming with Command(resume=...))."""

from .types import Command, GraphInterrupt, _resume

START, END = "__start__", "__end__"


class StateGraph:
    def __init__(self, schema):
        self.nodes, self.edges = {}, {}

    def add_node(self, name, fn):
        self.nodes[name] = fn

    def add_edge(self, a, b):
        self.edges[a] = b

    def compile(self, checkpointer=None):
        return CompiledGraph(self)


class CompiledGraph:
    def __init__(self, g):
        self.g, self.paused = g, None  # (node, state) of an interrupt
        self.trail = []

    def invoke(self, value):
        if isinstance(value, Command) and value.resume is not None:
            node, state = self.paused
            token = _resume.set(value.resume)
        else:
            node, state, token = self.g.edges[START], dict(value), None
        while node != END:
            try:
                out = self.g.nodes[node](state)
            except GraphInterrupt as i:
                self.paused = (node, state)
                return {**state, "__interrupt__": [i.value]}
            finally:
                if token is not None:  # only the resumed node sees the resume value
                    _resume.reset(token)
                    token = None
            self.trail.append(node)
            if isinstance(out, Command):
                state.update(out.update or {})
                node = out.goto
            else:
                state.update(out or {})
                node = self.g.edges.get(node, END)
        return state
