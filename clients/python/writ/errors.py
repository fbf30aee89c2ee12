"""Exceptions raised by the writ client.

Every error writ answers is an RFC 9457 problem; the client raises it as
:class:`ProblemError`, or the subclass named for its ``code``, carrying the
problem. A check the guard may not run raises :class:`Blocked`, carrying
the receipt.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type

from .types import Problem, Receipt


class WritError(Exception):
    """Base of every error the client raises."""


class ProblemError(WritError):
    """writ answered an RFC 9457 problem; ``problem`` holds it whole."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        msg = f"writ: {problem.status} {problem.code}: {problem.detail or problem.title}"
        located = [f"{e.field or e.file or '?'}: {e.message}" for e in problem.errors]
        if located:
            msg += " (" + "; ".join(located) + ")"
        super().__init__(msg)

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def code(self) -> str:
        return self.problem.code


class Invalid(ProblemError):
    """400 (405, 415): the input is malformed or breaks a rule; nothing was written."""


class Unauthenticated(ProblemError):
    """401: no API key, or one that is malformed, unknown or revoked."""


class Forbidden(ProblemError):
    """403: the key holds none of the route's roles, or names another tenant."""


class NotFound(ProblemError):
    """404: no such record, decision, run or approval request for the tenant."""


class Conflict(ProblemError):
    """409: contradicts what is recorded (a reused idempotency key, a second decision of an approval, ...)."""


class TooLarge(ProblemError):
    """413: the body or the stored envelope is over the limit."""


class RateLimited(ProblemError):
    """429: the key is over the server's rate limit (after the client's retries)."""


class Unavailable(ProblemError):
    """503: writ is overloaded or its store is down (after the client's retries).

    When writ answered a fail-closed receipt (the record could not be
    committed), ``receipt`` holds it; its ``safe_to_execute`` is false and
    the action must not run.
    """

    def __init__(self, problem: Problem, receipt: Optional[Receipt] = None) -> None:
        super().__init__(problem)
        self.receipt = receipt


class Internal(ProblemError):
    """500: a bug or an unexpected failure in writ."""


class TransportError(WritError):
    """writ gave no answer: the base of the transport failures.

    The request may or may not have reached writ; a check retried with the
    same idempotency key writes at most one record. ``__cause__`` is the
    error of the standard library.
    """


class Unreachable(TransportError):
    """writ could not be reached: connection refused or reset, name not found, an answer cut short."""


class Timeout(TransportError):
    """The call ran past its timeout (the client's ``timeout``, plus a resume's ``wait``)."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class Aborted(TransportError):
    """The call was cancelled by its caller (an asyncio task cancelled while it waited)."""


class InvalidArgument(WritError, ValueError):
    """The client refused the call before sending anything, because writ would refuse it too.

    Nothing was written and no tool ran. ``field`` names the member (such
    as ``wait``, over writ's 5 minute maximum).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"writ: {field}: {message}")
        self.field = field


class Blocked(WritError):
    """The guard's check did not permit the call; ``receipt`` says why and what would change it.

    ``receipt.disposition.mode`` says where the workflow goes next:
    ``local_replan``, ``upstream_replan`` (``receipt.routing.return_to_node``),
    ``human_review`` (``receipt.approval_ids``) or ``terminal_block``.

    What resuming needs is here too: ``decision_id``, ``request`` (the
    check request as it was sent, idempotency key included),
    ``idempotency_key`` and ``request_digest`` (:func:`writ.result_digest`
    of ``request``). ``client.resume(b.decision_id, b.request, wait=...)``
    resumes the same decision; a guard with a pending store does it on the
    next call of the same action.
    """

    def __init__(self, receipt: Receipt, request: Optional[Mapping[str, Any]] = None,
                 request_digest: Optional[str] = None) -> None:
        self.receipt = receipt
        self.request: Dict[str, Any] = dict(request or {})
        self.idempotency_key: Optional[str] = self.request.get("idempotency_key")
        self.request_digest = request_digest
        codes = ", ".join(r.code for r in receipt.reasons) or "no reason given"
        super().__init__(
            f"writ: {receipt.outcome} ({receipt.disposition.mode}) for decision "
            f"{receipt.decision_id}: {codes}"
        )

    @property
    def mode(self) -> str:
        return self.receipt.disposition.mode

    @property
    def decision_id(self) -> str:
        return self.receipt.decision_id


_BY_CODE: Dict[str, Type[ProblemError]] = {
    "invalid": Invalid,
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "too_large": TooLarge,
    "rate_limited": RateLimited,
    "unavailable": Unavailable,
    "internal": Internal,
}

_BY_STATUS: Dict[int, Type[ProblemError]] = {
    400: Invalid, 405: Invalid, 415: Invalid,
    401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: TooLarge, 429: RateLimited, 500: Internal, 503: Unavailable,
}


def error_for(problem: Problem, receipt: Optional[Receipt] = None) -> ProblemError:
    """The exception for a problem: by its code, else by its status."""
    cls = _BY_CODE.get(problem.code) or _BY_STATUS.get(problem.status) or ProblemError
    if cls is Unavailable:
        return Unavailable(problem, receipt)
    return cls(problem)
