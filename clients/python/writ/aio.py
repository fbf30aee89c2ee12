"""The asyncio client: :class:`AsyncClient` has the API of :class:`writ.Client`
with every call a coroutine.

Standard library only: each call runs the blocking client's call in a
worker thread (``asyncio.to_thread``), so the event loop never blocks and
the two clients answer and fail exactly alike. A resume that waits for an
approval holds one thread while it waits. Cancelling the task raises
:class:`~writ.errors.Aborted` in it; the request in flight may still reach
writ (a check retried with the same idempotency key writes at most one
record).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Mapping, Optional, TypeVar, Union

from .client import Client
from .errors import Aborted
from .guard import Permit, Guard
from .state import Outbox
from .types import JSON, ApprovalRequest, ExecutionAck, Page, Receipt

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """A client of one writ server for asyncio code; the options are :class:`writ.Client`'s."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, **options: Any) -> None:
        self.sync = Client(base_url, api_key, **options)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except asyncio.CancelledError as e:
            raise Aborted(f"writ: {getattr(fn, '__name__', 'call')} was cancelled") from e

    async def check(self, request: Mapping[str, Any], *, traceparent: Optional[str] = None) -> Receipt:
        return await self._run(self.sync.check, request, traceparent=traceparent)

    async def resume(self, decision_id: str, request: Mapping[str, Any], *,
                     wait: Union[str, float, None] = None, traceparent: Optional[str] = None) -> Receipt:
        return await self._run(self.sync.resume, decision_id, request, wait=wait, traceparent=traceparent)

    async def report_execution(self, decision_id: str, status: str = "succeeded", **options: Any) -> ExecutionAck:
        return await self._run(self.sync.report_execution, decision_id, status, **options)

    async def decision(self, decision_id: str) -> JSON:
        return await self._run(self.sync.decision, decision_id)

    async def record(self, record_id: str) -> JSON:
        return await self._run(self.sync.record, record_id)

    async def records(self, **query: Any) -> Page:
        return await self._run(self.sync.records, **query)

    async def approvals(self, **query: Any) -> Page:
        return await self._run(self.sync.approvals, **query)

    async def approval(self, approval_id: str) -> ApprovalRequest:
        return await self._run(self.sync.approval, approval_id)

    async def approve(self, approval_id: str, reason: str, *, approver: Optional[str] = None) -> ApprovalRequest:
        return await self._run(self.sync.approve, approval_id, reason, approver=approver)

    async def deny(self, approval_id: str, reason: str, *, approver: Optional[str] = None) -> ApprovalRequest:
        return await self._run(self.sync.deny, approval_id, reason, approver=approver)

    async def withdraw(self, approval_id: str, reason: Optional[str] = None) -> ApprovalRequest:
        return await self._run(self.sync.withdraw, approval_id, reason)

    async def submit_evidence(self, kind: Optional[str] = None, **options: Any) -> JSON:
        return await self._run(self.sync.submit_evidence, kind, **options)

    async def evidence(self, id: str) -> JSON:
        return await self._run(self.sync.evidence, id)

    async def revoke_evidence(self, id: str, reason: str) -> JSON:
        return await self._run(self.sync.revoke_evidence, id, reason)

    async def health(self) -> JSON:
        return await self._run(self.sync.health)

    async def replay_outbox(self, outbox: Outbox) -> List[ExecutionAck]:
        return await self._run(self.sync.replay_outbox, outbox)

    def guard(self, tool: str, **options: Any) -> Guard:
        """The guard of :meth:`writ.Client.guard`: use it on ``async def`` tools."""
        return self.sync.guard(tool, **options)

    def permit(self, request: Mapping[str, Any], **options: Any) -> Permit:
        """A :class:`writ.Permit`; use it with ``async with``."""
        return self.sync.permit(request, **options)
