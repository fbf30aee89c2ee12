"""The Python framework mappings of docs/frameworks.md, against a real writ serve.

The code shown in docs/frameworks.md is the files in examples/frameworks/
(a test here keeps them equal); LangGraph, the OpenAI Agents SDK and
Temporal are stood in for by tests/framework_stubs/ at the framework's
boundary only, since they cannot be installed here.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, PY)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "framework_stubs"))
sys.path.insert(0, os.path.join(PY, "examples", "frameworks"))

import writ  # noqa: E402
from writserver import REPO, WritServer  # noqa: E402

import agents  # noqa: E402  (the stand-in)
import langgraph_refund  # noqa: E402
import openai_agents_refund  # noqa: E402
import temporal_refund  # noqa: E402
from langgraph.types import Command  # noqa: E402
from temporalio import workflow as temporal_workflow  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402

AGENT, FINANCE, AUDITOR = "agt_support_service", "user_finance_lead_77", "auditor_olga"


def facts_of(srv: WritServer, example: str, amount: int) -> dict:
    """The check's facts (actor, subjects, evidence, context, outputs) from a refund example.

    Its identity verification is on file with srv, submitted by the IDV service.
    """
    r = srv.refund_request(example)
    for k in ("tool", "arguments", "tool_call_id"):
        r.pop(k, None)
    r["outputs"] = {"refund_amount_inr": amount, "currency": "INR", "order_id": "ord_881"}
    return r


def args(amount: int) -> dict:
    return {"order_id": "ord_881", "amount_inr": amount, "currency": "INR"}


class Frameworks(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.srv = WritServer("examples/refund", keys={AGENT: "agent", FINANCE: "approver", AUDITOR: "auditor"})
        cls.agent = writ.Client(cls.srv.url, cls.srv.tokens[AGENT])
        cls.finance = writ.Client(cls.srv.url, cls.srv.tokens[FINANCE])
        cls.auditor = writ.Client(cls.srv.url, cls.srv.tokens[AUDITOR])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.srv.close()

    def kinds(self, decision_id: str) -> list:
        return [r["kind"] for r in self.auditor.decision(decision_id)["records"]]

    # ---- LangGraph -------------------------------------------------------

    def graph(self, amounts):
        issued, proposals = [], [{"tool": "payments.issue_refund", "arguments": args(a)} for a in amounts]

        def support_agent(state):  # the scripted model proposes the next refund
            return {"proposal": proposals.pop(0)}

        def returns_intake(state):  # the returns desk confirms the warehouse has the item
            if state.get("receipt"):
                return {"facts": {**state["facts"], "context": {**state["facts"]["context"], "return_status": "received"}},
                        "receipt": None}
            return {}

        def issue(a):
            issued.append(a)
            return {"refund_id": f"rf_{len(issued)}"}

        g = langgraph_refund.build_graph(self.agent, support_agent, returns_intake, issue, checkpointer=None)
        return g, issued

    def test_langgraph_allowed(self) -> None:
        g, issued = self.graph([4200])
        out = g.invoke({"facts": facts_of(self.srv, "refund-allow", 4200)})
        self.assertEqual(g.trail, ["returns_intake", "support_agent", "writ_check", "issue_refund"])
        self.assertEqual(issued, [args(4200)])
        self.assertEqual(self.kinds(out["receipt"]["decision_id"]), ["check", "execution_report"])

    def test_langgraph_human_review_interrupts(self) -> None:
        g, issued = self.graph([15000])
        paused = g.invoke({"facts": facts_of(self.srv, "refund-high-value-human-review", 15000)})
        [pause] = paused["__interrupt__"]
        self.assertEqual((issued, pause["target_hint"]), ([], "finance_approvers"))
        self.finance.approve(pause["approval_ids"][0], "order history checked")
        out = g.invoke(Command(resume={"decided": True}))
        self.assertEqual(g.trail[-2:], ["human_review", "issue_refund"])
        self.assertEqual(len(issued), 1)
        self.assertEqual(self.kinds(pause["decision_id"]), ["check", "approval_decision", "check", "execution_report"])
        self.assertEqual(out["receipt"]["outcome"], "allow")

    def test_langgraph_upstream_replan_reroutes(self) -> None:
        g, issued = self.graph([4200, 4200])
        g.invoke({"facts": facts_of(self.srv, "refund-return-in-transit-upstream-replan", 4200)})
        self.assertEqual(g.trail, ["returns_intake", "support_agent", "writ_check",
                                   "returns_intake", "support_agent", "writ_check", "issue_refund"])
        self.assertEqual(len(issued), 1)

    # ---- OpenAI Agents ---------------------------------------------------

    def test_openai_agents_allowed(self) -> None:
        issued = []
        refund = openai_agents_refund.GovernedRefund(self.agent, facts_of(self.srv, "refund-allow", 4200),
                                                     lambda a: issued.append(a) or {"refund_id": "rf_1"})
        res = asyncio.run(agents.run_tool_call(refund.tool, "call_a", args(4200)))
        self.assertEqual(res.interruptions, [])
        self.assertEqual(issued, [args(4200)])
        self.assertEqual(self.kinds(refund.receipt("call_a").decision_id), ["check", "execution_report"])

    def test_openai_agents_human_review(self) -> None:
        issued = []
        refund = openai_agents_refund.GovernedRefund(self.agent, facts_of(self.srv, "refund-high-value-human-review", 15000),
                                                     lambda a: issued.append(a) or {"refund_id": "rf_2"})
        res = asyncio.run(agents.run_tool_call(refund.tool, "call_h", args(15000)))
        self.assertEqual((len(res.interruptions), issued), (1, []))
        state = res.to_state()
        openai_agents_refund.approve_in_writ(self.finance, refund, state, res.interruptions[0], "checked")
        res = asyncio.run(agents.run_tool_call(refund.tool, "call_h", args(15000), state=state))
        self.assertEqual(len(issued), 1)
        self.assertEqual(self.kinds(refund.receipt("call_h").decision_id),
                         ["check", "approval_decision", "check", "execution_report"])

    def test_openai_agents_blocked_answers_the_receipt(self) -> None:
        refund = openai_agents_refund.GovernedRefund(
            self.agent, facts_of(self.srv, "refund-return-in-transit-upstream-replan", 4200), lambda a: self.fail("ran"))
        res = asyncio.run(agents.run_tool_call(refund.tool, "call_u", args(4200)))
        self.assertIn('"mode": "upstream_replan"', res.final_output)
        self.assertIn('"return_to_node": "returns_intake"', res.final_output)

    # ---- Temporal --------------------------------------------------------

    def workflow(self, issued):
        temporal_workflow.worker = temporal_refund.RefundActivities(
            self.agent, lambda a: issued.append(a) or {"refund_id": "rf_t"})
        return temporal_refund.RefundWorkflow()

    def test_temporal_allowed(self) -> None:
        issued = []
        out = asyncio.run(self.workflow(issued).run(facts_of(self.srv, "refund-allow", 4200), args(4200)))
        self.assertEqual((out["status"], out["result"]), ("refunded", {"refund_id": "rf_t"}))
        self.assertEqual(self.kinds(out["decision_id"]), ["check", "execution_report"])

    def test_temporal_waits_for_the_approval(self) -> None:
        issued, out = [], {}
        facts = facts_of(self.srv, "refund-high-value-human-review", 15000)
        wf = self.workflow(issued)
        t = threading.Thread(target=lambda: out.update(asyncio.run(wf.run(facts, args(15000)))))
        t.start()
        pending = []
        while not pending and t.is_alive():
            pending = [a for a in self.finance.approvals(state="pending").items if facts["subject_ids"][0] in a.raw["subject_ids"]]
        self.finance.approve(pending[0].approval_id, "checked")
        t.join()
        self.assertEqual(out["status"], "refunded")
        self.assertEqual(self.kinds(out["decision_id"]), ["check", "approval_decision", "check", "execution_report"])

    def test_temporal_replan_and_terminal(self) -> None:
        out = asyncio.run(self.workflow([]).run(facts_of(self.srv, "refund-return-in-transit-upstream-replan", 4200), args(4200)))
        self.assertEqual((out["status"], out["return_to_node"]), ("returned", "returns_intake"))
        with self.assertRaises(ApplicationError) as cm:
            asyncio.run(self.workflow([]).run(facts_of(self.srv, "refund-exceeds-order-goal-fail", 20000), args(20000)))
        self.assertEqual((cm.exception.type, cm.exception.non_retryable), ("terminal_block", True))


class DocMatchesFiles(unittest.TestCase):
    """Each code block of docs/frameworks.md preceded by <!-- file: PATH --> is that file, byte for byte."""

    def test_doc_blocks_are_the_files(self) -> None:
        with open(os.path.join(REPO, "docs", "frameworks.md"), encoding="utf-8") as f:
            doc = f.read()
        blocks = re.findall(r"<!-- file: (\S+) -->\n```[a-z]*\n(.*?)```\n", doc, re.S)
        self.assertGreaterEqual(len(blocks), 3, "the doc shows the three Python mappings")
        for path, body in blocks:
            with self.subTest(path):
                with open(os.path.join(REPO, path), encoding="utf-8") as f:
                    self.assertEqual(body, f.read(), f"docs/frameworks.md's copy of {path} differs from the file")


if __name__ == "__main__":
    unittest.main()
