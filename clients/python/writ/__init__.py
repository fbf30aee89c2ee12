"""writ: a Python client of the writ governance runtime.

Standard library only. ``Client`` speaks writ's HTTP API (checks, records,
approvals, runs and attempts, execution reports, resume with wait, a
decision's story); ``Client.guard`` and ``Client.permit`` govern a tool call
end to end. See README.md beside this package.
"""

from .client import Client, current_traceparent, new_idempotency_key, result_digest, traceparent
from .aio import AsyncClient
from .errors import (
    Aborted,
    Blocked,
    Conflict,
    Forbidden,
    Internal,
    Invalid,
    InvalidArgument,
    NotFound,
    ProblemError,
    RateLimited,
    Timeout,
    TooLarge,
    TransportError,
    Unauthenticated,
    Unavailable,
    Unreachable,
    WritError,
)
from .state import (
    FileOutbox,
    FilePendingStore,
    MemoryPendingStore,
    Outbox,
    OutboxEntry,
    PendingApproval,
    PendingStore,
    action_digest,
)
from .guard import Permit, ReportFailed, guard, run_and_report
from .types import (
    ALLOW,
    ALLOW_WITH_WARNING,
    CONTINUE_DOWNSTREAM,
    GOAL_FAIL_TERMINAL,
    HUMAN_REVIEW,
    LOCAL_REPLAN,
    REPLAN_REQUIRED,
    TERMINAL_BLOCK,
    UPSTREAM_REPLAN,
    Actor,
    ApprovalRequest,
    ApprovalState,
    Direction,
    Disposition,
    DispositionMode,
    ExecutionStatus,
    Outcome,
    Provenance,
    ExecutionAck,
    FieldError,
    Page,
    Problem,
    Reason,
    Receipt,
    Routing,
)

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "traceparent", "current_traceparent", "result_digest", "new_idempotency_key",
    "guard", "Permit", "ReportFailed", "run_and_report", "Actor", "Provenance",
    "WritError", "ProblemError", "Blocked", "Invalid", "Unauthenticated", "Forbidden", "NotFound",
    "Conflict", "TooLarge", "RateLimited", "Unavailable", "Internal",
    "TransportError", "Unreachable", "Timeout", "Aborted", "InvalidArgument",
    "PendingStore", "PendingApproval", "MemoryPendingStore", "FilePendingStore", "action_digest",
    "Outbox", "OutboxEntry", "FileOutbox",
    "Outcome", "DispositionMode", "Direction", "ApprovalState", "ExecutionStatus",
    "Receipt", "Disposition", "Routing", "Reason", "ExecutionAck", "ApprovalRequest", "Page",
    "Problem", "FieldError",
    "ALLOW", "ALLOW_WITH_WARNING", "REPLAN_REQUIRED", "GOAL_FAIL_TERMINAL",
    "CONTINUE_DOWNSTREAM", "LOCAL_REPLAN", "UPSTREAM_REPLAN", "HUMAN_REVIEW", "TERMINAL_BLOCK",
]
