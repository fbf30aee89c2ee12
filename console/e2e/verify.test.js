// The console's verifier (console/assets/verify.js) against the worked
// example of docs/ledger-format.md: real bytes of a three-record ledger,
// its key and its signed checkpoint, which a Go test keeps in step with
// what writ writes. Runs in Node's WebCrypto, the same API as the
// browser's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifyRecord, verifyLedger, splitRecordsPage, treeRoot, rootFromInclusion, sha256, hex } from '../assets/verify.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const doc = readFileSync(path.resolve(here, '../../docs/ledger-format.md'), 'utf8');
const example = doc.slice(doc.indexOf('<!-- BEGIN WORKED EXAMPLE'));

const records = example.split('\n').filter((l) => l.startsWith('{"action_class"') && l.includes('"record_hash"'));
const note = /`tenants\/acme\/checkpoints\/3\.note` \(\d+ bytes\):\n\n```\n([\s\S]*?)```/.exec(example)[1];
const verifierKey = /\| verifier key \| `([^`]+)` \|/.exec(example)[1];
const leafHex = [...example.matchAll(/\| leaf (\d) \(seq \d\) \| [^|]+\| `([0-9a-f]{64})` \|/g)].map((m) => m[2]);
const node01 = /\| node 0–1 \| [^|]+\| `([0-9a-f]{64})` \|/.exec(example)[1];
const keys = [{ name: 'writ-example', id: 'writ-example+18ab7136', verifier_key: verifierKey, valid_from: '2026-05-09T09:00:00Z' }];
const enc = new TextEncoder();
const b64 = (h) => Buffer.from(h, 'hex').toString('base64');

function proofFor(seq, path) {
  return { seq, tree_size: 3, proof: path.map(b64), checkpoint: { note } };
}

const good = [proofFor(1, [leafHex[1], leafHex[2]]), proofFor(2, [leafHex[0], leafHex[2]]), proofFor(3, [node01])];
// The checkpoint's root (its third line) and the first record's hash and
// signature, read from the worked example rather than copied, so that a
// regenerated example keeps these tests meaningful.
const rootB64 = note.split('\n')[2];
const firstHash = JSON.parse(records[0]).audit.record_hash;
const firstSig = JSON.parse(records[0]).audit.signature;
const otherChar = (c) => (c === 'A' ? 'B' : 'A');

test('the worked example parses', () => {
  assert.equal(records.length, 3);
  assert.equal(leafHex.length, 3);
  assert.ok(note.startsWith('writ/acme\n3\n'));
});

test('every record of the worked example verifies', async () => {
  for (let i = 0; i < 3; i++) {
    const steps = await verifyRecord({ bytes: enc.encode(records[i]), proof: good[i], keys, tenantID: 'acme' });
    assert.deepEqual(steps.map((s) => [s.name, s.ok]), [['record hash', true], ['signature', true], ['checkpoint', true], ['inclusion', true]],
      JSON.stringify(steps, null, 1));
  }
});

test('leaf hashes are RFC 6962 leaves of the stored bytes', async () => {
  const leaf = await sha256(new Uint8Array([0, ...enc.encode(records[0])]));
  assert.equal(hex(leaf), leafHex[0]);
  const root = await rootFromInclusion(0, 3, leaf, [leafHex[1], leafHex[2]].map((h) => Buffer.from(h, 'hex')));
  assert.equal(Buffer.from(root).toString('base64'), rootB64);
});

// Each tamper names what fails first, and how.
const tampers = [
  ['a changed output', (r) => ({ bytes: r.replace('"amount_eur":12.5', '"amount_eur":125') }), 'record hash', new RegExp(`hash to sha256:[0-9a-f]{64}, but its seal says ${firstHash}`)],
  ['a forged signature', (r) => ({ bytes: r.replace(`"signature":"${firstSig}"`, `"signature":"${otherChar(firstSig[0])}${firstSig.slice(1)}"`) }), 'signature', /does not verify/],
  ['an unknown signer', (r) => ({ bytes: r, keys: [] }), 'signature', /not a key of this ledger/],
  ['a key outside its window', (r) => ({ bytes: r, keys: [{ ...keys[0], valid_from: '2026-05-10T00:00:00Z' }] }), 'signature', /not valid at/],
  ['a checkpoint over another root', (r) => ({ bytes: r, proof: { ...good[0], checkpoint: { note: note.replace(rootB64, otherChar(rootB64[0]) + rootB64.slice(1)) } } }), 'checkpoint', /does not verify/],
  ['a wrong audit path', (r) => ({ bytes: r, proof: proofFor(1, [leafHex[2], leafHex[1]]) }), 'inclusion', /not the ones the ledger committed/],
  ['a short audit path', (r) => ({ bytes: r, proof: proofFor(1, [leafHex[1]]) }), 'inclusion', /shorter/],
  ['another tenant\'s checkpoint', (r) => ({ bytes: r, tenantID: 'globex' }), 'tenant', /not globex/],
];

for (const [name, change, step, detail] of tampers) {
  test(`verification fails on ${name}`, async () => {
    const c = change(records[0]);
    const steps = await verifyRecord({ bytes: enc.encode(c.bytes), proof: c.proof || good[0], keys: c.keys || keys, tenantID: c.tenantID || 'acme' });
    const failed = steps.filter((s) => s.ok === false);
    assert.ok(failed.length > 0, `nothing failed: ${JSON.stringify(steps)}`);
    assert.equal(failed[0].name, step, JSON.stringify(steps, null, 1));
    assert.match(failed[0].detail, detail);
  });
}

test('a record no checkpoint covers yet says so', async () => {
  const steps = await verifyRecord({ bytes: enc.encode(records[2]), proof: null, keys, tenantID: 'acme' });
  assert.deepEqual(steps.map((s) => [s.name, s.ok]), [['record hash', true], ['signature', true], ['inclusion', null]]);
});

test('a page of records splits into each record\'s exact bytes', () => {
  const page = enc.encode(`{"records":[${records.join(',')}],"next_cursor":"c\\"]}"}`);
  const got = splitRecordsPage(page).map((b) => new TextDecoder().decode(b));
  assert.deepEqual(got, records);
  assert.deepEqual(splitRecordsPage(enc.encode('{"records":[]}')), []);
  assert.throws(() => splitRecordsPage(enc.encode('{"records":[{"a":"}')), /ends inside a record/);
});

test('the tree root of the worked example is its checkpoint\'s', async () => {
  const root = await treeRoot(leafHex.map((h) => new Uint8Array(Buffer.from(h, 'hex'))));
  assert.equal(Buffer.from(root).toString('base64'), rootB64);
});

test('the worked example\'s whole ledger verifies', async () => {
  const r = await verifyLedger({ records: records.map((l) => enc.encode(l)), keys, tenantID: 'acme', checkpointNote: note });
  assert.deepEqual(r.failures, []);
  assert.equal(r.records, 3);
  assert.equal(r.checkpoint.ok, true);
});

for (const [name, lines, want] of [
  ['two records swapped', [records[1], records[0], records[2]], [[2, 'chain'], [2, 'chain'], [1, 'chain'], [1, 'chain'], [3, 'chain'], [0, 'checkpoint']]],
  ['a record missing', [records[0], records[2]], [[3, 'chain'], [3, 'chain'], [0, 'checkpoint']]],
  ['a record changed', [records[0], records[1].replace('"amount_eur":10000', '"amount_eur":1000'), records[2]], [[2, 'record hash'], [0, 'checkpoint']]],
]) {
  test(`the whole-ledger check finds ${name}`, async () => {
    const r = await verifyLedger({ records: lines.map((l) => enc.encode(l)), keys, tenantID: 'acme', checkpointNote: note });
    assert.deepEqual(r.failures.map((f) => [f.seq, f.name]), want, JSON.stringify(r.failures, null, 1));
  });
}
