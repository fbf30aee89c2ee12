"""Typed views of writ's answers.

Each class reads one schema of writ's OpenAPI document
(``httpapi/openapi.yaml``): the members an agent branches on are typed
attributes, and ``raw`` keeps the whole answer exactly as decoded, so
nothing the server says is lost when the document grows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, cast

JSON = Dict[str, Any]


def objects(v: Any) -> List[JSON]:
    """The JSON objects of a decoded list (anything else is skipped): typed for the readers below."""
    out: List[JSON] = []
    if isinstance(v, list):
        for x in cast(List[Any], v):
            if isinstance(x, dict):
                out.append(cast(JSON, x))
    return out

# The enumerations of the API as types: a value outside them is a type
# error for pyright, and writ never answers one.
Outcome = Literal["allow", "allow_with_warning", "replan_required", "goal_fail_terminal"]
DispositionMode = Literal["continue_downstream", "local_replan", "upstream_replan", "human_review", "terminal_block"]
Direction = Literal["downstream", "local", "upstream", "human", "stop"]
ApprovalState = Literal["pending", "approved", "denied", "withdrawn", "expired"]
ExecutionStatus = Literal["succeeded", "failed", "not_executed"]
# How writ knows a decision input (schema Provenance; docs/trust.md).
Provenance = Literal["authenticated", "observed", "issued", "claimed"]

# Outcomes of a receipt (schema Outcome).
ALLOW = "allow"
ALLOW_WITH_WARNING = "allow_with_warning"
REPLAN_REQUIRED = "replan_required"
GOAL_FAIL_TERMINAL = "goal_fail_terminal"

# Disposition modes (schema DispositionMode).
CONTINUE_DOWNSTREAM = "continue_downstream"
LOCAL_REPLAN = "local_replan"
UPSTREAM_REPLAN = "upstream_replan"
HUMAN_REVIEW = "human_review"
TERMINAL_BLOCK = "terminal_block"


@dataclass(frozen=True)
class Actor:
    """A record's actor (schema Actor): who acted, and how writ knows it.

    ``provenance`` is ``authenticated`` when the actor is the API key's
    principal (``key_id``), ``claimed`` in development mode, and None for a
    record sealed before writ said; ``acted_by`` is the key's own principal
    (``"TYPE:ID"``) when the key acted for the actor (docs/trust.md).
    """

    type: str
    id: str
    provenance: Optional[Provenance] = None
    key_id: Optional[str] = None
    acted_by: Optional[str] = None
    delegated_user_id: Optional[str] = None
    delegated_user_provenance: Optional[Provenance] = None
    delegated_user_issuer: Optional[str] = None
    workload_identity: Optional[str] = None

    @classmethod
    def from_json(cls, d: JSON) -> "Actor":
        by = d.get("acted_by")
        acted_by: Optional[str] = None
        if isinstance(by, dict):
            b = cast(JSON, by)
            acted_by = f"{b.get('type', '')}:{b.get('id', '')}"
        return cls(
            type=d.get("type", ""), id=d.get("id", ""), provenance=d.get("provenance"), key_id=d.get("key_id"),
            acted_by=acted_by,
            delegated_user_id=d.get("delegated_user_id"), delegated_user_provenance=d.get("delegated_user_provenance"),
            delegated_user_issuer=d.get("delegated_user_issuer"), workload_identity=d.get("workload_identity"),
        )


@dataclass(frozen=True)
class Reason:
    """A stable code and a message for people (schema Reason)."""

    code: str
    message: str

    @classmethod
    def from_json(cls, d: JSON) -> "Reason":
        return cls(code=d.get("code", ""), message=d.get("message", ""))


@dataclass(frozen=True)
class Disposition:
    """Where the workflow may go next (schema Disposition)."""

    mode: DispositionMode
    downstream_allowed: bool
    local_replan_recommended: bool
    upstream_replan_required: bool

    @classmethod
    def from_json(cls, d: JSON) -> "Disposition":
        return cls(
            mode=cast(DispositionMode, d.get("mode", "")),
            downstream_allowed=bool(d.get("downstream_allowed", False)),
            local_replan_recommended=bool(d.get("local_replan_recommended", False)),
            upstream_replan_required=bool(d.get("upstream_replan_required", False)),
        )


@dataclass(frozen=True)
class Routing:
    """Hints for the next stage of the workflow (schema Routing)."""

    direction: Direction
    target_hint: Optional[str] = None
    return_to_node: Optional[str] = None
    workflow_id: Optional[str] = None
    node_id: Optional[str] = None

    @classmethod
    def from_json(cls, d: JSON) -> "Routing":
        return cls(
            direction=cast(Direction, d.get("direction", "")),
            target_hint=d.get("target_hint"),
            return_to_node=d.get("return_to_node"),
            workflow_id=d.get("workflow_id"),
            node_id=d.get("node_id"),
        )


@dataclass(frozen=True)
class Receipt:
    """A decision receipt (schema Receipt).

    Branch on ``outcome``, ``safe_to_execute`` and ``disposition.mode``.
    ``metadata`` is the receipt's metadata object as served (``record_id``,
    ``approval_ids``, ``repeated``, ``execution_report``, ...); ``raw`` is
    the whole receipt. ``traceparent`` is the header writ answered with.
    """

    decision_id: str
    outcome: Outcome
    action_class: str
    safe_to_execute: bool
    human_review_terminal: bool
    must_not_retry_same_action: bool
    reasons: List[Reason]
    safe_next_steps: List[Reason]
    what_would_change_this: List[str]
    disposition: Disposition
    routing: Routing
    metadata: JSON
    raw: JSON = field(repr=False)
    traceparent: Optional[str] = field(default=None, repr=False)

    @classmethod
    def from_json(cls, d: JSON, traceparent: Optional[str] = None) -> "Receipt":
        return cls(
            decision_id=d.get("decision_id", ""),
            outcome=cast(Outcome, d.get("outcome", "")),
            action_class=d.get("action_class", ""),
            # Fail closed: only an explicit true permits.
            safe_to_execute=d.get("safe_to_execute") is True,
            human_review_terminal=bool(d.get("human_review_terminal", False)),
            must_not_retry_same_action=bool(d.get("must_not_retry_same_action", False)),
            reasons=[Reason.from_json(r) for r in objects(d.get("reasons"))],
            safe_next_steps=[Reason.from_json(r) for r in objects(d.get("safe_next_steps"))],
            what_would_change_this=list(d.get("what_would_change_this") or []),
            disposition=Disposition.from_json(d.get("disposition") or {}),
            routing=Routing.from_json(d.get("routing") or {}),
            metadata=dict(d.get("metadata") or {}),
            raw=d,
            traceparent=traceparent,
        )

    @property
    def record_id(self) -> Optional[str]:
        """The durable record behind the receipt."""
        return self.metadata.get("record_id")

    @property
    def approval_ids(self) -> List[str]:
        """The approval requests this decision waits on."""
        return list(self.metadata.get("approval_ids") or [])

    @property
    def repeated(self) -> Optional[str]:
        """``idempotent``, ``must_not_retry`` or ``still_waiting`` when this is an earlier answer again."""
        return self.metadata.get("repeated")

    @property
    def report_required(self) -> bool:
        """Whether the agent must report the effect's execution."""
        return self.metadata.get("execution_report") == "required"

    @property
    def awaits_approval(self) -> bool:
        """A human review that an approval can settle (not a terminal escalation)."""
        return (
            self.disposition.mode == HUMAN_REVIEW
            and not self.human_review_terminal
            and bool(self.approval_ids)
        )


@dataclass(frozen=True)
class ExecutionAck:
    """writ's acknowledgement of an execution report (schema ExecutionAck)."""

    decision_id: str
    record_id: str
    reported_for: str
    status: str
    execution: str
    findings: List[Reason]
    trace_id: str
    repeated: Optional[str]
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> "ExecutionAck":
        return cls(
            decision_id=d.get("decision_id", ""),
            record_id=d.get("record_id", ""),
            reported_for=d.get("reported_for", ""),
            status=d.get("status", ""),
            execution=d.get("execution", ""),
            findings=[Reason.from_json(r) for r in objects(d.get("findings"))],
            trace_id=d.get("trace_id", ""),
            repeated=d.get("repeated"),
            raw=d,
        )


@dataclass(frozen=True)
class ApprovalRequest:
    """An approval request at a gate (schema ApprovalRequest)."""

    approval_id: str
    gate_id: str
    decision_id: str
    record_id: str
    state: ApprovalState
    terminal: bool
    target_hint: Optional[str]
    reasons: List[Reason]
    raw: JSON = field(repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> "ApprovalRequest":
        return cls(
            approval_id=d.get("approval_id", ""),
            gate_id=d.get("gate_id", ""),
            decision_id=d.get("decision_id", ""),
            record_id=d.get("record_id", ""),
            state=cast(ApprovalState, d.get("state", "")),
            terminal=bool(d.get("terminal", False)),
            target_hint=d.get("target_hint"),
            reasons=[Reason.from_json(r) for r in objects(d.get("reasons"))],
            raw=d,
        )


@dataclass(frozen=True)
class Page:
    """One page of a list: its items and the cursor of the next page (absent on the last)."""

    items: List[Any]
    next_cursor: Optional[str] = None


@dataclass(frozen=True)
class FieldError:
    """One located problem of a 400 (a JSON path or parameter in ``field``, or a pack ``file`` and ``line``)."""

    message: str
    field: Optional[str] = None
    file: Optional[str] = None
    line: Optional[int] = None


@dataclass(frozen=True)
class Problem:
    """An RFC 9457 problem as writ serves it (schema Problem)."""

    status: int
    code: str
    title: str
    detail: str
    type: str = ""
    instance: str = ""
    errors: List[FieldError] = field(default_factory=lambda: list[FieldError]())
    raw: JSON = field(default_factory=lambda: cast(JSON, {}), repr=False)

    @classmethod
    def from_json(cls, d: JSON, status: int) -> "Problem":
        errs: List[FieldError] = []
        for e in objects(d.get("errors")):
            errs.append(FieldError(message=str(e.get("message", "")), field=e.get("field"),
                                   file=e.get("file"), line=e.get("line")))
        return cls(
            status=int(d.get("status") or status),
            code=str(d.get("code") or ""),
            title=str(d.get("title") or ""),
            detail=str(d.get("detail") or ""),
            type=str(d.get("type") or ""),
            instance=str(d.get("instance") or ""),
            errors=errs,
            raw=d,
        )
