"""What an agent builder needs in production, each finding of issue 41 a test,
against a real `writ serve` on loopback (the binary is $WRIT_BIN)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import tempfile
import threading
import unittest
from typing import Any, Dict, List

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import writ  # noqa: E402
from flaky_proxy import FlakyProxy  # noqa: E402
from writserver import WritServer  # noqa: E402

AGENT, FINANCE, AUDITOR = "agt_support_service", "user_finance_lead_77", "auditor_olga"


def _trace() -> str:
    return os.urandom(16).hex()


class Production(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = WritServer("examples/refund", keys={AGENT: "agent", FINANCE: "approver", AUDITOR: "auditor"})
        self.agent = writ.Client(self.srv.url, self.srv.tokens[AGENT])
        self.finance = writ.Client(self.srv.url, self.srv.tokens[FINANCE])
        self.auditor = writ.Client(self.srv.url, self.srv.tokens[AUDITOR])
        self.tmp = tempfile.mkdtemp(prefix="writ-py-state-")

    def tearDown(self) -> None:
        self.srv.close()

    def _records(self, trace_id: str) -> List[Dict[str, Any]]:
        return list(self.auditor.records(trace_id=trace_id).items)

    # ---- never lose a result -------------------------------------------

    def test_writ_killed_mid_tool_raises_report_failed_and_the_outbox_keeps_the_report(self) -> None:
        base = self.srv.refund_request("refund-allow")
        args = base.pop("arguments")
        outbox = writ.FileOutbox(os.path.join(self.tmp, "outbox.jsonl"))
        refunds: List[int] = []

        @self.agent.guard("payments.issue_refund", request=base, outbox=outbox)
        def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> Dict[str, Any]:
            refunds.append(amount_inr)
            self.srv.kill()  # writ goes down while the tool runs
            return {"refund_id": "rf_killed"}

        trace = _trace()
        with writ.traceparent(f"00-{trace}-00f067aa0ba902b7-01"):
            with self.assertRaises(writ.ReportFailed) as cm:
                issue_refund(**args)
        e = cm.exception
        self.assertEqual(e.result, {"refund_id": "rf_killed"}, "the result is never lost")
        self.assertTrue(e.decision_id)
        self.assertIsInstance(e.__cause__, writ.Unreachable, "a typed transport error, not URLError")
        self.assertIsInstance(e.__cause__, writ.TransportError)
        self.assertEqual(refunds, [4200], "the refund ran once")
        held = outbox.pending()
        self.assertEqual([(x["decision_id"], x["report"]["status"]) for x in held], [(e.decision_id, "succeeded")])

        # writ comes back; a new agent process replays its outbox on start.
        self.srv.start()
        agent = writ.Client(self.srv.url, self.srv.tokens[AGENT])
        acks = agent.replay_outbox(writ.FileOutbox(outbox.path))
        self.assertEqual([a.decision_id for a in acks], [e.decision_id])
        self.assertEqual(outbox.pending(), [])
        auditor = writ.Client(self.srv.url, self.srv.tokens[AUDITOR])
        story = auditor.decision(e.decision_id)
        self.assertEqual((story["state"]["status"], story["state"]["execution"]), ("CLOSED", "succeeded"))

    def test_an_agent_crash_mid_tool_is_reported_from_the_outbox(self) -> None:
        path = os.path.join(self.tmp, "outbox.jsonl")
        req = self.srv.refund_request("refund-allow")
        p = self.agent.permit(req, outbox=writ.FileOutbox(path))
        p.__enter__()  # the tool starts ... and the agent dies before __exit__
        decision_id = p.receipt.decision_id if p.receipt else ""
        acks = writ.Client(self.srv.url, self.srv.tokens[AGENT]).replay_outbox(writ.FileOutbox(path))
        self.assertEqual([a.decision_id for a in acks], [decision_id])
        story = self.auditor.decision(decision_id)
        self.assertEqual(story["state"]["execution"], "failed")
        report = story["records"][-1]["record"]["execution"]
        self.assertEqual(report["error"]["code"], "agent_crashed")

    def test_a_5xx_after_the_tool_raises_report_failed(self) -> None:
        # writ answers every report 503 (the client retries, then gives
        # up): the tool ran, so the guard raises ReportFailed with the result.
        proxy = FlakyProxy(self.srv.url, fail=100, retry_after="0", only="/execution")
        try:
            agent = writ.Client(proxy.url, self.srv.tokens[AGENT], sleep=lambda s: None)
            base = self.srv.refund_request("refund-allow")
            args = base.pop("arguments")

            @agent.guard("payments.issue_refund", request=base)
            def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> str:
                return "rf_5xx"

            with self.assertRaises(writ.ReportFailed) as cm:
                issue_refund(**args)
            self.assertEqual(cm.exception.result, "rf_5xx")
            self.assertIsInstance(cm.exception.__cause__, writ.Unavailable)
            self.assertIn("503 /v1/decisions/" + cm.exception.decision_id + "/execution", proxy.seen)
        finally:
            proxy.close()

    # ---- async ------------------------------------------------------------

    def test_an_async_tool_that_raises_is_reported_failed(self) -> None:
        base = self.srv.refund_request("refund-allow")
        args = base.pop("arguments")

        @self.agent.guard("payments.issue_refund", request=base)
        async def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> str:
            await asyncio.sleep(0)
            raise RuntimeError("the payment provider said no")

        trace = _trace()

        async def main() -> None:
            with writ.traceparent(f"00-{trace}-00f067aa0ba902b7-01"):
                await issue_refund(**args)

        with self.assertRaises(RuntimeError):
            asyncio.run(main())
        recs = self._records(trace)
        story = self.auditor.decision(recs[0]["decision_id"])
        self.assertEqual((story["state"]["status"], story["state"]["execution"]), ("CLOSED", "failed"),
                         "never CLOSED succeeded for an effect that failed")
        self.assertEqual(story["records"][-1]["record"]["execution"]["error"]["code"], "RuntimeError")

    def test_an_async_tool_is_awaited_before_its_report(self) -> None:
        base = self.srv.refund_request("refund-allow")
        args = base.pop("arguments")
        client = writ.AsyncClient(self.srv.url, self.srv.tokens[AGENT])

        @client.guard("payments.issue_refund", request=base)
        async def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> Dict[str, Any]:
            await asyncio.sleep(0)
            return {"refund_id": "rf_async"}

        self.assertEqual(asyncio.run(issue_refund(**args)), {"refund_id": "rf_async"})
        r = asyncio.run(client.check(self.srv.refund_request("refund-missing-idv-local-replan")))
        self.assertEqual(r.disposition.mode, "local_replan")

    def test_a_sync_function_returning_a_coroutine_is_not_reported_succeeded(self) -> None:
        base = self.srv.refund_request("refund-allow")
        args = base.pop("arguments")

        async def later() -> str:
            return "never"

        @self.agent.guard("payments.issue_refund", request=base)
        def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> Any:
            return later()

        trace = _trace()
        with writ.traceparent(f"00-{trace}-00f067aa0ba902b7-01"):
            with self.assertRaises(TypeError):
                issue_refund(**args)
        story = self.auditor.decision(self._records(trace)[0]["decision_id"])
        self.assertEqual(story["state"]["execution"], "failed")

    # ---- approval state that survives --------------------------------------

    def _blocked_once(self, issue_refund: Any, args: Dict[str, Any]) -> writ.Blocked:
        with self.assertRaises(writ.Blocked) as cm:
            issue_refund(**args)
        return cm.exception

    def test_the_clients_own_pending_store_reuses_the_approval_by_default(self) -> None:
        # No pending= anywhere: the client's in-memory store is the guard's.
        base = self.srv.refund_request("refund-high-value-human-review")
        args = base.pop("arguments")

        @self.agent.guard("payments.issue_refund", request=base)
        def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> str:
            return "rf_never"

        b = self._blocked_once(issue_refund, args)
        b2 = self._blocked_once(issue_refund, args)
        self.assertEqual((b2.decision_id, b2.receipt.approval_ids), (b.decision_id, b.receipt.approval_ids))
        approvals = [a for a in self.finance.approvals().items if a.decision_id == b.decision_id]
        self.assertEqual(len(approvals), 1, "one approval request for the one action")
        self.assertIsInstance(self.agent.pending, writ.MemoryPendingStore)

    def test_a_guard_timeout_then_a_second_call_reuses_the_approval(self) -> None:
        base = self.srv.refund_request("refund-high-value-human-review")
        args = base.pop("arguments")
        pending = writ.MemoryPendingStore()
        ran: List[int] = []

        @self.agent.guard("payments.issue_refund", request=base, wait=1, pending=pending)
        def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> str:
            ran.append(amount_inr)
            return "rf_once"

        b = self._blocked_once(issue_refund, args)  # the wait runs out
        self.assertEqual(b.receipt.repeated, "still_waiting")
        self.assertTrue(b.decision_id and b.idempotency_key and b.request_digest)
        self.assertEqual(b.request["idempotency_key"], b.idempotency_key)
        self.assertEqual(b.request_digest, writ.result_digest(self.agent.with_tenant(b.request)))
        b2 = self._blocked_once(issue_refund, args)  # still waiting: the same decision, no second approval
        self.assertEqual((b2.decision_id, b2.receipt.approval_ids), (b.decision_id, b.receipt.approval_ids))
        self.finance.approve(b.receipt.approval_ids[0], "order history checked")
        self.assertEqual(issue_refund(**args), "rf_once")
        self.assertEqual(ran, [15000])
        approvals = [a for a in self.finance.approvals().items if a.decision_id == b.decision_id]
        self.assertEqual(len(approvals), 1, "one approval request for the one action")
        story = self.auditor.decision(b.decision_id)
        self.assertEqual(story["state"]["execution"], "succeeded")

    def test_a_restored_run_resumes_the_same_decision(self) -> None:
        base = self.srv.refund_request("refund-high-value-human-review")
        args = base.pop("arguments")
        path = os.path.join(self.tmp, "pending.json")

        def tool(agent: writ.Client) -> Any:
            @agent.guard("payments.issue_refund", request=base, pending=writ.FilePendingStore(path))
            def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> str:
                return "rf_restored"
            return issue_refund

        b = self._blocked_once(tool(self.agent), args)
        self.finance.approve(b.receipt.approval_ids[0], "checked")
        # Another process: a new client, a new guard, the same pending file.
        restored = tool(writ.Client(self.srv.url, self.srv.tokens[AGENT]))
        self.assertEqual(restored(**args), "rf_restored")
        story = self.auditor.decision(b.decision_id)
        self.assertEqual([x["kind"] for x in story["records"]],
                         ["check", "approval_decision", "check", "execution_report"])
        self.assertEqual(writ.FilePendingStore(path).get(writ.action_digest(self.agent.with_tenant(
            {"tool": "payments.issue_refund", **base, "arguments": args}))), None, "settled, so forgotten")

    def test_withdraw(self) -> None:
        base = self.srv.refund_request("refund-high-value-human-review")
        args = base.pop("arguments")
        pending = writ.MemoryPendingStore()

        @self.agent.guard("payments.issue_refund", request=base, pending=pending)
        def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> str:
            raise AssertionError("never runs")

        b = self._blocked_once(issue_refund, args)
        a = self.agent.withdraw(b.receipt.approval_ids[0], "the customer cancelled")
        self.assertEqual((a.state, a.raw["decision"]["decision"]), ("withdrawn", "withdrawn"))
        with self.assertRaises(writ.Conflict):
            self.agent.withdraw(b.receipt.approval_ids[0])
        with self.assertRaises(writ.Conflict):
            self.finance.approve(b.receipt.approval_ids[0], "too late")
        # The next call of the action resumes the decision, which now ends.
        end = self._blocked_once(issue_refund, args)
        self.assertEqual((end.decision_id, end.receipt.outcome), (b.decision_id, "goal_fail_terminal"))
        self.assertIn("approval_withdrawn", [r.code for r in end.receipt.reasons])

    # ---- client-side validation and typed errors ----------------------------

    def test_wait_over_the_maximum_is_refused_before_any_request(self) -> None:
        dead = writ.Client(f"http://127.0.0.1:{_closed_port()}", "k")  # any request would fail Unreachable
        for wait in ("10m", 301, "5m1s", -1):
            with self.subTest(wait=wait):
                with self.assertRaises(writ.InvalidArgument) as cm:
                    dead.guard("payments.issue_refund", wait=wait)
                self.assertEqual(cm.exception.field, "wait")
                with self.assertRaises(writ.InvalidArgument):
                    dead.permit({"tool": "payments.issue_refund"}, wait=wait)
                with self.assertRaises(writ.InvalidArgument):
                    dead.resume("dec_1", {}, wait=wait)
        dead.guard("payments.issue_refund", wait="5m")  # the maximum itself is fine

    def test_transport_errors_are_typed(self) -> None:
        with self.assertRaises(writ.Unreachable):
            writ.Client(f"http://127.0.0.1:{_closed_port()}", "k").health()
        mute = socket.socket()
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)
        try:
            with self.assertRaises(writ.Timeout) as cm:
                writ.Client(f"http://127.0.0.1:{mute.getsockname()[1]}", "k", timeout=0.3).health()
            self.assertEqual(cm.exception.seconds, 0.3)
        finally:
            mute.close()

    def test_a_cancelled_async_call_is_aborted(self) -> None:
        mute = socket.socket()
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)
        client = writ.AsyncClient(f"http://127.0.0.1:{mute.getsockname()[1]}", "k", timeout=5)

        async def main() -> None:
            task = asyncio.ensure_future(client.health())
            await asyncio.sleep(0.05)
            task.cancel()
            await task

        try:
            with self.assertRaises(writ.Aborted):
                asyncio.run(main())
        finally:
            mute.close()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


if __name__ == "__main__":
    unittest.main()
