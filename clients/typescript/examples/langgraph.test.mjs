// The LangGraph adapter as the example uses it (langgraph.ts), offline with a scripted chat
// model, against a real writ serve with the refund pack.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Command, MemorySaver } from '@langchain/langgraph';
import { FakeListChatModel } from '@langchain/core/utils/testing';
import { Client } from '@writhq/writ-client';
import { startWrit, faultProxy } from '../test/writserver.mjs';
import { governedRefundGraph } from './dist/langgraph.js';

let srv, agent, finance, auditor;
before(async () => {
  srv = await startWrit({ keys: { agt_support_service: 'agent', user_finance_lead_77: 'approver', auditor_olga: 'auditor' } });
  agent = new Client(srv.url, { apiKey: srv.tokens.agt_support_service });
  finance = new Client(srv.url, { apiKey: srv.tokens.user_finance_lead_77 });
  auditor = new Client(srv.url, { apiKey: srv.tokens.auditor_olga });
});
after(async () => { await srv?.close(); });

// scenario builds the graph with a scripted model that proposes the
// refunds of `amounts` in turn, and the facts of a refund pack example.
async function scenario(example, amounts, client = agent) {
  // The identity service verifies the customer first (srv.refundRequest).
  const { tool, arguments: _a, ...facts } = await srv.refundRequest(example);
  const model = new FakeListChatModel({
    responses: amounts.map((amount) => JSON.stringify({ tool, arguments: { order_id: 'ord_881', amount_inr: amount, currency: 'INR' } })),
  });
  const issued = [];
  const upstream = [];
  const graph = governedRefundGraph({
    client, model, checkpointer: new MemorySaver(),
    issue: async (args) => { issued.push(args); return { refund_id: `rf_${issued.length}` }; },
    // The returns desk confirms the warehouse has the item.
    onUpstream: async (f, receipt) => {
      upstream.push(receipt.reasons.map((r) => r.code));
      return { ...f, context: { ...f.context, return_status: 'received' } };
    },
  });
  const outputs = (amount) => ({ refund_amount_inr: amount, currency: 'INR', order_id: 'ord_881' });
  return { graph, issued, upstream, input: { ask: 'Refund order ord_881.', facts: { ...facts, outputs: outputs(amounts[0]) } } };
}

const config = (id) => ({ configurable: { thread_id: id } });

test('an allowed tool is executed and reported', async () => {
  const s = await scenario('refund-allow', [4200]);
  const out = await s.graph.invoke(s.input, config('allow'));
  assert.deepEqual(out.trail, ['returns_intake', 'support_agent', 'writ_check', 'issue_refund']);
  assert.deepEqual(s.issued, [{ order_id: 'ord_881', amount_inr: 4200, currency: 'INR' }]);
  assert.deepEqual(out.writ.result, { refund_id: 'rf_1' });
  const story = await auditor.decision(out.writ.receipt.decision_id);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'execution_report']);
  assert.equal(story.records[1].record.tool_lineage[0].tool_result_id, 'rf_1');
});

test('human review is an interrupt(); approving in writ and resuming runs the tool', async () => {
  const s = await scenario('refund-high-value-human-review', [15000]);
  const paused = await s.graph.invoke(s.input, config('review'));
  const [pause] = paused.__interrupt__ ?? [];
  assert.ok(pause, 'the graph paused');
  assert.deepEqual(paused.trail, ['returns_intake', 'support_agent', 'writ_check']);
  assert.equal(s.issued.length, 0, 'nothing ran before the approval');
  const { decision_id, approval_ids, target_hint } = pause.value;
  assert.equal(target_hint, 'finance_approvers');

  await finance.approve(approval_ids[0], 'order history checked');
  const out = await s.graph.invoke(new Command({ resume: { decided: true } }), config('review'));
  assert.deepEqual(out.trail, ['returns_intake', 'support_agent', 'writ_check', 'human_review', 'issue_refund']);
  assert.equal(out.writ.receipt.outcome, 'allow');
  assert.equal(s.issued.length, 1);
  const story = await auditor.decision(decision_id);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'approval_decision', 'check', 'execution_report']);
});

test('an upstream replan is a Command back to routing.return_to_node', async () => {
  const s = await scenario('refund-return-in-transit-upstream-replan', [4200, 4200]);
  const out = await s.graph.invoke(s.input, config('upstream'));
  assert.deepEqual(out.trail, ['returns_intake', 'support_agent', 'writ_check',
    'returns_intake', 'support_agent', 'writ_check', 'issue_refund']);
  assert.deepEqual(s.upstream, [['return_not_received']], 'the returns desk got the receipt');
  assert.equal(out.writ.receipt.outcome, 'allow');
  assert.equal(s.issued.length, 1, 'the refund ran once, after the warehouse receipt');
});

test('a terminal block ends the graph with the receipt', async () => {
  const s = await scenario('refund-exceeds-order-goal-fail', [20000]);
  const out = await s.graph.invoke(s.input, config('deny'));
  assert.deepEqual(out.trail, ['returns_intake', 'support_agent', 'writ_check']);
  assert.equal(out.writ.receipt.disposition.mode, 'terminal_block');
  assert.equal(s.issued.length, 0);
});

test('a report writ does not take: the tool node keeps the result and the report, and does not fail', async (t) => {
  const proxy = await faultProxy(srv.url, { match: /\/execution$/, fault: '500' });
  t.after(() => proxy.close());
  const quiet = t.mock.method(console, 'error', () => {});
  const s = await scenario('refund-allow', [4200], new Client(proxy.url, { apiKey: srv.tokens.agt_support_service }));
  const out = await s.graph.invoke(s.input, config('unreported'));
  assert.deepEqual(out.trail, ['returns_intake', 'support_agent', 'writ_check', 'issue_refund']);
  assert.deepEqual([out.writ.result, s.issued.length], [{ refund_id: 'rf_1' }, 1]);
  assert.equal(out.writ.unreported.report.status, 'succeeded');
  assert.match(quiet.mock.calls[0].arguments[0], new RegExp(out.writ.receipt.decision_id));
  await agent.reportExecution(out.writ.receipt.decision_id, out.writ.unreported.report);
  const story = await auditor.decision(out.writ.receipt.decision_id);
  assert.deepEqual(story.records.map((r) => r.kind), ['check', 'execution_report']);
});
