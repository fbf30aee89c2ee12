"""State a governed call keeps beside writ: the approvals it waits on (the
pending store) and the reports it owes (the outbox).

Both are small interfaces (:class:`PendingStore`, :class:`Outbox`) with an
in-memory and a file implementation; implement them over any store an
agent already has (a database, a framework's run state).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Protocol, TypedDict

__all__ = ["PendingApproval", "PendingStore", "MemoryPendingStore", "FilePendingStore",
           "OutboxEntry", "Outbox", "FileOutbox", "action_digest"]

# The members of a check request that name its action; see action_digest.
_ACTION_MEMBERS = ("tenant_id", "decision_key", "tool", "arguments", "actor", "subject_ids", "workflow")


def _canonical(v: Any) -> bytes:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")


def action_digest(request: Mapping[str, Any]) -> str:
    """The digest that names an action for the pending store.

    ``sha256:`` and the hex SHA-256 of the JSON (sorted keys, no
    whitespace) of the request's ``tenant_id``, ``decision_key``, ``tool``,
    ``arguments``, ``actor``, ``subject_ids`` and ``workflow``, the absent
    ones left out. Evidence, context and the idempotency key are not part
    of it: a retry with fresh evidence is the same action. (The TypeScript
    client's ``actionDigest`` is the same digest.)
    """
    a = {k: request[k] for k in _ACTION_MEMBERS if request.get(k) is not None}
    return "sha256:" + hashlib.sha256(_canonical(a)).hexdigest()


class PendingApproval(TypedDict):
    """An approval a governed action waits on: what resuming its decision needs."""

    decision_id: str
    #: The idempotency key the action was checked with; resuming sends it again.
    idempotency_key: str
    #: The digest of the request as checked (Blocked.request_digest).
    request_digest: str
    approval_ids: List[str]
    #: The check request as sent (resume sends it again).
    request: Dict[str, Any]


class PendingStore(Protocol):
    """Where a guard keeps the approvals its actions wait on, by :func:`action_digest`.

    An entry is set when a check awaits an approval and deleted when the
    decision permits or ends; a later call of the same action resumes the
    decision of the entry instead of checking again (and opening a second
    approval request).
    """

    def get(self, action: str) -> Optional[PendingApproval]: ...
    def set(self, action: str, pending: PendingApproval) -> None: ...
    def delete(self, action: str) -> None: ...


class MemoryPendingStore:
    """A :class:`PendingStore` in memory: it lasts as long as the process."""

    def __init__(self) -> None:
        self._m: Dict[str, PendingApproval] = {}
        self._lock = threading.Lock()

    def get(self, action: str) -> Optional[PendingApproval]:
        with self._lock:
            return self._m.get(action)

    def set(self, action: str, pending: PendingApproval) -> None:
        with self._lock:
            self._m[action] = pending

    def delete(self, action: str) -> None:
        with self._lock:
            self._m.pop(action, None)


def _write_durably(path: str, data: bytes) -> None:
    """Replaces path with data: a temporary file, fsynced, renamed over it, the directory fsynced."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    d = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(d)
    finally:
        os.close(d)


class FilePendingStore:
    """A :class:`PendingStore` in one JSON file, rewritten durably on every change.

    A run restored in another process (after a restart) finds the
    decisions its actions wait on, and resumes them.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> Dict[str, PendingApproval]:
        try:
            with open(self.path, "rb") as f:
                doc: Dict[str, PendingApproval] = json.loads(f.read() or b"{}")
                return doc
        except FileNotFoundError:
            return {}

    def get(self, action: str) -> Optional[PendingApproval]:
        with self._lock:
            return self._read().get(action)

    def set(self, action: str, pending: PendingApproval) -> None:
        with self._lock:
            m = self._read()
            m[action] = pending
            _write_durably(self.path, _canonical(m))

    def delete(self, action: str) -> None:
        with self._lock:
            m = self._read()
            if m.pop(action, None) is not None:
                _write_durably(self.path, _canonical(m))


class OutboxEntry(TypedDict, total=False):
    """A report the outbox holds: begun (the tool was about to run) and, once it ran, the report."""

    decision_id: str
    idempotency_key: Optional[str]
    started_at: str
    #: The execution report to send (members of schema ExecutionReport);
    #: absent while the tool's outcome is unknown.
    report: Dict[str, Any]


class Outbox(Protocol):
    """A durable journal of execution reports.

    The guard calls ``begin`` before the tool runs (a failure there keeps
    the tool from running), ``settle`` with the report before sending it,
    and ``done`` once writ took it. :meth:`writ.Client.replay_outbox` sends
    what ``pending`` answers.
    """

    def begin(self, entry: OutboxEntry) -> None: ...
    def settle(self, decision_id: str, report: Dict[str, Any]) -> None: ...
    def done(self, decision_id: str) -> None: ...
    def pending(self) -> List[OutboxEntry]: ...


class FileOutbox:
    """An :class:`Outbox` as a file of JSON lines, appended and fsynced before each step.

    Each line is ``{"op": "begin"|"settle"|"done", ...}``; the entries are
    read back by replaying the lines. A line cut short by a crash (the
    last one) is ignored: its step had not returned, so the guard had not
    gone on. ``compact()`` rewrites the file with only the pending entries.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _append(self, line: Dict[str, Any]) -> None:
        with self._lock:
            with open(self.path, "ab") as f:
                f.write(_canonical(line) + b"\n")
                f.flush()
                os.fsync(f.fileno())

    def begin(self, entry: OutboxEntry) -> None:
        self._append({"op": "begin", **entry})

    def settle(self, decision_id: str, report: Dict[str, Any]) -> None:
        self._append({"op": "settle", "decision_id": decision_id, "report": report})

    def done(self, decision_id: str) -> None:
        self._append({"op": "done", "decision_id": decision_id})

    def pending(self) -> List[OutboxEntry]:
        entries: Dict[str, OutboxEntry] = {}
        try:
            with open(self.path, "rb") as f:
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            return []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                line: Dict[str, Any] = json.loads(raw)
            except ValueError:
                continue  # a line a crash cut short
            op, did = line.pop("op", ""), str(line.get("decision_id", ""))
            if op == "begin":
                e: OutboxEntry = {"decision_id": did, "idempotency_key": line.get("idempotency_key"),
                                  "started_at": str(line.get("started_at", ""))}
                entries[did] = e
            elif op == "settle" and did in entries:
                entries[did]["report"] = dict(line.get("report") or {})
            elif op == "done":
                entries.pop(did, None)
        return list(entries.values())

    def compact(self) -> None:
        """Rewrites the journal with only the entries still pending."""
        keep = self.pending()
        data = b"".join(_canonical({"op": "begin", **{k: v for k, v in e.items() if k != "report"}}) + b"\n" +
                        (_canonical({"op": "settle", "decision_id": e.get("decision_id"), "report": e.get("report")}) + b"\n"
                         if "report" in e else b"") for e in keep)
        with self._lock:
            _write_durably(self.path, data)
