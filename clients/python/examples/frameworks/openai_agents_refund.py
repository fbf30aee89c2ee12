"""writ under the OpenAI Agents SDK: needs_approval is writ's receipt."""

import asyncio
import json
from typing import Any, Callable

from agents import RunContextWrapper, RunState, ToolApprovalItem, function_tool
from agents.tool_context import ToolContext

import writ


class GovernedRefund:
    """The issue_refund tool, checked with writ once per tool call (the SDK's call id)."""

    def __init__(self, client: writ.Client, facts: dict[str, Any],
                 issue: Callable[[dict[str, Any]], Any]) -> None:
        self.client, self.facts, self.issue = client, facts, issue
        self.calls: dict[str, tuple[dict[str, Any], writ.Receipt]] = {}  # call id -> (check request, receipt)
        self.tool = function_tool(self._issue_refund, name_override="issue_refund",
                                  needs_approval=self._needs_approval)

    def _decide(self, args: dict[str, Any], call_id: str) -> tuple[dict[str, Any], writ.Receipt]:
        if call_id not in self.calls:
            req = {**self.facts, "tool": "payments.issue_refund", "arguments": args,
                   "idempotency_key": writ.new_idempotency_key()}
            self.calls[call_id] = (req, self.client.check(req))
        return self.calls[call_id]

    async def _needs_approval(self, ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        _, receipt = await asyncio.to_thread(self._decide, dict(params), call_id)
        return receipt.awaits_approval  # human_review that an approval can settle

    async def _issue_refund(self, ctx: ToolContext, order_id: str, amount_inr: int, currency: str) -> str:
        """Refund an order to the original payment method."""
        args = {"order_id": order_id, "amount_inr": amount_inr, "currency": currency}
        req, receipt = await asyncio.to_thread(self._decide, args, ctx.tool_call_id)
        if not receipt.safe_to_execute and receipt.awaits_approval:
            # The SDK's approval was given; writ's decides.
            receipt = await asyncio.to_thread(self.client.resume, receipt.decision_id, req, wait="30s")
            self.calls[ctx.tool_call_id] = (req, receipt)
        if not receipt.safe_to_execute:
            # The model sees the receipt instead of a result, and replans.
            return json.dumps({"blocked_by_writ": True, "outcome": receipt.outcome,
                               "mode": receipt.disposition.mode,
                               "reasons": [r.code for r in receipt.reasons],
                               "safe_next_steps": [s.message for s in receipt.safe_next_steps],
                               "return_to_node": receipt.routing.return_to_node})
        result = await asyncio.to_thread(self.client.run_and_report, receipt, lambda: self.issue(args),
                                         idempotency_key=req["idempotency_key"])
        return json.dumps(result)

    def receipt(self, call_id: str) -> writ.Receipt:
        return self.calls[call_id][1]


def approve_in_writ(approver: writ.Client, refund: GovernedRefund, state: RunState,
                    interruption: ToolApprovalItem, reason: str) -> None:
    """An approver approves in writ (the recorded approval), then in the SDK's run state."""
    approver.approve(refund.receipt(interruption.raw_item.call_id).approval_ids[0], reason)
    state.approve(interruption)
