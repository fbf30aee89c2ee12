"""The writ HTTP client: one method per route of writ's API an agent or an
approver uses. Standard library only (``urllib``)."""

from __future__ import annotations

import contextlib
import http.client
import contextvars
import email.utils
import hashlib
import json
import re
import secrets
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Generator, cast, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import InvalidArgument, Timeout, Unavailable, Unreachable, error_for
from .state import MemoryPendingStore, PendingStore
from .types import JSON, ApprovalRequest, ExecutionAck, Page, Problem, Receipt, objects

if TYPE_CHECKING:
    from .guard import Permit, Guard
    from .state import Outbox

__all__ = ["Client", "traceparent", "current_traceparent", "result_digest", "new_idempotency_key"]

_traceparent: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("writ_traceparent", default=None)

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


@contextlib.contextmanager
def traceparent(value: str) -> Generator[None, None, None]:
    """Sends ``value`` as the W3C ``traceparent`` of every request made inside the block.

    writ continues the trace: the record's ``trace_id`` is the header's trace id.
    A ``traceparent`` passed to a method overrides it.
    """
    if not _TRACEPARENT.match(value):
        raise ValueError(f"not a W3C traceparent: {value!r}")
    token = _traceparent.set(value)
    try:
        yield
    finally:
        _traceparent.reset(token)


def current_traceparent() -> Optional[str]:
    """The ``traceparent`` set by the innermost :func:`traceparent` block, if any."""
    return _traceparent.get()


def new_idempotency_key() -> str:
    """A fresh idempotency key: ``ik_`` and 24 random hex digits."""
    return "ik_" + secrets.token_hex(12)


def result_digest(result: Any) -> str:
    """The ``sha256:<hex>`` digest of a tool's result, for an execution report.

    Bytes are hashed as they are, a string as UTF-8, anything else as JSON
    with sorted keys and no whitespace (``json.dumps(sort_keys=True,
    separators=(",", ":"), ensure_ascii=False)``). writ never sees the result.
    """
    if isinstance(result, (bytes, bytearray)):
        data = bytes(result)
    elif isinstance(result, memoryview):
        data = cast(memoryview, result).tobytes()
    elif isinstance(result, str):
        data = result.encode("utf-8")
    else:
        data = json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=str).encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


_digest = result_digest


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: The longest wait of a resume writ takes (writ.MaxResumeWait).
MAX_WAIT_SECONDS = 300.0


def check_wait(wait: Union[str, float, int, None]) -> Tuple[Optional[str], float]:
    """The wait as writ takes it (a Go duration) and in seconds.

    Raises :class:`~writ.errors.InvalidArgument` for a wait writ would
    refuse (negative, malformed, or over 5 minutes), before any request.
    """
    if wait is None:
        return None, 0.0
    if isinstance(wait, bool):
        raise InvalidArgument("wait", f"must be seconds or a duration such as '30s' or '2m', not {wait!r}")
    if isinstance(wait, (int, float)):
        if not 0 <= wait <= MAX_WAIT_SECONDS:
            raise InvalidArgument("wait", f"must be between 0 and 5m (writ's maximum), not {wait:g}s")
        return f"{float(wait):g}s", float(wait)
    total = 0.0
    rest = wait
    # Go durations may chain units (1m30s).
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", wait):
        total += float(num) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
        rest = rest.replace(num + unit, "", 1)
    if rest or not wait:
        raise InvalidArgument("wait", f"must be seconds or a duration such as '30s' or '2m', not {wait!r}")
    if total > MAX_WAIT_SECONDS:
        raise InvalidArgument("wait", f"must be at most 5m (writ's maximum), not {wait}")
    return wait, total


class Client:
    """A client of one writ server.

    ``api_key`` is a bearer key of writ (``writ keys create``); without one
    the server must be in development mode, and ``tenant_id`` is then
    required. With a key, ``tenant_id`` may be left out: it is the key's.

    Answers of 503 (overloaded, store down, a fail-closed receipt) and 429
    (rate limited) are retried up to ``max_retries`` times, each after the
    ``Retry-After`` the server sent (at most ``max_retry_wait`` seconds).
    A check always carries an idempotency key (one is generated when the
    request has none), so retrying it writes at most one record.

    ``pending`` is the pending store its guards use unless given their own
    (a :class:`~writ.state.MemoryPendingStore` by default), so a guard
    called again for an action that waits on an approval resumes that
    decision instead of opening a second approval request.

    ``delegation_token`` is a JWT naming the human user the agent acts for,
    signed by an issuer the key's tenant trusts; every call sends it as the
    ``Writ-Delegation`` header, and writ records its subject as the actor's
    delegated user, ``authenticated`` (docs/trust.md).
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        *,
        tenant_id: Optional[str] = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        user_agent: str = "writ-python",
        pending: Optional[PendingStore] = None,
        delegation_token: Optional[str] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # Where guards keep the approvals they wait on, unless a guard is
        # given its own: in memory by default, as the TypeScript client's.
        self.pending: PendingStore = pending if pending is not None else MemoryPendingStore()
        self.api_key = api_key
        # A JWT naming the human user the agent acts for, signed by an
        # issuer the key's tenant trusts: sent as Writ-Delegation, it makes
        # actor.delegated_user_id authenticated (docs/trust.md).
        self.delegation_token = delegation_token
        self.tenant_id = tenant_id
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self._sleep = sleep
        self.user_agent = user_agent

    # ---- boundary checks -------------------------------------------------

    def check(self, request: Mapping[str, Any], *, traceparent: Optional[str] = None) -> Receipt:
        """``POST /v1/check``: may this side effect happen now?

        Returns the receipt, whatever its outcome: branch on
        ``safe_to_execute`` and ``disposition.mode``. Raises a
        :class:`~writ.errors.ProblemError` for a problem, and
        :class:`~writ.errors.Unavailable` (with the fail-closed receipt)
        when writ could not commit the record even after retrying.
        """
        body = self.with_tenant(request)
        if not body.get("idempotency_key"):
            body["idempotency_key"] = new_idempotency_key()
        data, headers = self._call("POST", "/v1/check", body=body, traceparent=traceparent)
        return Receipt.from_json(data, headers.get("traceparent"))

    def resume(
        self,
        decision_id: str,
        request: Mapping[str, Any],
        *,
        wait: Union[str, float, None] = None,
        traceparent: Optional[str] = None,
    ) -> Receipt:
        """``POST /v1/decisions/{id}/resume``: decide a blocked decision's action again.

        ``request`` is the check as first made, with whatever changed.
        With ``wait`` (seconds, or a duration such as ``"2m"``; at most 5
        minutes), writ waits for an approval the decision waits on to be
        decided. If none is, the blocked receipt comes back with
        ``repeated == "still_waiting"``.
        """
        wait_str, wait_s = check_wait(wait)
        body: JSON = {"request": self.with_tenant(request)}
        if self.tenant_id:
            body["tenant_id"] = self.tenant_id
        if wait_str:
            body["wait"] = wait_str
        data, headers = self._call("POST", f"/v1/decisions/{_seg(decision_id)}/resume", body=body,
                                   traceparent=traceparent, timeout=self.timeout + wait_s)
        return Receipt.from_json(data, headers.get("traceparent"))

    def report_execution(
        self,
        decision_id: str,
        status: str = "succeeded",
        *,
        result: Any = None,
        result_digest: Optional[str] = None,
        tool_result_id: Optional[str] = None,
        error: Optional[Mapping[str, str]] = None,
        started_at: Optional[str] = None,
        ended_at: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        reversal_token: Optional[str] = None,
        traceparent: Optional[str] = None,
        **extra: Any,
    ) -> ExecutionAck:
        """``POST /v1/decisions/{id}/execution``: report what happened to the effect.

        ``status`` is ``succeeded``, ``failed`` or ``not_executed``. Pass
        ``result`` to have its digest computed (:func:`result_digest`), or
        ``result_digest`` directly; writ never takes the result itself.
        Other members of the ``ExecutionReport`` schema go in ``extra``.
        """
        body: JSON = {"status": status, **extra}
        if self.tenant_id:
            body["tenant_id"] = self.tenant_id
        if result is not None and result_digest is None:
            result_digest = _digest(result)
        for k, v in (("result_digest", result_digest), ("tool_result_id", tool_result_id),
                     ("error", dict(error) if error else None), ("started_at", started_at),
                     ("ended_at", ended_at), ("idempotency_key", idempotency_key),
                     ("reversal_token", reversal_token)):
            if v is not None:
                body[k] = v
        data, _ = self._call("POST", f"/v1/decisions/{_seg(decision_id)}/execution", body=body,
                             traceparent=traceparent)
        return ExecutionAck.from_json(data)

    def decision(self, decision_id: str) -> JSON:
        """``GET /v1/decisions/{id}``: the decision's story (schema DecisionStory)."""
        data, _ = self._call("GET", f"/v1/decisions/{_seg(decision_id)}", query=self._tenant_query())
        return data

    def in_flight(self, *, expired_by: Optional[str] = None, limit: Optional[int] = None,
                  cursor: Optional[str] = None) -> Page:
        """``GET /v1/decisions/in_flight``: permits still awaiting their execution reports."""
        q = self._tenant_query(expired_by=expired_by, limit=limit, cursor=cursor)
        data, _ = self._call("GET", "/v1/decisions/in_flight", query=q)
        return Page(list(data.get("decisions") or []), data.get("next_cursor"))

    # ---- records ---------------------------------------------------------

    def record_bytes(self, record_id: str) -> bytes:
        """``GET /v1/records/{id}``: the record exactly as sealed (to verify its hash, keep these bytes)."""
        raw, _ = self._call("GET", f"/v1/records/{_seg(record_id)}", query=self._tenant_query(), decode=False)
        return raw

    def record(self, record_id: str) -> JSON:
        """``GET /v1/records/{id}``: the record, decoded."""
        return json.loads(self.record_bytes(record_id))

    def records(self, *, decision_key: Optional[str] = None, status: Optional[str] = None,
                subject_id: Optional[str] = None, trace_id: Optional[str] = None,
                approval_mode_effective: Optional[str] = None,
                policy_decision_id: Optional[str] = None, approver: Optional[str] = None,
                refers_to: Optional[str] = None, scorecard: Optional[str] = None,
                decision_key_prefix: Optional[str] = None, subject_prefix: Optional[str] = None,
                outcome: Optional[str] = None, order: Optional[str] = None,
                from_: Optional[str] = None, to: Optional[str] = None,
                limit: Optional[int] = None, cursor: Optional[str] = None) -> Page:
        """``GET /v1/records``: a page of the tenant's records, oldest first (``order="newest"``: newest first).

        Every seed query key is a filter: ``decision_key``, ``subject_id``, ``status``,
        ``approval_mode_effective``, ``policy_decision_id``, ``trace_id`` and ``approver``;
        ``refers_to`` lists the records about a record, and ``scorecard="failed"`` the records
        whose scorecard failed their spec's pass mark.
        """
        q = self._tenant_query(decision_key=decision_key, status=status, subject_id=subject_id,
                               trace_id=trace_id, approval_mode_effective=approval_mode_effective,
                               policy_decision_id=policy_decision_id, approver=approver,
                               refers_to=refers_to, scorecard=scorecard,
                               decision_key_prefix=decision_key_prefix, subject_prefix=subject_prefix,
                               outcome=outcome, order=order, to=to, limit=limit, cursor=cursor)
        if from_:
            q["from"] = from_
        data, _ = self._call("GET", "/v1/records", query=q)
        return Page(list(data.get("records") or []), data.get("next_cursor"))

    def retract(self, record_id: str, reason: str, *, by: Optional[str] = None,
                trace_id: Optional[str] = None) -> JSON:
        """``POST /v1/records/{id}/retract`` (an auditor's or admin's key): seal a retraction of the record.

        The retraction is a record of its own (decision key ``retraction:…``)
        that supersedes the record without replacing it; the record stays
        verifiable, shown retracted. Answers an AnnotationAck. ``by`` only in
        development mode (with a key, the key's subject retracts).
        """
        body: JSON = {"reason": reason}
        for k, v in (("by", by), ("trace_id", trace_id)):
            if v is not None:
                body[k] = v
        data, _ = self._call("POST", f"/v1/records/{_seg(record_id)}/retract", body=self.with_tenant(body))
        return data

    def feedback(self, record_id: str, label: str, *, score: Optional[float] = None,
                 comment: Optional[str] = None, author: Optional[str] = None,
                 rule_change: Optional[str] = None, trace_id: Optional[str] = None) -> JSON:
        """``POST /v1/records/{id}/feedback`` (an approver's or auditor's key): seal a feedback entry on the record.

        ``label`` names it (``correct``, ``wrong_outcome``, ...), ``score`` is
        in [0, 1], ``rule_change`` the change it led to. The entry is a record
        (decision key ``feedback:…``) that links back. Answers an AnnotationAck.
        """
        body: JSON = {"label": label}
        for k, v in (("score", score), ("comment", comment), ("author", author),
                     ("rule_change", rule_change), ("trace_id", trace_id)):
            if v is not None:
                body[k] = v
        data, _ = self._call("POST", f"/v1/records/{_seg(record_id)}/feedback", body=self.with_tenant(body))
        return data

    def links(self, record_id: str) -> JSON:
        """``GET /v1/records/{id}/links``: the records that supersede it, its retraction, its feedback and last replay."""
        data, _ = self._call("GET", f"/v1/records/{_seg(record_id)}/links", query=self._tenant_query())
        return data

    def erase(self, subject_id: str, reason: str, *, by: Optional[str] = None,
              trace_id: Optional[str] = None) -> JSON:
        """``POST /v1/erasures`` (an admin's key): erase a subject's classified values.

        The raw values the pack classifies, kept apart from the ledger, are
        deleted with their salts, and an erasure record lists their
        references; every record still verifies, and a replay of an erased
        decision answers ``inputs_erased``. Answers an Erasure
        (``erased``: how many values, ``refs``, ``record_id``).
        """
        body: JSON = {"subject_id": subject_id, "reason": reason}
        for k, v in (("by", by), ("trace_id", trace_id)):
            if v is not None:
                body[k] = v
        data, _ = self._call("POST", "/v1/erasures", body=self.with_tenant(body))
        return data

    # ---- approvals -------------------------------------------------------

    def approvals(self, *, state: Optional[str] = None, gate_id: Optional[str] = None,
                  decision_key: Optional[str] = None, older_than: Optional[str] = None,
                  created_before: Optional[str] = None, limit: Optional[int] = None,
                  cursor: Optional[str] = None) -> Page:
        """``GET /v1/approvals``: a page of approval requests, oldest first (``state``: ``pending``, ...)."""
        q = self._tenant_query(state=state, gate_id=gate_id, decision_key=decision_key,
                               older_than=older_than, created_before=created_before,
                               limit=limit, cursor=cursor)
        data, _ = self._call("GET", "/v1/approvals", query=q)
        return Page([ApprovalRequest.from_json(a) for a in objects(data.get("approvals"))],
                    data.get("next_cursor"))

    def approval(self, approval_id: str) -> ApprovalRequest:
        """``GET /v1/approvals/{id}``: one approval request, with its events."""
        data, _ = self._call("GET", f"/v1/approvals/{_seg(approval_id)}", query=self._tenant_query())
        return ApprovalRequest.from_json(data)

    def approve(self, approval_id: str, reason: str, *, approver: Optional[str] = None) -> ApprovalRequest:
        """``POST /v1/approvals/{id}/approve`` (an approver's key; the approver is the key's subject)."""
        return self._decide(approval_id, "approve", reason, approver)

    def deny(self, approval_id: str, reason: str, *, approver: Optional[str] = None) -> ApprovalRequest:
        """``POST /v1/approvals/{id}/deny``."""
        return self._decide(approval_id, "deny", reason, approver)

    def withdraw(self, approval_id: str, reason: Optional[str] = None) -> ApprovalRequest:
        """``POST /v1/approvals/{id}/withdraw``: take back a pending approval request (its requester's agent key).

        The request's state becomes ``withdrawn``; a resume of its decision
        is then denied (``approval_withdrawn``).
        """
        body: JSON = {}
        if self.tenant_id:
            body["tenant_id"] = self.tenant_id
        if reason:
            body["reason"] = reason
        data, _ = self._call("POST", f"/v1/approvals/{_seg(approval_id)}/withdraw", body=body)
        return ApprovalRequest.from_json(data)

    def _decide(self, approval_id: str, verb: str, reason: str, approver: Optional[str]) -> ApprovalRequest:
        body: JSON = {"reason": reason}
        if self.tenant_id:
            body["tenant_id"] = self.tenant_id
        if approver:
            body["approver"] = approver
        data, _ = self._call("POST", f"/v1/approvals/{_seg(approval_id)}/{verb}", body=body)
        return ApprovalRequest.from_json(data)

    # ---- evidence ----------------------------------------------------------

    def submit_evidence(self, kind: Optional[str] = None, *, id: Optional[str] = None,
                        subject_ids: Optional[Sequence[str]] = None,
                        attributes: Optional[Mapping[str, Any]] = None,
                        observed_at: Optional[str] = None, expires_at: Optional[str] = None,
                        issuer: Optional[str] = None, jws: Optional[str] = None) -> JSON:
        """``POST /v1/evidence``: store an evidence item (schema StoredEvidence).

        Either the item's fields, from an API key with the ``issuer`` role
        (writ sets the issuer from the key; ``issuer`` only on a development
        server without keys), or ``jws`` alone: an item an issuer signed,
        which any key of the tenant may carry in. ``observed_at`` and
        ``expires_at`` are RFC 3339 times.
        """
        body: JSON = {}
        if jws is not None:
            body["jws"] = jws
        if kind is not None:
            body["kind"] = kind
        if id is not None:
            body["id"] = id
        if subject_ids is not None:
            body["subject_ids"] = list(subject_ids)
        if attributes is not None:
            body["attributes"] = dict(attributes)
        if observed_at is not None:
            body["observed_at"] = observed_at
        if expires_at is not None:
            body["expires_at"] = expires_at
        if issuer is not None:
            body["issuer"] = issuer
        data, _ = self._call("POST", "/v1/evidence", body=self.with_tenant(body))
        return data

    def evidence(self, id: str) -> JSON:
        """``GET /v1/evidence/{id}``: a stored item by id or content address (``sha256:…``), with its revocation."""
        data, _ = self._call("GET", f"/v1/evidence/{_seg(id)}", query=self._tenant_query())
        return data

    def revoke_evidence(self, id: str, reason: str) -> JSON:
        """``POST /v1/evidence/{id}/revoke``: revoke an item (an issuer key); a sealed record, never an edit."""
        data, _ = self._call("POST", f"/v1/evidence/{_seg(id)}/revoke", body=self.with_tenant({"reason": reason}))
        return data

    # ---- runs and attempts -----------------------------------------------

    def start_run(self, workflow_id: str, *, context: Optional[Mapping[str, Any]] = None,
                  **extra: Any) -> JSON:
        """``POST /v1/runs``: start a run of a workflow of the pinned pack (schema Run)."""
        body = self.with_tenant({"workflow_id": workflow_id, **extra})
        if context is not None:
            body["context"] = dict(context)
        data, _ = self._call("POST", "/v1/runs", body=body)
        return data

    def submit_attempt(self, run_id: str, step_id: str, *, actor: Mapping[str, Any],
                       result: Mapping[str, Any], **extra: Any) -> JSON:
        """``POST /v1/runs/{id}/steps/{step}/attempts``: answers the step's verdict (schema StepVerdict)."""
        body: JSON = {"actor": dict(actor), "result": dict(result), **extra}
        data, _ = self._call("POST", f"/v1/runs/{_seg(run_id)}/steps/{_seg(step_id)}/attempts",
                             query=self._tenant_query(), body=body)
        return data

    def run(self, run_id: str) -> JSON:
        """``GET /v1/runs/{id}``: a run, with its history."""
        data, _ = self._call("GET", f"/v1/runs/{_seg(run_id)}", query=self._tenant_query())
        return data

    # ---- health ----------------------------------------------------------

    def health(self) -> JSON:
        """``GET /healthz``."""
        data, _ = self._call("GET", "/healthz")
        return data

    # ---- the guard -------------------------------------------------------

    def guard(self, tool: str, **options: Any) -> "Guard":
        """A decorator that governs a tool function (sync or ``async def``); see :func:`writ.guard.guard`."""
        from .guard import guard

        return guard(self, tool, **options)

    def run_and_report(self, receipt: Receipt, run: Callable[[], Any], **options: Any) -> Any:
        """Runs a tool under a permit already held, then reports; see :func:`writ.guard.run_and_report`."""
        from .guard import run_and_report

        return run_and_report(self, receipt, run, **options)

    def replay_outbox(self, outbox: "Outbox") -> List[ExecutionAck]:
        """Sends the execution reports an outbox still holds (call it on start).

        An entry whose tool finished is sent as settled; one begun but
        never settled (the agent crashed while the tool ran) is reported
        ``failed`` with the error code ``agent_crashed``: writ then knows
        the outcome is unknown, and the effect is for a person to check.
        Each one writ takes is marked done. A report writ refuses as a
        conflict (it already holds one) is marked done too.
        """
        from .errors import Conflict
        acks: List[ExecutionAck] = []
        for e in outbox.pending():
            decision_id = e.get("decision_id", "")
            report: Dict[str, Any] = dict(e.get("report") or {
                "status": "failed", "started_at": e.get("started_at"), "ended_at": _now(),
                "error": {"code": "agent_crashed", "message": "the agent stopped while the tool ran; its outcome is unknown"}})
            if e.get("idempotency_key") and "idempotency_key" not in report:
                report["idempotency_key"] = e.get("idempotency_key")
            try:
                acks.append(self.report_execution(decision_id, **report))
            except Conflict:
                pass
            outbox.done(decision_id)
        return acks

    def permit(self, request: Mapping[str, Any], **options: Any) -> "Permit":
        """A context manager that governs one call; see :class:`writ.guard.Permit`."""
        from .guard import Permit

        return Permit(self, request, **options)

    # ---- plumbing --------------------------------------------------------

    def with_tenant(self, body: Mapping[str, Any]) -> JSON:
        """``body`` with the client's tenant, when it has one and the body names none."""
        out = dict(body)
        if self.tenant_id and not out.get("tenant_id"):
            out["tenant_id"] = self.tenant_id
        return out

    def _tenant_query(self, **params: Any) -> Dict[str, str]:
        q = {k: str(v) for k, v in params.items() if v is not None and v != ""}
        if self.tenant_id:
            q["tenant_id"] = self.tenant_id
        return q

    def _call(self, method: str, path: str, *, query: Optional[Mapping[str, str]] = None,
              body: Optional[Mapping[str, Any]] = None, traceparent: Optional[str] = None,
              timeout: Optional[float] = None, decode: bool = True) -> Tuple[Any, Mapping[str, str]]:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        if self.delegation_token:
            headers["Writ-Delegation"] = self.delegation_token
        tp = traceparent or _traceparent.get()
        if tp:
            headers["traceparent"] = tp

        attempt = 0
        while True:
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                    raw = resp.read()
                    hdrs = {k.lower(): v for k, v in resp.headers.items()}
                    return (json.loads(raw) if decode else raw), hdrs
            except urllib.error.HTTPError as e:
                raw = e.read()
                hdrs = {k.lower(): v for k, v in (e.headers or {}).items()}
                status = e.code
            except (TimeoutError, socket.timeout) as e:
                raise Timeout(f"writ: {method} {path}: no answer within {timeout or self.timeout:g}s",
                              timeout or self.timeout) from e
            except urllib.error.URLError as e:
                if isinstance(e.reason, (TimeoutError, socket.timeout)):
                    raise Timeout(f"writ: {method} {path}: no answer within {timeout or self.timeout:g}s",
                                  timeout or self.timeout) from e
                raise Unreachable(f"writ: {method} {path}: {e.reason}") from e
            except (OSError, http.client.HTTPException, ValueError) as e:
                # A connection reset or an answer cut short (ValueError:
                # a body that is not the JSON it started as).
                raise Unreachable(f"writ: {method} {path}: {e}") from e
            retryable = status in (429, 503)
            if retryable and attempt < self.max_retries:
                attempt += 1
                self._sleep(self._retry_after(hdrs.get("retry-after"), attempt))
                continue
            raise self._error(status, hdrs, raw)

    def _retry_after(self, value: Optional[str], attempt: int) -> float:
        """Seconds to wait before a retry: the server's ``Retry-After`` (seconds or an HTTP date), else a backoff."""
        wait: Optional[float] = None
        if value:
            value = value.strip()
            if value.isdigit():
                wait = float(value)
            else:
                try:
                    when = email.utils.parsedate_to_datetime(value)
                    wait = max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
                except (TypeError, ValueError):
                    wait = None
        if wait is None:
            wait = min(2.0 ** (attempt - 1), 8.0)
        return min(wait, self.max_retry_wait)

    def _error(self, status: int, hdrs: Mapping[str, str], raw: bytes) -> Exception:
        ctype = hdrs.get("content-type", "").split(";")[0].strip()
        try:
            decoded: Any = json.loads(raw) if raw else {}
        except ValueError:
            decoded = {}
        doc: JSON = cast(JSON, decoded) if isinstance(decoded, dict) else {}
        if ctype == "application/json" and doc.get("receipt_type"):
            # A fail-closed receipt: writ could not commit the record.
            receipt = Receipt.from_json(doc, hdrs.get("traceparent"))
            codes = ", ".join(r.code for r in receipt.reasons)
            problem = Problem(status=status, code="unavailable", title="Service unavailable",
                              detail=f"writ could not commit the decision record (fail-closed receipt: {codes})",
                              raw=doc)
            return Unavailable(problem, receipt)
        if not doc:
            text = raw.decode("utf-8", "replace").strip()[:200]
            doc = {"status": status, "title": f"HTTP {status}", "detail": text}
        return error_for(Problem.from_json(doc, status))


def _seg(s: str) -> str:
    if not s:
        raise ValueError("an id is required")
    return urllib.parse.quote(s, safe="")
