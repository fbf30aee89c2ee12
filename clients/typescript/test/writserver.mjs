// A real `writ serve` on a loopback port for the client's tests and the
// framework examples. The binary is $WRIT_BIN when set (CI builds it once);
// otherwise it is built from this repository with `go build`, once.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

/** IDV is the refund example's identity verification service, an issuer. */
export const IDV = 'idv.acme.example';
export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

let bin = process.env.WRIT_BIN;
function writBin() {
  if (!bin) {
    const d = mkdtempSync(path.join(tmpdir(), 'writ-ts-bin-'));
    bin = path.join(d, 'writ');
    execFileSync('go', ['build', '-o', bin, './cmd/writ'], { cwd: repo, stdio: 'inherit' });
  }
  return bin;
}

/**
 * startWrit starts `writ serve --pack PACK` on 127.0.0.1:0 with a fresh
 * data directory. `keys` maps a subject to its roles; each key is created
 * with `writ keys create` first, its token in `tokens[subject]`. Without
 * keys the server runs in development mode.
 */
export async function startWrit({ pack = 'examples/refund', keys = {}, tenant = 'acme' } = {}) {
  const tmp = mkdtempSync(path.join(tmpdir(), 'writ-ts-test-'));
  const data = path.join(tmp, 'data');
  const tokens = {};
  // A keyed server of the refund pack has the IDV service's issuer key,
  // which refundRequest submits identity verifications with.
  if (Object.keys(keys).length > 0 && pack === 'examples/refund' && !(IDV in keys)) keys = { ...keys, [IDV]: 'issuer' };
  for (const [subject, roles] of Object.entries(keys)) {
    // An agent key is an orchestrator's: it acts for the agents the
    // example requests name (docs/trust.md).
    const acts = roles.includes('agent') ? ['--actor-type', 'SERVICE', '--acts-for', 'AGENT:*'] : [];
    const out = execFileSync(writBin(), ['keys', 'create', '--data', data, '--tenant', tenant,
      '--subject', subject, '--role', roles, '--json', ...acts], { cwd: repo, encoding: 'utf8' });
    tokens[subject] = JSON.parse(out).token;
  }
  const proc = spawn(writBin(), ['serve', '--pack', pack, '--data', data, '--addr', '127.0.0.1:0', '--log-level', 'warn'],
    { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`writ serve exited ${code}:\n${stderr}`)));
  });
  return {
    url, tokens,
    /**
     * refundRequest is the module's refundRequest, its identity
     * verification a fact writ resolves: a refund is a mutating action,
     * so writ accepts only evidence it can resolve. The IDV service
     * submits, with its issuer key, a fresh identity verification about
     * the request's (new) customer, and the request cites it by id, as an
     * agent does once the customer is verified.
     */
    async refundRequest(name, over = {}) {
      const r = refundRequest(name, over);
      if (!tokens[IDV]) return r;
      const customers = r.subject_ids.filter((s) => s.startsWith('customer:'));
      for (const [i, e] of (r.evidence ?? []).entries()) {
        if (e.kind !== 'identity_verification') continue;
        const item = { kind: e.kind, id: 'idv_' + randomBytes(6).toString('hex'), subject_ids: customers, attributes: e.attributes, observed_at: e.observed_at };
        const res = await fetch(url + '/v1/evidence', { method: 'POST', body: JSON.stringify(item),
          headers: { authorization: 'Bearer ' + tokens[IDV], 'content-type': 'application/json' } });
        if (!res.ok) throw new Error(`POST /v1/evidence: ${res.status} ${await res.text()}`);
        r.evidence[i] = { kind: e.kind, id: item.id };
      }
      return r;
    },
    /** Stops writ (SIGTERM; 'SIGKILL' to kill it) and removes its data. */
    async close(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((resolve) => proc.on('exit', resolve));
      proc.kill(signal);
      await exited;
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/**
 * refundRequest returns an example request of the refund pack
 * (examples/refund/requests/NAME.json) decided now: fresh evidence, the
 * key's tenant, and a new customer, so that the pack's velocity rule
 * (3 refunds per customer a day) counts only this test's refunds.
 */
export function refundRequest(name, over = {}) {
  const r = JSON.parse(readFileSync(path.join(repo, 'examples/refund/requests', name + '.json'), 'utf8'));
  const fresh = new Date(Date.now() - 60_000).toISOString();
  for (const e of r.evidence ?? []) e.observed_at = fresh;
  delete r.tenant_id;
  delete r.idempotency_key;
  const customer = 'customer:cus_' + randomBytes(5).toString('hex');
  r.subject_ids = r.subject_ids.map((s) => (s.startsWith('customer:') ? customer : s));
  return { ...r, ...over };
}

/**
 * flakyProxy is a loopback proxy in front of writ that answers the first
 * `fail` requests with writ's own backpressure problem (503, Retry-After),
 * then forwards every request unchanged. writ answers 503 when it is over
 * its in-flight limit or its store is down, neither of which one real
 * server can be made to do on cue.
 */
export async function flakyProxy(upstream, { fail = 1, retryAfter = '2' } = {}) {
  const http = await import('node:http');
  const seen = [];
  let remaining = fail;
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    if (remaining > 0) {
      remaining--;
      seen.push(`503 ${req.url}`);
      res.writeHead(503, { 'Content-Type': 'application/problem+json', 'Retry-After': retryAfter });
      res.end(JSON.stringify({ type: 'urn:writ:problem:unavailable', title: 'Service unavailable', status: 503,
        detail: 'writ is serving 1024 requests; retry later', instance: req.url, code: 'unavailable' }));
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    delete headers['content-length'];
    const up = await fetch(upstream + req.url, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    seen.push(`${up.status} ${req.url}`);
    const body = Buffer.from(await up.arrayBuffer());
    const out = {};
    up.headers.forEach((v, k) => { if (!['content-length', 'content-encoding', 'transfer-encoding', 'connection'].includes(k)) out[k] = v; });
    res.writeHead(up.status, out);
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, seen, close: () => new Promise((r) => server.close(r)) };
}

/**
 * faultProxy is a loopback proxy in front of writ that forwards every
 * request unchanged except those whose path matches `match`, which meet
 * `fault`: 'hang' (no answer, until the proxy closes), 'reset' (the
 * connection is destroyed) or '500' (writ's internal-error problem).
 * These are the ways a report can fail after the tool ran that one real
 * server does not produce on cue.
 */
export async function faultProxy(upstream, { match, fault }) {
  const http = await import('node:http');
  const seen = [];
  const hung = new Set();
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const path = new URL(req.url, 'http://x').pathname;
    if (match.test(path)) {
      seen.push(`${fault} ${path}`);
      if (fault === 'hang') { hung.add(res); return; }
      if (fault === 'reset') { req.socket.destroy(); return; }
      res.writeHead(500, { 'Content-Type': 'application/problem+json' });
      res.end(JSON.stringify({ type: 'urn:writ:problem:internal', title: 'Internal error', status: 500,
        detail: 'internal error', instance: req.url, code: 'internal' }));
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    delete headers['content-length'];
    const up = await fetch(upstream + req.url, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    seen.push(`${up.status} ${path}`);
    const body = Buffer.from(await up.arrayBuffer());
    const out = {};
    up.headers.forEach((v, k) => { if (!['content-length', 'content-encoding', 'transfer-encoding', 'connection'].includes(k)) out[k] = v; });
    res.writeHead(up.status, out);
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`, seen,
    close: () => new Promise((r) => { for (const res of hung) res.destroy(); server.closeAllConnections(); server.close(r); }),
  };
}
