// The guard in production conditions, against a real `writ serve`: writ
// killed while the tool runs, reports that time out, abort or meet a 500,
// the agent itself crashing, approvals waited on across calls and
// restarts, and input writ would refuse.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as writ from '../dist/index.js';
import { FileOutbox, FilePendingStore } from '../dist/node.js';
import { startWrit, faultProxy } from './writserver.mjs';

const AGENT = 'agt_support_service', FINANCE = 'user_finance_lead_77', AUDITOR = 'auditor_olga';
const keys = { [AGENT]: 'agent', [FINANCE]: 'approver', [AUDITOR]: 'auditor' };
let srv, agent, finance, auditor, tmp;

before(async () => {
  srv = await startWrit({ keys });
  agent = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT] });
  finance = new writ.Client(srv.url, { apiKey: srv.tokens[FINANCE] });
  auditor = new writ.Client(srv.url, { apiKey: srv.tokens[AUDITOR] });
  tmp = mkdtempSync(path.join(tmpdir(), 'writ-ts-guard-'));
});
after(async () => {
  await srv?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const digest = (json) => 'sha256:' + createHash('sha256').update(json).digest('hex');

// split separates a refund pack example into the guard's tool, arguments
// and parts, its identity verification on file with server.
async function split(name, server = srv) {
  const { tool, arguments: args, ...parts } = await server.refundRequest(name);
  return { tool, args, parts };
}

test('writ killed while the tool runs: ReportFailed carries the result and the decision', async () => {
  const doomed = await startWrit({ keys });
  const c = new writ.Client(doomed.url, { apiKey: doomed.tokens[AGENT] });
  const { tool, args, parts } = await split('refund-allow', doomed);
  const ran = [];
  const issueRefund = c.guard(tool, async (a) => {
    ran.push(a.amount_inr);
    await doomed.close('SIGKILL'); // writ dies while the refund is being issued
    return { refund_id: 'rf_killed' };
  }, { request: parts });
  const err = await issueRefund(args).catch((e) => e);
  assert.ok(err instanceof writ.ReportFailed, `got ${err}`);
  assert.deepEqual(err.result, { refund_id: 'rf_killed' });
  assert.match(err.decisionId, /^dec_/);
  assert.ok(err.cause instanceof writ.Unreachable, `cause ${err.cause}`);
  assert.ok(!(err.cause instanceof TypeError));
  assert.deepEqual([err.report.status, err.report.result_digest], ['succeeded', digest('{"refund_id":"rf_killed"}')]);
  assert.deepEqual(ran, [4200], 'the tool ran once');
});

test('every other way a report fails after the tool ran is ReportFailed, and its report can be sent again', async (t) => {
  const cases = [
    // name, the proxy's fault on the report, client options, guard call options, the cause's class
    ['a report that times out', 'hang', { timeout: 1 }, () => ({}), writ.Timeout],
    ['the connection reset', 'reset', {}, () => ({}), writ.Unreachable],
    ['a 500', '500', {}, () => ({}), writ.Internal],
    ['aborted while the tool ran', '500', {}, (ctl) => ({ signal: ctl.signal }), writ.Aborted],
  ];
  for (const [name, fault, copts, callOpts, Cause] of cases) {
    await t.test(name, async () => {
      const proxy = await faultProxy(srv.url, { match: /\/execution$/, fault });
      try {
        const c = new writ.Client(proxy.url, { apiKey: srv.tokens[AGENT], ...copts });
        const { tool, args, parts } = await split('refund-allow');
        const ctl = new AbortController();
        const ran = [];
        const issueRefund = c.guard(tool, async (a) => {
          ran.push(a.order_id);
          ctl.abort(new Error('the user closed the chat'));
          return { refund_id: 'rf_' + fault };
        }, { request: parts, toolResultId: (r) => r.refund_id });
        const err = await issueRefund(args, callOpts(ctl)).catch((e) => e);
        assert.ok(err instanceof writ.ReportFailed, `got ${err}`);
        assert.ok(err.cause instanceof Cause, `cause ${err.cause}`);
        assert.deepEqual([err.result, ran], [{ refund_id: 'rf_' + fault }, ['ord_881']]);
        // The result is not lost: the same report, sent again, closes the decision.
        const ack = await agent.reportExecution(err.decisionId, err.report);
        assert.deepEqual([ack.status, ack.execution], ['CLOSED', 'succeeded']);
        const story = await auditor.decision(err.decisionId);
        assert.deepEqual(story.records.map((x) => x.kind), ['check', 'execution_report']);
        assert.equal(story.records[1].record.execution.result_digest, digest(`{"refund_id":"rf_${fault}"}`));
      } finally { await proxy.close(); }
    });
  }
});

test('transport failures are typed, never a raw TypeError or DOMException', async (t) => {
  await t.test('nothing listening: Unreachable', async () => {
    const gone = await startWrit({ keys });
    const url = gone.url;
    await gone.close();
    const err = await new writ.Client(url, { apiKey: 'wk_x' }).check(await srv.refundRequest('refund-allow')).catch((e) => e);
    assert.ok(err instanceof writ.Unreachable && err instanceof writ.TransportError && err instanceof writ.WritError, `got ${err}`);
    assert.match(err.message, /ECONNREFUSED/);
  });
  await t.test('no answer in time: Timeout', async () => {
    const proxy = await faultProxy(srv.url, { match: /^\/v1\/check$/, fault: 'hang' });
    try {
      const c = new writ.Client(proxy.url, { apiKey: srv.tokens[AGENT], timeout: 0.5 });
      const err = await c.check(await srv.refundRequest('refund-allow')).catch((e) => e);
      assert.ok(err instanceof writ.Timeout, `got ${err}`);
      assert.equal(err.seconds, 0.5);
      const err2 = await agent.check(await srv.refundRequest('refund-allow'), { timeout: 0 }).catch((e) => e);
      assert.ok(err2 instanceof writ.Timeout, `a call's own timeout: got ${err2}`);
    } finally { await proxy.close(); }
  });
  await t.test('the caller aborts: Aborted, before and during the call, and the guard never runs the tool', async () => {
    const proxy = await faultProxy(srv.url, { match: /^\/v1\/check$/, fault: 'hang' });
    try {
      const c = new writ.Client(proxy.url, { apiKey: srv.tokens[AGENT] });
      const ctl = new AbortController();
      const pending = c.check(await srv.refundRequest('refund-allow'), { signal: ctl.signal }).catch((e) => e);
      ctl.abort();
      const err = await pending;
      assert.ok(err instanceof writ.Aborted, `got ${err}`);
      assert.equal(err.cause?.name, 'AbortError');
      const before = await agent.check(await srv.refundRequest('refund-allow'), { signal: AbortSignal.abort() }).catch((e) => e);
      assert.ok(before instanceof writ.Aborted, `got ${before}`);
      // Every method takes the signal last.
      const gone = { signal: AbortSignal.abort() };
      for (const call of [() => agent.decision('dec_x', gone), () => agent.inFlight({}, gone), () => agent.record('dr_x', gone),
        () => agent.records({}, gone), () => finance.approvals({}, gone), () => finance.approval('apr_x', gone),
        () => finance.approve('apr_x', 'ok', undefined, gone), () => finance.deny('apr_x', 'no', undefined, gone),
        () => agent.withdraw('apr_x', 'no', gone), () => agent.run('run_x', gone), () => agent.health(gone),
        () => agent.startRun({ workflow_id: 'w' }, gone), () => agent.submitAttempt('run_x', 's', { actor: { type: 'AGENT', id: 'a' } }, gone),
        () => agent.reportExecution('dec_x', { status: 'succeeded' }, gone), () => agent.resume('dec_x', {}, gone)]) {
        await assert.rejects(call(), writ.Aborted, String(call));
      }
      const { tool, args, parts } = await split('refund-allow');
      const ran = [];
      const g = c.guard(tool, (a) => { ran.push(a); return 'x'; }, { request: parts });
      const ctl2 = new AbortController();
      const blocked = g(args, { signal: ctl2.signal }).catch((e) => e);
      ctl2.abort();
      assert.ok((await blocked) instanceof writ.Aborted);
      assert.deepEqual(ran, []);
    } finally { await proxy.close(); }
  });
});

test('a wait over 5m is refused before any request', async () => {
  const sent = [];
  const c = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT], fetch: (u, init) => { sent.push(String(u)); return fetch(u, init); } });
  const { tool, args, parts } = await split('refund-high-value-human-review');
  const ran = [];
  const g = c.guard(tool, (a) => { ran.push(a); return 'x'; }, { request: parts, wait: '10m' });
  const err = await g(args).catch((e) => e);
  assert.ok(err instanceof writ.InvalidArgument, `got ${err}`);
  assert.equal(err.field, 'wait');
  assert.match(err.message, /over writ's maximum, 5m/);
  for (const bad of ['10m', '5m1s', 'soon', '-1s', '1d']) {
    await assert.rejects(c.resume('dec_x', await srv.refundRequest('refund-allow'), { wait: bad }), writ.InvalidArgument, bad);
  }
  await assert.rejects(c.decision(''), writ.InvalidArgument);
  assert.deepEqual([sent, ran], [[], []], 'no request was sent and no tool ran');
  assert.equal(writ.waitSeconds('4m59.5s'), 299.5);
  assert.equal(writ.waitSeconds('1m30s'), 90);
  assert.equal(writ.waitSeconds('500ms'), 0.5);
});

// pendingFor answers the pending approval requests of a decision.
async function pendingFor(decisionId) {
  return (await finance.approvals({ state: 'pending', limit: 500 })).approvals.filter((a) => a.decision_id === decisionId);
}

test('a guard that stopped waiting, called again, reuses the approval instead of opening another', async () => {
  const { tool, args, parts } = await split('refund-high-value-human-review');
  const ran = [];
  const issueRefund = agent.guard(tool, (a) => { ran.push(a.amount_inr); return { refund_id: 'rf_reused' }; },
    { request: parts, wait: '1s' });
  const first = await issueRefund(args).catch((e) => e);
  assert.ok(first instanceof writ.Blocked, `got ${first}`);
  assert.equal(first.mode, 'human_review');
  assert.match(first.idempotencyKey, /^ik_/);
  assert.equal(first.request.idempotency_key, first.idempotencyKey);
  assert.equal(first.requestDigest, await writ.resultDigest(first.request));
  assert.equal(first.approvalIds.length, 1);
  // The agent's retry after the wait ran out: the same decision, the same approval.
  const second = await issueRefund(args).catch((e) => e);
  assert.ok(second instanceof writ.Blocked, `got ${second}`);
  assert.deepEqual([second.decisionId, second.idempotencyKey, second.approvalIds],
    [first.decisionId, first.idempotencyKey, first.approvalIds]);
  assert.equal((await pendingFor(first.decisionId)).length, 1, 'one approval request, not two');
  assert.deepEqual(ran, []);
  await finance.approve(first.approvalIds[0], 'order history checked');
  assert.deepEqual(await issueRefund(args), { refund_id: 'rf_reused' });
  assert.deepEqual(ran, [15000]);
  const story = await auditor.decision(first.decisionId);
  assert.deepEqual(story.records.map((x) => x.kind), ['check', 'approval_decision', 'check', 'execution_report']);
  // Blocked carries what a manual resume needs.
  const again = await agent.resume(first.decisionId, first.request);
  assert.equal(again.metadata.repeated, 'idempotent');
});

test('the pending approval survives a restart in a FilePendingStore', async () => {
  const file = path.join(tmp, 'pending.json');
  const { tool, args, parts } = await split('refund-high-value-human-review');
  const run = () => ({ refund_id: 'rf_restart' });
  const before = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT], pending: new FilePendingStore(file) });
  const first = await before.guard(tool, run, { request: parts })(args).catch((e) => e);
  assert.ok(first instanceof writ.Blocked, `got ${first}`);
  // A new process: a new client on the same file.
  const after = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT], pending: new FilePendingStore(file) });
  const second = await after.guard(tool, run, { request: parts })(args).catch((e) => e);
  assert.ok(second instanceof writ.Blocked, `got ${second}`);
  assert.equal(second.decisionId, first.decisionId);
  assert.equal((await pendingFor(first.decisionId)).length, 1);
  await finance.deny(first.approvalIds[0], 'not this one');
  const denied = await after.guard(tool, run, { request: parts })(args).catch((e) => e);
  assert.deepEqual([denied.decisionId, denied.receipt.outcome], [first.decisionId, 'goal_fail_terminal']);
  assert.equal(await new FilePendingStore(file).get(await writ.actionDigest(first.request)), undefined, 'a settled action leaves the store');
});

test('the agent crashes after its tool ran: the outbox replays the report on start', async () => {
  const journal = path.join(tmp, 'outbox.jsonl');
  const req = await srv.refundRequest('refund-allow');
  const child = await new Promise((resolve) => {
    execFile(process.execPath, [path.join(import.meta.dirname, 'crash-agent.mjs'), srv.url, srv.tokens[AGENT], journal, JSON.stringify(req)],
      (error, stdout) => resolve({ error, stdout }));
  });
  assert.equal(child.error?.signal, 'SIGKILL', 'the agent was killed');
  assert.equal(child.stdout, 'tool ran\n');
  const [entry] = await new FileOutbox(journal).pending();
  assert.equal(entry.report.result_digest, digest('{"amount_inr":4200,"refund_id":"rf_crash"}'));
  assert.equal((await auditor.decision(entry.decision_id)).records.length, 1, 'writ has no report yet');
  // The agent starts again.
  const restarted = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT], outbox: new FileOutbox(journal) });
  const replay = await restarted.replayOutbox();
  assert.deepEqual([replay.reported.map((a) => a.decision_id), replay.unknown, replay.failed], [[entry.decision_id], [], []]);
  const story = await auditor.decision(entry.decision_id);
  assert.deepEqual(story.records.map((x) => x.kind), ['check', 'execution_report']);
  assert.equal(story.records[1].record.execution.result_digest, entry.report.result_digest);
  assert.deepEqual(await new FileOutbox(journal).pending(), []);
  assert.deepEqual((await restarted.replayOutbox()).reported, [], 'a replayed report is not sent twice');
});

test('a tool begun but never finished is an unknown outcome: replay does not guess it', async () => {
  const journal = path.join(tmp, 'unknown.jsonl');
  const outbox = new FileOutbox(journal);
  const r = await agent.check(await srv.refundRequest('refund-allow'));
  await outbox.begin({ decision_id: r.decision_id, started_at: new Date().toISOString() });
  const c = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT], outbox });
  const replay = await c.replayOutbox();
  assert.deepEqual([replay.reported, replay.unknown.map((e) => e.decision_id)], [[], [r.decision_id]]);
  assert.equal((await auditor.decision(r.decision_id)).records.length, 1);
  await outbox.compact();
  assert.equal((await new FileOutbox(journal).pending()).length, 1, 'still there for a person to settle');
});

test('an agent withdraws the approval it no longer needs', async () => {
  const { tool, args, parts } = await split('refund-high-value-human-review');
  const ran = [];
  const issueRefund = agent.guard(tool, (a) => { ran.push(a); return 'x'; }, { request: parts });
  const blocked = await issueRefund(args).catch((e) => e);
  assert.ok(blocked instanceof writ.Blocked, `got ${blocked}`);
  const [withdrawn] = await agent.withdrawPending(blocked.request, 'the customer cancelled the refund');
  assert.deepEqual([withdrawn.approval_id, withdrawn.state], [blocked.approvalIds[0], 'withdrawn']);
  assert.equal((await finance.approval(blocked.approvalIds[0])).state, 'withdrawn');
  assert.deepEqual(await agent.withdrawPending(blocked.request), [], 'the action is no longer pending');
  await assert.rejects(finance.approve(blocked.approvalIds[0], 'too late'), writ.Conflict);
  await assert.rejects(agent.withdraw(blocked.approvalIds[0]), writ.Conflict, 'withdrawn once');
  const ended = await agent.resume(blocked.decisionId, blocked.request);
  assert.equal(ended.outcome, 'goal_fail_terminal');
  assert.ok(ended.reasons.some((r) => r.code === 'approval_withdrawn'));
  assert.deepEqual(ran, []);
  const kinds = (await auditor.decision(blocked.decisionId)).records.map((x) => x.kind);
  assert.deepEqual(kinds, ['check', 'approval_decision', 'check']);
});
