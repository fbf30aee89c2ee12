// writ console. Every value from the API is put in the page as text
// (textContent, never innerHTML), and every decision is the API's: the
// console only shows what the API answers and forwards what people decide.
import { verifyRecord, verifyLedger, splitRecordsPage, sha256, hex } from './verify.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
let session = null;
let timer = null; // the inbox's poller

// h builds an element. attrs are set as attributes or properties; a
// string child is a text node, so data can never become markup.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// kids drops the empty children of a list (replaceChildren would write
// null as the text "null").
const kids = (nodes) => nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false);

function show(...nodes) {
  main.replaceChildren(...kids(nodes));
  const h1 = main.querySelector('h1');
  if (h1) { h1.setAttribute('tabindex', '-1'); h1.focus({ preventScroll: true }); }
}

// ApiError carries an RFC 9457 problem.
class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function fail(res) {
  let p = null;
  try { p = await res.json(); } catch { /* not a problem body */ }
  if (res.status === 401 && session) sessionEnded();
  throw new ApiError(res.status, p);
}

// sessionEnded stops every poller, forgets who was signed in and shows
// the sign-in page: an ended session polls nothing and shows no one.
function sessionEnded() {
  clearInterval(timer);
  timer = null;
  session = null;
  renderChrome();
  document.title = 'writ console';
  signInPage('Your session ended: sign in again.');
}

// api calls the API through the console's forwarder, for the session's
// tenant. raw returns the body's bytes.
async function api(method, path, { query, body, raw } = {}) {
  const q = new URLSearchParams();
  // The tenant is the session's: in the query of a read, in the body of
  // a decision (whose route takes no query).
  if (session && body === undefined) q.set('tenant_id', session.tenant_id);
  if (session && body !== undefined) body = { tenant_id: session.tenant_id, ...body };
  for (const [k, v] of Object.entries(query || {})) if (v !== '' && v !== undefined && v !== null) q.set(k, v);
  const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.headers['X-Writ-CSRF'] = session.csrf_token;
    init.body = JSON.stringify(body);
  }
  const res = await fetch(`/console/api${path}${q.size ? '?' + q : ''}`, init);
  if (!res.ok) await fail(res);
  return raw ? new Uint8Array(await res.arrayBuffer()) : res.json();
}

const has = (role) => session && session.roles.includes(role);

// home is the first page of a role: approvers decide, auditors read the
// records, an admin (who may do neither) sees the server.
const home = () => (has('approver') ? '#/inbox' : has('auditor') ? '#/records' : '#/server');
const fmtTime = (t) => (t ? new Date(t).toISOString().replace('.000Z', 'Z') : '');
const json = (v) => JSON.stringify(v, null, 2);

// ago says how long ago (or, for a time ahead, in how long) t is, in
// words; the exact time is on hover.
function relTime(t, now = Date.now()) {
  if (!t) return '';
  const d = Math.round((Date.parse(t) - now) / 1000);
  const a = Math.abs(d);
  const [n, unit] = a < 60 ? [a, 's'] : a < 3600 ? [Math.floor(a / 60), 'min'] : a < 86400 ? [Math.floor(a / 3600), 'h'] : [Math.floor(a / 86400), 'd'];
  const span = `${n} ${unit}`;
  return d <= 0 ? (a < 5 ? 'just now' : `${span} ago`) : `in ${span}`;
}
const timeEl = (t) => (t ? h('time', { datetime: t, title: fmtTime(t) }, relTime(t)) : '');

// Human words for the values people read most; the field's own name
// (and value) is on hover, for auditors.
const words = {
  DECIDED: 'decided', DEFERRED: 'deferred', REJECTED: 'rejected', ESCALATED: 'escalated', IN_FLIGHT: 'in flight', CLOSED: 'closed',
  allow: 'allowed', allow_with_warning: 'allowed, with a warning', replan_required: 'replan required', goal_fail_terminal: 'goal failed (terminal)',
  check: 'check', approval_decision: 'approval decision', execution_report: 'execution report', verdict: 'step verdict',
};
const human = (v) => (v === undefined || v === null ? '' : words[v] || String(v));
const labelled = (field, v, cls) => h('span', { title: `${field}: ${v}`, class: cls }, human(v));

function errorBox(e) {
  return h('p', { class: 'error', role: 'alert' }, e instanceof ApiError ? `${e.status}: ${e.message}` : String(e.message || e));
}

function dl(rows) {
  return h('dl', {}, rows.filter((r) => r && r[1] !== undefined && r[1] !== null && r[1] !== '').map(([k, v]) =>
    [h('dt', {}, k), h('dd', {}, v instanceof Node ? v : val(v))]));
}

// val renders any JSON value as nested lists of text.
function val(v, depth = 0) {
  if (v === null || v === undefined) return h('span', { class: 'muted' }, 'null');
  if (typeof v !== 'object') return typeof v === 'string' && /^(sha256|hmac-sha256):/.test(v) ? code(v) : String(v);
  if (depth > 6) return h('pre', {}, json(v));
  if (Array.isArray(v)) {
    if (!v.length) return h('span', { class: 'muted' }, 'none');
    if (v.every((x) => x === null || typeof x !== 'object')) return h('ul', { class: 'inline' }, v.map((x) => h('li', {}, val(x))));
    // A list of flat objects reads best as a table.
    const cols = [...new Set(v.flatMap((x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.keys(x) : ['\u0000'])))];
    const flat = (x) => x === null || typeof x !== 'object' || (Array.isArray(x) && x.every((y) => y === null || typeof y !== 'object'));
    if (!cols.includes('\u0000') && cols.length <= 6 && v.every((x) => Object.values(x).every(flat))) {
      return h('table', { class: 'mini' }, h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, v.map((x) => h('tr', {}, cols.map((c) => h('td', {}, x[c] === undefined ? '' : val(x[c])))))));
    }
    return h('ol', { class: 'items' }, v.map((x) => h('li', {}, val(x, depth + 1))));
  }
  const entries = Object.entries(v);
  if (!entries.length) return h('span', { class: 'muted' }, 'none');
  return h('dl', { class: 'nested' }, entries.map(([k, x]) => [h('dt', {}, k), h('dd', {}, val(x, depth + 1))]));
}

const code = (s) => h('code', {}, s);

// table builds a list table; each cell carries its column's name, which
// narrow screens show beside the value. rows are [attrs, cells].
function table(cols, rows) { return tableOf(cols, cols, rows); }

// tableOf is table with headers that are nodes (a sort link, say) and
// the names narrow screens show beside each value.
function tableOf(heads, names, rows) {
  return h('div', { class: 'tablewrap' }, h('table', { class: 'list' }, h('thead', {}, h('tr', {}, heads.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.map(([attrs, cells]) => h('tr', attrs, cells.map((c, i) => h('td', { 'data-label': names[i] }, c)))))));
}
const link = (href, text, attrs = {}) => h('a', { href, ...attrs }, text);

// ---- sign-in ----

async function signInPage(message) {
  let health = {};
  try { health = await (await fetch('/healthz')).json(); } catch { /* shown below */ }
  const dev = health.auth === 'disabled';
  const status = h('p', { role: 'status', class: 'error' }, message || '');
  const fields = dev
    ? [h('label', { for: 'tenant' }, 'Tenant'), h('input', { id: 'tenant', name: 'tenant', required: true, autocomplete: 'off' }),
       h('label', { for: 'subject' }, 'Your name (the approver named in decisions)'), h('input', { id: 'subject', name: 'subject', required: true })]
    : [h('label', { for: 'key' }, 'API key'), h('input', { id: 'key', name: 'key', type: 'password', required: true, autocomplete: 'off', spellcheck: 'false' })];
  const form = h('form', { class: 'card narrow', onsubmit: async (ev) => {
    ev.preventDefault();
    const body = dev ? { tenant_id: form.tenant.value, subject: form.subject.value } : { api_key: form.key.value };
    const res = await fetch('/console/session', { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    if (!dev) form.key.value = '';
    if (!res.ok) {
      let p = {}; try { p = await res.json(); } catch { /* empty */ }
      status.textContent = p.detail || `sign-in failed (${res.status})`;
      return;
    }
    session = await res.json();
    renderChrome();
    // A deep link opened before signing in is kept.
    const target = !location.hash || location.hash.startsWith('#/signin') ? home() : location.hash;
    if (location.hash === target) route(); else location.hash = target;
  } },
  h('h1', {}, 'Sign in to writ'),
  dev ? h('p', { class: 'warn' }, 'Development mode: this server authenticates no one. Name a tenant and yourself.') : h('p', {}, 'Sign in with your API key (approver, auditor or admin). It stays on the server, for this session only.'),
  fields, h('button', { type: 'submit' }, 'Sign in'), status);
  show(form);
}

async function signOut() {
  await fetch('/console/session', { method: 'DELETE', credentials: 'same-origin', headers: { 'X-Writ-CSRF': session?.csrf_token || '' } });
  session = null;
  renderChrome();
  location.hash = '#/signin';
}

function renderChrome() {
  const links = [];
  if (has('approver') || has('auditor')) links.push(['#/inbox', 'Approvals']);
  if (has('auditor')) links.push(['#/overview', 'Overview'], ['#/records', 'Records'], ['#/runs', 'Runs'], ['#/shadow', 'Shadow'], ['#/ledger', 'Ledger']);
  if (has('admin')) links.push(['#/keys', 'Keys']);
  if (session) links.push(['#/server', 'Server']);
  nav.replaceChildren(...links.map(([href, text]) => h('a', { href, 'data-nav': href }, text)));
  who.replaceChildren(...kids(session ? [
    h('span', {}, `${session.subject} · ${session.tenant_id} · ${session.roles.join(', ')}`),
    session.dev_mode ? h('span', { class: 'badge warn' }, 'dev mode') : null,
    h('button', { type: 'button', class: 'link', onclick: signOut }, 'Sign out')] : []));
}

// ---- approvals ----

// stateBadge shows a request's state by its name, whatever it is (a
// state this console does not know yet included).
const stateBadge = (s) => h('span', { class: `badge ${String(s || 'unknown').replace(/[^a-z_]/g, '')}` }, s || 'unknown');

// envelopes caches the request envelopes the inbox has read, by record:
// they are immutable (content-addressed), so each is read once.
const envelopes = new Map();
async function envelopeOf(recordID) {
  if (!envelopes.has(recordID)) {
    envelopes.set(recordID, api('GET', `/v1/records/${encodeURIComponent(recordID)}/envelope`).catch((e) => ({ error: e })));
  }
  return envelopes.get(recordID);
}

// summaryArgs picks what a person needs to tell requests apart: the
// top-level scalar arguments (already redacted by the pack), at most
// four, as "name value".
function summaryArgs(args) {
  return Object.entries(args || {}).filter(([, v]) => v === null || typeof v !== 'object').slice(0, 4)
    .map(([k, v]) => `${k} ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' · ');
}

const inboxSorts = { newest: 'newest first', oldest: 'oldest first', expiring: 'expiring first' };

async function inboxPage(params) {
  const state = params.get('state') || 'pending';
  const sort = inboxSorts[params.get('sort')] ? params.get('sort') : 'newest';
  const list = h('div', { 'aria-live': 'polite' });
  const go = (st, so) => { location.hash = `#/inbox?${new URLSearchParams({ state: st, sort: so })}`; };
  const filter = h('select', { id: 'state', onchange: () => go(filter.value, sort) },
    ['pending', 'approved', 'denied', 'withdrawn', 'expired', 'all'].map((s) => h('option', { value: s, selected: s === state }, s)));
  const order = h('select', { id: 'sort', onchange: () => go(state, order.value) },
    Object.entries(inboxSorts).map(([k, v]) => h('option', { value: k, selected: k === sort }, v)));
  show(h('h1', {}, 'Approvals'), h('p', { class: 'filters' }, h('label', { for: 'state' }, 'State '), filter, ' ', h('label', { for: 'sort' }, 'Order '), order,
    state === 'pending' ? h('span', { class: 'muted' }, ' · new requests appear here as they arrive') : null), list);
  const seen = new Set();
  let first = true;
  const load = async () => {
    let page;
    try { page = await api('GET', '/v1/approvals', { query: { state: state === 'all' ? '' : state, limit: 200 } }); } catch (e) {
      list.replaceChildren(errorBox(e)); return;
    }
    const by = { newest: (a, b) => Date.parse(b.created_at) - Date.parse(a.created_at), oldest: (a, b) => Date.parse(a.created_at) - Date.parse(b.created_at),
      expiring: (a, b) => Date.parse(a.expires_at) - Date.parse(b.expires_at) }[sort];
    // Pending first, then in the chosen order.
    const rows = page.approvals.slice().sort((a, b) => (b.state === 'pending') - (a.state === 'pending') || by(a, b));
    if (state === 'pending') document.title = rows.length ? `(${rows.length}) Approvals · writ` : 'Approvals · writ';
    if (!rows.length) { list.replaceChildren(h('p', { class: 'muted' }, state === 'pending' ? 'Nothing waits for a decision.' : 'No requests.')); return; }
    const envs = await Promise.all(rows.map((a) => envelopeOf(a.record_id)));
    list.replaceChildren(...kids([page.next_cursor ? h('p', { class: 'warn' }, `More than ${rows.length} requests: these are the oldest ${rows.length}. Narrow the list with the state, or decide these first.`) : null,
      table(['Asked', 'Tool', 'What is asked', 'Asked by', 'Expires', 'Gate', 'State'], rows.map((a, i) => {
      const fresh = !first && !seen.has(a.approval_id);
      seen.add(a.approval_id);
      const env = envs[i];
      const by = a.requested_by || {};
      return [{ class: fresh ? 'fresh' : '' }, [
        link(`#/approvals/${encodeURIComponent(a.approval_id)}`, h('time', { datetime: a.created_at, title: fmtTime(a.created_at) }, relTime(a.created_at))),
        env.error ? h('span', { class: 'bad', title: env.error.message }, '✗ envelope fails its check') : code(env.tool || ''),
        env.error ? '' : h('span', { class: 'summary', title: 'arguments (redacted)' }, summaryArgs(env.arguments)),
        [h('span', { class: 'id' }, by.actor_id || ''), by.delegated_user_id ? [' for ', h('span', { class: 'id' }, by.delegated_user_id)] : '',
          by.subject ? [' ', h('span', { class: 'id muted', title: 'the API key\'s subject' }, `(${by.subject})`)] : ''],
        a.state === 'pending' ? timeEl(a.expires_at) : '',
        [a.gate_id, a.terminal ? h('span', { class: 'badge' }, 'terminal') : null],
        stateBadge(a.state)]];
    }))]));
    first = false;
  };
  await load();
  // Poll while the tab is visible; a hidden tab catches up when shown.
  // One load at a time, should the API be slower than the interval.
  let busy = false;
  timer = setInterval(async () => {
    if (busy || document.visibilityState === 'hidden' || !session) return;
    busy = true;
    try { await load(); } finally { busy = false; }
  }, 2000);
}

// mine says whether the signed-in person asked for the request: separation
// of duties. The API refuses it anyway; the page says so before.
function mine(a) {
  const r = a.requested_by || {};
  return [r.actor_id, r.delegated_user_id, r.subject, r.key_id].filter(Boolean)
    .some((x) => x === session.subject || x === session.key_id);
}

async function approvalPage(id) {
  clearInterval(timer);
  timer = null;
  show(h('h1', {}, 'Approval request'), h('p', { class: 'muted' }, 'Loading…'));
  let a;
  try { a = await api('GET', `/v1/approvals/${encodeURIComponent(id)}`); } catch (e) { show(h('h1', {}, 'Approval request'), errorBox(e)); return; }
  let env = null, envBytes = null, envError = null;
  try { envBytes = await api('GET', `/v1/records/${encodeURIComponent(a.record_id)}/envelope`, { raw: true }); env = JSON.parse(new TextDecoder().decode(envBytes)); } catch (e) { envError = e; }
  // The envelope is what the approver reviews: bytes that do not hash to
  // the address the request pins (here, or as the server found) are
  // shown as failing, and nothing about them can be approved.
  let envCheck = null, tampered = null;
  if (envBytes) {
    const got = 'sha256:' + hex(await sha256(envBytes));
    envCheck = got === a.replay_packet_id
      ? h('span', { class: 'ok', id: 'envelope-check' }, `✓ the envelope hashes to the request's replay_packet_id`)
      : h('span', { class: 'bad', id: 'envelope-check' }, `✗ the envelope hashes to ${got}, not to the request's replay_packet_id ${a.replay_packet_id}`);
    if (got !== a.replay_packet_id) tampered = `the request envelope hashes to ${got}; the request pins ${a.replay_packet_id}`;
  } else if (envError) {
    tampered = envError.message;
    envCheck = h('span', { class: 'bad', id: 'envelope-check' }, '✗ not served: it fails its hash (above)');
  }
  const b = a.binding;
  const self = mine(a);
  const storyBox = h('section', { class: 'card', id: 'story', 'aria-live': 'polite' }, h('h2', {}, 'The decision\'s story'), h('p', { class: 'muted' }, 'Loading…'));
  const status = h('p', { role: 'status' });
  const reason = h('textarea', { id: 'reason', name: 'reason', rows: 3, required: true, 'aria-describedby': 'reason-help' });
  const decide = (verb) => async () => {
    if (!reason.value.trim()) { status.className = 'error'; status.textContent = 'A reason is required: it goes into the record.'; reason.focus(); return; }
    const body = { reason: reason.value };
    if (session.dev_mode) body.approver = session.subject;
    try {
      const after = await api('POST', `/v1/approvals/${encodeURIComponent(id)}/${verb}`, { body });
      status.className = 'ok';
      status.textContent = `${after.state}: decision record ${after.decision?.record_id || ''}`;
      setTimeout(() => approvalPage(id), 600);
    } catch (e) { status.className = 'error'; status.textContent = e.message; }
  };
  // Whether the decision is allowed is the API's to say; the page offers
  // it to approvers while the request is pending.
  const canDecide = has('approver') && a.state === 'pending';
  const decision = canDecide ? h('section', { class: 'card decide', 'aria-labelledby': 'decide-h' },
    h('h2', { id: 'decide-h' }, 'Decide'),
    self ? h('p', { class: 'error', id: 'sod' }, 'You asked for this request: separation of duties says someone else must decide it.') : null,
    tampered ? h('p', { class: 'error', id: 'no-approve' }, 'Approve is disabled: the request\'s envelope fails its integrity check, so what would be approved is not what was recorded. Deny it, and tell whoever runs this server (writ ledger verify names what changed).') : null,
    h('label', { for: 'reason' }, 'Reason (recorded with the decision)'), reason,
    h('p', { id: 'reason-help', class: 'muted' }, a.terminal
      ? 'This is an escalation: the automated path ended. Your decision is recorded; no check can redeem it.'
      : `Approving lets the agent's retry of exactly this call (same arguments digest, evidence and policy) proceed, ${a.allowance} time(s), until the approval expires.`),
    h('div', { class: 'buttons' },
      h('button', { type: 'button', id: 'approve', disabled: self || !!tampered, onclick: decide('approve') }, 'Approve'),
      h('button', { type: 'button', id: 'deny', class: 'danger', disabled: self, onclick: decide('deny') }, 'Deny')),
    status) : null;

  show(h('h1', {}, 'Approval request ', stateBadge(a.state)),
    h('p', { class: 'muted' }, code(a.approval_id)),
    h('div', { class: 'grid' },
      h('section', { class: 'card', 'aria-labelledby': 'what-h' }, h('h2', { id: 'what-h' }, 'What is being approved'),
        tampered ? h('p', { class: 'result bad', id: 'tampered', role: 'alert' }, '✗ What was asked cannot be shown as recorded: ', tampered) : null,
        dl([['Tool', env ? code(env.tool) : h('span', { class: 'bad' }, 'unknown: the envelope fails its check')],
          ['Arguments (redacted)', env ? h('pre', { id: 'arguments' }, json(env.arguments ?? {})) : ''],
          ['Decision key', b.decision_key],
          ['Arguments digest (keyed)', code(b.arguments_digest)],
          ['Redacted arguments digest', code(b.redacted_arguments_digest)],
          ['Evidence snapshot hash', code(b.evidence_snapshot_hash)],
          ['Evidence', env && env.evidence ? h('ul', {}, env.evidence.map((ev) => h('li', {}, `${ev.kind}:${ev.id}${ev.version ? '#' + ev.version : ''}${ev.hash ? ' ' + ev.hash : ''}`))) : ''],
          ['Proposed outputs', env && env.outputs ? env.outputs : ''],
          ['Context', env && env.context ? env.context : ''],
          ['Policy revision', (b.bundle_revisions || []).join(', ')],
          ['Request envelope', envCheck]])),
      h('section', { class: 'card', 'aria-labelledby': 'who-h' }, h('h2', { id: 'who-h' }, 'Who asked, and the gate'),
        dl([['Gate', a.gate_id], ['Approval mode', a.approval_mode_effective], ['Terminal', a.terminal ? 'yes: people take over, no check can redeem it' : 'no'],
          ['Routed to', a.target_hint],
          ['Asked by', `${a.requested_by.actor_id}${a.requested_by.delegated_user_id ? ' for ' + a.requested_by.delegated_user_id : ''}${a.requested_by.subject ? ' (key ' + a.requested_by.subject + ')' : ''}`],
          ['Asked at', fmtTime(a.created_at)], ['Expires', fmtTime(a.expires_at)],
          ['Subjects', (a.subject_ids || []).join(', ')],
          ['Why', h('ul', {}, (a.reasons || []).map((r) => h('li', {}, code(r.code), ' ', r.message)))],
          ['Check record', has('auditor') ? link(`#/records/${encodeURIComponent(a.record_id)}`, a.record_id) : a.record_id],
          ['Trace', a.trace_id]]))),
    decision,
    a.decision ? h('section', { class: 'card', 'aria-labelledby': 'dec-h' }, h('h2', { id: 'dec-h' }, 'Decision'),
      dl([['Decision', a.decision.decision], ['By', a.decision.approver], ['Reason', a.decision.reason], ['At', fmtTime(a.decision.decided_at)],
        ['Valid until', fmtTime(a.decision.valid_until)], ['Uses', `${a.uses} of ${a.allowance}`],
        ['Record', has('auditor') ? link(`#/records/${encodeURIComponent(a.decision.record_id)}`, a.decision.record_id) : a.decision.record_id]])) : null,
    storyBox,
    a.events && a.events.length ? h('section', { class: 'card' }, h('h2', {}, 'Events'),
      h('ol', {}, a.events.map((e) => h('li', {}, `${fmtTime(e.at)} ${e.kind}${e.actor ? ' by ' + e.actor : ''}${e.reason ? ': ' + e.reason : ''} `, code(e.record_id))))) : null);
  loadStory(a.decision_id, a.record_id, storyBox, null, 'the check that asked');
  // Someone else may decide it meanwhile: watch the request while it is
  // pending, and show the decision when it comes.
  if (a.state === 'pending') {
    const here = location.hash;
    timer = setInterval(async () => {
      if (document.visibilityState === 'hidden') return;
      try {
        const now = await api('GET', `/v1/approvals/${encodeURIComponent(id)}`);
        if (now.state !== 'pending' && location.hash === here) approvalPage(id);
      } catch { /* the next tick tries again */ }
    }, 3000);
  }
}

// ---- records ----

const statuses = ['', 'DECIDED', 'DEFERRED', 'REJECTED', 'ESCALATED', 'IN_FLIGHT', 'CLOSED'];
const outcomes = ['', 'allow', 'allow_with_warning', 'replan_required', 'goal_fail_terminal'];
const select = (id, label, options, value) => [h('label', { for: id }, label),
  h('select', { id, name: id }, options.map((o) => h('option', { value: o, selected: o === value }, o || 'any')))];

function toRFC3339(local) { return local ? new Date(local).toISOString() : ''; }

// recordColumns are the records list's columns: the sort key of each
// sortable one (seq is the server's order; the others sort the page).
const recordColumns = [['Seq', 'seq'], ['Time', 'seq'], ['Decision key', 'key'], ['Status', 'status'], ['Outcome', 'outcome'], ['Actor', null], ['Subjects', null]];
const recordFilters = ['decision_key_prefix', 'subject_prefix', 'status', 'outcome', 'approval_mode_effective', 'policy_decision_id', 'approver', 'trace_id', 'from', 'to', 'decision_key', 'subject_id'];
const approvalModes = ['', 'read_only', 'local_write', 'network', 'delegated', 'destructive'];

// recordsPage lists the tenant's records, newest first unless the URL
// says order=chain, filtered and sorted as the URL says: the URL holds
// the whole view, so it can be shared.
async function recordsPage(params) {
  const f = Object.fromEntries([...recordFilters, 'cursor', 'order', 'sort', 'dir'].map((k) => [k, params.get(k) || '']));
  const newest = f.order !== 'chain';
  const input = (id, label, attrs = {}) => [h('label', { for: id }, label), h('input', { id, name: id, value: f[id], ...attrs })];
  const view = (over) => {
    const q = new URLSearchParams();
    for (const k of [...recordFilters, 'order', 'sort', 'dir']) { const v = over[k] ?? f[k]; if (v) q.set(k, v); }
    return `#/records?${q}`;
  };
  const form = h('form', { class: 'filters card', onsubmit: (ev) => {
    ev.preventDefault();
    const over = {};
    for (const k of ['decision_key_prefix', 'subject_prefix', 'status', 'outcome', 'approval_mode_effective', 'policy_decision_id', 'approver', 'trace_id', 'from', 'to']) over[k] = form[k].value;
    location.hash = view(over);
  } },
  h('div', {}, input('decision_key_prefix', 'Decision key begins with', { placeholder: 'support.refund', 'aria-describedby': 'prefix-help' })),
  h('div', {}, input('subject_prefix', 'Subject begins with', { placeholder: 'customer:', 'aria-describedby': 'prefix-help' })),
  h('div', {}, select('status', 'Status', statuses, f.status)),
  h('div', {}, select('outcome', 'Outcome', outcomes, f.outcome)),
  h('div', {}, select('approval_mode_effective', 'Approval mode', approvalModes, f.approval_mode_effective)),
  h('div', {}, input('policy_decision_id', 'Rule (policy decision)', { placeholder: 'pd:…:deny', title: 'policy_decision_id' })),
  h('div', {}, input('approver', 'Approver', { title: 'approvals[].approver' })),
  h('div', {}, input('trace_id', 'Trace id')),
  h('div', {}, input('from', 'From', { type: 'datetime-local', step: 1 })),
  h('div', {}, input('to', 'To', { type: 'datetime-local', step: 1 })),
  h('div', {}, h('button', { type: 'submit', id: 'filter' }, 'Filter')),
  h('p', { id: 'prefix-help', class: 'muted small' }, 'Decision key and subject match by prefix, case-sensitive: support.refund finds support.refund.execute.'),
  f.decision_key || f.subject_id ? h('p', { class: 'small' }, 'Also exactly: ', [f.decision_key ? ['decision key ', code(f.decision_key), ' '] : null, f.subject_id ? ['subject ', code(f.subject_id), ' '] : null],
    link(view({ decision_key: '', subject_id: '' }), 'clear')) : null);
  const out = h('div', {});
  show(h('h1', {}, 'Records'), form, out);
  let page;
  const t0 = performance.now();
  try {
    page = await api('GET', '/v1/records', { query: { decision_key: f.decision_key, decision_key_prefix: f.decision_key_prefix, status: f.status, outcome: f.outcome,
      subject_id: f.subject_id, subject_prefix: f.subject_prefix, trace_id: f.trace_id, approval_mode_effective: f.approval_mode_effective,
      policy_decision_id: f.policy_decision_id, approver: f.approver, from: toRFC3339(f.from), to: toRFC3339(f.to), cursor: f.cursor,
      order: newest ? 'newest' : '', limit: 50 } });
  } catch (e) { out.replaceChildren(errorBox(e)); return; }
  let rows = page.records;
  const key = { key: (r) => r.decision_key, status: (r) => human(r.status), outcome: (r) => human(r.outputs?.outcome) }[f.sort];
  if (key) {
    rows = rows.slice().sort((a, b) => key(a).localeCompare(key(b)) || b.audit.seq - a.audit.seq);
    if (f.dir === 'desc') rows.reverse();
  }
  // A column's header sorts by it: seq and time in the server's order
  // (newest or oldest first), the others within this page.
  const header = ([name, sortKey]) => {
    if (!sortKey) return name;
    const active = sortKey === 'seq' ? !key : f.sort === sortKey;
    const dir = sortKey === 'seq' ? (newest ? 'descending' : 'ascending') : f.dir === 'desc' ? 'descending' : 'ascending';
    const next = sortKey === 'seq' ? view({ order: newest ? 'chain' : '', sort: '', dir: '' }) : view({ sort: sortKey, dir: active && f.dir !== 'desc' ? 'desc' : '' });
    return [link(next, name, { 'data-sort': sortKey, 'aria-sort': active ? dir : null }), active ? (dir === 'descending' ? ' ↓' : ' ↑') : ''];
  };
  const next = new URLSearchParams(params);
  if (page.next_cursor) next.set('cursor', page.next_cursor);
  out.replaceChildren(...kids([
    rows.length ? tableOf(recordColumns.map(header), recordColumns.map(([n]) => n), rows.map((r) => [{}, [
      String(r.audit?.seq ?? ''),
      timeEl(r.timestamp),
      link(`#/records/${encodeURIComponent(r.record_id)}`, r.decision_key),
      labelled('status', r.status),
      r.outputs?.outcome !== undefined ? link(`#/records/${encodeURIComponent(r.record_id)}`, labelled('outputs.outcome', r.outputs.outcome)) : '',
      // Ids never break mid-word (at a hyphen, say): the cell wraps
      // between them.
      [r.actor?.type ?? '', ' ', h('span', { class: 'id' }, r.actor?.id ?? '')],
      (r.subject_ids || []).flatMap((x, i) => [i ? ', ' : '', h('span', { class: 'id' }, x)])]])) : h('p', { class: 'muted' }, 'No records match.'),
    h('p', { class: 'pager' }, f.cursor ? link('#/records?' + new URLSearchParams([...params].filter(([k]) => k !== 'cursor')), newest ? 'Newest page' : 'First page') : null,
      page.next_cursor ? [' ', link(`#/records?${next}`, newest ? 'Older →' : 'Next page →')] : null,
      h('span', { class: 'muted small', id: 'records-timing', 'data-ms': String(Math.round(performance.now() - t0)) }, `${rows.length} records, ${newest ? 'newest' : 'oldest'} first`))]));
}

// The seed's field groups (002, "Anatomy"), each with the members of the
// record that hold it.
const groups = [
  ['Identity', ['record_id', 'decision_id', 'decision_key', 'decision_version', 'timestamp', 'status', 'supersedes', 'intent_ref', 'action_class']],
  ['Actor', ['actor']], ['Subject', ['subject_ids']], ['Inputs', ['inputs_refs']], ['Outputs', ['outputs']],
  ['Evidence', ['evidence_refs', 'history']], ['Policy', ['policy_decisions']], ['Approvals', ['approvals', 'approval_mode_effective']],
  ['Controls', ['controls_active']], ['Tool lineage', ['tool_lineage', 'execution']], ['Scores', ['scorecard']], ['Budget', ['budget_usage', 'metered_usage']],
  ['Lineage', ['lineage']], ['Trace', ['trace_id', 'replay']], ['Seal', ['audit', 'tenant_id']],
];

async function recordPage(id) {
  show(h('h1', {}, 'Record'), h('p', { class: 'muted' }, 'Loading…'));
  let bytes, rec;
  try {
    bytes = await api('GET', `/v1/records/${encodeURIComponent(id)}`, { raw: true });
    rec = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) { show(h('h1', {}, 'Record'), errorBox(e)); return; }
  const verdict = h('section', { class: 'card verify', id: 'verify', 'aria-live': 'polite', 'aria-labelledby': 'verify-h' }, h('h2', { id: 'verify-h' }, 'Verified in your browser'), h('p', { class: 'muted' }, 'Checking…'));
  const replayOut = h('div', { 'aria-live': 'polite' });
  const replay = h('section', { class: 'card' }, h('h2', {}, 'Replay'),
    h('p', { class: 'muted' }, 'Decide the record again on the inputs it pins, and compare.'),
    h('div', { class: 'buttons' },
      h('button', { type: 'button', id: 'replay', onclick: () => runReplay(`/v1/records/${encodeURIComponent(id)}/replay`, {}, replayOut) }, 'Replay this record'),
      h('button', { type: 'button', onclick: () => runReplay('/v1/replay', { trace_id: rec.trace_id }, replayOut) }, 'Replay its trace')),
    replayOut);
  const receiptBox = h('section', { class: 'card', id: 'receipt', 'aria-live': 'polite' }, h('h2', {}, 'Receipt'), h('p', { class: 'muted' }, 'Loading…'));
  const storyBox = h('section', { class: 'card', id: 'story', 'aria-live': 'polite' }, h('h2', {}, 'The decision\'s story'), h('p', { class: 'muted' }, 'Loading…'));
  const linksBox = h('section', { class: 'card', id: 'links', 'aria-live': 'polite' }, h('h2', {}, 'Corrections, retraction and feedback'), h('p', { class: 'muted' }, 'Loading…'));
  const used = new Set();
  const fields = groups.map(([name, keys]) => {
    const rows = keys.filter((k) => rec[k] !== undefined).map((k) => { used.add(k); return [k, rec[k]]; });
    return h('section', { class: 'group', 'aria-label': name }, h('h3', {}, name), rows.length ? dl(rows) : h('p', { class: 'muted' }, '—'));
  });
  const extra = Object.keys(rec).filter((k) => !used.has(k));
  show(h('h1', {}, 'Record ', labelled('status', rec.status, 'badge')),
    h('p', { class: 'muted' }, code(rec.record_id), ` · seq ${rec.audit?.seq} · ${rec.decision_key} · `, timeEl(rec.timestamp)),
    h('div', { class: 'record' },
      h('div', { class: 'fields' }, recordSummary(rec),
        h('details', { class: 'group', id: 'all-fields' }, h('summary', {}, 'Every field of the record: ids, hashes, seal and signature'),
          h('div', { class: 'fields' }, fields, extra.length ? h('section', { class: 'group' }, h('h3', {}, 'Other'), dl(extra.map((k) => [k, rec[k]]))) : null))),
      h('aside', { class: 'side' }, verdict, linksBox, receiptBox, storyBox, replay,
        h('section', { class: 'card' }, h('h2', {}, 'Related'),
          h('ul', { class: 'related' }, related(rec).map(([href, text]) => h('li', {}, link(href, text))))))));
  verify(id, bytes, verdict);
  // A check (it has an outcome) pins its request, with the evidence as
  // resolved; other records only repeat the check's refs.
  if (rec.outputs?.outcome !== undefined && (rec.evidence_refs || []).length) loadEvidence(id, document.getElementById('evidence'));
  loadLinks(id, linksBox);
  loadStory(rec.decision_id, id, storyBox, receiptBox);
}

// unresolved says, for each way a cited item can fail to resolve
// (writ.Resolution*), what an approver needs to know of it.
const unresolved = {
  unresolvable: 'not in the evidence store (the citation is the caller\'s word)',
  hash_mismatch: 'stored, but not with the hash the check cites',
  bad_signature: 'its issuer\'s signature does not verify',
  subject_mismatch: 'stored, but about another subject than the check\'s',
};

// loadEvidence shows each evidence item a check cited, as its stored
// request envelope pins it (GET /v1/records/{id}/envelope): the issuer,
// the provenance, when it was observed and whether writ resolved it.
async function loadEvidence(id, box) {
  let env;
  try { env = await api('GET', `/v1/records/${encodeURIComponent(id)}/envelope`); } catch (e) {
    box.append(h('p', { class: 'bad', id: 'evidence-error' }, '✗ The request envelope that pins how each item resolved cannot be read: ', e.message));
    return;
  }
  const resolved = (e) => {
    if (!e.resolution) return h('span', { class: 'muted', title: 'resolution' }, 'not resolved (sealed before writ resolved evidence)');
    if (e.resolution !== 'resolved') return h('span', { class: 'bad', title: `resolution: ${e.resolution}` }, `✗ ${unresolved[e.resolution] || 'not resolved: ' + human(e.resolution)}`);
    if (e.revoked_at) return h('span', { class: 'bad', title: 'revoked_at' }, '✓ resolved, revoked ', timeEl(e.revoked_at));
    return h('span', { class: 'ok', title: 'resolution: resolved' }, '✓ resolved');
  };
  box.replaceChildren(h('ul', { class: 'evidence' }, (env.evidence || []).map((e) => h('li', {},
    code(`${e.kind}:${e.id}`), ' · ', resolved(e), ' · ',
    h('span', { title: 'provenance' }, e.provenance || 'no provenance'), ' · ',
    h('span', { title: 'issuer' }, e.issuer ? ['issued by ', code(e.issuer)] : 'no issuer'), ' · ',
    e.observed_at ? h('span', { title: 'observed_at' }, 'observed ', timeEl(e.observed_at)) : h('span', { class: 'muted' }, 'no observation time')))));
}

// loadLinks shows what the ledger holds about a record besides the
// record, which never changes: the records that supersede it, its
// retraction, its feedback entries and its latest recorded replay.
async function loadLinks(id, box) {
  const title = box.querySelector('h2');
  let l;
  try { l = await api('GET', `/v1/records/${encodeURIComponent(id)}/links`); } catch (e) { box.replaceChildren(title, errorBox(e)); return; }
  const list = (ids, listID) => (ids || []).length ? h('ul', { id: listID }, ids.map((x) => h('li', {}, recordLink(x)))) : h('span', { id: listID, class: 'muted' }, 'none');
  box.replaceChildren(...kids([title,
    l.retracted ? h('p', { class: 'result bad', id: 'retracted' }, 'Retracted by ', recordLink(l.retracted_by), ': the record stays as sealed, and verifies') : null,
    dl([['Superseded by', list(l.superseded_by, 'superseded-by')],
      ['Feedback', list(l.feedback, 'feedback')],
      ['Last replay', l.replay ? h('span', { id: 'last-replay', class: l.replay.last_status === 'replay_equal' ? 'ok' : 'bad' }, l.replay.last_status, ' · ', timeEl(l.replay.at), ' · ', recordLink(l.replay.record_id)) : h('span', { id: 'last-replay', class: 'muted' }, 'never recorded')]])]));
}

// recordSummary says in words what a record decided, why, for whom, on
// what evidence and with whose approval: what people read first. The
// field each line comes from is on hover.
function recordSummary(rec) {
  const out = rec.outputs || {};
  const row = (label, field, value) => (value === '' || value === undefined || value === null ? null : [h('dt', { title: field }, label), h('dd', {}, value)]);
  const outcome = out.outcome !== undefined ? labelled('outputs.outcome', out.outcome, out.outcome === 'allow' ? 'ok' : out.outcome === 'allow_with_warning' ? 'warn' : 'bad') : null;
  const rules = (rec.policy_decisions || []).flatMap((p) => (p.rule_ids || []).map((r) => [r, p.verdict, p.policy_decision_id]));
  const filter = (k, v, label) => link(`#/records?${new URLSearchParams({ [k]: v })}`, label, { title: `every record with ${k} ${v}` });
  const actor = rec.actor || {};
  return h('section', { class: 'card summary', id: 'summary', 'aria-labelledby': 'summary-h' },
    h('h2', { id: 'summary-h' }, outcome ? ['Outcome: ', outcome] : ['A ', human(rec.kind) || 'record', ' · ', labelled('status', rec.status)]),
    h('dl', {}, kids([
      row('Decision', 'decision_key', code(rec.decision_key)),
      row('Status', 'status', labelled('status', rec.status)),
      row('Why', 'policy_decisions[].rule_ids', rules.length ? h('ul', { class: 'inline' }, rules.map(([r, v, pd]) => h('li', {}, pd ? filter('policy_decision_id', pd, code(r)) : code(r), v ? ` (${v})` : ''))) : 'no rule fired'),
      row('Who', 'actor', [h('span', { title: 'actor.type' }, String(actor.type || '').toLowerCase()), ' ', code(actor.id || ''),
        actor.delegated_user_id ? [' for ', code(actor.delegated_user_id)] : '']),
      row('About', 'subject_ids', (rec.subject_ids || []).length ? h('ul', { class: 'inline' }, rec.subject_ids.map((x) => h('li', {}, code(x)))) : 'no subject'),
      row('Evidence', 'evidence_refs', (rec.evidence_refs || []).length ? h('div', { id: 'evidence' }, h('ul', { class: 'inline' }, rec.evidence_refs.map((x) => h('li', {}, code(x))))) : 'none'),
      row('Approvals', 'approvals', (rec.approvals || []).length
        ? h('ul', {}, rec.approvals.map((a) => h('li', {}, a.approver ? filter('approver', a.approver, a.approver) : 'someone', ` at gate ${a.gate_id}`, a.decided_at ? [', ', timeEl(a.decided_at)] : '')))
        : rec.approval_mode_effective ? ['none yet (mode ', filter('approval_mode_effective', rec.approval_mode_effective, rec.approval_mode_effective), ')'] : 'none needed'),
      row('Execution', 'execution', rec.execution ? [rec.execution.status ? `reported ${human(rec.execution.status)}` : rec.execution.report_required ? 'permitted; a report is due' : 'permitted',
        rec.execution.valid_until ? [' · valid until ', timeEl(rec.execution.valid_until)] : ''] : ''),
      row('When', 'timestamp', [timeEl(rec.timestamp), h('span', { class: 'muted small' }, ` ${fmtTime(rec.timestamp)}`)]),
      row('Trace', 'trace_id', link(`#/records?trace_id=${encodeURIComponent(rec.trace_id)}`, 'every record of this trace')),
    ].flat())));
}

// loadStory fills box with the decision's whole story (GET
// /v1/decisions/{id}) and receiptBox, when given, with the receipt
// answered with the record recordID.
async function loadStory(decisionID, recordID, box, receiptBox, marker = 'this record') {
  let story;
  try { story = await api('GET', `/v1/decisions/${encodeURIComponent(decisionID)}`); } catch (e) {
    box.replaceChildren(h('h2', {}, 'The decision\'s story'), e instanceof ApiError && e.status === 500 && e.message !== 'internal error'
      ? h('p', { class: 'result bad', id: 'story-error', role: 'alert' }, '✗ The story cannot be shown: ', e.message)
      : errorBox(e));
    receiptBox?.remove();
    return;
  }
  const mineRec = story.records.find((r) => r.record_id === recordID);
  if (receiptBox) {
    if (mineRec?.receipt) receiptBox.replaceChildren(...kids([h('h2', {}, 'Receipt'), receiptView(mineRec.receipt)]));
    else receiptBox.remove(); // approval decisions and verdicts answer no receipt
  }
  const st = story.state;
  box.replaceChildren(...kids([h('h2', {}, 'The decision\'s story'),
    dl([['Decision', code(story.decision_id)], ['Status', labelled('status', st.status)], ['Outcome', st.outcome ? labelled('outcome', st.outcome) : ''], ['Safe to execute', st.safe_to_execute ? 'yes' : 'no'],
      ['Permit', st.permit_record_id ? recordLink(st.permit_record_id) : ''], ['Valid until', fmtTime(st.valid_until)],
      ['Execution', st.execution || (st.report_required ? 'not reported yet' : '')], ['In flight', st.in_flight ? 'yes: a report is due' : '']]),
    h('ol', { class: 'story', id: 'story-timeline' }, story.records.map((r) => h('li', { class: r.record_id === recordID ? 'current' : '' },
      h('p', {}, h('strong', {}, r.kind.replace('_', ' ')), ' · ', labelled('status', r.status), ` · seq ${r.seal?.seq ?? ''} · `, timeEl(r.timestamp)),
      h('p', {}, r.record_id === recordID ? [code(r.record_id), ` (${marker})`] : recordLink(r.record_id),
        r.receipt ? [' → ', receiptWord(r.receipt)] : null)))),
    story.approvals?.length ? [h('h3', {}, 'Approval requests'), h('ul', { class: 'related' }, story.approvals.map((a) => h('li', {},
      link(`#/approvals/${encodeURIComponent(a.approval_id)}`, a.gate_id), ' ', stateBadge(a.state),
      a.decision ? ` by ${a.decision.approver}: ${a.decision.reason}` : '')))] : null]));
}

const recordLink = (id) => (has('auditor') ? link(`#/records/${encodeURIComponent(id)}`, id) : code(id));

// receiptWord says in a word what a story entry answered: a check's
// outcome, or what an execution report acknowledged.
function receiptWord(r) {
  if (r.outcome !== undefined) return h('span', { class: r.safe_to_execute ? 'ok' : 'warn', title: `outcome: ${r.outcome}` }, human(r.outcome));
  if (r.execution !== undefined) return h('span', { title: `execution: ${r.execution}` }, `execution ${human(r.execution)}`);
  return h('span', { class: 'muted' }, r.state || r.status || 'answered');
}

// receiptView shows what the agent was told: a decision receipt, or the
// acknowledgement of an execution report (which has no outcome).
function receiptView(r) {
  if (r.outcome === undefined) {
    return [
      h('p', { class: 'result', id: 'receipt-summary' }, `Execution report acknowledged: ${human(r.execution ?? 'unknown')}${r.status ? ` · record ${human(r.status)}` : ''}`),
      dl([['Reported for', r.reported_for ? recordLink(r.reported_for) : ''],
        ['Findings', (r.findings || []).length ? h('ul', {}, r.findings.map((x) => h('li', {}, code(x.code), ' ', x.message))) : 'none']]),
      h('details', {}, h('summary', {}, 'The whole acknowledgement'), val(r)),
    ];
  }
  return [
    h('p', { class: r.safe_to_execute ? 'result ok' : 'result warn', id: 'receipt-summary' }, `${r.outcome} · ${r.safe_to_execute ? 'safe to execute' : 'not safe to execute'}${r.human_review_terminal ? ' · human review, terminal' : ''}`),
    dl([['Reasons', (r.reasons || []).length ? h('ul', {}, r.reasons.map((x) => h('li', {}, code(x.code), ' ', x.message))) : ''],
      ['Safe next steps', (r.safe_next_steps || []).length ? h('ul', {}, r.safe_next_steps.map((x) => h('li', {}, code(x.code), ' ', x.message))) : ''],
      ['What would change this', (r.what_would_change_this || []).length ? h('ul', {}, r.what_would_change_this.map((x) => h('li', {}, typeof x === 'string' ? x : val(x)))) : '']]),
    h('details', {}, h('summary', {}, 'The whole receipt'), val(r)),
  ];
}

// related links a record to what it belongs to: its trace, the run of a
// step verdict (subject run:<id>), the request and the check of an
// approval decision (outputs.approval_id, outputs.for_record).
function related(rec) {
  const links = [[`#/records?trace_id=${encodeURIComponent(rec.trace_id)}`, 'Every record of this trace →']];
  for (const s of rec.subject_ids || []) {
    if (typeof s === 'string' && s.startsWith('run:')) links.push([`#/runs/${encodeURIComponent(s.slice(4))}`, `Run ${s.slice(4)} →`]);
  }
  const out = rec.outputs || {};
  if (typeof out.approval_id === 'string') links.push([`#/approvals/${encodeURIComponent(out.approval_id)}`, `Approval request ${out.approval_id} →`]);
  if (typeof out.for_record === 'string') links.push([`#/records/${encodeURIComponent(out.for_record)}`, `The check that asked: ${out.for_record} →`]);
  if (typeof out.record_id === 'string' && /^(retraction|feedback|replay):/.test(rec.decision_key)) links.push([`#/records/${encodeURIComponent(out.record_id)}`, `The record it is about: ${out.record_id} →`]);
  return links;
}

async function verify(id, bytes, box) {
  const title = box.querySelector('h2');
  let proof = null, keys = [];
  try { keys = (await api('GET', '/v1/ledger/keys')).keys; } catch (e) { box.replaceChildren(title, errorBox(e)); return; }
  // The proof is asked for only once a checkpoint covers the record (its
  // tree holds the record's seq): a record after the latest checkpoint has
  // none yet, and the next checkpoint comes within the server's
  // checkpoint interval, so the page looks a few times.
  let seq = 0;
  try { seq = JSON.parse(new TextDecoder().decode(bytes)).audit?.seq || 0; } catch { /* verifyRecord names it */ }
  let cp = null;
  for (let attempt = 0; seq > 0 && attempt < 6; attempt++) {
    if (attempt) await new Promise((r) => setTimeout(r, 1000));
    try { cp = (await ledgerState()).checkpoint; } catch { break; }
    if (cp && cp.tree_size >= seq) {
      try { proof = await api('GET', `/v1/records/${encodeURIComponent(id)}/proof`, { query: { size: cp.tree_size } }); } catch { proof = null; }
      break;
    }
  }
  const steps = await verifyRecord({ bytes, proof, keys, tenantID: session.tenant_id });
  // A record before the tenant's first checkpoint waits for it: a normal
  // state, said in words.
  const waiting = steps.find((s) => s.name === 'inclusion' && s.ok === null);
  if (waiting && !proof) {
    waiting.detail = cp ? `the latest checkpoint covers ${cp.tree_size} records, this record is seq ${seq}: the next checkpoint will cover it`
      : `this record waits for the tenant's first checkpoint, signed within the server's checkpoint interval; open the page again to verify its inclusion`;
  }
  const failed = steps.filter((s) => s.ok === false);
  const pending = steps.some((s) => s.ok === null);
  const summary = failed.length
    ? h('p', { class: 'result bad', id: 'verify-result' }, `✗ Verification failed: ${failed.map((s) => s.name).join(', ')} (below, what was expected and what was found)`)
    : pending ? h('p', { class: 'result warn', id: 'verify-result' }, '… Signed, not yet covered by a checkpoint: ' + steps.find((s) => s.ok === null).detail)
      : h('p', { class: 'result ok', id: 'verify-result' }, '✓ Verified in your browser: seal, signature, inclusion and signed checkpoint');
  box.replaceChildren(...kids([title, summary, h('ul', { class: 'steps' }, steps.map((s) =>
    h('li', { class: s.ok === true ? 'ok' : s.ok === false ? 'bad' : 'warn' }, s.ok === true ? '✓ ' : s.ok === false ? '✗ ' : '… ', h('strong', {}, s.name), ': ', s.detail))),
  h('p', { class: 'muted small' }, 'Checked with WebCrypto (SHA-256, Ed25519) against the keys this server publishes at /v1/ledger/keys; compare them with writ ledger keys list to trust them.')]));
}

async function runReplay(path, query, out) {
  out.replaceChildren(h('p', { class: 'muted' }, 'Replaying…'));
  try {
    const res = await api('GET', path, { query });
    const results = Array.isArray(res.results) ? res.results : [res];
    out.replaceChildren(...results.map((r) => h('div', { class: 'replay' },
      h('p', { class: r.status === 'replay_equal' ? 'result ok' : 'result bad' }, `${r.status === 'replay_equal' ? '✓' : '✗'} ${r.record_id}: ${r.status}`, r.error ? ` — ${r.error}` : ''),
      r.differences?.length ? table(['Class', 'Path', 'Recorded', 'Replayed', 'Detail'], r.differences.map((d) => [{}, [
        d.class, code(d.path || d.input || ''),
        d.recorded !== undefined ? JSON.stringify(d.recorded) : '', d.replayed !== undefined ? JSON.stringify(d.replayed) : '', d.detail || '']])) : null)));
  } catch (e) { out.replaceChildren(errorBox(e)); }
}

// ---- runs ----

const runStatuses = ['', 'active', 'completed', 'aborted', 'escalated'];

// runsPage lists the tenant's runs, by workflow and state, a page at a
// time; runPage shows one.
async function runsPage(params) {
  const f = Object.fromEntries(['workflow_id', 'status', 'cursor'].map((k) => [k, params.get(k) || '']));
  const form = h('form', { class: 'filters card', onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const k of ['workflow_id', 'status']) if (form[k].value) q.set(k, form[k].value);
    location.hash = `#/runs?${q}`;
  } },
  h('div', {}, h('label', { for: 'workflow_id' }, 'Workflow'), h('input', { id: 'workflow_id', name: 'workflow_id', value: f.workflow_id })),
  h('div', {}, select('status', 'State', runStatuses, f.status)),
  h('div', {}, h('button', { type: 'submit', id: 'filter' }, 'Filter')));
  const open = h('form', { class: 'filters card', onsubmit: (ev) => { ev.preventDefault(); location.hash = `#/runs/${encodeURIComponent(open.run.value.trim())}`; } },
    h('div', {}, h('label', { for: 'run' }, 'Run id'), h('input', { id: 'run', name: 'run', required: true })),
    h('div', {}, h('button', { type: 'submit' }, 'Show')));
  const out = h('div', {});
  show(h('h1', {}, 'Runs'), form, out, open);
  let page;
  try {
    page = await api('GET', '/v1/runs', { query: { workflow_id: f.workflow_id, status: f.status, cursor: f.cursor, limit: 50 } });
  } catch (e) { out.replaceChildren(errorBox(e)); return; }
  const next = new URLSearchParams(params);
  if (page.next_cursor) next.set('cursor', page.next_cursor);
  out.replaceChildren(...kids([
    page.runs.length ? table(['Run', 'Workflow', 'State', 'Step', 'Attempts', 'Started', 'Last event'], page.runs.map((r) => [{}, [
      link(`#/runs/${encodeURIComponent(r.run_id)}`, r.run_id), `${r.workflow_id}@${r.workflow_version}`,
      h('span', { class: 'badge' }, r.status), r.current_step || '', String(r.attempts), timeEl(r.started_at), timeEl(r.last_event_at)]]))
      : h('p', { class: 'muted' }, page.next_cursor ? 'No runs match on this page: the next page looks further.' : 'No runs match.'),
    h('p', { class: 'pager' }, f.cursor ? link('#/runs?' + new URLSearchParams([...params].filter(([k]) => k !== 'cursor')), 'First page') : null,
      page.next_cursor ? [' ', link(`#/runs?${next}`, 'Next page →')] : null)]));
}

// stepsOf sums a run's history up per step: attempts, the last verdict
// and what it left.
function stepsOf(run) {
  const steps = new Map();
  for (const e of run.history) {
    if (!e.step_id) continue;
    const s = steps.get(e.step_id) || { step: e.step_id, attempts: 0, observed: 0, last: null };
    if (e.kind === 'step_attempt') { s.attempts++; s.last = e.verdict; }
    if (e.kind === 'call_observed') s.observed++;
    steps.set(e.step_id, s);
  }
  return [...steps.values()];
}

async function runPage(id) {
  const out = h('div', {});
  show(h('h1', {}, `Run ${id}`), h('p', {}, link('#/runs', '← All runs')), out);
  let run;
  try { run = await api('GET', `/v1/runs/${encodeURIComponent(id)}`); } catch (e) { out.replaceChildren(errorBox(e)); return; }
  out.replaceChildren(h('section', { class: 'card' }, h('h2', {}, `${run.workflow_id}@${run.workflow_version} `, h('span', { class: 'badge' }, run.status)),
    dl([['Run', code(run.run_id)], ['Current step', run.current_step], ['Pack', `${run.pack} ${run.pack_hash}`], ['Started', fmtTime(run.started_at)]])),
  h('section', { class: 'card' }, h('h2', {}, 'Steps'), table(['Step', 'Attempts', 'Calls observed', 'Last verdict', 'Retries left', 'Failed checks'], stepsOf(run).map((s) => [{}, [
    code(s.step), String(s.attempts), String(s.observed), s.last ? s.last.state : '', s.last ? String(s.last.attempts_left) : '',
    s.last ? (s.last.failed || []).map((c) => c.target).join(', ') : '']]))),
  h('h2', {}, 'History'),
  h('ol', { class: 'timeline' }, run.history.map((e) => h('li', { class: 'card' },
    h('p', {}, h('strong', {}, e.kind), e.step_id ? [' · step ', code(e.step_id)] : null, e.tool ? [' · tool ', code(e.tool)] : null, ` · ${fmtTime(e.at)}`,
      e.record_id && has('auditor') ? [' · ', link(`#/records/${encodeURIComponent(e.record_id)}`, 'record')] : null),
    e.verdict ? [
      dl([['Verdict', e.verdict.state], ['Attempts', `${e.verdict.attempts_used} used, ${e.verdict.attempts_left} left`], ['Retry prompt', e.verdict.retry_prompt],
        ['Next step', e.verdict.next_step], ['Escalate to', e.verdict.escalate_to]]),
      h('ul', { class: 'steps' }, (e.verdict.checks || []).map((c) => h('li', { class: c.passed ? 'ok' : 'bad' }, c.passed ? '✓ ' : '✗ ', `${c.kind} `, code(c.target),
        c.reject_message ? `: ${c.reject_message}` : '', c.detail ? ` (${c.detail})` : '')))] : null))));
}

// ---- shadow report ----

// shadowPage shows what the shadow pack (writ serve --shadow-pack)
// decided against what was enforced: outcome transitions, changed first.
async function shadowPage(params) {
  const f = Object.fromEntries(['decision_key', 'pack_hash', 'from', 'to'].map((k) => [k, params.get(k) || '']));
  const input = (id, label, attrs = {}) => [h('label', { for: id }, label), h('input', { id, name: id, value: f[id], ...attrs })];
  const form = h('form', { class: 'filters card', onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const k of ['decision_key', 'pack_hash', 'from', 'to']) if (form[k].value) q.set(k, form[k].value);
    location.hash = `#/shadow?${q}`;
  } },
  h('div', {}, input('decision_key', 'Decision key')),
  h('div', {}, input('pack_hash', 'Shadow pack hash')),
  h('div', {}, input('from', 'From', { type: 'datetime-local', step: 1 })),
  h('div', {}, input('to', 'To', { type: 'datetime-local', step: 1 })),
  h('div', {}, h('button', { type: 'submit', id: 'filter' }, 'Report')));
  const out = h('div', {});
  show(h('h1', {}, 'Shadow report'), h('p', { class: 'muted' }, 'What the shadow pack decided for each check, never enforced, against what was enforced.'), form, out);
  let rep;
  try {
    rep = await api('GET', '/v1/shadow/report', { query: { decision_key: f.decision_key, pack_hash: f.pack_hash, from: toRFC3339(f.from), to: toRFC3339(f.to), examples: 5 } });
  } catch (e) { out.replaceChildren(errorBox(e)); return; }
  if (!rep.decisions) {
    out.replaceChildren(h('p', { class: 'muted', id: 'shadow-summary' }, 'No shadow decisions in this window. Start writ serve with --shadow-pack DIR to decide every check under a candidate pack too.'));
    return;
  }
  // A rule id is bundle@version:rule: it may wrap after the colon, never
  // inside either part.
  const ruleId = (r) => { const i = r.lastIndexOf(':'); return i < 0 ? code(r) : h('code', {}, r.slice(0, i + 1), h('wbr', {}), r.slice(i + 1)); };
  const rules = (m) => Object.entries(m || {}).map(([r, n]) => h('li', {}, ruleId(r), ` × ${n}`));
  out.replaceChildren(
    h('section', { class: 'card' },
      h('p', { class: rep.changed ? 'result warn' : 'result ok', id: 'shadow-summary' }, `${rep.decisions} shadow decisions, ${rep.changed} with another outcome than enforced`),
      dl(rep.packs.map((p) => [`Shadow pack ${p.pack}`, h('span', {}, code(p.pack_hash), ` · ${p.decisions} decisions`)]))),
    table(['Enforced', 'Shadow', 'Count', 'Rules that fired in the shadow', 'Rules that no longer fire', 'Examples'], rep.transitions.map((t) => [{ class: t.from !== t.to ? 'changed' : '' }, [
      code(t.from), t.from !== t.to ? h('strong', {}, t.to) : code(t.to), String(t.count),
      h('ul', {}, rules(t.rules_fired)), h('ul', {}, rules(t.rules_cleared)),
      h('ul', {}, t.examples.map((id) => h('li', {}, link(`#/records/${encodeURIComponent(id)}`, id))))]])));
}

// ---- ledger health ----

async function ledgerPage() {
  const out = h('div', {});
  show(h('h1', {}, 'Ledger'), out);
  const parts = [];
  let records = null;
  try {
    const page = await api('GET', '/v1/records', { query: { limit: 1000 } });
    records = page.records.length;
    parts.push(h('section', { class: 'card' }, h('h2', {}, 'Records'), h('p', {}, page.next_cursor ? 'more than 1000 records' : `${page.records.length} records`)));
  } catch (e) { parts.push(errorBox(e)); }
  try {
    // A tenant without records has no checkpoint, nor has one whose first
    // record is younger than the checkpoint interval: the checkpoint is
    // asked for only once GET /v1/ledger/witnesses names one.
    if (records === 0) throw new Error('No checkpoint: the tenant has no records yet.');
    if (!(await ledgerState()).checkpoint) throw new Error('No checkpoint yet: the tenant\'s first checkpoint is signed within the server\'s checkpoint interval after its first record.');
    const cp = await api('GET', '/v1/ledger/checkpoint');
    const age = Math.max(0, Math.round((Date.now() - Date.parse(cp.issued_at)) / 1000));
    parts.unshift(h('section', { class: 'card' }, h('h2', {}, 'Latest checkpoint'),
      dl([['Records covered', String(cp.tree_size)], ['Root', code(cp.root_hash)], ['Issued', `${fmtTime(cp.issued_at)} (${age} s ago)`], ['Signed note', h('pre', {}, cp.note)]])));
  } catch (e) { parts.unshift(h('section', { class: 'card' }, h('h2', {}, 'Latest checkpoint'), e instanceof ApiError ? errorBox(e) : h('p', { class: 'muted' }, e.message))); }
  try {
    const { keys } = await api('GET', '/v1/ledger/keys');
    parts.push(h('section', { class: 'card' }, h('h2', {}, 'Signing keys'), table(['Key id', 'Valid from', 'Valid until', 'Revoked'], keys.map((k) => [{}, [
      code(k.id), fmtTime(k.valid_from), k.valid_until ? fmtTime(k.valid_until) : 'open',
      k.revoked_at ? `${fmtTime(k.revoked_at)} ${k.revoked_reason || ''}` : '']]))));
  } catch (e) { parts.push(errorBox(e)); }
  parts.push(ledgerVerifier());
  out.replaceChildren(...parts);
}

// ledgerVerifier checks the tenant's whole chain in the browser, and
// remembers this browser's last run, per tenant.
function ledgerVerifier() {
  const store = `writ-console-last-verification:${session.tenant_id}`;
  const result = h('div', { 'aria-live': 'polite', id: 'ledger-verify' });
  const last = () => {
    let v = null;
    try { v = JSON.parse(localStorage.getItem(store)); } catch { /* none */ }
    return v ? h('p', { id: 'last-verification', class: v.ok ? 'ok' : 'bad' },
      `Last verified in this browser: ${fmtTime(v.at)}, ${v.records} records, ${v.ok ? 'intact' : `${v.failures} finding(s)`}${v.size ? `, checkpoint of ${v.size}` : ''}.`)
      : h('p', { id: 'last-verification', class: 'muted' }, 'Not verified in this browser yet.');
  };
  let lastLine = last();
  const run = async () => {
    button.disabled = true;
    result.replaceChildren(h('p', { class: 'muted' }, 'Reading the chain…'));
    try {
      const records = [];
      let cursor = '';
      do {
        const page = await api('GET', '/v1/records', { query: { limit: 1000, cursor }, raw: true });
        records.push(...splitRecordsPage(page));
        cursor = JSON.parse(new TextDecoder().decode(page)).next_cursor || '';
        result.replaceChildren(h('p', { class: 'muted' }, `Read ${records.length} records…`));
      } while (cursor);
      const { keys } = await api('GET', '/v1/ledger/keys');
      let note = null;
      if (records.length && (await ledgerState()).checkpoint) note = (await api('GET', '/v1/ledger/checkpoint')).note;
      const r = await verifyLedger({ records, keys, tenantID: session.tenant_id, checkpointNote: note });
      const ok = r.failures.length === 0;
      localStorage.setItem(store, JSON.stringify({ at: new Date().toISOString(), records: r.records, ok, failures: r.failures.length, size: r.checkpoint?.size }));
      result.replaceChildren(...kids([
        h('p', { class: ok ? 'result ok' : 'result bad', id: 'ledger-result' }, ok
          ? `✓ ${r.records} records verified in your browser: every seal and signature, the chain from seq 1, ${r.checkpoint ? r.checkpoint.detail : 'no checkpoint yet'}`
          : `✗ ${r.failures.length} finding(s) in ${r.records} records`),
        r.failures.length ? h('ul', { class: 'steps' }, r.failures.slice(0, 50).map((f) => h('li', { class: 'bad' }, '✗ ',
          f.seq ? [`seq ${f.seq} `, f.record_id ? link(`#/records/${encodeURIComponent(f.record_id)}`, f.record_id) : ''] : '', ' ', h('strong', {}, f.name), ': ', f.detail))) : null]));
      const fresh = last();
      lastLine.replaceWith(fresh);
      lastLine = fresh;
    } catch (e) { result.replaceChildren(errorBox(e)); }
    button.disabled = false;
  };
  const button = h('button', { type: 'button', id: 'verify-ledger', onclick: run }, 'Verify the whole ledger in your browser');
  return h('section', { class: 'card' }, h('h2', {}, 'Verification'),
    h('p', { class: 'muted' }, 'Reads every record of the tenant and checks each seal and signature, the chain links, and the tree root against the latest signed checkpoint, with WebCrypto.'),
    lastLine, h('div', { class: 'buttons' }, button), result);
}

// ---- overview ----

// The chart library, uPlot (MIT, vendored from npm under assets/vendor
// with its licence), is loaded by the overview page only.
let uPlotModule = null;
async function uPlotLib() {
  if (!uPlotModule) {
    uPlotModule = (await import('./vendor/uPlot.esm.js')).default;
    document.head.append(h('link', { rel: 'stylesheet', href: '/console/assets/vendor/uPlot.min.css' }));
  }
  return uPlotModule;
}

const outcomeSeries = [['allow', '#1a7f37'], ['allow_with_warning', '#9a6700'], ['replan_required', '#0a58ca'], ['goal_fail_terminal', '#b42318'], ['', '#8c959f']];

// bucketsOf counts records by time bucket and outcome: the bucket is the
// smallest of a minute, five minutes, an hour or a day that keeps the
// chart to at most 60 of them.
function bucketsOf(records) {
  const ts = records.map((r) => Date.parse(r.timestamp) / 1000);
  const lo = Math.min(...ts), hi = Math.max(...ts);
  const step = [60, 300, 3600, 86400].find((s) => (hi - lo) / s <= 60) || 86400;
  // One empty bucket either side, so that a single one still has a time
  // axis around it.
  const start = Math.floor(lo / step) * step - step;
  const n = Math.floor((hi - start) / step) + 2;
  const xs = Array.from({ length: n }, (_, i) => start + i * step);
  const ys = outcomeSeries.map(() => new Array(n).fill(0));
  records.forEach((r, i) => {
    const k = outcomeSeries.findIndex(([o]) => o === (r.outputs?.outcome ?? ''));
    ys[k < 0 ? outcomeSeries.length - 1 : k][Math.floor((ts[i] - start) / step)]++;
  });
  return { step, data: [xs, ...ys] };
}

// ledgerState is where the tenant's ledger stands (GET
// /v1/ledger/witnesses): its latest checkpoint, null before the first,
// and each witness's lag. It answers 200 before the first checkpoint
// too, so pages ask it first and the checkpoint itself only once one
// exists: normal use sends no request that fails.
const ledgerState = () => api('GET', '/v1/ledger/witnesses');

// witnessesCard says how far each witness's cosignatures of the tenant's
// checkpoints lag behind the latest checkpoint.
function witnessesCard(ledger) {
  const ws = ledger.witnesses;
  const lagText = (w) => {
    if (w.conflict) return h('span', { class: 'bad' }, '✗ conflict: it saw another history of this log');
    if (!w.cosigned_size) return h('span', { class: ledger.checkpoint ? 'warn' : 'muted' }, ledger.checkpoint ? `nothing cosigned yet (${w.lag_records} records behind)` : 'no checkpoint to cosign yet');
    if (!w.lag_records) return h('span', { class: 'ok' }, '✓ up to date');
    return h('span', { class: 'warn' }, `${w.lag_records} ${w.lag_records === 1 ? 'record' : 'records'}, ${fmtSeconds(w.lag_seconds)} behind`);
  };
  return h('section', { class: 'card', id: 'witnesses' }, h('h2', {}, 'Witnesses'),
    ws.length
      ? [h('p', { class: 'muted small' }, `Each witness cosigns the checkpoints of ${session.tenant_id} it verified as extending the ones it saw before.`),
        table(['Witness', 'Cosigned', 'Lag'], ws.map((w) => [{}, [
          h('span', { title: `name, key ID ${w.key_id}` }, w.name),
          h('span', { title: 'cosigned_size, received_at' }, w.cosigned_size ? [`${w.cosigned_size} records, `, timeEl(w.received_at)] : 'none'),
          h('span', { title: 'lag_records, lag_seconds' }, lagText(w))]]))]
      : h('p', { class: 'muted', id: 'no-witnesses' }, 'No witnesses configured: this server submits the checkpoints to none (writ serve --witnesses).'));
}

// fmtSeconds says a duration in seconds in the largest unit that keeps it
// readable.
function fmtSeconds(s) {
  if (s < 1) return 'under a second';
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

// overviewPage pictures the tenant's recent decisions: how many of each
// outcome over time, the rules that block most, the approvals waiting and
// their age, the check latency and append lag this server measured for
// the tenant (GET /v1/stats/latency), and where verification stands. It
// reads the newest 1,000 records (GET /v1/records?order=newest).
async function overviewPage() {
  const out = h('div', { class: 'overview' });
  show(h('h1', {}, 'Overview'), out);
  let page, pending, latency, ledger;
  try {
    [page, pending, latency, ledger] = await Promise.all([api('GET', '/v1/records', { query: { order: 'newest', limit: 1000 } }),
      api('GET', '/v1/approvals', { query: { state: 'pending', limit: 200 } }), api('GET', '/v1/stats/latency'), ledgerState()]);
  } catch (e) { out.replaceChildren(errorBox(e)); return; }
  // The latest checkpoint: none for a tenant without records, nor before
  // the first checkpoint, signed within the server's checkpoint interval
  // (a second by default) after the tenant's first record.
  const cp = ledger.checkpoint;
  const recs = page.records;
  const chart = h('div', { id: 'decisions-chart', role: 'img', 'aria-label': 'Decisions over time by outcome' });
  const latencyChart = h('div', { id: 'latency-chart', role: 'img', 'aria-label': 'Check latency and append lag, p50 and p99, per minute' });
  const lw = latency.windows;
  const checks = lw.reduce((n, w) => n + w.check_latency.count, 0);
  // The worst p99 of the hour, to two significant figures at least.
  const worst = (f) => { const v = Math.max(0, ...lw.map((w) => w[f].p99_ms)); return v >= 10 ? v.toFixed(1) : v.toFixed(2); };
  // Rules that block most: the rules of a non-allow verdict in the
  // records whose outcome is not allow.
  const blocking = new Map();
  for (const r of recs) {
    const o = r.outputs?.outcome;
    if (o === undefined || o === 'allow') continue;
    for (const p of r.policy_decisions || []) {
      if (p.verdict === 'allow') continue;
      for (const id of p.rule_ids || []) blocking.set(id, (blocking.get(id) || 0) + 1);
    }
  }
  const top = [...blocking].sort((a, b) => b[1] - a[1]).slice(0, 8);
  const now = Date.now();
  const ages = (pending.approvals || []).map((a) => now - Date.parse(a.created_at));
  const band = (lo, hi) => ages.filter((x) => x >= lo && x < hi).length;
  let last = null;
  try { last = JSON.parse(localStorage.getItem(`writ-console-last-verification:${session.tenant_id}`)); } catch { /* none */ }
  out.replaceChildren(
    h('section', { class: 'card' }, h('h2', {}, `Decisions over time, by outcome`),
      h('p', { class: 'muted small', id: 'overview-span' }, recs.length
        ? `The newest ${recs.length} records${page.next_cursor ? ' (older ones are not counted)' : ''}, from ${fmtTime(recs[recs.length - 1].timestamp)} to ${fmtTime(recs[0].timestamp)}.`
        : 'No records yet.'),
      chart),
    h('section', { class: 'card', id: 'latency' }, h('h2', {}, 'Check latency and append lag'),
      h('p', { class: 'muted small', id: 'latency-span' }, lw.length
        ? `${checks} ${checks === 1 ? 'check' : 'checks'} of ${session.tenant_id} in the last hour, per minute, as this server measured them since ${fmtTime(latency.since)}: the check from its call to its answer (the record committed), the append from the record's queueing to its commit. The worst p99: check ${worst('check_latency')} ms, append ${worst('append_lag')} ms.`
        : `No check of ${session.tenant_id} in the last hour on this server (measuring since ${fmtTime(latency.since)}).`),
      latencyChart),
    h('div', { class: 'grid' },
      h('section', { class: 'card', id: 'blocking-rules' }, h('h2', {}, 'Rules that block most'),
        top.length ? h('table', { class: 'mini' }, h('tbody', {}, top.map(([id, n]) => h('tr', {}, h('td', {}, code(id)),
          h('td', {}, h('meter', { min: 0, max: top[0][1], value: n, 'aria-label': `${id}: ${n}` })), h('td', {}, String(n))))))
          : h('p', { class: 'muted' }, 'No rule blocked any of these records.')),
      h('section', { class: 'card', id: 'waiting' }, h('h2', {}, 'Approvals waiting'),
        h('p', { class: 'big' }, String(ages.length), pending.next_cursor ? '+' : ''),
        ages.length ? dl([['Oldest', `asked ${relTime(new Date(now - Math.max(...ages)).toISOString(), now)}`],
          ['Under an hour', String(band(0, 3600e3))], ['1 to 24 hours', String(band(3600e3, 86400e3))], ['Over a day', String(band(86400e3, Infinity))]])
          : h('p', { class: 'muted' }, 'Nothing waits for a decision.'),
        h('p', {}, link('#/inbox?sort=oldest', 'Oldest first →'))),
      h('section', { class: 'card', id: 'verification' }, h('h2', {}, `Verification of ${session.tenant_id}`),
        dl([['Latest checkpoint', cp ? h('span', {}, `${cp.tree_size} records, issued `, timeEl(cp.issued_at)) : 'none yet'],
          ['Verified in this browser', last ? h('span', {}, h('span', { class: last.ok ? 'ok' : 'bad' }, last.ok ? '✓ intact' : `✗ ${last.failures} finding(s)`), `, ${last.records} records, `, timeEl(last.at)) : 'not yet'],
        ]),
        h('p', {}, link('#/ledger', 'Verify the whole ledger →'))),
      witnessesCard(ledger)));
  if (!recs.length && !lw.length) return;
  const uPlot = await uPlotLib();
  if (lw.length) {
    // A gap where a window had no check (or no append); a log scale, so
    // that p50 and p99 both read.
    const ms = (w, f, q) => (w[f].count ? Math.max(w[f][q], 0.001) : null);
    const t = lw.map((w) => Date.parse(w.start) / 1000);
    // One empty minute either side, so that a single window still has a
    // time axis around it.
    const xs = [t[0] - latency.window_seconds, ...t, t[t.length - 1] + latency.window_seconds];
    const ys = [['check_latency', 'p50'], ['check_latency', 'p99'], ['append_lag', 'p50'], ['append_lag', 'p99']]
      .map(([f, q]) => [null, ...lw.map((w) => ms(w, f, `${q}_ms`)), null]);
    // eslint-disable-next-line no-new
    new uPlot({
      width: Math.max(320, latencyChart.clientWidth || 900), height: 220,
      scales: { x: { time: true }, y: { distr: 3 } },
      axes: [{}, { label: 'milliseconds (log scale)' }],
      series: [{}, { label: 'check p50', stroke: '#0a58ca', width: 2, points: { show: true, size: 6 } },
        { label: 'check p99', stroke: '#6f42c1', dash: [6, 4], width: 2, points: { show: true, size: 6 } },
        { label: 'append p50', stroke: '#1a7f37', width: 2, points: { show: true, size: 6 } },
        { label: 'append p99', stroke: '#b42318', dash: [6, 4], width: 2, points: { show: true, size: 6 } }],
    }, [xs, ...ys], latencyChart);
  }
  if (!recs.length) return;
  const { step, data } = bucketsOf(recs);
  const width = Math.max(320, chart.clientWidth || 900);
  // eslint-disable-next-line no-new
  new uPlot({
    width, height: 260,
    scales: { x: { time: true } },
    axes: [{}, { label: `records per ${({ 60: 'minute', 300: '5 minutes', 3600: 'hour', 86400: 'day' })[step]}` }],
    series: [{}, ...outcomeSeries.map(([o, stroke]) => ({ label: o ? human(o) : 'no outcome', stroke, width: 2, points: { show: true, size: 5 } }))],
  }, data, chart);
}

// ---- server ----

// serverPage shows what this server runs: the pack in force and its
// hash, the store and how callers are authenticated; every role may read
// it, and it is an admin's start page.
async function serverPage() {
  const out = h('div', {});
  show(h('h1', {}, 'Server'), out);
  let health;
  const rulesBox = h('section', { class: 'card', id: 'pack-rules' });
  try { health = await (await fetch('/healthz')).json(); } catch (e) { out.replaceChildren(errorBox(e)); return; }
  out.replaceChildren(
    h('section', { class: 'card', id: 'server' }, h('h2', {}, 'The pack in force'),
      dl([['Pack', health.pack ? code(health.pack) : 'none (this server serves the ledger only)'], ['Pack hash', health.pack_hash ? code(health.pack_hash) : ''],
        ['writ version', health.version], ['Store', health.store], ['Authentication', health.auth === 'disabled' ? 'none: development mode, loopback only' : 'API keys'],
        ['Status', health.status]])),
    h('section', { class: 'card' }, h('h2', {}, 'Your session'),
      dl([['Tenant', session.tenant_id], ['You', session.subject], ['Key', session.key_id ? code(session.key_id) : ''], ['Roles', session.roles.join(', ')],
        ['Session ends', timeEl(session.expires_at)]])),
    has('admin') ? h('section', { class: 'card' }, h('h2', {}, 'API keys'),
      h('p', {}, link('#/keys', 'Manage the API keys of ' + session.tenant_id + ' →'))) : null,
    rulesBox);
  // The pack's rules, bundle by bundle (GET /v1/pack).
  let p;
  try { p = await api('GET', '/v1/pack'); } catch (e) { rulesBox.replaceChildren(h('h2', {}, 'Rules'), errorBox(e)); return; }
  const rows = p.bundles.flatMap((b) => b.rules.map((r) => [{}, [code(`${b.bundle_id}@${b.version}`), h('span', { title: r.description || '' }, code(r.id)),
    labelled('effect', r.effect.replaceAll('_', ' ')), r.gate ? code(r.gate) : '', r.applies_to.length ? r.applies_to.join(', ') : 'every check']]));
  rulesBox.replaceChildren(h('h2', {}, `Rules of ${p.pack}`),
    h('p', { class: 'muted small' }, `${rows.length} ${rows.length === 1 ? 'rule' : 'rules'} in ${p.bundles.length} ${p.bundles.length === 1 ? 'bundle' : 'bundles'}; a rule's description is on hover.`),
    rows.length ? tableOf(['Bundle', 'Rule', 'Effect', 'Gate', 'Applies to'], ['Bundle', 'Rule', 'Effect', 'Gate', 'Applies to'], rows) : h('p', { class: 'muted' }, 'No rules.'));
}

// ---- API keys (admin) ----

const keyRoles = ['agent', 'approver', 'auditor', 'admin'];
const actorTypes = ['AGENT', 'HUMAN', 'SERVICE'];

// keysPage lists the tenant's API keys, creates one (its token shown
// once, here) and revokes one, through /v1/keys: an admin's work.
async function keysPage() {
  const out = h('div', {});
  const created = h('div', { id: 'key-created', 'aria-live': 'polite' });
  const form = h('form', { class: 'filters card', id: 'create-key', onsubmit: async (ev) => {
    ev.preventDefault();
    const roles = keyRoles.filter((r) => form[`role-${r}`].checked);
    const body = { subject: form.subject.value.trim(), roles, actor_type: form.actor_type.value };
    const actsFor = form.acts_for.value.split(',').map((x) => x.trim()).filter(Boolean);
    if (actsFor.length) body.acts_for = actsFor;
    if (form.expires.value) body.expires_at = toRFC3339(form.expires.value);
    try {
      const k = await api('POST', '/v1/keys', { body });
      form.reset();
      created.replaceChildren(h('section', { class: 'card token', role: 'status' },
        h('h2', {}, `Key ${k.key_id} for ${k.subject}`),
        h('p', {}, 'Its token, shown this once (writ keeps only its hash). Copy it now and give it to ', code(k.subject), ':'),
        h('pre', { id: 'new-token' }, k.token)));
      await listKeys();
    } catch (e) { created.replaceChildren(errorBox(e)); }
  } },
  h('div', {}, h('label', { for: 'subject' }, 'Who holds it'), h('input', { id: 'subject', name: 'subject', required: true, placeholder: 'maria', title: 'subject: the approver named in approvals' })),
  h('fieldset', { class: 'roles' }, h('legend', {}, 'Roles'), keyRoles.map((r) => h('label', { class: 'check' }, h('input', { type: 'checkbox', id: `role-${r}`, name: `role-${r}` }), ' ', r))),
  h('div', {}, h('label', { for: 'actor_type', title: 'actor_type: the actor of every check the key makes' }, 'Acts as'),
    h('select', { id: 'actor_type', name: 'actor_type' }, actorTypes.map((t) => h('option', { value: t, selected: t === 'AGENT' }, t)))),
  h('div', {}, h('label', { for: 'acts_for', title: 'acts_for: TYPE:ID patterns, * matches any run of characters (docs/trust.md)' }, 'May also act for (optional)'),
    h('input', { id: 'acts_for', name: 'acts_for', placeholder: 'AGENT:agt_*', spellcheck: 'false', 'aria-describedby': 'acts-for-help' })),
  h('div', {}, h('label', { for: 'expires' }, 'Expires (optional)'), h('input', { id: 'expires', name: 'expires', type: 'datetime-local' })),
  h('div', {}, h('button', { type: 'submit', id: 'create' }, 'Create key')),
  h('p', { id: 'acts-for-help', class: 'muted small' }, 'A key acts as its holder: the checks it makes name that actor. "May also act for" lists, comma-separated, the principals it may name instead, as TYPE:ID (* matches any run of characters): an orchestrator\'s SERVICE key acting for its agents, say AGENT:agt_*. Every such check is recorded as acting for them.'));
  show(h('h1', {}, 'API keys'), h('p', { class: 'muted' }, `The keys of tenant ${session.tenant_id}. A new key opens requests at once; a revoked one opens nothing from then on.`),
    form, created, out);
  async function listKeys() {
    let list;
    try { list = await api('GET', '/v1/keys'); } catch (e) { out.replaceChildren(errorBox(e)); return; }
    const revoke = (k) => {
      if (k.revoked_at) return labelled('revoked_at', 'revoked');
      if (k.key_id === session.key_id) return h('span', { class: 'muted' }, 'your key');
      const b = h('button', { type: 'button', class: 'secondary', title: `Revoke ${k.key_id}`, onclick: async () => {
        if (b.dataset.armed !== 'yes') { b.dataset.armed = 'yes'; b.textContent = 'Click again to revoke'; return; }
        try { await api('POST', `/v1/keys/${encodeURIComponent(k.key_id)}/revoke`, { body: {} }); await listKeys(); } catch (e) { out.prepend(errorBox(e)); }
      } }, 'Revoke');
      return b;
    };
    const state = (k) => (k.revoked_at ? ['revoked ', timeEl(k.revoked_at)] : k.expires_at && Date.parse(k.expires_at) < Date.now() ? 'expired' : 'active');
    const actsAs = (k) => [labelled('actor_type', k.actor_type || 'AGENT'),
      k.acts_for?.length ? h('span', { class: 'muted', title: `acts_for: ${k.acts_for.join(', ')}` }, ' and for ', k.acts_for.map((p, i) => [i ? ', ' : '', code(p)])) : ''];
    out.replaceChildren(list.keys.length ? tableOf(['Key', 'Who', 'Roles', 'Acts as', 'Created', 'Expires', 'State', 'Signature', ''], ['Key', 'Who', 'Roles', 'Acts as', 'Created', 'Expires', 'State', 'Signature', 'Action'],
      list.keys.map((k) => [{ 'data-key': k.key_id }, [code(k.key_id), k.subject, k.roles.join(', '), actsAs(k), timeEl(k.created_at), k.expires_at ? timeEl(k.expires_at) : 'never', state(k),
        labelled('signature', k.signature, k.signature === 'ok' ? 'ok' : 'bad'), revoke(k)]])) : h('p', { class: 'muted' }, 'No keys: this server runs in development mode.'));
  }
  await listKeys();
}

// ---- router ----

async function route() {
  clearInterval(timer);
  timer = null;
  document.title = 'writ console';
  const [path, qs] = (location.hash.slice(1) || '/').split('?');
  const params = new URLSearchParams(qs || '');
  const seg = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (!session) {
    try {
      // 200 either way: {"signed_in": false} before sign-in.
      const res = await fetch('/console/session', { credentials: 'same-origin' });
      const s = res.ok ? await res.json() : null;
      if (s?.signed_in) session = s;
    } catch { /* not signed in */ }
    renderChrome();
  }
  if (!session || seg[0] === 'signin') { await signInPage(); return; }
  const section = { approvals: '#/inbox', inbox: '#/inbox', records: '#/records', runs: '#/runs', shadow: '#/shadow', ledger: '#/ledger', server: '#/server', overview: '#/overview', keys: '#/keys' }[seg[0]];
  for (const a of nav.querySelectorAll('a')) {
    if (a.getAttribute('href') === section) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  // A page the role cannot read says so, and where to go instead.
  const needs = { keys: 'admin', overview: 'auditor', records: 'auditor', runs: 'auditor', shadow: 'auditor', ledger: 'auditor', inbox: ['approver', 'auditor'], approvals: ['approver', 'auditor'] }[seg[0]];
  if (needs && ![needs].flat().some(has)) {
    show(h('h1', {}, 'Not for your role'), h('p', { id: 'not-for-role' }, `This page needs the role ${[needs].flat().join(' or ')}; you signed in with ${session.roles.join(', ')}.`),
      h('p', {}, link(home(), 'Go to your start page →')));
    document.body.dataset.ready = location.hash;
    return;
  }
  try {
    switch (seg[0]) {
      case 'server': await serverPage(); break;
      case 'keys': await keysPage(); break;
      case 'overview': await overviewPage(); break;
      case 'approvals': if (seg[1]) { await approvalPage(seg[1]); break; } // falls through
      case 'inbox': await inboxPage(params); break;
      case 'records': if (seg[1]) await recordPage(seg[1]); else await recordsPage(params); break;
      case 'runs': if (seg[1]) await runPage(seg[1]); else await runsPage(params); break;
      case 'shadow': await shadowPage(params); break;
      case 'ledger': await ledgerPage(); break;
      default: location.hash = home(); return;
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return; // sessionEnded showed the sign-in page
    show(h('h1', {}, 'Error'), errorBox(e));
  }
  document.body.dataset.ready = location.hash;
}

window.addEventListener('hashchange', route);
route();
