"""A governed refund agent: the Python client's quick start, end to end.

Start writ with the refund example pack, an agent key and an issuer key
for the identity service (see README.md beside this folder), then:

    WRIT_URL=http://127.0.0.1:8080 WRIT_API_KEY=<agent token> WRIT_ISSUER_KEY=<issuer token> \
        python3 clients/python/examples/refund_agent.py

First the identity service verifies the customer: with the issuer key, it
puts an identity verification on file, which the refunds cite (a refund
accepts no evidence that is only the agent's word). Then a scripted
"model" proposes three refunds. writ allows the first (it runs,
and its execution is reported), sends the second back upstream (the return
has not reached the warehouse), and asks a person to approve the third
(over 10,000 INR): the agent prints the approval request and, with
``--wait 2m``, waits for it (approve it with ``writ approvals approve``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a clone, installed or not

import writ  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "refund", "requests")


JSON = Dict[str, Any]


def verify_identity(url: str, issuer_key: Optional[str], customer: str) -> Optional[str]:
    """The identity service's step, before the agent acts: an identity verification of the customer, put on
    file with the issuer's key. Returns its id, or None without a key (the refunds then have none to cite)."""
    if not issuer_key:
        print("no WRIT_ISSUER_KEY: nobody verifies the customer's identity, so no refund can be allowed")
        return None
    now = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    stored = writ.Client(url, issuer_key).submit_evidence(
        "identity_verification", id="idv_" + uuid.uuid4().hex[:8], subject_ids=[customer],
        attributes={"method": "otp"}, observed_at=now)
    print(f"identity service: {customer} verified ({stored['item']['id']}, {stored['provenance']})")
    return str(stored["item"]["id"])


def facts(example: str, customer: str, session: str, verification: Optional[str]) -> JSON:
    """What the agent knows when it asks: the refund example's actor, subjects, evidence and context, fresh,
    in this run's session (writ counts the session's tool calls against the refund's budget), citing the
    identity service's verification of the customer."""
    with open(os.path.join(EXAMPLES, example + ".json")) as f:
        r: JSON = json.load(f)
    now = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    for e in r["evidence"]:
        e["observed_at"] = now  # the examples were written on 2026-05-09
        if e["kind"] == "identity_verification" and verification:
            e["id"] = verification
            e.pop("version", None)
    subjects = [customer if s.startswith("customer:") else s for s in r["subject_ids"]]
    inputs_refs: JSON = {**r.get("inputs_refs", {}), "session": session}
    return {"actor": r["actor"], "subject_ids": subjects, "evidence": r["evidence"], "context": r["context"],
            "inputs_refs": inputs_refs}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--url", default=os.environ.get("WRIT_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--api-key", default=os.environ.get("WRIT_API_KEY"))
    ap.add_argument("--issuer-key", default=os.environ.get("WRIT_ISSUER_KEY"),
                    help="the identity service's key (role issuer), which verifies the customer first")
    ap.add_argument("--wait", default=None, help="wait this long for the approval of the third refund, such as 2m")
    opts = ap.parse_args()
    client = writ.Client(opts.url, opts.api_key)
    customer = "customer:cus_" + uuid.uuid4().hex[:8]
    session = "sess_" + uuid.uuid4().hex[:8]
    situation: JSON = {}
    verification = verify_identity(opts.url, opts.issuer_key, customer)

    def request(order_id: str, amount_inr: int, currency: str = "INR") -> JSON:
        return {**situation, "outputs": {"refund_amount_inr": amount_inr, "currency": currency, "order_id": order_id}}

    def refund_id(r: Any) -> str:
        return str(r["refund_id"])

    @client.guard("payments.issue_refund", request=request, wait=opts.wait, tool_result_id=refund_id)
    def issue_refund(order_id: str, amount_inr: int, currency: str = "INR") -> JSON:
        print(f"  -> payments provider: refund {amount_inr} {currency} on {order_id}")
        return {"refund_id": "rf_" + uuid.uuid4().hex[:8], "amount_inr": amount_inr}

    # The scripted model's proposals, each with the facts it had at the time.
    script = [("refund-allow", 4200), ("refund-return-in-transit-upstream-replan", 4200),
              ("refund-high-value-human-review", 15000)]
    for example, amount in script:
        situation.clear()
        situation.update(facts(example, customer, session, verification))
        print(f"propose: refund {amount} INR on ord_881 ({example})")
        try:
            result = issue_refund("ord_881", amount)
            print(f"  allowed, executed and reported: {result['refund_id']}")
        except writ.Blocked as b:
            r = b.receipt
            print(f"  blocked: {r.outcome} / {r.disposition.mode}: {', '.join(x.code for x in r.reasons)}")
            for step in r.safe_next_steps:
                print(f"    next: {step.message}")
            if r.disposition.mode == writ.UPSTREAM_REPLAN:
                print(f"    route back to: {r.routing.return_to_node}")
            if r.awaits_approval:
                print(f"    approval request: {r.approval_ids[0]} (decision {r.decision_id})")
        except writ.ProblemError as e:
            print(f"  writ refused the request: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
