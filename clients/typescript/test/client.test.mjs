// The TypeScript client (compiled to dist/) against a real `writ serve` on
// loopback: npm test. $WRIT_BIN names a built writ; without it one is built.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import * as writ from '../dist/index.js';
import { startWrit, refundRequest, flakyProxy } from './writserver.mjs';

const AGENT = 'agt_support_service', FINANCE = 'user_finance_lead_77', AUDITOR = 'auditor_olga', IDV = 'idv.acme.example';
let srv, agent, finance, auditor, idv;

before(async () => {
  srv = await startWrit({ keys: { [AGENT]: 'agent', [FINANCE]: 'approver', [AUDITOR]: 'auditor', [IDV]: 'issuer' } });
  idv = new writ.Client(srv.url, { apiKey: srv.tokens[IDV] });
  agent = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT] });
  finance = new writ.Client(srv.url, { apiKey: srv.tokens[FINANCE] });
  auditor = new writ.Client(srv.url, { apiKey: srv.tokens[AUDITOR] });
});
after(async () => { await srv?.close(); });

test('every outcome', async (t) => {
  const cases = [
    // example request, outcome, mode, human_review_terminal, record status
    ['refund-allow', 'allow', 'continue_downstream', false, 'IN_FLIGHT'],
    ['refund-allow-with-warning', 'allow_with_warning', 'continue_downstream', false, 'IN_FLIGHT'],
    ['refund-missing-idv-local-replan', 'replan_required', 'local_replan', false, 'DEFERRED'],
    ['refund-return-in-transit-upstream-replan', 'replan_required', 'upstream_replan', false, 'DEFERRED'],
    ['refund-high-value-human-review', 'replan_required', 'human_review', false, 'ESCALATED'],
    ['refund-fraud-terminal-review', 'replan_required', 'human_review', true, 'ESCALATED'],
    ['refund-exceeds-order-goal-fail', 'goal_fail_terminal', 'terminal_block', false, 'REJECTED'],
  ];
  for (const [name, outcome, mode, terminal, status] of cases) {
    await t.test(name, async () => {
      const r = await agent.check(await srv.refundRequest(name));
      assert.deepEqual([r.outcome, r.disposition.mode, r.human_review_terminal], [outcome, mode, terminal], `check(${name})`);
      assert.equal(r.safe_to_execute, outcome.startsWith('allow'));
      assert.ok(r.metadata.record_id, 'every receipt names its durable record');
      const rec = await auditor.record(r.metadata.record_id);
      assert.equal(rec.status, status);
      assert.equal(rec.decision_id, r.decision_id);
    });
  }
});

test('evidence: an issuer stores an item, an agent cites it, a revocation refuses it', async () => {
  const observed = new Date(Date.now() - 60_000).toISOString();
  // Evidence counts only about the check's subjects: the refunds below
  // name the customer the item is about.
  const customer = 'customer:cus_' + randomBytes(5).toString('hex');
  const stored = await idv.submitEvidence({ kind: 'identity_verification', id: 'idv_ts_1', subject_ids: [customer],
    attributes: { method: 'otp' }, observed_at: observed });
  assert.deepEqual([stored.provenance, stored.item.issuer], ['issued', IDV]);
  assert.match(stored.content_address, /^sha256:[0-9a-f]{64}$/);
  for (const ref of ['idv_ts_1', stored.content_address]) {
    const got = await agent.evidence(ref);
    assert.deepEqual([got.item.id, got.content_address], ['idv_ts_1', stored.content_address]);
  }
  const cite = (id) => {
    const req = refundRequest('refund-allow', { evidence: [{ kind: 'identity_verification', id }] });
    req.subject_ids = req.subject_ids.map((s) => (s.startsWith('customer:') ? customer : s));
    return agent.check(req);
  };
  const allowed = await cite('idv_ts_1');
  assert.equal(allowed.outcome, 'allow', JSON.stringify(allowed.reasons));

  const revoked = await idv.revokeEvidence('idv_ts_1', 'the document was reported stolen');
  assert.equal(revoked.revoked?.reason, 'the document was reported stolen');
  const refused = await cite('idv_ts_1');
  assert.equal(refused.safe_to_execute, false);
  assert.match(refused.reasons[0].message, /was revoked/);

  const forbidden = await agent.submitEvidence({ kind: 'identity_verification', id: 'idv_ts_agent', observed_at: observed }).catch((e) => e);
  assert.ok(forbidden instanceof writ.Forbidden, `got ${forbidden}`);
  assert.match(forbidden.message, /issuer/);
  const missing = await agent.evidence('idv_ts_agent').catch((e) => e);
  assert.ok(missing instanceof writ.NotFound, `got ${missing}`);
  const dup = await idv.submitEvidence({ kind: 'identity_verification', id: 'idv_ts_1', observed_at: observed }).catch((e) => e);
  assert.ok(dup instanceof writ.Conflict, `got ${dup}`);
});

test('a blocked call throws Blocked with the receipt, and the tool never runs', async () => {
  const { arguments: _a, ...base } = await srv.refundRequest('refund-exceeds-order-goal-fail');
  const calls = [];
  const issueRefund = agent.guard('payments.issue_refund', (args) => { calls.push(args); return { refund_id: 'rf_1' }; },
    { request: base });
  const err = await issueRefund({ order_id: 'ord_881', amount_inr: 20000, currency: 'INR' }).catch((e) => e);
  assert.ok(err instanceof writ.Blocked, `got ${err}`);
  assert.equal(err.mode, 'terminal_block');
  assert.equal(err.receipt.outcome, 'goal_fail_terminal');
  assert.ok(err.receipt.reasons.some((r) => r.code === 'refund_exceeds_order_total'));
  assert.deepEqual(calls, []);
  const story = await auditor.decision(err.receipt.decision_id);
  assert.deepEqual(story.records.map((x) => x.kind), ['check']);
});

test('an allowed call runs and is reported, in the caller\'s trace', async () => {
  const { arguments: args, ...base } = await srv.refundRequest('refund-allow');
  const traceId = createHash('sha256').update(String(Math.random())).digest('hex').slice(0, 32);
  const tracing = new writ.Client(srv.url, { apiKey: srv.tokens[AGENT], traceparent: () => `00-${traceId}-00f067aa0ba902b7-01` });
  const issueRefund = tracing.guard('payments.issue_refund', async (a) => ({ refund_id: 'rf_881', amount_inr: a.amount_inr }),
    { request: base, toolResultId: (res) => res.refund_id });
  const result = await issueRefund(args);
  assert.deepEqual(result, { refund_id: 'rf_881', amount_inr: 4200 });
  const page = await auditor.records({ trace_id: traceId });
  assert.deepEqual(page.records.map((r) => r.status), ['IN_FLIGHT', 'CLOSED']);
  const story = await auditor.decision(page.records[0].decision_id);
  assert.deepEqual(story.records.map((x) => x.kind), ['check', 'execution_report']);
  assert.equal(story.state.execution, 'succeeded');
  const want = 'sha256:' + createHash('sha256').update('{"amount_inr":4200,"refund_id":"rf_881"}').digest('hex');
  assert.equal(story.records[1].record.execution.result_digest, want);
  assert.equal(story.records[1].record.tool_lineage[0].tool_result_id, 'rf_881');
  // The seed's query keys filter: the trace newest first, and the check's rule.
  const newest = await auditor.records({ trace_id: traceId, order: 'newest' });
  assert.deepEqual(newest.records.map((r) => r.status), ['CLOSED', 'IN_FLIGHT']);
  const check = page.records[0];
  const byRule = await auditor.records({ policy_decision_id: check.policy_decisions[0].policy_decision_id,
    approval_mode_effective: check.approval_mode_effective, trace_id: traceId });
  assert.deepEqual(byRule.records.map((r) => r.record_id), [check.record_id]);
  const byApprover = await auditor.records({ approver: 'user_nobody', trace_id: traceId });
  assert.deepEqual(byApprover.records, []);
});

test('an execution report, its repeat and a conflicting one', async () => {
  const r = await agent.check(await srv.refundRequest('refund-allow'));
  assert.equal(r.metadata.execution_report, 'required');
  const ack = await agent.reportExecution(r.decision_id, { status: 'succeeded', result: { refund_id: 'rf_9' }, tool_result_id: 'tr_121' });
  assert.deepEqual([ack.status, ack.execution, ack.findings, ack.repeated], ['CLOSED', 'succeeded', [], undefined]);
  const again = await agent.reportExecution(r.decision_id, { status: 'succeeded', result: { refund_id: 'rf_9' }, tool_result_id: 'tr_121' });
  assert.deepEqual([again.record_id, again.repeated], [ack.record_id, 'idempotent']);
  await assert.rejects(agent.reportExecution(r.decision_id, { status: 'failed', error: { code: 'other' } }), writ.Conflict);
});

test('an approval flow end to end: the guard waits, the approver approves, the tool runs', async () => {
  const { arguments: args, ...base } = await srv.refundRequest('refund-high-value-human-review');
  const ran = [];
  const issueRefund = agent.guard('payments.issue_refund', (a) => { ran.push(a.amount_inr); return { refund_id: 'rf_15000' }; },
    { request: base, wait: '2m' });
  const pending = issueRefund(args);
  let settled = false;
  pending.then(() => { settled = true; }, () => { settled = true; });
  // The finance lead finds the request in the queue and approves it.
  let found;
  while (!found && !settled) {
    const page = await finance.approvals({ state: 'pending' });
    found = page.approvals.find((a) => a.reasons.some((x) => x.message.includes(String(args.amount_inr))) &&
      a.subject_ids.includes(base.subject_ids[0]));
  }
  assert.ok(found, 'a pending approval request');
  const decided = await finance.approve(found.approval_id, 'order history checked');
  assert.equal(decided.state, 'approved');
  assert.deepEqual(await pending, { refund_id: 'rf_15000' });
  assert.deepEqual(ran, [15000]);
  const story = await auditor.decision(found.decision_id);
  assert.deepEqual(story.records.map((x) => x.kind), ['check', 'approval_decision', 'check', 'execution_report']);
});

test('resume: a denied approval is terminal, a wait in vain is still_waiting', async () => {
  const req = await srv.refundRequest('refund-high-value-human-review');
  const r = await agent.check(req);
  assert.ok(writ.awaitsApproval(r));
  const vain = await agent.resume(r.decision_id, req, { wait: '1s' });
  assert.deepEqual([vain.metadata.repeated, vain.safe_to_execute], ['still_waiting', false]);
  await finance.deny(r.metadata.approval_ids[0], 'not this one');
  const again = await agent.resume(r.decision_id, req, { wait: '5s' });
  assert.deepEqual([again.outcome, again.decision_id], ['goal_fail_terminal', r.decision_id]);
  assert.ok(again.reasons.some((x) => x.code === 'approval_denied'));
});

test('problems surface as typed errors carrying the problem', async () => {
  const err = await agent.check({ tenant_id: 42, actor: { type: 'AGENT', id: 'a' } }).catch((e) => e);
  assert.ok(err instanceof writ.Invalid, `got ${err}`);
  assert.deepEqual([err.status, err.code, err.problem.type], [400, 'invalid', 'urn:writ:problem:invalid']);
  assert.deepEqual(err.problem.errors, [{ field: 'tenant_id', message: 'must be a string, not a number' }]);
  await assert.rejects(new writ.Client(srv.url, { apiKey: 'wk_not_a_key' }).check(await srv.refundRequest('refund-allow')), writ.Unauthenticated);
  await assert.rejects(finance.check(await srv.refundRequest('refund-allow')), writ.Forbidden);
  await assert.rejects(auditor.decision('dec_does_not_exist'), writ.NotFound);
  const req = await srv.refundRequest('refund-allow', { idempotency_key: writ.newIdempotencyKey() });
  assert.equal((await agent.check(req)).safe_to_execute, true);
  assert.equal((await agent.check(req)).metadata.repeated, 'idempotent');
  const other = { ...req, arguments: { ...req.arguments, amount_inr: 4100 }, outputs: { ...req.outputs, refund_amount_inr: 4100 } };
  await assert.rejects(agent.check(other), writ.Conflict);
});

test('a 503 is retried after its Retry-After', async () => {
  const proxy = await flakyProxy(srv.url, { fail: 1, retryAfter: '2' });
  try {
    const slept = [];
    const c = new writ.Client(proxy.url, { apiKey: srv.tokens[AGENT], sleep: async (s) => { slept.push(s); } });
    const r = await c.check(await srv.refundRequest('refund-allow'));
    assert.equal(r.safe_to_execute, true);
    assert.deepEqual(slept, [2]);
    assert.deepEqual(proxy.seen, ['503 /v1/check', '200 /v1/check']);
  } finally { await proxy.close(); }
});

test('a 503 that persists is Unavailable with the problem', async () => {
  const proxy = await flakyProxy(srv.url, { fail: 10, retryAfter: '1' });
  try {
    const slept = [];
    const c = new writ.Client(proxy.url, { apiKey: srv.tokens[AGENT], maxRetries: 2, sleep: async (s) => { slept.push(s); } });
    const err = await c.check(await srv.refundRequest('refund-allow')).catch((e) => e);
    assert.ok(err instanceof writ.Unavailable, `got ${err}`);
    assert.deepEqual([err.status, err.receipt, slept], [503, undefined, [1, 1]]);
  } finally { await proxy.close(); }
});

test('runs and attempts (storybook pack, development mode)', async () => {
  const dev = await startWrit({ pack: 'examples/storybook' });
  try {
    const c = new writ.Client(dev.url, { tenantId: 'acme' });
    assert.equal((await c.health()).auth, 'disabled');
    const run = await c.startRun({ workflow_id: 'ui.component.change', context: { component: 'Button', ticket: 'UI-142' } });
    assert.equal(run.current_step, 'implement');
    const actor = { type: 'AGENT', id: 'agt_frontend' };
    const v1 = await c.submitAttempt(run.run_id, 'implement', { actor, result: { diff_summary: 'Primary button uses the new brand colour.' } });
    assert.equal(v1.state, 'accepted');
    const v2 = await c.submitAttempt(run.run_id, 'visual_check', { actor, result: { visualVerification: { performed: false } } });
    assert.equal(v2.state, 'retry');
    assert.ok(v2.retry_prompt);
    assert.equal((await c.run(run.run_id)).current_step, 'visual_check');
  } finally { await dev.close(); }
});
