// The OpenAI Agents SDK mapping (openai-agents.mjs), offline with a
// scripted model, against a real writ serve with the refund pack.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, run, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { Client } from '@writhq/writ-client';
import { startWrit, refundRequest } from '../test/writserver.mjs';
import { governedTool, approveInWrit, rejectInWrit, approvalOf } from './openai-agents.mjs';
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
function refundAgent(script, example, wait) {
  const base = refundRequest(example);
  const issued = [];
  const issueRefund = governedTool(agentKey, {
    name: 'issue_refund',
    writTool: 'payments.issue_refund', // the SDK's function names may not hold dots
    description: 'Refund an order to the original payment method.',
    parameters: z.object({ order_id: z.string(), amount_inr: z.number(), currency: z.literal('INR') }),
    request: (input) => ({
      actor: base.actor, subject_ids: base.subject_ids, evidence: base.evidence, context: base.context,
      outputs: { refund_amount_inr: input.amount_inr, currency: input.currency, order_id: input.order_id },
    }),
    run: async (input) => { issued.push(input); return { refund_id: `rf_${issued.length}`, ...input }; },
    toolResultId: (r) => r.refund_id,
    wait,
  });
  const model = scriptedModel(script);
  const agent = new Agent({ name: 'support', instructions: 'Resolve refund requests.', model, tools: [issueRefund] });
  return { agent, model, issueRefund, issued, tool: 'payments.issue_refund' };
}

const refund = (id, amount) => ({ call: 'issue_refund', id, args: { order_id: 'ord_881', amount_inr: amount, currency: 'INR' } });

test('an allowed tool is executed and reported', async () => {
  const a = refundAgent([refund('call_a', 4200), { say: 'Refunded.' }], 'refund-allow');
  const result = await run(a.agent, 'Please refund order ord_881.');
  assert.equal(result.finalOutput, 'Refunded.');
  assert.deepEqual(result.interruptions ?? [], []);
  assert.equal(a.issued.length, 1, 'the refund ran once');
  const receipt = a.issueRefund.writReceipt('call_a');
  assert.equal(receipt.outcome, 'allow');
  const story = await auditor.decision(receipt.decision_id);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'execution_report']);
  assert.equal(story.state.execution, 'succeeded');
  assert.equal(story.records[1].record.tool_lineage[0].tool_result_id, 'rf_1');
});

test('human review pauses the run; approving in writ resumes it', async () => {
  const a = refundAgent([refund('call_h', 15000), { say: 'Refunded after approval.' }], 'refund-high-value-human-review');
  let result = await run(a.agent, 'Refund 15,000 INR on ord_881.');
  assert.equal(result.interruptions.length, 1, 'the run paused for approval');
  const pause = result.interruptions[0];
  assert.equal(a.issued.length, 0, 'nothing ran before the approval');
  const receipt = a.issueRefund.writReceipt('call_h');
  assert.equal(receipt.disposition.mode, 'human_review');
  const approvalId = approvalOf(a.issueRefund, pause);
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
  const a = refundAgent([refund('call_u', 4200), { say: 'Handing back to returns intake.' }],
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
  const a = refundAgent([refund('call_r', 15000), { say: 'The refund was refused.' }], 'refund-high-value-human-review');
  let result = await run(a.agent, 'Refund 15,000 INR on ord_881.');
  const [pause] = result.interruptions;
  const approvalId = approvalOf(a.issueRefund, pause);
  await rejectInWrit(finance, a.issueRefund, result.state, pause, 'not without the invoice');
  result = await run(a.agent, result.state);
  assert.equal(result.finalOutput, 'The refund was refused.');
  assert.equal(a.issued.length, 0);
  assert.equal((await finance.approval(approvalId)).state, 'denied');
});

test('approving only in the SDK is not enough: writ still blocks', async () => {
  const a = refundAgent([refund('call_s', 15000), { say: 'Still waiting for finance.' }], 'refund-high-value-human-review', '1s');
  let result = await run(a.agent, 'Refund 15,000 INR on ord_881.');
  const [pause] = result.interruptions;
  result.state.approve(pause); // no approval in writ
  result = await run(a.agent, result.state);
  assert.equal(a.issued.length, 0, 'the refund did not run');
  const told = JSON.parse(toolResults(a.model).call_s);
  assert.deepEqual([told.blocked_by_writ, told.mode], [true, 'human_review']);
});
