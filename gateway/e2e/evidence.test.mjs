// End-to-end test of evidence the gateway captures (docs/mcp.md,
// "Evidence from tool results" and "Proposed outputs"): the refund
// example pack as it is (examples/refund: its identity check's result is
// identity_verification evidence, and its refund's arguments are the
// outputs its outputs_schema validates) behind `writ gateway`; a small MCP server written with the official
// TypeScript SDK (idv-server.mjs) as the tools; the official SDK client
// as the agent, with no code of writ's. The refund is refused until the
// agent has checked the customer's identity, then allowed on the item the
// gateway captured, which the refund's record cites, provenance
// observed. On the SQLite store, and on PostgreSQL (a schema of its own)
// when WRIT_TEST_POSTGRES names a database and psql is installed.
// WRIT_BIN names the writ binary; without it the test builds one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const RECEIPT_KEY = 'io.github.writhq/receipt';
const RECORD_KEY = 'io.github.writhq/record_id';

let tmp, writ;

before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'writ-evidence-e2e-'));
  writ = process.env.WRIT_BIN;
  if (!writ) {
    writ = path.join(tmp, 'writ');
    execFileSync('go', ['build', '-o', writ, './cmd/writ'], { cwd: repo, stdio: 'inherit' });
  }
});

after(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function records(storeArgs, ...args) {
  const out = execFileSync(writ, ['records', ...args, '--tenant', 'acme', ...storeArgs], { encoding: 'utf8' });
  return out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

// postgresSchema makes a schema of its own in $WRIT_TEST_POSTGRES and
// returns the store URL that uses it, or null (skip).
function postgresSchema(t) {
  const dsn = process.env.WRIT_TEST_POSTGRES;
  if (!dsn || spawnSync('psql', ['--version']).status !== 0) return null;
  const schema = 'writ_evidence_e2e_' + crypto.randomBytes(6).toString('hex');
  execFileSync('psql', [dsn, '-q', '-c', `CREATE SCHEMA ${schema}`]);
  t.after(() => execFileSync('psql', [dsn, '-q', '-c', `SET client_min_messages = warning; DROP SCHEMA ${schema} CASCADE`]));
  const u = new URL(dsn);
  u.searchParams.set('search_path', schema);
  return u.toString();
}

async function scenario(t, store) {
  const dir = fs.mkdtempSync(path.join(tmp, 'run-'));
  const pack = path.join(repo, 'examples', 'refund');
  const data = path.join(dir, 'data');
  const refunds = path.join(dir, 'refunds.jsonl');
  const server = ['      command: node', `      args: [${JSON.stringify(path.join(here, 'idv-server.mjs'))}]`, `      env: {IDV_REFUNDS: ${JSON.stringify(refunds)}}`];
  const config = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(config, [
    'tenant: acme',
    'actor: {id: agt_support}',
    'upstreams:',
    '  - name: idv',
    '    prefix: idv.',
    '    stdio:', ...server,
    '  - name: payments',
    '    prefix: payments.',
    '    stdio:', ...server,
    '',
  ].join('\n'));
  const storeArgs = store ? ['--store', store, '--data', data] : ['--data', data];
  const client = new Client({ name: 'writ-evidence-e2e', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: writ,
    args: ['gateway', '--config', config, '--pack', pack, ...storeArgs],
    stderr: 'inherit',
  }));
  const refund = { customer_id: 'cus_77', order_id: 'ord_881', amount_inr: 4200, currency: 'INR' };
  let refundRecord;
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((x) => x.name).sort(), ['idv.check_identity', 'payments.issue_refund']);

    // No identity check yet: refused, nothing reaches the tool.
    let result = await client.callTool({ name: 'payments.issue_refund', arguments: refund });
    assert.equal(result.isError, true, text(result));
    assert.equal(result._meta?.[RECEIPT_KEY]?.reasons[0].code, 'missing_identity_verification', text(result));
    // A failed identity check captures nothing: still refused.
    result = await client.callTool({ name: 'idv.check_identity', arguments: { customer_id: 'cus_fail' } });
    assert.equal(result.isError, true);
    result = await client.callTool({ name: 'payments.issue_refund', arguments: { ...refund, customer_id: 'cus_fail' } });
    assert.equal(result.isError, true, text(result));
    assert.equal(result._meta[RECEIPT_KEY].reasons[0].code, 'missing_identity_verification');
    assert.equal(fs.existsSync(refunds), false, 'a refused refund reached the tool');

    // The identity check, then the refund: allowed on what was captured.
    result = await client.callTool({ name: 'idv.check_identity', arguments: { customer_id: 'cus_77' } });
    assert.notEqual(result.isError, true, text(result));
    assert.equal(result.structuredContent.verified, true);
    result = await client.callTool({ name: 'payments.issue_refund', arguments: refund });
    assert.notEqual(result.isError, true, text(result));
    assert.match(text(result), /refunded 4200 INR on ord_881/);
    refundRecord = result._meta[RECORD_KEY];
    // The spec's outputs_schema validates the outputs the call proposes
    // (tools.yaml outputs): a refund in another currency is refused.
    result = await client.callTool({ name: 'payments.issue_refund', arguments: { ...refund, currency: 'USD' } });
    assert.equal(result.isError, true, text(result));
    assert.match(text(result), /outputs\.currency/);
    // Another customer's refund does not ride on cus_77's check.
    result = await client.callTool({ name: 'payments.issue_refund', arguments: { ...refund, customer_id: 'cus_12' } });
    assert.equal(result.isError, true, text(result));
    assert.equal(result._meta[RECEIPT_KEY].reasons[0].code, 'missing_identity_verification');
  } finally {
    await client.close();
  }
  assert.equal(fs.readFileSync(refunds, 'utf8').trim().split('\n').length, 1, 'one refund reached the tool');

  // The ledger: one observed item, from the identity check the gateway
  // allowed, cited by the refund's record.
  const items = records(storeArgs, 'list', '--json', '--decision-key', 'evidence:identity_verification');
  assert.equal(items.length, 1, 'one identity_verification item was captured');
  const ev = items[0];
  assert.equal(ev.outputs.provenance, 'observed');
  assert.equal(ev.outputs.observation.tool, 'idv.check_identity');
  assert.deepEqual(ev.outputs.item.subject_ids, ['customer:cus_77']);
  assert.deepEqual(ev.outputs.item.attributes, { method: 'otp', verified: true });
  assert.equal(ev.outputs.item.issuer, 'writ-gateway');
  assert.equal(ev.actor.provenance, 'observed');
  const [rec] = records(storeArgs, 'get', refundRecord);
  assert.equal(rec.decision_key, 'support.refund.execute');
  assert.deepEqual(rec.subject_ids, ['customer:cus_77', 'order:ord_881']);
  assert.deepEqual(rec.outputs, { currency: 'INR', order_id: 'ord_881', outcome: 'allow', refund_amount_inr: 4200 });
  assert.ok(rec.evidence_refs.includes(`identity_verification:${ev.outputs.item.id}#${ev.outputs.content_address}`),
    `the refund record cites ${rec.evidence_refs}, not the captured item`);
  const identity = records(storeArgs, 'list', '--json', '--decision-key', 'support.identity.check');
  assert.ok(identity.some((r) => r.decision_id === ev.outputs.observation.decision_id), 'the observation names the identity check\'s decision');
}

test('the refund is allowed on the identity check the gateway captured (SQLite)', async (t) => {
  await scenario(t, null);
});

test('the refund is allowed on the identity check the gateway captured (PostgreSQL)', async (t) => {
  const store = postgresSchema(t);
  if (!store) {
    t.skip('WRIT_TEST_POSTGRES is not set, or psql is not installed');
    return;
  }
  await scenario(t, store);
});
