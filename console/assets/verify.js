// In-browser verification of one sealed record, as docs/ledger-format.md
// specifies it: the seal (record_hash over the hash input), the record's
// Ed25519 signature, the RFC 6962 inclusion proof, and the C2SP signed
// note of the checkpoint the proof is against, every signature checked
// against the tenant's verifier keys. Only WebCrypto is used: SHA-256 and
// Ed25519. Nothing here trusts a hash the server computed: the leaf, the
// path's root and the record hash are all computed from the bytes.

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function b64(s) {
  if (typeof s !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) {
    throw new Error(`not standard base64: ${String(s).slice(0, 40)}`);
  }
  const bin = atob(s);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) { out.set(p, i); i += p.length; }
  return out;
}

function indexOf(hay, needle, from = 0) {
  outer: for (let i = from; i <= hay.length - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

function equal(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const auditOpen = enc.encode('"audit":{"prev_hash":"');
const sealRE = /^"audit":\{"prev_hash":"(sha256:[0-9a-f]{64})","record_hash":"(sha256:[0-9a-f]{64})","seq":([1-9][0-9]*)(?:,"signature":"([A-Za-z0-9+/=]+)","signed_by":"([^"]+)")?\}$/;

// splitSeal finds the audit block of stored record bytes and returns the
// seal and the hash input (§2.4, "splice").
export function splitSeal(bytes) {
  const start = indexOf(bytes, auditOpen);
  if (start < 0) throw new Error('the record has no audit block');
  const end = bytes.indexOf(0x7d, start); // '}'
  if (end < 0) throw new Error('the audit block does not end');
  const block = dec.decode(bytes.subarray(start, end + 1));
  const m = sealRE.exec(block);
  if (!m) throw new Error(`the audit block is not a seal: ${block.slice(0, 120)}`);
  const [, prevHash, recordHash, seq, signature, signedBy] = m;
  const input = concat(bytes.subarray(0, start), enc.encode(`"audit":{"prev_hash":"${prevHash}","seq":${seq}}`), bytes.subarray(end + 1));
  return { prevHash, recordHash, seq: Number(seq), signature, signedBy, input };
}

// parseVerifierKey parses a note verifier key, name+hash+base64(0x01 ‖
// key), and checks that its hash is the key's (§3.1).
export async function parseVerifierKey(vkey) {
  // name+hash+base64: the name has no '+', the base64 may.
  const text = String(vkey);
  const i = text.indexOf('+'), j = text.indexOf('+', i + 1);
  if (i <= 0 || j < 0) throw new Error(`malformed verifier key ${vkey}`);
  const name = text.slice(0, i), hash = text.slice(i + 1, j), data = text.slice(j + 1);
  if (!/^[0-9a-f]{8}$/.test(hash)) throw new Error(`malformed verifier key ${vkey}`);
  const keyData = b64(data);
  if (keyData.length !== 33 || keyData[0] !== 0x01) throw new Error(`verifier key ${name}+${hash} is not an Ed25519 key`);
  const sum = await sha256(concat(enc.encode(name + '\n'), keyData));
  if (hex(sum.subarray(0, 4)) !== hash) throw new Error(`verifier key ${name}+${hash}: its hash does not match its key data`);
  const key = await crypto.subtle.importKey('raw', keyData.subarray(1), { name: 'Ed25519' }, false, ['verify']);
  return { name, hash, id: `${name}+${hash}`, key };
}

async function ed25519Verify(key, sig, msg) {
  return crypto.subtle.verify({ name: 'Ed25519' }, key, sig, msg);
}

// rootFromInclusion computes the root from a leaf hash and an RFC 6962
// audit path (RFC 9162 §2.1.3.2).
export async function rootFromInclusion(index, size, leaf, path) {
  if (!(index >= 0 && index < size)) throw new Error(`leaf index ${index} is outside a tree of ${size}`);
  let fn = index, sn = size - 1, r = leaf;
  for (const p of path) {
    if (sn === 0) throw new Error('the audit path is longer than the tree allows');
    if (fn % 2 === 1 || fn === sn) {
      r = await sha256(concat(Uint8Array.of(1), p, r));
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      }
    } else {
      r = await sha256(concat(Uint8Array.of(1), r, p));
    }
    fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
  }
  if (sn !== 0) throw new Error('the audit path is shorter than the tree needs');
  return r;
}

// openNote parses a C2SP signed note and verifies its signatures with
// keys (a list from parseVerifierKey): every line by a known key must
// verify, and at least one must (§5).
export async function openNote(note, keys) {
  const cut = note.lastIndexOf('\n\n');
  if (cut < 0) throw new Error('the checkpoint is not a signed note (no blank line)');
  const text = note.slice(0, cut + 1);
  const lines = note.slice(cut + 2).split('\n');
  if (lines.pop() !== '') throw new Error('the note does not end with a newline');
  let verifiedBy = [];
  for (const line of lines) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
    if (!m) throw new Error(`malformed signature line: ${line.slice(0, 80)}`);
    const raw = b64(m[2]);
    if (raw.length !== 68) continue; // not an Ed25519 signature: not ours
    const hash = hex(raw.subarray(0, 4));
    const k = keys.find((k) => k.name === m[1] && k.hash === hash);
    if (!k) continue; // unknown keys are ignored
    if (!(await ed25519Verify(k.key, raw.subarray(4), enc.encode(text)))) {
      throw new Error(`the checkpoint's signature by ${k.id} does not verify`);
    }
    verifiedBy.push(k.id);
  }
  if (verifiedBy.length === 0) throw new Error('no known key signed the checkpoint');
  // Origin, size and root, then C2SP extension lines (writ's
  // revocations line, docs/ledger-format.md §5.1), each non-empty, which
  // a verifier that does not know them ignores.
  const [origin, size, root, ...rest] = text.split('\n');
  if (rest.pop() !== '' || rest.some((l) => l === '') || !/^[1-9][0-9]*$/.test(size) || root === undefined) {
    throw new Error('the checkpoint text is not origin, size and root (and extension lines)');
  }
  return { origin, size: Number(size), root: b64(root), verifiedBy };
}

function validAt(k, t) {
  const ms = Date.parse(t);
  if (Number.isNaN(ms)) return false;
  if (ms < Date.parse(k.valid_from)) return false;
  if (k.valid_until && ms >= Date.parse(k.valid_until)) return false;
  if (k.revoked_at && ms >= Date.parse(k.revoked_at)) return false;
  return true;
}

// parseKeys parses the verifier keys of GET /v1/ledger/keys; it throws
// only when this browser cannot check Ed25519 at all.
export async function parseKeys(keys) {
  const parsed = [];
  for (const k of keys || []) {
    try { parsed.push({ ...(await parseVerifierKey(k.verifier_key)), meta: k }); } catch (e) {
      if (e.name === 'NotSupportedError') throw new Error('this browser has no Ed25519 in WebCrypto: signatures cannot be checked here');
      parsed.push({ id: String(k.id), bad: e.message });
    }
  }
  return parsed;
}

// sealSteps checks a record's hash and signature.
async function sealSteps(record, seal, parsed) {
  const steps = [];
  const got = 'sha256:' + hex(await sha256(seal.input));
  steps.push({ name: 'record hash', ok: got === seal.recordHash,
    detail: got === seal.recordHash ? `SHA-256 of the hash input is ${got}, as sealed`
      : `the record's bytes hash to ${got}, but its seal says ${seal.recordHash}: the record was changed after it was sealed` });
  const sig = (ok, detail) => steps.push({ name: 'signature', ok, detail });
  if (!seal.signature) {
    sig(false, 'the record is unsigned');
    return steps;
  }
  const k = parsed.find((k) => k.id === seal.signedBy);
  if (!k) sig(false, `the record is signed by ${seal.signedBy}, which is not a key of this ledger`);
  else if (k.bad) sig(false, k.bad);
  else {
    let raw;
    try { raw = b64(seal.signature); } catch { raw = new Uint8Array(); }
    const msg = enc.encode(`writ-record-signature-v1\n${seal.recordHash}\n`);
    const ok = raw.length === 64 && (await ed25519Verify(k.key, raw, msg));
    if (!ok) sig(false, `the Ed25519 signature by ${k.id} does not verify over the record hash`);
    else if (!validAt(k.meta, record.timestamp)) sig(false, `the signature by ${k.id} verifies, but the key was not valid at ${record.timestamp}`);
    else sig(true, `Ed25519 signature by ${k.id}, valid at ${record.timestamp}`);
  }
  return steps;
}

// splitRecordsPage returns the exact bytes of each record of a
// GET /v1/records answer, which splices every record's sealed bytes in
// unchanged: {"records":[R1,R2,…],"next_cursor":"…"}.
export function splitRecordsPage(bytes) {
  const open = enc.encode('{"records":[');
  if (indexOf(bytes, open) !== 0) throw new Error('not a page of records');
  const out = [];
  let i = open.length;
  while (bytes[i] !== 0x5d) { // ']'
    if (bytes[i] !== 0x7b) throw new Error(`a page of records has no record at byte ${i}`);
    let depth = 0, inString = false, j = i;
    for (; j < bytes.length; j++) {
      const c = bytes[j];
      if (inString) {
        if (c === 0x5c) j++; // skip the escaped byte
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) inString = true;
      else if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) { depth--; if (depth === 0) break; }
    }
    if (j >= bytes.length) throw new Error('a page of records ends inside a record');
    out.push(bytes.subarray(i, j + 1));
    i = j + 1;
    if (bytes[i] === 0x2c) i++;
  }
  return out;
}

// treeRoot is the RFC 6962 Merkle tree hash of leaf hashes.
export async function treeRoot(leaves) {
  if (leaves.length === 1) return leaves[0];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  const [l, r] = await Promise.all([treeRoot(leaves.slice(0, k)), treeRoot(leaves.slice(k))]);
  return sha256(concat(Uint8Array.of(1), l, r));
}

const genesis = 'sha256:' + '0'.repeat(64);

// verifyLedger checks a tenant's whole chain, as `writ ledger verify`
// checks the seal: every record's hash and signature, seq 1, 2, 3… with
// each prev_hash the record_hash before, and the root of the first
// checkpoint.size leaves against the latest signed checkpoint (its note,
// checkpointNote; none when the ledger has no checkpoint yet). records
// are the records' exact bytes in chain order. It returns {records,
// failures: [{seq, record_id, name, detail}], checkpoint}.
export async function verifyLedger({ records, keys, tenantID, checkpointNote }) {
  const parsed = await parseKeys(keys);
  const failures = [];
  const leaves = [];
  let prev = genesis;
  for (let i = 0; i < records.length; i++) {
    const bytes = records[i];
    let record, seal;
    try { record = JSON.parse(dec.decode(bytes)); seal = splitSeal(bytes); } catch (e) {
      failures.push({ seq: i + 1, record_id: '', name: 'seal', detail: e.message });
      leaves.push(await sha256(concat(Uint8Array.of(0), bytes)));
      continue;
    }
    const fail = (name, detail) => failures.push({ seq: seal.seq, record_id: record.record_id, name, detail });
    if (record.tenant_id !== tenantID) fail('tenant', `the record names tenant ${record.tenant_id}, not ${tenantID}`);
    if (seal.seq !== i + 1) fail('chain', `record ${i + 1} of the chain says seq ${seal.seq}: a record is missing or out of place`);
    if (seal.prevHash !== prev) fail('chain', `prev_hash is ${seal.prevHash}, but the record before has record_hash ${prev}`);
    for (const s of await sealSteps(record, seal, parsed)) if (!s.ok) fail(s.name, s.detail);
    prev = seal.recordHash;
    leaves.push(await sha256(concat(Uint8Array.of(0), bytes)));
  }
  let checkpoint = null;
  if (checkpointNote) {
    try {
      const cp = await openNote(checkpointNote, parsed);
      if (!cp.origin.endsWith('/' + tenantID)) throw new Error(`the checkpoint's origin ${cp.origin} is not this tenant's ledger`);
      if (cp.size > leaves.length) throw new Error(`the checkpoint covers ${cp.size} records, the ledger served ${leaves.length}: records are missing`);
      const root = await treeRoot(leaves.slice(0, cp.size));
      if (!equal(root, cp.root)) throw new Error(`the first ${cp.size} records give root ${hex(root).slice(0, 16)}…, but the signed checkpoint states ${hex(cp.root).slice(0, 16)}…`);
      checkpoint = { size: cp.size, ok: true, detail: `the root of the first ${cp.size} records is the one ${cp.verifiedBy.join(', ')} signed` };
    } catch (e) {
      checkpoint = { ok: false, detail: e.message };
      failures.push({ seq: 0, record_id: '', name: 'checkpoint', detail: e.message });
    }
  }
  return { records: records.length, failures, checkpoint };
}

// verifyRecord checks one record. bytes are the record exactly as served
// by GET /v1/records/{id}; proof is GET /v1/records/{id}/proof's answer
// (null when no checkpoint covers the record yet); keys is GET
// /v1/ledger/keys' list. It returns the steps, each {name, ok, detail};
// ok is null for a step that could not be taken.
export async function verifyRecord({ bytes, proof, keys, tenantID }) {
  const steps = [];
  const step = (name, ok, detail) => { steps.push({ name, ok, detail }); return ok; };
  if (!crypto.subtle) {
    step('WebCrypto', false, 'this page has no WebCrypto (it needs a secure context: https, or localhost)');
    return steps;
  }
  let record, seal;
  try {
    record = JSON.parse(dec.decode(bytes));
    seal = splitSeal(bytes);
  } catch (e) {
    step('seal', false, `the record cannot be read: ${e.message}`);
    return steps;
  }
  if (tenantID && record.tenant_id !== tenantID) {
    step('tenant', false, `the record names tenant ${record.tenant_id}, not ${tenantID}`);
  }
  let parsed;
  try { parsed = await parseKeys(keys); } catch (e) {
    // No Ed25519 here: the hash can still be checked.
    const [hashStep] = await sealSteps(record, seal, []);
    step(hashStep.name, hashStep.ok, hashStep.detail);
    step('signature', null, e.message);
    return steps;
  }
  for (const s of await sealSteps(record, seal, parsed)) step(s.name, s.ok, s.detail);

  if (!proof) {
    step('inclusion', null, 'no signed checkpoint covers this record yet');
    return steps;
  }
  let cp;
  try {
    cp = await openNote(proof.checkpoint.note, parsed);
    const originOK = cp.origin.endsWith('/' + record.tenant_id);
    step('checkpoint', originOK, originOK ? `checkpoint ${cp.origin} of ${cp.size} records, signed by ${cp.verifiedBy.join(', ')}`
      : `the checkpoint's origin ${cp.origin} is not this tenant's ledger`);
  } catch (e) {
    step('checkpoint', false, e.message);
    return steps;
  }
  try {
    if (proof.seq !== seal.seq) throw new Error(`the proof is for seq ${proof.seq}, the record is seq ${seal.seq}`);
    if (proof.tree_size !== cp.size) throw new Error(`the proof is against a tree of ${proof.tree_size}, the checkpoint states ${cp.size}`);
    const leaf = await sha256(concat(Uint8Array.of(0), bytes));
    const root = await rootFromInclusion(seal.seq - 1, cp.size, leaf, proof.proof.map(b64));
    if (!equal(root, cp.root)) {
      throw new Error(`the record's leaf (${hex(leaf).slice(0, 16)}…) and its audit path give root ${hex(root).slice(0, 16)}…, but the signed checkpoint states ${hex(cp.root).slice(0, 16)}…: the record's bytes are not the ones the ledger committed`);
    }
    step('inclusion', true, `leaf ${seal.seq - 1} of ${cp.size}: the audit path of ${proof.proof.length} hashes gives the signed root`);
  } catch (e) {
    step('inclusion', false, e.message);
  }
  return steps;
}
