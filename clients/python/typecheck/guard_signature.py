"""Checked by pyright (strict), never run: the guard keeps the wrapped signature.

Each ``# type: ignore`` below marks a call that must be a type error; with
``reportUnnecessaryTypeIgnoreComment`` on, pyright fails if one is not
(as when a decorator turns the function into ``(...) -> Any``).
"""

from __future__ import annotations

import writ

client = writ.Client("http://127.0.0.1:8080", "key")


@client.guard("payments.issue_refund")
def issue_refund(order_id: str, amount_inr: int) -> str:
    return order_id


@client.guard("payments.issue_refund")
async def issue_refund_async(order_id: str, amount_inr: int) -> str:
    return order_id


def calls() -> None:
    ok: str = issue_refund("ord_881", 4200)
    issue_refund("ord_881", "4200")  # type: ignore[reportArgumentType]
    issue_refund(4200)  # type: ignore[reportCallIssue]
    wrong: int = issue_refund("ord_881", 4200)  # type: ignore[reportAssignmentType]
    print(ok, wrong, issue_refund_async("ord_881", 4200))


def modes(r: writ.Receipt) -> None:
    if r.disposition.mode == "human_reveiw":  # type: ignore[reportUnnecessaryComparison]
        pass
