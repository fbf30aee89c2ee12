"""A real `writ serve` on a loopback port for the client's tests.

The binary is $WRIT_BIN when set (CI builds it once); otherwise it is built
from this repository with `go build` into a temporary directory, once per
test process.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# IDV is the refund example's identity verification service: an issuer
# key of the tenant, which every keyed server of the refund pack has.
IDV = "idv.acme.example"
_bin: Optional[str] = None
_lock = threading.Lock()


def writ_bin() -> str:
    global _bin
    with _lock:
        if _bin:
            return _bin
        env = os.environ.get("WRIT_BIN")
        if env:
            _bin = env
            return _bin
        d = tempfile.mkdtemp(prefix="writ-py-bin-")
        atexit.register(shutil.rmtree, d, True)
        out = os.path.join(d, "writ")
        subprocess.run(["go", "build", "-o", out, "./cmd/writ"], cwd=REPO, check=True)
        _bin = out
        return _bin


class WritServer:
    """`writ serve --pack PACK` on 127.0.0.1:0 with a fresh data directory.

    ``keys`` maps a subject to its roles; each key is created with
    `writ keys create` before the server starts, and its token is in
    ``tokens[subject]``. Without keys the server runs in development mode.
    A keyed server of the refund pack also has the IDV service's issuer
    key (``tokens[IDV]``), which :meth:`refund_request` submits with.
    """

    def __init__(self, pack: str = "examples/refund", keys: Optional[Dict[str, str]] = None,
                 tenant: str = "acme") -> None:
        self.tmp = tempfile.mkdtemp(prefix="writ-py-test-")
        self.data = os.path.join(self.tmp, "data")
        self.tenant = tenant
        self.tokens: Dict[str, str] = {}
        keys = dict(keys or {})
        if keys and pack == "examples/refund":
            keys.setdefault(IDV, "issuer")
        for subject, roles in keys.items():
            # An agent key is an orchestrator's: it acts for the agents
            # the example requests name (docs/trust.md).
            acts = ["--actor-type", "SERVICE", "--acts-for", "AGENT:*"] if "agent" in roles else []
            out = self.writ("keys", "create", "--data", self.data, "--tenant", tenant,
                            "--subject", subject, "--role", roles, "--json", *acts)
            self.tokens[subject] = json.loads(out)["token"]
        self.pack = pack
        self.start()

    def start(self) -> None:
        """Starts `writ serve` on the data directory (again, after kill), on a new port."""
        self.proc = subprocess.Popen(
            [writ_bin(), "serve", "--pack", self.pack, "--data", self.data, "--addr", "127.0.0.1:0",
             "--log-level", "warn"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = ""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"writ serve did not start: {err}")
        # Keep reading stdout so the server never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def refund_request(self, name: str, **over: Any) -> Dict[str, Any]:
        """:func:`refund_request`, its identity verification a fact writ resolves.

        A refund is a mutating action, so writ accepts only evidence it can
        resolve: the IDV service submits, with its issuer key, a fresh
        identity verification about the request's (new) customer, and the
        request cites it by id, as an agent does once the customer is
        verified. A request that cites none is returned as it is.
        """
        r = refund_request(name, **over)
        if IDV not in self.tokens:
            return r
        import writ  # the client under test; the test modules put it on the path

        idv = writ.Client(self.url, self.tokens[IDV])
        customers = [s for s in r.get("subject_ids", []) if s.startswith("customer:")]
        for i, e in enumerate(r.get("evidence", [])):
            if e.get("kind") != "identity_verification":
                continue
            stored = idv.submit_evidence("identity_verification", id="idv_" + uuid.uuid4().hex[:12],
                                         subject_ids=customers, attributes=e.get("attributes"),
                                         observed_at=e["observed_at"])
            r["evidence"][i] = {"kind": "identity_verification", "id": stored["item"]["id"]}
        return r

    def kill(self) -> None:
        """Kills `writ serve` (SIGKILL) and waits for it: writ is down."""
        self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()

    def writ(self, *args: str) -> str:
        return subprocess.run([writ_bin(), *args], cwd=REPO, check=True, capture_output=True,
                              text=True).stdout

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def refund_request(name: str, **over: Any) -> Dict[str, Any]:
    """An example request of the refund pack (examples/refund/requests/NAME.json), decided now.

    Its evidence is made fresh (observed a minute ago), the tenant is left
    to the key, and the customer is a new one, so that the pack's velocity
    rule (3 refunds per customer a day) counts only this test's refunds.
    """
    with open(os.path.join(REPO, "examples", "refund", "requests", name + ".json")) as f:
        r = json.load(f)
    fresh = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    for e in r.get("evidence", []):
        e["observed_at"] = fresh
    r.pop("tenant_id", None)
    r.pop("idempotency_key", None)
    customer = "customer:cus_" + uuid.uuid4().hex[:10]
    r["subject_ids"] = [customer if s.startswith("customer:") else s for s in r["subject_ids"]]
    r = copy.deepcopy(r)
    r.update(over)
    return r
