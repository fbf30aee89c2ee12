"""writ in a Temporal workflow: checks, waits and reports are activities."""

from datetime import timedelta
from typing import Any, Callable

from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    import writ


class RefundActivities:
    """The I/O of the workflow: every call to writ and to the payments provider."""

    def __init__(self, client: writ.Client, issue: Callable[[dict[str, Any]], Any]) -> None:
        self.client, self.issue = client, issue

    @activity.defn
    def check_refund(self, req: dict[str, Any]) -> dict[str, Any]:
        # A retried activity sends the same idempotency key: one record.
        return self.client.check(req).raw

    @activity.defn
    def wait_for_approval(self, decision_id: str, req: dict[str, Any]) -> dict[str, Any]:
        while True:  # long-poll writ, heartbeating, until a person decides
            r = self.client.resume(decision_id, req, wait="60s")
            if r.repeated != "still_waiting":
                return r.raw
            activity.heartbeat(decision_id)

    @activity.defn
    def issue_refund(self, receipt: dict[str, Any], req: dict[str, Any]) -> dict[str, Any]:
        return self.client.run_and_report(writ.Receipt.from_json(receipt),
                                          lambda: self.issue(req["arguments"]),
                                          idempotency_key=req["idempotency_key"])


@workflow.defn
class RefundWorkflow:
    @workflow.run
    async def run(self, facts: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        # workflow.uuid4() is the same on every replay of the workflow.
        req = {**facts, "tool": "payments.issue_refund", "arguments": args,
               "idempotency_key": "ik_" + workflow.uuid4().hex}
        r = await workflow.execute_activity(RefundActivities.check_refund, req,
                                            start_to_close_timeout=timedelta(seconds=30))
        mode = r["disposition"]["mode"]
        if mode == "human_review" and not r["human_review_terminal"]:
            r = await workflow.execute_activity(RefundActivities.wait_for_approval,
                                                args=[r["decision_id"], req],
                                                start_to_close_timeout=timedelta(days=1),
                                                heartbeat_timeout=timedelta(minutes=2))
        if not r["safe_to_execute"]:
            if r["disposition"]["mode"] == "upstream_replan":
                # The parent workflow routes to the node the pack names.
                return {"status": "returned", "return_to_node": r["routing"].get("return_to_node"),
                        "receipt": r}
            raise ApplicationError(f"writ: {r['outcome']}", r, type=r["disposition"]["mode"],
                                   non_retryable=True)
        result = await workflow.execute_activity(RefundActivities.issue_refund, args=[r, req],
                                                 start_to_close_timeout=timedelta(minutes=5))
        return {"status": "refunded", "result": result, "decision_id": r["decision_id"]}
