"""The guard: check with writ before a tool runs, report after.

One governed call goes:

1. ``POST /v1/check`` with the call's request (an idempotency key is
   generated when it has none);
2. if the receipt does not permit it: with ``wait``, and a receipt that an
   approval can settle (``human_review``, not terminal, with
   ``approval_ids``), ``POST /v1/decisions/{id}/resume`` waiting for the
   approval; if it still does not permit, raise :class:`~writ.errors.Blocked`
   carrying the receipt, and the tool never runs;
3. run the tool;
4. ``POST /v1/decisions/{id}/execution``: ``succeeded`` with the digest of
   the result, or ``failed`` with the exception's class name as the error
   code (and the exception is raised again).
"""

from __future__ import annotations

import functools
import inspect
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Union

from .client import new_idempotency_key, result_digest
from .errors import Blocked, WritError
from .types import JSON, ExecutionAck, Receipt

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Permit", "guard", "run_and_report", "ReportFailed"]


class ReportFailed(WritError):
    """The tool ran, but writ did not take its execution report.

    ``result`` is what the tool returned (the effect happened), ``receipt``
    the permit, and ``__cause__`` the error of the report. Report it again
    with :meth:`writ.Client.report_execution`: the same report is idempotent.
    """

    def __init__(self, receipt: Receipt, result: Any) -> None:
        super().__init__(f"writ: the execution report of decision {receipt.decision_id} failed")
        self.receipt = receipt
        self.result = result


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Permit:
    """A context manager that governs one call.

    ::

        with client.permit({"tool": "payments.issue_refund", "arguments": args, ...}, wait="2m") as p:
            p.result = issue_refund(**args)

    Entering checks (and waits, with ``wait``), and raises
    :class:`~writ.errors.Blocked` when the call may not run; ``p.receipt`` is
    the permit. Given ``receipt`` (a permit the caller already holds, such
    as one resumed after an approval), entering checks nothing and only
    refuses a receipt that does not permit. Leaving reports the execution:
    ``succeeded`` with the digest of ``p.result``, or ``failed`` if the block
    raised. ``p.ack`` is writ's acknowledgement. ``report=False`` skips the
    report.
    """

    def __init__(self, client: "Client", request: Mapping[str, Any], *,
                 wait: Union[str, float, None] = None, report: bool = True,
                 tool_result_id: Optional[Callable[[Any], Optional[str]]] = None,
                 receipt: Optional[Receipt] = None) -> None:
        self.client = client
        self.request: JSON = dict(request)
        if receipt is None and not self.request.get("idempotency_key"):
            self.request["idempotency_key"] = new_idempotency_key()
        self.wait = wait
        self.report = report
        self._tool_result_id = tool_result_id
        self.receipt: Optional[Receipt] = None
        self._given = receipt
        self.result: Any = None
        self.ack: Optional[ExecutionAck] = None
        self._started: Optional[str] = None

    def __enter__(self) -> "Permit":
        r = self._given or self.client.check(self.request)
        if not r.safe_to_execute and self.wait is not None and r.awaits_approval:
            r = self.client.resume(r.decision_id, self.request, wait=self.wait)
        self.receipt = r
        if not r.safe_to_execute:
            raise Blocked(r)
        self._started = _now()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self.report or self.receipt is None:
            return False
        r = self.receipt
        common = dict(started_at=self._started, ended_at=_now(),
                      idempotency_key=self.request.get("idempotency_key"))
        if exc is None:
            try:
                rid = self._tool_result_id(self.result) if self._tool_result_id else None
                self.ack = self.client.report_execution(
                    r.decision_id, "succeeded", result_digest=result_digest(self.result),
                    tool_result_id=rid, **common)
            except WritError as e:
                raise ReportFailed(r, self.result) from e
            return False
        # The tool raised: record that it failed, then let its error through.
        try:
            self.ack = self.client.report_execution(
                r.decision_id, "failed",
                error={"code": type(exc).__name__, "message": str(exc)[:1024]}, **common)
        except WritError:
            pass  # the tool's own error matters more; the permit stays IN_FLIGHT for auditors
        return False


def run_and_report(client: "Client", receipt: Receipt, run: Callable[[], Any], *,
                   idempotency_key: Optional[str] = None,
                   tool_result_id: Optional[Callable[[Any], Optional[str]]] = None) -> Any:
    """Runs a tool under a permit the caller already holds, then reports its execution.

    For frameworks that keep the receipt across a pause (an approval
    resumed after an interruption), where checking again would open a new
    decision. Raises :class:`~writ.errors.Blocked` without running anything
    if ``receipt`` does not permit.
    """
    req: JSON = {"idempotency_key": idempotency_key} if idempotency_key else {}
    with Permit(client, req, receipt=receipt, tool_result_id=tool_result_id) as p:
        p.result = run()
    return p.result


def _arguments(sig: inspect.Signature, bound: inspect.BoundArguments) -> JSON:
    """The call's arguments by name; ``**kwargs`` are spread, ``*args`` kept as a list."""
    out: JSON = {}
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = list(value)
        else:
            out[name] = value
    return out


def guard(client: "Client", tool: str, *,
          request: Union[Mapping[str, Any], Callable[..., Mapping[str, Any]], None] = None,
          wait: Union[str, float, None] = None, report: bool = True,
          tool_result_id: Optional[Callable[[Any], Optional[str]]] = None,
          ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that governs every call of a tool function.

    The check request is ``{"tool": tool, "arguments": <the call's
    arguments by name>}``, merged over ``request``: a mapping of fixed
    members (``actor``, ``subject_ids``, ...), or a function of the call's
    arguments that returns them (it may set ``arguments`` itself, and
    ``evidence`` or ``context`` fresh for each call). ``wait`` waits for an
    approval (see :class:`Permit`). ``tool_result_id`` maps the result to the
    id the report carries.

    A call writ does not permit raises :class:`~writ.errors.Blocked` and
    the function never runs.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def governed(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            req: JSON = {"tool": tool, "arguments": _arguments(sig, bound)}
            extra = request(*args, **kwargs) if callable(request) else (request or {})
            req.update(extra)
            with Permit(client, req, wait=wait, report=report, tool_result_id=tool_result_id) as p:
                p.result = fn(*args, **kwargs)
            return p.result

        governed.__writ_tool__ = tool  # type: ignore[attr-defined]
        return governed

    return decorate
