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
   code (and the exception is raised again). If writ does not take the
   report of a tool that returned (writ down, the network down, a timeout,
   a 5xx), :class:`ReportFailed` carries the result and the decision id:
   the effect happened, do not run it again.

With ``pending`` (a :class:`~writ.state.PendingStore`; the client's own,
in memory, unless one is given), a blocked call that
waits on an approval is remembered by its action, and the next call of the
same action resumes that decision (with the same idempotency key) instead
of checking again and opening a second approval request. With ``outbox``
(a :class:`~writ.state.Outbox`), the report is journalled before the tool
runs and until writ takes it, so it survives the agent's own crash
(:meth:`writ.Client.replay_outbox` sends it on start).

``async def`` tools are awaited before their report (an async tool that
raises is reported ``failed``); the client's blocking calls then run in a
worker thread (``asyncio.to_thread``), so the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from datetime import datetime, timezone
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Dict, Mapping, Optional, ParamSpec,
                    TypeVar, Union, cast, overload)

from .client import check_wait, new_idempotency_key, result_digest
from .errors import Blocked, NotFound, WritError
from .state import Outbox, PendingApproval, PendingStore, action_digest
from .types import JSON, ExecutionAck, Receipt

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Permit", "Guard", "guard", "run_and_report", "ReportFailed"]

P = ParamSpec("P")
R = TypeVar("R")


class ReportFailed(WritError):
    """The tool ran, but writ did not take its execution report.

    ``result`` is what the tool returned (the effect happened: do not run it
    again), ``receipt`` the permit, ``decision_id`` its decision, and
    ``__cause__`` the error of the report (a transport error, a problem, or
    anything else the report raised). Report it again with
    :meth:`writ.Client.report_execution` (the same report is idempotent),
    or let an outbox do it.
    """

    def __init__(self, receipt: Receipt, result: Any) -> None:
        super().__init__(f"writ: the execution report of decision {receipt.decision_id} failed; "
                         "the tool ran and its result is kept")
        self.receipt = receipt
        self.result = result
        self.decision_id = receipt.decision_id


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Permit:
    """A context manager that governs one call.

    ::

        with client.permit({"tool": "payments.issue_refund", "arguments": args, ...}, wait="2m") as p:
            p.result = issue_refund(**args)

    Entering checks (and waits, with ``wait``), and raises
    :class:`~writ.errors.Blocked` when the call may not run; ``p.receipt`` is
    the permit. A ``wait`` writ would refuse (over 5 minutes) raises
    :class:`~writ.errors.InvalidArgument` before any request. Given
    ``receipt`` (a permit the caller already holds, such as one resumed
    after an approval), entering checks nothing and only refuses a receipt
    that does not permit. Leaving reports the execution: ``succeeded`` with
    the digest of ``p.result``, or ``failed`` if the block raised; if writ
    does not take the report of a block that did not raise,
    :class:`ReportFailed` carries the result. ``p.ack`` is writ's
    acknowledgement. ``report=False`` skips the report. ``pending`` and
    ``outbox``: see the module's documentation.

    ``async with`` does the same from a coroutine, running the client's
    calls in a worker thread.
    """

    def __init__(self, client: "Client", request: Mapping[str, Any], *,
                 wait: Union[str, float, None] = None, report: bool = True,
                 tool_result_id: Optional[Callable[[Any], Optional[str]]] = None,
                 receipt: Optional[Receipt] = None,
                 pending: Optional[PendingStore] = None,
                 outbox: Optional[Outbox] = None) -> None:
        check_wait(wait)  # refuse what writ would refuse, before any request
        self.client = client
        self.request: JSON = dict(request)
        self.wait = wait
        self.report = report
        self._tool_result_id = tool_result_id
        self.receipt: Optional[Receipt] = None
        self._given = receipt
        self.pending: Optional[PendingStore] = pending if pending is not None else client.pending
        self.outbox = outbox
        self.result: Any = None
        self.ack: Optional[ExecutionAck] = None
        self._started: Optional[str] = None

    # ---- entering --------------------------------------------------------

    def _permitted(self) -> Receipt:
        if self._given is not None:
            r = self._given
            if not r.safe_to_execute:
                raise Blocked(r, self.request)
            return r
        c = self.client
        action = action_digest(c.with_tenant(self.request)) if self.pending is not None else ""
        held: Optional[PendingApproval] = self.pending.get(action) if self.pending is not None else None
        r: Optional[Receipt] = None
        if held is not None and self.request.get("idempotency_key") in (None, "", held["idempotency_key"]):
            # The same action waits on an approval already: resume its
            # decision instead of asking again.
            self.request["idempotency_key"] = held["idempotency_key"]
            try:
                r = c.resume(held["decision_id"], self.request, wait=self.wait)
            except NotFound:
                r = None  # a decision this writ does not have: ask afresh
        if r is None:
            if not self.request.get("idempotency_key"):
                self.request["idempotency_key"] = new_idempotency_key()
            r = c.check(self.request)
            if not r.safe_to_execute and self.wait is not None and r.awaits_approval:
                r = c.resume(r.decision_id, self.request, wait=self.wait)
        digest = result_digest(c.with_tenant(self.request))
        if self.pending is not None:
            if not r.safe_to_execute and r.awaits_approval:
                self.pending.set(action, {"decision_id": r.decision_id,
                                          "idempotency_key": str(self.request["idempotency_key"]),
                                          "request_digest": digest, "approval_ids": list(r.approval_ids),
                                          "request": dict(self.request)})
            else:
                self.pending.delete(action)
        if not r.safe_to_execute:
            raise Blocked(r, self.request, digest)
        return r

    def _begin(self) -> None:
        assert self.receipt is not None
        self._started = _now()
        if self.outbox is not None and self.report:
            # Before the tool runs: a failure here keeps it from running.
            self.outbox.begin({"decision_id": self.receipt.decision_id,
                               "idempotency_key": self.request.get("idempotency_key"),
                               "started_at": self._started})

    def __enter__(self) -> "Permit":
        self.receipt = self._permitted()
        self._begin()
        return self

    async def __aenter__(self) -> "Permit":
        self.receipt = await asyncio.to_thread(self._permitted)
        await asyncio.to_thread(self._begin)
        return self

    # ---- leaving ---------------------------------------------------------

    def _report(self, exc: Optional[BaseException]) -> None:
        if not self.report or self.receipt is None:
            return
        r = self.receipt
        body: Dict[str, Any] = {"started_at": self._started, "ended_at": _now(),
                                "idempotency_key": self.request.get("idempotency_key")}
        if exc is None:
            body["status"] = "succeeded"
            try:
                body["result_digest"] = result_digest(self.result)
                rid = self._tool_result_id(self.result) if self._tool_result_id else None
                if rid is not None:
                    body["tool_result_id"] = rid
                if self.outbox is not None:
                    self.outbox.settle(r.decision_id, {k: v for k, v in body.items() if v is not None})
                self.ack = self.client.report_execution(r.decision_id, **body)
            except Exception as e:
                # Whatever went wrong, the tool ran: never lose its result.
                raise ReportFailed(r, self.result) from e
            if self.outbox is not None:
                self.outbox.done(r.decision_id)
            return
        # The tool raised: record that it failed, then let its error through.
        body["status"] = "failed"
        body["error"] = {"code": type(exc).__name__, "message": str(exc)[:1024]}
        try:
            if self.outbox is not None:
                self.outbox.settle(r.decision_id, {k: v for k, v in body.items() if v is not None})
            self.ack = self.client.report_execution(r.decision_id, **body)
            if self.outbox is not None:
                self.outbox.done(r.decision_id)
        except Exception:
            pass  # the tool's own error matters more; the outbox (if any) still holds the report

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        self._report(exc)
        return False

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        await asyncio.to_thread(self._report, exc)
        return False


def run_and_report(client: "Client", receipt: Receipt, run: Callable[[], R], *,
                   idempotency_key: Optional[str] = None,
                   tool_result_id: Optional[Callable[[Any], Optional[str]]] = None,
                   outbox: Optional[Outbox] = None) -> R:
    """Runs a tool under a permit the caller already holds, then reports its execution.

    For frameworks that keep the receipt across a pause (an approval
    resumed after an interruption), where checking again would open a new
    decision. Raises :class:`~writ.errors.Blocked` without running anything
    if ``receipt`` does not permit.
    """
    req: JSON = {"idempotency_key": idempotency_key} if idempotency_key else {}
    with Permit(client, req, receipt=receipt, tool_result_id=tool_result_id, outbox=outbox) as p:
        p.result = run()
    return cast(R, p.result)


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


RequestOption = Union[Mapping[str, Any], Callable[..., Mapping[str, Any]], None]


class Guard:
    """The decorator :func:`guard` returns; typed so the wrapped signature is kept (``ParamSpec``)."""

    def __init__(self, client: "Client", tool: str, request: RequestOption, options: Dict[str, Any]) -> None:
        self.client, self.tool, self.request, self.options = client, tool, request, options

    def _request(self, sig: inspect.Signature, args: Any, kwargs: Any) -> JSON:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        req: JSON = {"tool": self.tool, "arguments": _arguments(sig, bound)}
        extra = self.request(*args, **kwargs) if callable(self.request) else (self.request or {})
        req.update(extra)
        return req

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]: ...
    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, fn: Callable[P, Any]) -> Callable[P, Any]:
        sig = inspect.signature(fn)
        g = self

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def governed_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                async with Permit(g.client, g._request(sig, args, kwargs), **g.options) as p:
                    # Awaited before the report: an async tool that raises
                    # is reported failed, never succeeded.
                    p.result = await fn(*args, **kwargs)
                return p.result

            setattr(governed_async, "__writ_tool__", g.tool)
            return governed_async

        @functools.wraps(fn)
        def governed(*args: P.args, **kwargs: P.kwargs) -> Any:
            with Permit(g.client, g._request(sig, args, kwargs), **g.options) as p:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    # Never report an effect that has not happened yet.
                    if inspect.iscoroutine(result):
                        result.close()
                    raise TypeError(f"{g.tool}: the guarded function returned an awaitable; declare it "
                                    "async def so the guard awaits it before reporting")
                p.result = result
            return p.result

        setattr(governed, "__writ_tool__", g.tool)
        return governed


def guard(client: "Client", tool: str, *,
          request: RequestOption = None,
          wait: Union[str, float, None] = None, report: bool = True,
          tool_result_id: Optional[Callable[[Any], Optional[str]]] = None,
          pending: Optional[PendingStore] = None,
          outbox: Optional[Outbox] = None) -> Guard:
    """A decorator that governs every call of a tool function, sync or ``async def``.

    The check request is ``{"tool": tool, "arguments": <the call's
    arguments by name>}``, merged over ``request``: a mapping of fixed
    members (``actor``, ``subject_ids``, ...), or a function of the call's
    arguments that returns them (it may set ``arguments`` itself, and
    ``evidence`` or ``context`` fresh for each call). ``wait`` waits for an
    approval (see :class:`Permit`; over 5 minutes is refused here, before
    any call). ``tool_result_id`` maps the result to the id the report
    carries. ``pending`` and ``outbox``: see the module's documentation.
    The decorated function keeps its signature for type checkers.

    A call writ does not permit raises :class:`~writ.errors.Blocked` and
    the function never runs.
    """
    check_wait(wait)
    return Guard(client, tool, request, {"wait": wait, "report": report, "tool_result_id": tool_result_id,
                                         "pending": pending, "outbox": outbox})
