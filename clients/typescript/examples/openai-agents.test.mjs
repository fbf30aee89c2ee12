// The OpenAI Agents SDK adapter as the example uses it (openai-agents.ts,
// compiled to dist/), offline with a scripted model, against a real writ
// serve with the refund pack.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, RunState, run, setTracingDisabled } from '@openai/agents';
import { Client } from '@writhq/writ-client';
import { FilePendingStore } from '@writhq/writ-client/node';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWrit, faultProxy } from '../test/writserver.mjs';
import { refundTool, approveInWrit, rejectInWrit, approvalOf } from './dist/openai-agents.js';
import { scriptedModel, toolResults } from './scripted-model.mjs';

setTracingDisabled(true); // nothing leaves the machine

let srv, agentKey, finance, auditor;
before(async () => {
  srv = await startWrit({ keys: { agt_support_service: 'agent', user_finance_lead_77: 'approver', auditor_olga: 'auditor' } });
  agentKey = new Client(srv.url, { apiKey: srv.tokens.agt_support_service });
  finance = new Client(srv.url, { apiKey: srv.tokens.user_finance_lead_77 });
  auditor = new Client(srv.url, { apiKey: srv.tokens.auditor_olga });
});
after(async () => { await srv?.close(); });

// refundAgent is a support agent whose one tool, issue_refund, is governed
// by writ. `example` names the refund pack's request the check is built
// from (its evidence, context and subjects); the model picks the arguments.
async function refundAgent(script, example, wait, facts, client = agentKey, onReportFailed) {
  // The identity service verifies the customer first (srv.refundRequest).
  const { actor, subject_ids, evidence, context, inputs_refs } = facts ?? await srv.refundRequest(example);
  const issued = [];
  const issueRefund = refundTool(client, { actor, subject_ids, evidence, context, inputs_refs },
    async (input) => { issued.push(input); return { refund_id: `rf_${issued.length}`, ...input }; }, { wait, onReportFailed });
  const model = scriptedModel(script);
  const agent = new Agent({ name: 'support', instructions: 'Resolve refund requests.', model, tools: [issueRefund] });
  return { agent, model, issueRefund, issued, facts: { actor, subject_ids, evidence, context, inputs_refs } };
}

const refund = (id, amount) => ({ call: 'issue_refund', id, args: { order_id: 'ord_881', amount_inr: amount, currency: 'INR' } });

test('an allowed tool is executed and reported', async () => {
  const a = await refundAgent([refund('call_a', 4200), { say: 'Refunded.' }], 'refund-allow');
  const result = await run(a.agent, 'Please refund order ord_881.');
  assert.equal(result.finalOutput, 'Refunded.');
  assert.deepEqual(result.interruptions ?? [], []);
  assert.equal(a.issued.length, 1, 'the refund ran once');
  const receipt = a.issueRefund.writ.receipt('call_a');
  assert.equal(receipt.outcome, 'allow');
  const story = await auditor.decision(receipt.decision_id);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'execution_report']);
  assert.equal(story.state.execution, 'succeeded');
  assert.equal(story.records[1].record.tool_lineage[0].tool_result_id, 'rf_1');
});

test('human review pauses the run; approving in writ resumes it', async () => {
  const a = await refundAgent([refund('call_h', 15000), { say: 'Refunded after approval.' }], 'refund-high-value-human-review');
  let result = await run(a.agent, 'Refund 15,000 INR on ord_881.');
  assert.equal(result.interruptions.length, 1, 'the run paused for approval');
  const pause = result.interruptions[0];
  assert.equal(a.issued.length, 0, 'nothing ran before the approval');
  const receipt = a.issueRefund.writ.receipt('call_h');
  assert.equal(receipt.disposition.mode, 'human_review');
  const approvalId = await approvalOf(a.issueRefund, pause);
  assert.equal((await finance.approval(approvalId)).state, 'pending');

  await approveInWrit(finance, a.issueRefund, result.state, pause, 'order history checked');
  result = await run(a.agent, result.state);
  assert.equal(result.finalOutput, 'Refunded after approval.');
  assert.equal(a.issued.length, 1);
  const story = await auditor.decision(receipt.decision_id);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'approval_decision', 'check', 'execution_report']);
  assert.equal(story.records[2].record.approvals[0].approver, 'user_finance_lead_77');
});

test('a replan answers the model the receipt instead of running the tool', async () => {
  const a = await refundAgent([refund('call_u', 4200), { say: 'Handing back to returns intake.' }],
    'refund-return-in-transit-upstream-replan');
  const result = await run(a.agent, 'Refund ord_881.');
  assert.deepEqual(result.interruptions ?? [], []);
  assert.equal(a.issued.length, 0, 'a blocked tool never runs');
  const told = JSON.parse(toolResults(a.model).call_u);
  assert.deepEqual([told.blocked_by_writ, told.outcome, told.mode, told.return_to_node],
    [true, 'replan_required', 'upstream_replan', 'returns_intake']);
  assert.equal(told.reasons[0].code, 'return_not_received');
});

test('rejecting in writ denies the approval and the tool never runs', async () => {
  const a = await refundAgent([refund('call_r', 15000), { say: 'The refund was refused.' }], 'refund-high-value-human-review');
  let result = await run(a.agent, 'Refund 15,000 INR on ord_881.');
  const [pause] = result.interruptions;
  const approvalId = await approvalOf(a.issueRefund, pause);
  await rejectInWrit(finance, a.issueRefund, result.state, pause, 'not without the invoice');
  result = await run(a.agent, result.state);
  assert.equal(result.finalOutput, 'The refund was refused.');
  assert.equal(a.issued.length, 0);
  assert.equal((await finance.approval(approvalId)).state, 'denied');
});

test('approving only in the SDK is not enough: writ still blocks', async () => {
  const a = await refundAgent([refund('call_s', 15000), { say: 'Still waiting for finance.' }], 'refund-high-value-human-review', '1s');
  let result = await run(a.agent, 'Refund 15,000 INR on ord_881.');
  const [pause] = result.interruptions;
  result.state.approve(pause); // no approval in writ
  result = await run(a.agent, result.state);
  assert.equal(a.issued.length, 0, 'the refund did not run');
  const told = JSON.parse(toolResults(a.model).call_s);
  assert.deepEqual([told.blocked_by_writ, told.mode], [true, 'human_review']);
});

test('a run state restored in another process, the tool\'s memory lost, resumes the same decision', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'writ-agents-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Each process's client keeps pending approvals in the same file.
  const durable = () => new Client(srv.url, { apiKey: srv.tokens.agt_support_service, pending: new FilePendingStore(path.join(dir, 'pending.json')) });
  const script = [refund('call_restore', 15000), { say: 'Refunded after approval.' }];
  const first = await refundAgent(script, 'refund-high-value-human-review', undefined, undefined, durable());
  const paused = await run(first.agent, 'Refund 15,000 INR on ord_881.');
  const [pause] = paused.interruptions;
  const decisionId = first.issueRefund.writ.receipt('call_restore').decision_id;
  const saved = paused.state.toString(); // what the application persists

  // Another process: a new tool (no call-id map), a new model that goes on from the pause.
  const again = await refundAgent(script, 'refund-high-value-human-review', undefined, first.facts, durable());
  again.model.skip(1);
  const state = await RunState.fromString(again.agent, saved);
  const [restored] = state.getInterruptions();
  assert.equal(restored.rawItem.callId, pause.rawItem.callId);
  await approveInWrit(finance, again.issueRefund, state, restored, 'order history checked');
  const customer = first.facts.subject_ids.find((x) => x.startsWith('customer:'));
  const mine = async (q) => (await finance.approvals({ ...q, limit: 500 })).approvals.filter((x) => x.subject_ids.includes(customer));
  assert.deepEqual(await mine({ state: 'pending' }), [], 'the one approval was decided');
  assert.deepEqual((await mine({})).map((x) => x.decision_id), [decisionId], 'no second approval was opened');
  const result = await run(again.agent, state);
  assert.equal(result.finalOutput, 'Refunded after approval.');
  assert.deepEqual([first.issued.length, again.issued.length], [0, 1]);
  assert.equal(again.issueRefund.writ.receipt('call_restore').decision_id, decisionId);
  const story = await auditor.decision(decisionId);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'approval_decision', 'check', 'execution_report']);
});

test('a report writ does not take: the model still gets the result, and the report is kept to send again', async (t) => {
  const proxy = await faultProxy(srv.url, { match: /\/execution$/, fault: '500' });
  t.after(() => proxy.close());
  const failed = [];
  const a = await refundAgent([refund('call_f', 4200), { say: 'Refunded.' }], 'refund-allow', undefined, undefined,
    new Client(proxy.url, { apiKey: srv.tokens.agt_support_service }), (e) => failed.push(e));
  const result = await run(a.agent, 'Please refund order ord_881.');
  assert.equal(result.finalOutput, 'Refunded.');
  assert.equal(a.issued.length, 1, 'the refund ran once');
  assert.deepEqual(JSON.parse(toolResults(a.model).call_f), { refund_id: 'rf_1', order_id: 'ord_881', amount_inr: 4200, currency: 'INR' },
    'the model was told the refund happened, not an error it would retry');
  assert.equal(failed.length, 1);
  assert.equal(failed[0].decisionId, a.issueRefund.writ.receipt('call_f').decision_id);
  await agentKey.reportExecution(failed[0].decisionId, failed[0].report);
  const story = await auditor.decision(failed[0].decisionId);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'execution_report']);
});
