"""writ in a LangGraph graph: the receipt's disposition.mode picks the next node."""

from typing import Any, Callable, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer, Command, interrupt

import writ


class RefundState(TypedDict):
    """The graph's state. Each key is a channel of its own, so a node's
    update replaces only the keys it returns; a node reads only keys an
    earlier node (or the graph's input) wrote."""

    facts: dict[str, Any]      # the check's tenant, actor, context, evidence
    proposal: dict[str, Any]   # the agent's tool and arguments
    check: dict[str, Any]      # the check sent to writ
    receipt: dict[str, Any]    # writ's latest receipt, as JSON
    result: Any                # the tool's result


def route(receipt: writ.Receipt) -> str:
    """The node a receipt sends the graph to."""
    mode = receipt.disposition.mode
    if mode == writ.CONTINUE_DOWNSTREAM and receipt.safe_to_execute:
        return "issue_refund"
    if mode == writ.HUMAN_REVIEW and receipt.awaits_approval:
        return "human_review"
    if mode == writ.UPSTREAM_REPLAN and receipt.routing.return_to_node:
        return receipt.routing.return_to_node  # the upstream node the pack names
    if mode == writ.LOCAL_REPLAN:
        return "support_agent"  # propose again, with the evidence the receipt asks for
    return END  # terminal_block, or a terminal human review


Node = Callable[[RefundState], dict[str, Any]]


def build_graph(client: writ.Client, support_agent: Node, returns_intake: Node,
                issue: Callable[[dict[str, Any]], Any], checkpointer: Checkpointer):
    def writ_check(state: RefundState) -> Command[str]:
        check = {**state["facts"], **state["proposal"], "idempotency_key": writ.new_idempotency_key()}
        receipt = client.check(check)
        return Command(goto=route(receipt), update={"check": check, "receipt": receipt.raw})

    # A separate node, because LangGraph runs an interrupted node again from
    # its start when it resumes: the check above must not be made twice.
    def human_review(state: RefundState) -> Command[str]:
        r = writ.Receipt.from_json(state["receipt"])
        review = interrupt({"decision_id": r.decision_id, "approval_ids": r.approval_ids,
                            "reasons": [x.code for x in r.reasons], "target_hint": r.routing.target_hint})
        if not review.get("decided"):
            return Command(goto=END)
        # The approver decided in writ; writ's decision, not the resume value, permits.
        r = client.resume(r.decision_id, state["check"], wait="30s")
        return Command(goto="issue_refund" if r.safe_to_execute else END, update={"receipt": r.raw})

    def issue_refund(state: RefundState) -> dict[str, Any]:
        receipt = writ.Receipt.from_json(state["receipt"])
        result = client.run_and_report(receipt, lambda: issue(state["proposal"]["arguments"]),
                                       idempotency_key=state["check"]["idempotency_key"])
        return {"result": result}

    g = StateGraph(RefundState)
    g.add_node("returns_intake", returns_intake)
    g.add_node("support_agent", support_agent)
    g.add_node("writ_check", writ_check)
    g.add_node("human_review", human_review)
    g.add_node("issue_refund", issue_refund)
    g.add_edge(START, "returns_intake")
    g.add_edge("returns_intake", "support_agent")
    g.add_edge("support_agent", "writ_check")
    g.add_edge("issue_refund", END)
    return g.compile(checkpointer=checkpointer)
