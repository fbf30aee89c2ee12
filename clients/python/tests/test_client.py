"""The Python client against a real `writ serve` on loopback.

    cd clients/python && python3 -m unittest -v

$WRIT_BIN names a built writ binary; without it the tests build one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import writ  # noqa: E402
from flaky_proxy import FlakyProxy  # noqa: E402
from writserver import WritServer, refund_request  # noqa: E402

AGENT, FINANCE, AUDITOR, DPO = "agt_support_service", "user_finance_lead_77", "auditor_olga", "dpo_ines"


IDV = "idv.acme.example"


class EvidenceStore(unittest.TestCase):
    """The evidence routes: an IDV issuer key stores, an agent cites, revokes refuse."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.srv = WritServer("examples/refund", keys={IDV: "issuer", AGENT: "agent"})
        cls.idv = writ.Client(cls.srv.url, cls.srv.tokens[IDV])
        cls.agent = writ.Client(cls.srv.url, cls.srv.tokens[AGENT])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.srv.close()

    def refund_citing(self, ref: str, customer: str) -> writ.Receipt:
        """A refund for customer citing ref: evidence counts only about the check's subjects."""
        req = refund_request("refund-allow")
        req["subject_ids"] = [customer if s.startswith("customer:") else s for s in req["subject_ids"]]
        req["evidence"] = [{"kind": "identity_verification", "id": ref}]
        return self.agent.check(req)

    def test_submit_show_cite_revoke(self) -> None:
        observed = refund_request("refund-allow")["evidence"][0]["observed_at"]
        customer = "customer:cus_" + uuid.uuid4().hex[:10]
        stored = self.idv.submit_evidence("identity_verification", id="idv_py_1", subject_ids=[customer],
                                          attributes={"method": "otp"}, observed_at=observed)
        self.assertEqual((stored["provenance"], stored["item"]["issuer"]), ("issued", IDV))
        self.assertTrue(stored["content_address"].startswith("sha256:"))
        for ref in ("idv_py_1", stored["content_address"]):
            got = self.agent.evidence(ref)
            self.assertEqual((got["item"]["id"], got["content_address"]), ("idv_py_1", stored["content_address"]))
        r = self.refund_citing("idv_py_1", customer)
        self.assertEqual(r.outcome, "allow", f"the refund citing the issued item: {r.reasons}")

        revoked = self.idv.revoke_evidence("idv_py_1", "the document was reported stolen")
        self.assertEqual(revoked["revoked"]["reason"], "the document was reported stolen")
        self.assertEqual(self.agent.evidence("idv_py_1")["revoked"]["by"], IDV)
        r = self.refund_citing("idv_py_1", customer)
        self.assertFalse(r.safe_to_execute)
        self.assertIn("was revoked", r.reasons[0].message)

    def test_refusals(self) -> None:
        observed = refund_request("refund-allow")["evidence"][0]["observed_at"]
        with self.assertRaises(writ.Forbidden) as cm:
            self.agent.submit_evidence("identity_verification", id="idv_py_agent", observed_at=observed)
        self.assertIn("issuer", str(cm.exception))
        with self.assertRaises(writ.NotFound):
            self.agent.evidence("idv_py_agent")
        with self.assertRaises(writ.NotFound):
            self.idv.revoke_evidence("idv_py_nobody", "no such item")
        self.idv.submit_evidence("identity_verification", id="idv_py_dup", observed_at=observed)
        with self.assertRaises(writ.Conflict):
            self.idv.submit_evidence("identity_verification", id="idv_py_dup", observed_at=observed)


class RefundPack(unittest.TestCase):
    """The refund example pack, with an agent, an approver and an auditor key."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.srv = WritServer("examples/refund", keys={AGENT: "agent", FINANCE: "approver", AUDITOR: "auditor", DPO: "admin",
                                                      IDV: "issuer"})
        cls.agent = writ.Client(cls.srv.url, cls.srv.tokens[AGENT])
        cls.finance = writ.Client(cls.srv.url, cls.srv.tokens[FINANCE])
        cls.auditor = writ.Client(cls.srv.url, cls.srv.tokens[AUDITOR])
        cls.dpo = writ.Client(cls.srv.url, cls.srv.tokens[DPO])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.srv.close()

    def test_every_outcome(self) -> None:
        cases = [
            # (example request, outcome, mode, human_review_terminal, record status)
            ("refund-allow", "allow", "continue_downstream", False, "IN_FLIGHT"),
            ("refund-allow-with-warning", "allow_with_warning", "continue_downstream", False, "IN_FLIGHT"),
            ("refund-missing-idv-local-replan", "replan_required", "local_replan", False, "DEFERRED"),
            ("refund-return-in-transit-upstream-replan", "replan_required", "upstream_replan", False, "DEFERRED"),
            ("refund-high-value-human-review", "replan_required", "human_review", False, "ESCALATED"),
            ("refund-fraud-terminal-review", "replan_required", "human_review", True, "ESCALATED"),
            ("refund-exceeds-order-goal-fail", "goal_fail_terminal", "terminal_block", False, "REJECTED"),
        ]
        for name, outcome, mode, terminal, status in cases:
            with self.subTest(name):
                r = self.agent.check(self.srv.refund_request(name))
                got = (r.outcome, r.disposition.mode, r.human_review_terminal)
                self.assertEqual(got, (outcome, mode, terminal), f"check({name}) = {got}")
                self.assertEqual(r.safe_to_execute, outcome in ("allow", "allow_with_warning"))
                self.assertTrue(r.record_id, "every receipt names its durable record")
                rec = self.auditor.record(r.record_id)
                self.assertEqual(rec["status"], status)
                self.assertEqual(rec["decision_id"], r.decision_id)
        up = self.agent.check(self.srv.refund_request("refund-return-in-transit-upstream-replan"))
        self.assertEqual(up.routing.return_to_node, "returns_intake")
        self.assertEqual([x.code for x in up.reasons], ["return_not_received"])

    def test_guard_blocked_raises_with_the_receipt(self) -> None:
        calls = []

        facts = self.srv.refund_request("refund-exceeds-order-goal-fail")
        del facts["arguments"]

        @self.agent.guard("payments.issue_refund", request=lambda *args, **kwargs: facts)
        def issue_refund(order_id: str, amount_inr: int, currency: str = "INR") -> dict:
            calls.append(order_id)
            return {"refund_id": "rf_1"}

        with self.assertRaises(writ.Blocked) as cm:
            issue_refund("ord_881", 20000)
        r = cm.exception.receipt
        self.assertEqual((r.outcome, cm.exception.mode), ("goal_fail_terminal", "terminal_block"))
        self.assertIn("refund_exceeds_order_total", [x.code for x in r.reasons])
        self.assertEqual(calls, [], "a blocked tool never runs")
        # Nothing was reported: the decision's story is the one check.
        story = self.auditor.decision(r.decision_id)
        self.assertEqual([x["kind"] for x in story["records"]], ["check"])

    def test_guard_allowed_runs_and_reports(self) -> None:
        base = self.srv.refund_request("refund-allow")
        args = base.pop("arguments")
        traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

        @self.agent.guard("payments.issue_refund", request=base, tool_result_id=lambda res: res["refund_id"])
        def issue_refund(order_id: str, amount_inr: int, currency: str, card_number: str) -> dict:
            return {"refund_id": "rf_881", "amount_inr": amount_inr}

        with writ.traceparent(traceparent):
            result = issue_refund(**args)
        self.assertEqual(result, {"refund_id": "rf_881", "amount_inr": 4200})
        records = self.auditor.records(trace_id="4bf92f3577b34da6a3ce929d0e0e4736").items
        self.assertEqual([r["status"] for r in records], ["IN_FLIGHT", "CLOSED"],
                         "the check and its report, in the caller's trace")
        decision_id = records[0]["decision_id"]
        story = self.auditor.decision(decision_id)
        self.assertEqual([x["kind"] for x in story["records"]], ["check", "execution_report"])
        self.assertEqual((story["state"]["status"], story["state"]["execution"], story["state"]["in_flight"]),
                         ("CLOSED", "succeeded", False))
        execution = story["records"][1]["record"]["execution"]
        want = "sha256:" + hashlib.sha256(
            json.dumps(result, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        self.assertEqual(execution["result_digest"], want)
        self.assertEqual(story["records"][1]["record"]["tool_lineage"][0]["tool_result_id"], "rf_881")

    def test_guard_reports_a_failed_tool(self) -> None:
        req = self.srv.refund_request("refund-allow")

        class PaymentsDown(Exception):
            pass

        with self.assertRaises(PaymentsDown):
            with self.agent.permit(req) as p:
                raise PaymentsDown("the payments provider timed out")
        self.assertEqual(p.ack.execution, "failed")
        story = self.auditor.decision(p.receipt.decision_id)
        self.assertEqual(story["records"][1]["record"]["execution"]["error"]["code"], "PaymentsDown")

    def test_execution_report(self) -> None:
        r = self.agent.check(self.srv.refund_request("refund-allow"))
        self.assertTrue(r.safe_to_execute)
        self.assertTrue(r.report_required)
        ack = self.agent.report_execution(r.decision_id, "succeeded", result={"refund_id": "rf_9"},
                                          tool_result_id="tr_121", reversal_token="rv_refund_txn_q9")
        self.assertEqual((ack.status, ack.execution, ack.findings, ack.repeated), ("CLOSED", "succeeded", [], None))
        again = self.agent.report_execution(r.decision_id, "succeeded", result={"refund_id": "rf_9"},
                                            tool_result_id="tr_121", reversal_token="rv_refund_txn_q9")
        self.assertEqual((again.record_id, again.repeated), (ack.record_id, "idempotent"))
        with self.assertRaises(writ.Conflict) as cm:
            self.agent.report_execution(r.decision_id, "failed", error={"code": "other"})
        self.assertEqual(cm.exception.status, 409)

    def test_retract_feedback_links_erase(self) -> None:
        blocked = self.agent.check(self.srv.refund_request("refund-exceeds-order-goal-fail"))
        allowed = self.agent.check(self.srv.refund_request("refund-allow"))
        ack = self.auditor.retract(blocked.record_id, "decided on a stale order total")
        self.assertEqual((ack["kind"], ack["about"], ack["decision_id"], ack["status"]),
                         ("retraction", blocked.record_id, blocked.decision_id, "CLOSED"))
        with self.assertRaises(writ.Conflict):
            self.auditor.retract(blocked.record_id, "again")
        with self.assertRaises(writ.Forbidden):
            self.agent.retract(allowed.record_id, "an agent may not")
        with self.assertRaises(writ.Invalid):
            self.finance.feedback(allowed.record_id, "wrong_outcome", score=1.5)
        fb = self.finance.feedback(allowed.record_id, "wrong_outcome", score=0.25, comment="should have escalated",
                                   rule_change="ctxpack.support@1.1.0")
        self.assertEqual((fb["kind"], fb["about"], fb["outcome"]), ("feedback", allowed.record_id, "wrong_outcome"))
        self.assertEqual(self.auditor.record(fb["record_id"])["actor"]["id"], FINANCE)

        links = self.auditor.links(blocked.record_id)
        self.assertEqual((links["retracted"], links["retracted_by"], links["superseded_by"], links["feedback"]),
                         (True, ack["record_id"], [ack["record_id"]], []))
        links = self.finance.links(allowed.record_id)
        self.assertEqual((links["retracted"], links["superseded_by"], links["feedback"]), (False, [], [fb["record_id"]]))

        with self.assertRaises(writ.Forbidden):
            self.auditor.erase("customer:cus_77", "not an admin")
        # The refund pack classifies nothing: the erasure erases nothing,
        # and is recorded all the same.
        x = self.dpo.erase("customer:cus_77", "the customer's erasure request")
        self.assertEqual((x["subject_id"], x["erased"], x["refs"]), ("customer:cus_77", 0, []))
        rec = self.auditor.record(x["record_id"])
        self.assertTrue(rec["decision_key"].startswith("erasure:"), rec["decision_key"])
        self.assertEqual(rec["actor"]["id"], DPO)

    def test_approval_flow_with_the_guard_waiting(self) -> None:
        base = self.srv.refund_request("refund-high-value-human-review")
        args = base.pop("arguments")
        ran = []

        @self.agent.guard("payments.issue_refund", request=base, wait="2m")
        def issue_refund(**kw) -> dict:
            ran.append(kw["amount_inr"])
            return {"refund_id": "rf_15000"}

        out: dict = {}

        def agent() -> None:
            try:
                out["result"] = issue_refund(**args)
            except Exception as e:  # reported to the test thread
                out["error"] = e

        t = threading.Thread(target=agent)
        t.start()
        # The finance lead finds the request in the queue (it appears once
        # the agent's check is sealed) and approves it.
        pending = []
        while not pending and t.is_alive():
            pending = [a for a in self.finance.approvals(state="pending").items
                       if a.decision_id and a.gate_id == "GATE_FINANCE_APPROVAL"
                       and self._is_for(a, args["amount_inr"])]
        self.assertTrue(pending, f"no pending approval; agent: {out}")
        decided = self.finance.approve(pending[0].approval_id, "order history checked")
        self.assertEqual(decided.state, "approved")
        t.join()
        self.assertNotIn("error", out)
        self.assertEqual(out["result"], {"refund_id": "rf_15000"})
        self.assertEqual(ran, [15000])
        story = self.auditor.decision(pending[0].decision_id)
        self.assertEqual([x["kind"] for x in story["records"]],
                         ["check", "approval_decision", "check", "execution_report"])
        self.assertEqual(story["records"][2]["receipt"]["outcome"], "allow")
        # The approval is found by its approver and by its rule, newest first.
        approval = story["records"][1]["record"]
        by_approver = self.auditor.records(approver=FINANCE, order="newest").items
        self.assertIn(approval["record_id"], [r["record_id"] for r in by_approver])
        self.assertTrue(all(any(a["approver"] == FINANCE for a in r["approvals"]) for r in by_approver))
        pd = approval["policy_decisions"][0]["policy_decision_id"]
        by_rule = self.auditor.records(policy_decision_id=pd, approval_mode_effective=approval["approval_mode_effective"]).items
        self.assertIn(approval["record_id"], [r["record_id"] for r in by_rule])
        with self.assertRaises(writ.Invalid):
            self.auditor.records(approval_mode_effective="writes")

    def _is_for(self, a: writ.ApprovalRequest, amount: int) -> bool:
        return any(str(amount) in r.message for r in a.reasons)

    def test_approval_denied_then_resume(self) -> None:
        req = self.srv.refund_request("refund-high-value-human-review")
        r = self.agent.check(req)
        self.assertTrue(r.awaits_approval)
        denied = self.finance.deny(r.approval_ids[0], "not this one")
        self.assertEqual(denied.state, "denied")
        again = self.agent.resume(r.decision_id, req, wait="5s")
        self.assertEqual((again.outcome, again.decision_id), ("goal_fail_terminal", r.decision_id))
        self.assertIn("approval_denied", [x.code for x in again.reasons])

    def test_resume_wait_in_vain(self) -> None:
        req = self.srv.refund_request("refund-high-value-human-review")
        r = self.agent.check(req)
        again = self.agent.resume(r.decision_id, req, wait=1)
        self.assertEqual((again.repeated, again.safe_to_execute), ("still_waiting", False))

    def test_problems_surface(self) -> None:
        with self.assertRaises(writ.Invalid) as cm:
            self.agent.check({"tenant_id": 42, "actor": {"type": "AGENT", "id": "a", "typ": "x"}})
        p = cm.exception.problem
        self.assertEqual((p.status, p.code, p.type), (400, "invalid", "urn:writ:problem:invalid"))
        self.assertEqual([(e.field, e.message) for e in p.errors], [("tenant_id", "must be a string, not a number")])

        with self.assertRaises(writ.Unauthenticated):
            writ.Client(self.srv.url, "wk_not_a_key").check(self.srv.refund_request("refund-allow"))
        with self.assertRaises(writ.Forbidden) as cm2:
            self.finance.check(self.srv.refund_request("refund-allow"))
        self.assertEqual(cm2.exception.code, "forbidden")
        with self.assertRaises(writ.NotFound):
            self.auditor.decision("dec_does_not_exist")

        # The same idempotency key with other arguments is a conflict.
        req = self.srv.refund_request("refund-allow", idempotency_key="ik_conflict_" + os.urandom(4).hex())
        first = self.agent.check(req)
        self.assertTrue(first.safe_to_execute)
        self.assertEqual(self.agent.check(req).repeated, "idempotent")
        other = dict(req, arguments=dict(req["arguments"], amount_inr=4100),
                     outputs=dict(req["outputs"], refund_amount_inr=4100))
        with self.assertRaises(writ.Conflict):
            self.agent.check(other)

    def test_503_is_retried_after_retry_after(self) -> None:
        proxy = FlakyProxy(self.srv.url, fail=1, retry_after="2")
        self.addCleanup(proxy.close)
        slept = []
        c = writ.Client(proxy.url, self.srv.tokens[AGENT], sleep=slept.append)
        r = c.check(self.srv.refund_request("refund-allow"))
        self.assertTrue(r.safe_to_execute)
        self.assertEqual(slept, [2.0], "waited what Retry-After said")
        self.assertEqual(proxy.seen, ["503 /v1/check", "200 /v1/check"])

    def test_503_gives_up_with_the_problem(self) -> None:
        proxy = FlakyProxy(self.srv.url, fail=10, retry_after="1")
        self.addCleanup(proxy.close)
        slept = []
        c = writ.Client(proxy.url, self.srv.tokens[AGENT], sleep=slept.append, max_retries=2)
        with self.assertRaises(writ.Unavailable) as cm:
            c.check(self.srv.refund_request("refund-allow"))
        self.assertEqual((cm.exception.status, cm.exception.receipt), (503, None))
        self.assertEqual(slept, [1.0, 1.0])
        self.assertEqual(len(proxy.seen), 3)

    def test_quick_start_agent(self) -> None:
        """examples/refund_agent.py, the README's quick start, runs against the server."""
        import subprocess

        script = os.path.join(os.path.dirname(__file__), "..", "examples", "refund_agent.py")
        env = dict(os.environ, WRIT_URL=self.srv.url, WRIT_API_KEY=self.srv.tokens[AGENT], WRIT_ISSUER_KEY=self.srv.tokens[IDV])
        out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, check=True).stdout
        self.assertRegex(out, r"identity service: customer:cus_\w+ verified \(idv_\w+, issued\)")
        self.assertIn("allowed, executed and reported: rf_", out)
        self.assertIn("blocked: replan_required / upstream_replan: return_not_received", out)
        self.assertIn("route back to: returns_intake", out)
        self.assertIn("blocked: replan_required / human_review: high_value_refund", out)
        self.assertIn("approval request: apr_", out)


class DevelopmentModeRuns(unittest.TestCase):
    """Runs and attempts, against the storybook pack in development mode (no keys)."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.srv = WritServer("examples/storybook")
        cls.c = writ.Client(cls.srv.url, tenant_id="acme")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.srv.close()

    def test_run_and_attempts(self) -> None:
        self.assertEqual(self.c.health()["auth"], "disabled")
        run = self.c.start_run("ui.component.change", context={"component": "Button", "ticket": "UI-142"})
        self.assertEqual(run["current_step"], "implement")
        actor = {"type": "AGENT", "id": "agt_frontend"}
        v = self.c.submit_attempt(run["run_id"], "implement", actor=actor,
                                  result={"diff_summary": "Primary button uses the new brand colour."})
        self.assertEqual(v["state"], "accepted")
        v = self.c.submit_attempt(run["run_id"], "visual_check", actor=actor,
                                  result={"visualVerification": {"performed": False}})
        self.assertEqual(v["state"], "retry")
        self.assertTrue(v["retry_prompt"])
        self.assertEqual(self.c.run(run["run_id"])["current_step"], "visual_check")
        with self.assertRaises(writ.Conflict):
            self.c.submit_attempt(run["run_id"], "implement", actor=actor, result={"diff_summary": "x"})


if __name__ == "__main__":
    unittest.main()
