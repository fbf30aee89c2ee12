// Browser tests of the writ console: real headless Chromium (Debian's
// chromium, driven by playwright-core) against a real `writ serve` on a
// loopback port chosen by the kernel, with API keys (so real sign-in), and
// the refund example pack. They build writ and the tamper tool with the
// Go toolchain, and take the screenshots of docs/console/.
//
//	cd console/e2e && npm ci && npm test
//
// WRIT_CHROMIUM overrides /usr/bin/chromium. WRIT_E2E_BIN_DIR names a
// directory holding writ, tamper and witnesses already built from this tree (the
// tests then build nothing). WRIT_E2E_SCREENSHOTS
// overrides where screenshots go (docs/console). WRIT_E2E_METRICS, when
// set, names a file the page-weight and time-to-interactive figures are
// written to.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const shots = process.env.WRIT_E2E_SCREENSHOTS || path.join(repo, 'docs/console');
const tmp = mkdtempSync(path.join(tmpdir(), 'writ-console-e2e-'));
const data = path.join(tmp, 'data');
const binDir = process.env.WRIT_E2E_BIN_DIR || tmp;
const bin = path.join(binDir, 'writ');
const tamperBin = path.join(binDir, 'tamper');
const witnessesBin = path.join(binDir, 'witnesses');
const metrics = {};
const consoleErrors = []; // every console error of every page closed

let server; // { proc, url }
let browser;
const keys = {};

function writ(...args) {
  return execFileSync(bin, args, { cwd: repo, encoding: 'utf8' });
}

// createKey creates a key of acme. An agent key acts as AGENT:subject
// and, as the requests of the examples name their own agents as actors
// (agt_support, ...), also for AGENT:agt_* (docs/trust.md).
function createKey(subject, roles, dir = data) {
  const actsFor = roles.split(',').includes('agent') ? ['--acts-for', 'AGENT:agt_*'] : [];
  const out = JSON.parse(writ('keys', 'create', '--data', dir, '--tenant', 'acme', '--subject', subject, '--role', roles, ...actsFor, '--json'));
  return out.token;
}

// startServer starts writ serve on 127.0.0.1:0 and waits for its address.
// Flags in extra come last, so they override the ones given here.
async function startServer(pack = 'examples/refund', dir = data, extra = []) {
  const proc = spawn(bin, ['serve', '--pack', pack, '--data', dir, '--addr', '127.0.0.1:0', '--checkpoint-interval', '200ms', '--log-level', 'warn', ...extra],
    { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timeout = setTimeout(() => reject(new Error(`writ serve did not start:\n${stderr}`)), 60_000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) { clearTimeout(timeout); resolve(m[1]); }
    });
    proc.on('exit', (code) => reject(new Error(`writ serve exited ${code}:\n${stderr}`)));
  });
  return { proc, url, stderr: () => stderr };
}

async function stopServer(srv = server) {
  const { proc } = srv;
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  proc.kill('SIGTERM');
  await exited;
  if (srv === server) server = null;
}

// fresh is when the evidence of every request was observed: recent, and
// the same for a check and its retry (an approval binds the evidence).
const fresh = new Date(Date.now() - 60_000).toISOString();

// request returns a check request of the refund example, decided now:
// its evidence is fresh, so that only the amount needs a person.
function request(over = {}) {
  const r = JSON.parse(readFileSync(path.join(repo, 'examples/refund/requests/refund-high-value-human-review.json'), 'utf8'));
  for (const e of r.evidence) e.observed_at = fresh;
  delete r.tenant_id; // the key's
  // inputs_refs merge too: the refund spec's tool_calls budget needs the
  // session the example names.
  return { ...r, ...over, arguments: { ...r.arguments, ...(over.arguments || {}) }, inputs_refs: { ...r.inputs_refs, ...(over.inputs_refs || {}) } };
}

async function call(method, p, key, body, base = server.url) {
  const res = await fetch(base + p, {
    method, headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}

const check = (key, body) => call('POST', '/v1/check', key, body);

// fileIDV puts on file, at the server at base, the identity verification
// the refunds cite (idv_771, about customer:cus_77, observed fresh): with
// an issuer key, or with none on a server in development mode, where the
// item names its tenant and issuer. A refund accepts no evidence that is
// only the agent's word.
async function fileIDV(base, key) {
  const item = { kind: 'identity_verification', id: 'idv_771', subject_ids: ['customer:cus_77'], attributes: { method: 'otp' }, observed_at: fresh };
  const res = key ? await call('POST', '/v1/evidence', key, item, base)
    : await (async () => {
      const r = await fetch(base + '/v1/evidence', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...item, tenant_id: 'acme', issuer: 'idv.acme.example' }) });
      return { status: r.status, body: await r.json() };
    })();
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

// page opens a fresh browser context (no cookies) at the console.
async function newPage(width = 1440, height = 900) {
  const ctx = await browser.newContext({ viewport: { width, height } });
  const page = await ctx.newPage();
  page.on('dialog', async (d) => { page.dialogs = (page.dialogs || 0) + 1; await d.dismiss(); });
  page.on('pageerror', (e) => { page.errors = [...(page.errors || []), e.message]; });
  // A Content-Security-Policy violation is a console error: the pages
  // must never need one.
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) page.errors = [...(page.errors || []), m.text()]; });
  // Every other console error is kept too: close() reports them.
  page.on('console', (m) => { if (m.type() === 'error') page.consoleErrors = [...(page.consoleErrors || []), `${m.text()} ${m.location()?.url || ''}`]; });
  return page;
}

// failedLoad matches the console error the browser logs for an answer of
// status (a number or a pattern) to a request whose URL matches path:
// "Failed to load resource: the server responded with a status of …".
const failedLoad = (status, path) => ({ status: String(status), path });

// close checks that the page raised no error, broke no CSP rule and
// logged no console error, and closes its context. Normal use logs none:
// not even the browser's "Failed to load resource" line for an answer of
// 4xx or 5xx (the session probe before sign-in answers 200, the record
// page asks for a proof only once a checkpoint covers the record). The
// only exceptions are the answers a test provokes on purpose (a refused
// sign-in, a revoked key, a tampered record, a refused form), which it
// names in allowed, as failedLoad(status, url pattern); they are written
// to the metrics.
async function close(page, allowed = []) {
  assert.deepEqual(page.errors || [], [], 'page errors and CSP violations');
  const provoked = (e) => allowed.some(({ status, path }) => {
    const m = /^Failed to load resource: the server responded with a status of (\d+) .*? (\S+)$/.exec(e);
    return m && new RegExp(`^(${status})$`).test(m[1]) && path.test(m[2]);
  });
  const others = (page.consoleErrors || []).filter((e) => !provoked(e));
  assert.deepEqual(others, [], 'console errors');
  if (page.consoleErrors?.length) consoleErrors.push(...page.consoleErrors);
  await assertReadable(page);
  // Accessibility basics of the page left open: every control has a
  // label, every button a name, every image an alternative.
  const unlabelled = await page.evaluate(() => [
    ...[...document.querySelectorAll('input, select, textarea')].filter((el) => !el.labels?.length && !el.getAttribute('aria-label')).map((el) => el.outerHTML),
    ...[...document.querySelectorAll('button')].filter((el) => !el.textContent.trim() && !el.getAttribute('aria-label')).map((el) => el.outerHTML),
    ...[...document.querySelectorAll('img')].filter((el) => !el.hasAttribute('alt')).map((el) => el.outerHTML),
  ]);
  assert.deepEqual(unlabelled, [], 'controls without a label or name');
  await page.context().close();
}

// brokenWords lists the words of list cells that the browser cut over
// two lines (a word whose text spans more than one line box), at the
// page's width. Narrow screens (under 760 px) stack the cells and may
// break long identifiers; wider ones must not.
async function brokenWords(page) {
  return page.evaluate(() => {
    if (window.innerWidth < 760) return [];
    const out = [];
    for (const td of document.querySelectorAll('table.list td, table.list th')) {
      const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        for (const m of n.data.matchAll(/\S{2,}/g)) {
          const r = document.createRange();
          r.setStart(n, m.index);
          r.setEnd(n, m.index + m[0].length);
          const lines = new Set([...r.getClientRects()].map((x) => Math.round(x.top)));
          if (lines.size > 1) out.push(m[0]);
        }
      }
    }
    return out;
  });
}

// assertReadable checks what a person reads on the page left open: no
// "undefined" or "null" shown for a missing value, and no word of a
// list cut mid-word.
async function assertReadable(page) {
  const text = await page.locator('body').textContent();
  assert.doesNotMatch(text, /\bundefined\b/, 'the page shows "undefined"');
  assert.deepEqual(await brokenWords(page), [], `words broken mid-cell at ${page.viewportSize().width} px`);
  // At 1440 px and wider (the screenshots' width), no list is wider than
  // the page gives it: nothing hides behind a scroll bar.
  const clipped = await page.evaluate(() => (window.innerWidth < 1440 ? [] : [...document.querySelectorAll('.tablewrap')]
    .filter((w) => w.scrollWidth > w.clientWidth + 1).map((w) => w.querySelector('th')?.textContent)));
  assert.deepEqual(clipped, [], `lists wider than the page at ${page.viewportSize().width} px`);
}

// signIn signs in at the console's start page; unless refused is set,
// it waits until the session's first page is shown.
async function signIn(page, key, base = server.url, refused = false) {
  await page.goto(base + '/console/');
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  if (!refused) await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

async function shot(page, name, fullPage = true) {
  // What goes in the docs is readable: no "undefined", no word broken
  // mid-cell, no list cut off.
  await assertReadable(page);
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage });
}

before(async () => {
  mkdirSync(shots, { recursive: true });
  if (!process.env.WRIT_E2E_BIN_DIR) {
    execFileSync('go', ['build', '-o', bin, './cmd/writ'], { cwd: repo, stdio: 'inherit' });
    execFileSync('go', ['build', '-o', tamperBin, './console/e2e/tamper'], { cwd: repo, stdio: 'inherit' });
    execFileSync('go', ['build', '-o', witnessesBin, './console/e2e/witnesses'], { cwd: repo, stdio: 'inherit' });
  }
  keys.maria = createKey('maria', 'approver');
  keys.olga = createKey('olga', 'auditor');
  keys.bot = createKey('support-bot', 'agent');
  keys.sam = createKey('sam', 'agent,approver');
  keys.ada = createKey('ada', 'admin');
  keys.idv = createKey('idv.acme.example', 'issuer');
  server = await startServer();
  await fileIDV(server.url, keys.idv);
  browser = await chromium.launch({
    executablePath: process.env.WRIT_CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    // launch() gives Chromium a fresh, temporary --user-data-dir of its
    // own (it refuses one passed in args).
  });
});

after(async () => {
  await browser?.close();
  if (server) await stopServer();
  if (process.env.WRIT_E2E_METRICS) writeFileSync(process.env.WRIT_E2E_METRICS, JSON.stringify({ ...metrics, console_errors: consoleErrors }, null, 2) + '\n');
  rmSync(tmp, { recursive: true, force: true });
});

test('an agent key cannot open the console', async () => {
  const page = await newPage();
  await signIn(page, keys.bot, server.url, true);
  await page.getByText('may not open the console').waitFor();
  await shot(page, 'signin-agent-refused');
  const res = await page.request.get(server.url + '/console/session');
  assert.equal(res.status(), 200, 'the session probe answers 200 signed in or not');
  assert.deepEqual(await res.json(), { signed_in: false }, 'a refused sign-in leaves no session');
  // The refusal itself is the one failed load: this test provokes it.
  await close(page, [failedLoad(403, /\/console\/session$/)]);
});

const approvals = {};

test('an approver approves a high-value refund, and the agent\'s retry is allowed', async () => {
  const first = await check(keys.bot, request({ idempotency_key: 'ik_e2e_approve' }));
  assert.equal(first.body.outcome, 'replan_required', JSON.stringify(first.body));
  const approvalID = first.body.metadata.approval_ids[0];
  assert.ok(approvalID, 'the check filed an approval request');
  approvals.approve = approvalID;

  const page = await newPage();
  const t0 = Date.now();
  await signIn(page, keys.maria);
  await page.locator(`a[href="#/approvals/${approvalID}"]`).waitFor();
  metrics.sign_in_to_inbox_ms = Date.now() - t0;
  // The inbox says what is asked: the tool, the arguments that tell
  // requests apart, who asks, how long ago, and until when.
  const row = page.locator('tbody tr', { has: page.locator(`a[href="#/approvals/${approvalID}"]`) });
  await row.getByText('payments.issue_refund').waitFor();
  const cells = await row.locator('td').allTextContents();
  assert.match(cells[0], /^(just now|\d+ s ago)$/, cells.join(' | '));
  assert.equal(cells[1], 'payments.issue_refund');
  assert.match(cells[2], /amount_inr 15000/);
  assert.match(cells[3], /agt_support.*support-bot/);
  assert.match(cells[4], /^in \d+ (s|min|h|d)$/);
  assert.match(await row.locator('time').first().getAttribute('title'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, 'the exact time on hover');
  await shot(page, 'inbox');

  // A new request appears without reloading.
  const second = await check(keys.bot, request({ idempotency_key: 'ik_e2e_deny', arguments: { amount_inr: 16000 }, outputs: { refund_amount_inr: 16000, currency: 'INR', order_id: 'ord_881' } }));
  approvals.deny = second.body.metadata.approval_ids[0];
  assert.ok(approvals.deny, JSON.stringify(second.body));
  await page.locator(`a[href="#/approvals/${approvals.deny}"]`).waitFor({ timeout: 10_000 });
  assert.equal(await page.title(), '(2) Approvals · writ', 'the tab says how many wait');

  await page.locator(`a[href="#/approvals/${approvalID}"]`).click();
  await page.getByRole('heading', { name: /What is being approved/ }).waitFor();
  const args = await page.locator('#arguments').textContent();
  assert.match(args, /"amount_inr": 15000/);
  assert.doesNotMatch(args, /4111 1111 1111 1111/, 'the card number is redacted');
  const body = await page.locator('main').textContent();
  for (const want of ['payments.issue_refund', 'hmac-sha256:', 'GATE_FINANCE_APPROVAL', 'destructive', 'POLICY_RETURNS_V1@1.0.0', 'agt_support', 'support-bot',
    'the envelope hashes to the request\'s replay_packet_id', 'identity_verification:idv_771']) {
    assert.ok(body.includes(want), `the approval page shows ${want}`);
  }
  await shot(page, 'approval');

  // A reason is required.
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.getByText('A reason is required').waitFor();
  await page.getByLabel(/Reason/).fill('Order and identity checked; amount matches the invoice.');
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.locator('.badge.approved').first().waitFor();
  await page.getByRole('heading', { name: 'Decision', exact: true }).waitFor();
  await shot(page, 'approval-approved');
  assert.equal(await page.title(), 'writ console');

  const retry = await check(keys.bot, request({ idempotency_key: 'ik_e2e_approve', approval_ids: [approvalID] }));
  assert.equal(retry.body.outcome, 'allow', JSON.stringify(retry.body.reasons));
  assert.equal(retry.body.safe_to_execute, true);
  approvals.allowedRecord = retry.body.metadata.record_id;
  await close(page);
});

test('an approver denies a request, and the retry is not allowed', async () => {
  const page = await newPage();
  await signIn(page, keys.maria);
  await page.locator(`a[href="#/approvals/${approvals.deny}"]`).click();
  await page.getByLabel(/Reason/).fill('The invoice does not match the amount.');
  await page.getByRole('button', { name: 'Deny' }).click();
  await page.locator('.badge.denied').first().waitFor();
  await shot(page, 'approval-denied');
  const retry = await check(keys.bot, request({ idempotency_key: 'ik_e2e_deny', arguments: { amount_inr: 16000 }, outputs: { refund_amount_inr: 16000, currency: 'INR', order_id: 'ord_881' }, approval_ids: [approvals.deny] }));
  assert.notEqual(retry.body.safe_to_execute, true, JSON.stringify(retry.body));
  await close(page);
});

test('separation of duties: who asked cannot approve', async () => {
  const asked = await check(keys.sam, request({ idempotency_key: 'ik_e2e_sod' }));
  const id = asked.body.metadata.approval_ids[0];
  const page = await newPage();
  await signIn(page, keys.sam);
  await page.locator(`a[href="#/approvals/${id}"]`).click();
  await page.getByText('You asked for this request').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Approve' }).isDisabled(), true);
  await shot(page, 'approval-own-request');
  // The API refuses it, whatever the page shows.
  const direct = await call('POST', `/v1/approvals/${id}/approve`, keys.sam, { reason: 'mine' });
  assert.equal(direct.status, 403);
  // Someone else decides it: the open page shows it without a reload.
  const other = await call('POST', `/v1/approvals/${id}/deny`, keys.maria, { reason: 'Not a refund we make.' });
  assert.equal(other.status, 200, JSON.stringify(other.body));
  await page.locator('.badge.denied').first().waitFor({ timeout: 10_000 });
  assert.match(await page.locator('main').textContent(), /Not a refund we make\./);
  await close(page);
});

test('untrusted text renders as text', async () => {
  const xss = '<img src=x onerror=alert(1)>';
  const asked = await check(keys.bot, request({ idempotency_key: 'ik_e2e_xss', arguments: { order_id: xss }, inputs_refs: { request: xss } }));
  const id = asked.body.metadata.approval_ids?.[0];
  assert.ok(id, JSON.stringify(asked.body));
  const page = await newPage();
  await signIn(page, keys.maria);
  await page.locator(`a[href="#/approvals/${id}"]`).click();
  await page.locator('#arguments').waitFor();
  assert.ok((await page.locator('#arguments').textContent()).includes(xss), 'the payload shows as text');
  assert.equal(await page.locator('main img').count(), 0, 'no element was made from it');
  await shot(page, 'approval-xss-as-text');
  await close(page);

  const audit = await newPage();
  await signIn(audit, keys.olga);
  await audit.goto(`${server.url}/console/#/records/${asked.body.metadata.record_id}`);
  await audit.locator('#verify-result').waitFor();
  assert.ok((await audit.locator('main').textContent()).includes(xss), 'the record page shows the payload as text');
  assert.equal(await audit.locator('main img').count(), 0);
  assert.equal(page.dialogs || 0, 0, 'no script ran');
  assert.equal(audit.dialogs || 0, 0, 'no script ran');
  await close(audit);
});

test('an auditor filters records, opens one and sees it verified in the browser; replay is equal', async () => {
  const page = await newPage();
  await signIn(page, keys.olga);
  await page.getByRole('heading', { name: 'Records' }).waitFor();
  await page.getByLabel('Decision key').fill('support.refund.execute');
  // The outcome filter is the API's: every row of the page has it.
  await page.getByLabel('Outcome').selectOption('replan_required');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(/outcome=replan_required/);
  await page.locator('tbody tr').first().waitFor();
  const shown = await page.locator('tbody tr td:nth-child(5)').allTextContents();
  assert.ok(shown.length >= 1 && shown.every((o) => o === 'replan required'), shown.join(','));
  assert.equal(await page.locator('tbody tr td:nth-child(5) span').first().getAttribute('title'), 'outputs.outcome: replan_required', 'the field name on hover');
  await page.getByLabel('Outcome').selectOption('');
  // The allowed retry is a permit awaiting its execution report.
  await page.getByLabel('Status').selectOption('IN_FLIGHT');
  await page.getByRole('button', { name: 'Filter' }).click();
  const link = page.locator(`a[href="#/records/${approvals.allowedRecord}"]`).first();
  await link.waitFor();
  assert.equal(await page.locator('tbody tr').count() >= 1, true);
  await shot(page, 'records');
  await link.click();
  const result = page.locator('#verify-result');
  await result.filter({ hasText: 'Verified in your browser' }).waitFor({ timeout: 15_000 });
  // Summary first: the outcome, why, who, evidence and approvals in
  // words; every field, hashes and seal folded below.
  const summary = await page.locator('#summary').textContent();
  for (const want of ['Outcome: allowed', 'agt_support', 'identity_verification:idv_771', 'maria at gate GATE_FINANCE_APPROVAL']) {
    assert.ok(summary.includes(want), `the summary says ${want}: ${summary}`);
  }
  assert.equal(await page.getByRole('heading', { name: 'Seal', exact: true }).isVisible(), false, 'the seal is folded');
  await page.locator('#all-fields > summary').click();
  for (const group of ['Identity', 'Actor', 'Subject', 'Inputs', 'Outputs', 'Evidence', 'Policy', 'Approvals', 'Controls', 'Tool lineage', 'Scores', 'Budget', 'Lineage', 'Trace', 'Seal']) {
    await page.getByRole('heading', { name: group, exact: true }).waitFor();
  }
  // The receipt beside it, and the decision's whole story: the check
  // that asked, the approval, the allowed retry, in chain order.
  await page.locator('#receipt').getByText('allow · safe to execute').waitFor();
  const story = page.locator('#story-timeline > li');
  await story.nth(2).waitFor();
  const kinds = await story.allTextContents();
  assert.deepEqual(kinds.map((k) => k.split(' · ')[0]), ['check', 'approval decision', 'check'], kinds.join('\n'));
  assert.match(kinds[0], /replan required/);
  assert.match(kinds[2], /this record.*allowed/);
  await page.locator('#story').getByText(/by maria: Order and identity checked/).waitFor();
  await page.getByRole('button', { name: 'Replay this record' }).click();
  await page.getByText(`${approvals.allowedRecord}: replay_equal`).waitFor({ timeout: 15_000 });
  // The screenshot shows the page as it opens: the summary, the fields
  // folded.
  await page.locator('#all-fields > summary').click();
  await shot(page, 'record');

  // Page weight and time to interactive of a cold record page.
  const cold = await newPage();
  await signIn(cold, keys.olga);
  await cold.getByRole('heading', { name: 'Records' }).waitFor();
  for (const [name, hash, ready] of [['inbox', '#/inbox', 'table.list, main p.muted'], ['record', `#/records/${approvals.allowedRecord}`, '#verify-result']]) {
    const m = await measure(cold, hash, ready);
    metrics[name] = m;
    assert.ok(m.bytes < 200_000, `${name} page weighs ${m.bytes} bytes`);
  }
  await close(cold);

  await page.goto(`${server.url}/console/#/ledger`);
  await page.getByRole('heading', { name: 'Signing keys' }).waitFor();
  await page.getByRole('button', { name: 'Verify the whole ledger in your browser' }).click();
  const whole = await page.locator('#ledger-result').textContent({ timeout: 15_000 });
  assert.match(whole, /✓ \d+ records verified in your browser/);
  assert.match(await page.locator('#last-verification').textContent(), /Last verified in this browser: .*intact/);
  await shot(page, 'ledger');
  await close(page);
});

// measure loads the console afresh at hash and returns the bytes
// transferred (document, assets and API answers, as the browser counts
// them) and the time from navigation to the page being usable.
async function measure(page, hash, readySelector) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  let bytes = 0;
  cdp.on('Network.loadingFinished', (e) => { bytes += e.encodedDataLength; });
  await page.goto('about:blank');
  const start = Date.now();
  await page.goto(`${server.url}/console/${hash}`);
  await page.locator(readySelector).first().waitFor();
  const ms = Date.now() - start;
  await cdp.detach();
  return { bytes, interactive_ms: ms };
}

test('an auditor filters by every seed query key: approver, rule and approval mode, kept in the URL', async () => {
  const page = await newPage(1440, 900);
  await signIn(page, keys.olga);
  await page.goto(`${server.url}/console/#/records/${approvals.allowedRecord}`);
  // The summary's approver and rule are links to the records that share them.
  const summary = page.locator('#summary');
  await summary.getByRole('link', { name: 'maria', exact: true }).click();
  await page.waitForURL(/approver=maria/);
  await page.locator('tbody tr').first().waitFor();
  assert.equal(await page.getByLabel('Approver').inputValue(), 'maria', 'the filter shows what the URL holds');
  const byMaria = await page.locator('tbody tr td:nth-child(3)').allTextContents();
  assert.ok(byMaria.length >= 2, `maria's approval decision and the retry it allowed: ${byMaria}`);
  const ids = await page.locator('tbody tr td:nth-child(3) a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
  assert.ok(ids.includes(`#/records/${approvals.allowedRecord}`), ids.join(' '));
  // Every record listed names maria as an approver (checked through the API).
  for (const href of ids) {
    const { body } = await call('GET', `/v1/records/${href.split('/').pop()}`, keys.olga);
    assert.ok(body.approvals.some((a) => a.approver === 'maria'), href);
  }
  // An approver no one is: nothing.
  await page.getByLabel('Approver').fill('nobody');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.getByText('No records match.').waitFor();
  // The approval mode filter, with the approver cleared.
  await page.getByLabel('Approver').fill('');
  const { body: rec } = await call('GET', `/v1/records/${approvals.allowedRecord}`, keys.olga);
  const mode = rec.approval_mode_effective;
  await page.getByLabel('Approval mode').selectOption(mode);
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(new RegExp(`approval_mode_effective=${mode}`));
  await page.locator('tbody tr').first().waitFor();
  const byMode = await call('GET', `/v1/records?approval_mode_effective=${mode}&order=newest&limit=50`, keys.olga);
  assert.equal(await page.locator('tbody tr').count(), byMode.body.records.length);
  assert.ok(byMode.body.records.every((r) => r.approval_mode_effective === mode));
  // The rule that asked for approval, from a record's summary.
  await page.goto(`${server.url}/console/#/records/${approvals.allowedRecord}`);
  const pd = rec.policy_decisions.find((p) => p.rule_ids.length).policy_decision_id;
  await summary.locator(`a[href="#/records?${new URLSearchParams({ policy_decision_id: pd })}"]`).first().click();
  await page.waitForURL(/policy_decision_id=/);
  await page.locator('tbody tr').first().waitFor();
  assert.equal(await page.getByLabel('Rule (policy decision)').inputValue(), pd);
  const byRule = await call('GET', `/v1/records?${new URLSearchParams({ policy_decision_id: pd, order: 'newest', limit: '50' })}`, keys.olga);
  assert.ok(byRule.body.records.length >= 1);
  assert.equal(await page.locator('tbody tr').count(), byRule.body.records.length);
  // The URL is the view: opened afresh, it shows the same filter.
  const shared = page.url();
  const other = await newPage(1440, 900);
  await signIn(other, keys.olga);
  await other.goto(shared);
  await other.locator('tbody tr').first().waitFor();
  assert.equal(await other.getByLabel('Rule (policy decision)').inputValue(), pd);
  await close(other);
  await shot(page, 'records-filtered');
  await close(page);
});

test('an auditor reads a verification-contract run: steps, attempts, checks and the retry prompt', async () => {
  // The storybook example pack has a workflow; it runs on a server of its own.
  const dir = path.join(tmp, 'storybook');
  const agent = createKey('frontend-bot', 'agent', dir);
  const auditor = createKey('olga', 'auditor', dir);
  const srv = await startServer('examples/storybook', dir);
  try {
    const started = await call('POST', '/v1/runs', agent, { workflow_id: 'ui.component.change', run_id: 'run_button_142', context: { component: 'Button', ticket: 'UI-142' } }, srv.url);
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const attempt = (step, file) => {
      const body = file ? JSON.parse(readFileSync(path.join(repo, 'examples/storybook/attempts', file), 'utf8')) : {};
      return call('POST', `/v1/runs/run_button_142/steps/${step}/attempts`, agent, { actor: { type: 'AGENT', id: 'agt_frontend' }, ...body }, srv.url);
    };
    assert.equal((await attempt('implement', 'implement.json')).body.state, 'accepted');
    const retry = await attempt('visual_check', 'visual-check-missing-evidence.json');
    assert.equal(retry.body.state, 'retry', JSON.stringify(retry.body));

    const page = await newPage();
    await signIn(page, auditor, srv.url);
    await page.getByRole('heading', { name: 'Records' }).waitFor();
    await page.getByRole('link', { name: 'Runs' }).click();
    // The records list names the run too, so wait for the runs page first.
    await page.getByRole('heading', { name: 'Runs', exact: true }).waitFor();
    // The list: the run, its state and how far it got; filtered by state.
    const row = page.locator('tbody tr', { hasText: 'run_button_142' });
    await row.waitFor();
    const cells = await row.locator('td').allTextContents();
    assert.deepEqual(cells.slice(0, 5), ['run_button_142', 'ui.component.change@1.0.0', 'active', 'visual_check', '2'], cells.join(' | '));
    await shot(page, 'runs');
    await page.getByLabel('State').selectOption('completed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByText('No runs match.').waitFor();
    await page.getByLabel('State').selectOption('active');
    await page.getByRole('button', { name: 'Filter' }).click();
    await row.waitFor();
    await page.getByLabel('Run id').fill('run_button_142');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('Visual verification was not executed.').waitFor();
    // From a step's verdict record back to its run.
    await page.locator('a', { hasText: 'record' }).last().click();
    await page.getByRole('link', { name: 'Run run_button_142 →' }).click();
    await page.getByText('Visual verification was not executed.').waitFor();
    const text = await page.locator('main').textContent();
    for (const want of ['ui.component.change', 'visual_check', '1 used, 2 left', 'open_simple_browser', 'The browser was not opened through writ.', retry.body.retry_prompt.slice(0, 40)]) {
      assert.ok(text.includes(want), `the run page shows ${want}`);
    }
    // The steps at a glance: attempts, the last verdict, retries left.
    const visual = await page.locator('tbody tr', { hasText: 'visual_check' }).locator('td').allTextContents();
    assert.deepEqual(visual.slice(0, 5), ['visual_check', '1', '0', 'retry', '2'], visual.join(' | '));
    await shot(page, 'run');
    await close(page);
  } finally {
    await stopServer(srv);
  }
});

test('an auditor reads the shadow pack\'s outcome transitions', async () => {
  // A candidate that lowers the approval threshold to 4,000 INR, served
  // in shadow beside the example pack.
  const cand = path.join(tmp, 'candidate');
  execFileSync('cp', ['-r', path.join(repo, 'examples/refund'), cand]);
  const rules = path.join(cand, 'policies/returns.yaml');
  writeFileSync(rules, readFileSync(rules, 'utf8').replace('args.amount_inr > 10000', 'args.amount_inr > 4000').replace('version: 1.0.0', 'version: 1.1.0'));
  const dir = path.join(tmp, 'shadow');
  const agent = createKey('support-bot', 'agent', dir);
  const auditor = createKey('olga', 'auditor', dir);
  const idv = createKey('idv.acme.example', 'issuer', dir);
  const proc = spawn(bin, ['serve', '--pack', 'examples/refund', '--shadow-pack', cand, '--data', dir, '--addr', '127.0.0.1:0', '--checkpoint-interval', '200ms', '--log-level', 'warn'],
    { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => { out += d; const m = /listening on (http:\/\/\S+)/.exec(out); if (m) resolve(m[1]); });
    proc.on('exit', (code) => reject(new Error(`writ serve --shadow-pack exited ${code}`)));
  });
  const srv = { proc, url };
  try {
    await fileIDV(url, idv);
    const small = request({ idempotency_key: 'ik_e2e_shadow_1', arguments: { amount_inr: 4200 } });
    small.outputs = { ...small.outputs, refund_amount_inr: 4200 };
    const allowed = await call('POST', '/v1/check', agent, small, url);
    assert.equal(allowed.body.outcome, 'allow', JSON.stringify(allowed.body));
    const asked = await call('POST', '/v1/check', agent, request({ idempotency_key: 'ik_e2e_shadow_2' }), url);
    assert.equal(asked.body.outcome, 'replan_required', JSON.stringify(asked.body));

    const page = await newPage();
    await signIn(page, auditor, url);
    await page.getByRole('link', { name: 'Shadow' }).click();
    await page.locator('#shadow-summary').filter({ hasText: '2 shadow decisions, 1 with another outcome than enforced' }).waitFor();
    const changed = await page.locator('tbody tr').first().locator('td').allTextContents();
    assert.equal(changed[0], 'allow');
    assert.equal(changed[1], 'replan_required');
    assert.equal(changed[2], '1');
    assert.match(changed[3], /R_HIGH_VALUE_REQUIRES_APPROVAL × 1/);
    assert.equal(changed[5], allowed.body.metadata.record_id);
    await shot(page, 'shadow');
    // An example opens its enforced record.
    await page.getByRole('link', { name: allowed.body.metadata.record_id }).click();
    await page.locator('#receipt').getByText('allow · safe to execute').waitFor();
    // Filtered to a decision key without shadow decisions: none.
    await page.goto(`${url}/console/#/shadow?decision_key=no.such.key`);
    await page.locator('#shadow-summary').filter({ hasText: 'No shadow decisions in this window' }).waitFor();
    await close(page);
  } finally {
    await stopServer(srv);
  }
});

test('development mode: sign in with a tenant and a name, no key, and approve', async () => {
  const dir = path.join(tmp, 'dev'); // no API keys: development mode
  const srv = await startServer('examples/refund', dir);
  try {
    await fileIDV(srv.url);
    const res = await fetch(srv.url + '/v1/check', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...request({ idempotency_key: 'ik_e2e_dev' }), tenant_id: 'acme' }) });
    const asked = await res.json();
    const id = asked.metadata.approval_ids[0];
    const page = await newPage();
    await page.goto(srv.url + '/console/');
    await page.getByText('Development mode').waitFor();
    await page.getByLabel('Tenant').fill('acme');
    await page.getByLabel(/Your name/).fill('maria');
    await shot(page, 'signin-dev');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator(`a[href="#/approvals/${id}"]`).click();
    await page.getByLabel(/Reason/).fill('Checked in development.');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.locator('.badge.approved').first().waitFor();
    assert.match(await page.locator('main').textContent(), /Bymaria/, 'the approver is the name signed in with');
    await close(page);

    // DNS rebinding: a site whose name resolves to 127.0.0.1 is
    // same-origin with itself; development mode refuses its Host.
    const port = new URL(srv.url).port;
    const rebound = await chromium.launch({
      executablePath: process.env.WRIT_CHROMIUM || '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--host-resolver-rules=MAP rebind.evil.example 127.0.0.1'],
    });
    try {
      const evil = await (await rebound.newContext()).newPage();
      const res = await evil.goto(`http://rebind.evil.example:${port}/console/`);
      assert.equal(res.status(), 403);
      const signInStatus = await evil.evaluate(async () => (await fetch('/console/session', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ tenant_id: 'acme', subject: 'mallory' }) })).status);
      assert.equal(signInStatus, 403, 'no session for a rebound host');
      const apiStatus = await evil.evaluate(async (aid) => (await fetch(`/v1/approvals/${aid}?tenant_id=acme`)).status, id);
      assert.equal(apiStatus, 403, 'nor the API');
      assert.match(await evil.locator('body').textContent(), /development mode answers only requests for localhost/);
    } finally {
      await rebound.close();
    }
  } finally {
    await stopServer(srv);
  }
});

test('the overview pictures decisions by outcome, the rules that block most, approvals waiting, latency and verification', async () => {
  const page = await newPage(1440, 900);
  await signIn(page, keys.olga);
  await page.getByRole('link', { name: 'Overview' }).click();
  await page.locator('#decisions-chart canvas').first().waitFor();
  assert.match(await page.locator('#overview-span').textContent(), /^The newest \d+ records, from /);
  // The high-value rule asked for approval in every refund above 10,000.
  assert.match(await page.locator('#blocking-rules').textContent(), /R_HIGH_VALUE_REQUIRES_APPROVAL/);
  assert.match(await page.locator('#waiting').textContent(), /Approvals waiting\d+/);
  assert.match(await page.locator('#verification').textContent(), /Latest checkpoint\d+ records, issued (just now|\d+ (s|min) ago)/);
  // Every outcome is named in the chart's legend.
  const legend = await page.locator('#decisions-chart .u-legend').textContent();
  for (const o of ['allowed', 'replan required', 'no outcome']) assert.ok(legend.includes(o), legend);
  // Check latency and append lag, p50 and p99, from the tenant's own
  // figures (GET /v1/stats/latency): the checks of this run are counted.
  await page.locator('#latency-chart canvas').first().waitFor();
  const lat = await call('GET', '/v1/stats/latency', keys.olga);
  assert.equal(lat.status, 200, JSON.stringify(lat.body));
  assert.equal(lat.body.tenant_id, 'acme');
  const counted = lat.body.windows.reduce((n, w) => n + w.check_latency.count, 0);
  const appended = lat.body.windows.reduce((n, w) => n + w.append_lag.count, 0);
  assert.ok(counted >= 5 && appended >= counted, `checks ${counted}, appends ${appended}`);
  for (const w of lat.body.windows) {
    for (const f of ['check_latency', 'append_lag']) assert.ok(w[f].p50_ms <= w[f].p99_ms && w[f].p99_ms <= w[f].max_ms, JSON.stringify(w));
  }
  assert.match(await page.locator('#latency-span').textContent(), /^\d+ checks of acme in the last hour, per minute/);
  const latLegend = await page.locator('#latency-chart .u-legend').textContent();
  for (const l of ['check p50', 'check p99', 'append p50', 'append p99']) assert.ok(latLegend.includes(l), latLegend);
  // Another tenant's figures are not an auditor's to read.
  assert.equal((await call('GET', '/v1/stats/latency?tenant_id=globex', keys.olga)).status, 403);
  // This server submits its checkpoints to no witness, and says so.
  assert.match(await page.locator('#witnesses').textContent(), /^WitnessesNo witnesses configured/);
  const wit = await call('GET', '/v1/ledger/witnesses', keys.olga);
  assert.equal(wit.status, 200, JSON.stringify(wit.body));
  assert.deepEqual(wit.body.witnesses, []);
  assert.ok(wit.body.checkpoint.tree_size > 0, JSON.stringify(wit.body));
  assert.equal((await call('GET', '/v1/ledger/witnesses?tenant_id=globex', keys.olga)).status, 403);
  await shot(page, 'overview');
  await close(page);
});

test('the overview shows each witness of the tenant\'s ledger and its lag, with a real witness', async () => {
  const dir = path.join(tmp, 'witnessed');
  const file = path.join(tmp, 'witnesses.json');
  mkdirSync(dir, { recursive: true });
  // The witnesses tool makes the data directory's signing key, builds
  // and starts one transparency-dev witness that knows acme's log, and
  // writes the --witnesses file.
  const wproc = spawn(witnessesBin, ['-data', dir, '-tenant', 'acme', '-out', file], { cwd: repo, stdio: ['pipe', 'pipe', 'pipe'] });
  let werr = '';
  wproc.stderr.on('data', (d) => { werr += d; });
  const wexited = new Promise((resolve) => wproc.on('exit', resolve));
  try {
    await new Promise((resolve, reject) => {
      let out = '';
      const timeout = setTimeout(() => reject(new Error(`the witness did not start:\n${werr}`)), 900_000);
      wproc.stdout.on('data', (d) => { out += d; if (out.includes('ready')) { clearTimeout(timeout); resolve(); } });
      wproc.on('exit', (code) => { clearTimeout(timeout); reject(new Error(`witnesses exited ${code}:\n${werr}`)); });
    });
    const auditor = createKey('olga', 'auditor', dir);
    const agent = createKey('support-bot', 'agent', dir);
    const srv = await startServer('examples/refund', dir, ['--witnesses', file, '--witness-poll', '200ms']);
    try {
      for (let i = 0; i < 3; i++) {
        const r = await call('POST', '/v1/check', agent, request({ idempotency_key: `ik_witnessed_${i}` }), srv.url);
        assert.equal(r.status, 200, JSON.stringify(r.body));
      }
      // The witness cosigns the newest checkpoint within a poll or two.
      let wit;
      for (let i = 0; i < 100; i++) {
        wit = await call('GET', '/v1/ledger/witnesses', auditor, undefined, srv.url);
        assert.equal(wit.status, 200, JSON.stringify(wit.body));
        const [w] = wit.body.witnesses;
        if (wit.body.checkpoint?.tree_size >= 3 && w?.cosigned_size === wit.body.checkpoint.tree_size) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const [w] = wit.body.witnesses;
      assert.equal(wit.body.witnesses.length, 1, JSON.stringify(wit.body));
      assert.equal(w.name, 'w1.example/witness');
      assert.match(w.key_id, /^[0-9a-f]{8}$/);
      assert.equal(w.cosigned_size, wit.body.checkpoint.tree_size, JSON.stringify(wit.body));
      assert.equal(w.lag_records, 0);
      assert.equal(w.lag_seconds, 0);
      const page = await newPage(1440, 900);
      await signIn(page, auditor, srv.url);
      await page.goto(srv.url + '/console/#/overview');
      await page.locator('#witnesses table').waitFor();
      const row = await page.locator('#witnesses tbody tr').first().textContent();
      assert.match(row, new RegExp(`^w1\\.example/witness${w.cosigned_size} records, .*✓ up to date$`));
      await close(page);
      // Stopped, the witness falls behind: the next checkpoints are not
      // cosigned, and the page says by how many records and how long.
      wproc.stdin.end();
      await wexited;
      const more = await call('POST', '/v1/check', agent, request({ idempotency_key: 'ik_witnessed_late' }), srv.url);
      assert.equal(more.status, 200, JSON.stringify(more.body));
      for (let i = 0; i < 100; i++) {
        wit = await call('GET', '/v1/ledger/witnesses', auditor, undefined, srv.url);
        if (wit.body.witnesses[0].lag_records > 0) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const behind = wit.body.witnesses[0];
      assert.ok(behind.lag_records > 0 && behind.lag_seconds >= 0, JSON.stringify(wit.body));
      const page2 = await newPage(1440, 900);
      await signIn(page2, auditor, srv.url);
      await page2.goto(srv.url + '/console/#/overview');
      await page2.locator('#witnesses table').waitFor();
      assert.match(await page2.locator('#witnesses tbody tr').first().textContent(), /\d+ records?, (under a second|\d+ s) behind$/);
      await close(page2);
    } finally {
      await stopServer(srv);
    }
  } finally {
    wproc.stdin.end();
    wproc.kill('SIGTERM');
    await wexited;
  }
});

test('a record before the tenant\'s first checkpoint waits for it, with no failed request', async () => {
  const dir = path.join(tmp, 'first-checkpoint');
  mkdirSync(dir, { recursive: true });
  const auditor = createKey('olga', 'auditor', dir);
  const agent = createKey('support-bot', 'agent', dir);
  // A checkpoint interval of an hour: the tenant's first record stays
  // without a checkpoint for the whole test.
  const srv = await startServer('examples/refund', dir, ['--checkpoint-interval', '1h']);
  try {
    const r = await call('POST', '/v1/check', agent, request({ idempotency_key: 'ik_first_record' }), srv.url);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const wit = await call('GET', '/v1/ledger/witnesses', auditor, undefined, srv.url);
    assert.equal(wit.status, 200, JSON.stringify(wit.body));
    assert.equal(wit.body.checkpoint, null);
    const page = await newPage(1440, 900);
    await signIn(page, auditor, srv.url);
    await page.goto(`${srv.url}/console/#/records/${encodeURIComponent(r.body.metadata.record_id)}`);
    await page.locator('#verify-result').waitFor({ timeout: 30_000 });
    assert.match(await page.locator('#verify-result').textContent(), /^… Signed, not yet covered by a checkpoint: this record waits for the tenant's first checkpoint/);
    await page.goto(srv.url + '/console/#/overview');
    await page.locator('#verification').waitFor();
    assert.match(await page.locator('#verification').textContent(), /Latest checkpointnone yet/);
    await page.goto(srv.url + '/console/#/ledger');
    await page.getByText('No checkpoint yet: the tenant\'s first checkpoint').waitFor();
    await page.getByRole('button', { name: 'Verify the whole ledger in your browser' }).click();
    assert.match(await page.locator('#ledger-result').textContent(), /^✓ 1 records verified in your browser: .*no checkpoint yet/);
    await close(page);
  } finally {
    await stopServer(srv);
  }
});

test('a record shows each cited evidence item: issuer, provenance, observed at, and whether it resolved', async () => {
  // An identity check stored by an issuer key, and a refund that cites
  // it beside the example's order, which no store holds.
  const issuer = createKey('idv-service', 'issuer');
  const observed = new Date(Date.now() - 30_000).toISOString();
  const added = await call('POST', '/v1/evidence', issuer, { kind: 'identity_verification', id: 'idv_e2e_issued', subject_ids: ['customer:cus_77'], attributes: { method: 'otp' }, observed_at: observed });
  assert.equal(added.status, 201, JSON.stringify(added.body));
  const cited = await check(keys.bot, request({ idempotency_key: 'ik_e2e_evidence_issued', evidence: [
    { kind: 'identity_verification', id: 'idv_e2e_issued', observed_at: observed },
    { kind: 'order', id: 'ord_881', version: 'snapshot_kg_2026_05_09_T0930', tenant_id: 'acme', observed_at: fresh }] }));
  assert.equal(cited.status, 200, JSON.stringify(cited.body));
  const page = await newPage();
  await signIn(page, keys.olga);
  await page.goto(`${server.url}/console/#/records/${encodeURIComponent(cited.body.metadata.record_id)}`);
  const items = page.locator('#evidence ul.evidence > li');
  await items.nth(1).waitFor();
  const [idv, order] = await items.allTextContents();
  assert.match(idv, /^identity_verification:idv_e2e_issued · ✓ resolved · issued · issued by idv-service · observed (just now|\d+ s ago)$/);
  assert.match(order, /^order:ord_881 · ✗ not in the evidence store \(the citation is the caller's word\) · claimed · no issuer · observed /);
  assert.equal(await items.nth(0).locator('[title="provenance"]').textContent(), 'issued', 'the field name on hover');
  await items.nth(1).scrollIntoViewIfNeeded();
  await shot(page, 'record-evidence', false);
  await close(page);
});

test('the chart library is uPlot as published, with its licence', () => {
  for (const [vendored, published] of [['uPlot.esm.js', 'dist/uPlot.esm.js'], ['uPlot.min.css', 'dist/uPlot.min.css'], ['uPlot.LICENSE', 'LICENSE']]) {
    assert.ok(readFileSync(path.join(repo, 'console/assets/vendor', vendored)).equals(readFileSync(path.join(here, 'node_modules/uplot', published))),
      `console/assets/vendor/${vendored} is not node_modules/uplot/${published}: copy it again after updating uplot`);
  }
});

test('an execution report reads in words: no "undefined" in its receipt panel or the story', async () => {
  const { status, body } = await call('GET', `/v1/records/${approvals.allowedRecord}`, keys.olga);
  assert.equal(status, 200);
  const rep = await call('POST', `/v1/decisions/${body.decision_id}/execution`, keys.bot, { status: 'succeeded', tool_result_id: 'tr_e2e_1', idempotency_key: 'ik_e2e_approve' });
  assert.equal(rep.status, 201, JSON.stringify(rep.body));
  approvals.report = rep.body.record_id;
  const page = await newPage();
  await signIn(page, keys.olga);
  await page.goto(`${server.url}/console/#/records/${approvals.report}`);
  await page.locator('#receipt-summary').filter({ hasText: 'Execution report acknowledged: succeeded' }).waitFor();
  const story = page.locator('#story-timeline > li');
  await story.nth(3).waitFor();
  const entries = await story.allTextContents();
  assert.match(entries[3], /execution report.*execution succeeded/, entries.join('\n'));
  for (const e of entries) assert.doesNotMatch(e, /undefined/, e);
  await close(page);
});

test('a retraction, feedback and a recorded replay show on the record page; the retracted record still verifies', async () => {
  const target = approvals.allowedRecord;
  const fb = await call('POST', `/v1/records/${target}/feedback`, keys.olga, { label: 'wrong_outcome', score: 0.25, comment: 'should have escalated', rule_change: 'ctxpack.support@1.1.0' });
  assert.equal(fb.status, 201, JSON.stringify(fb.body));
  const ret = await call('POST', `/v1/records/${target}/retract`, keys.olga, { reason: 'decided on a stale fraud score' });
  assert.equal(ret.status, 201, JSON.stringify(ret.body));
  assert.equal(ret.body.status, 'CLOSED');
  const again = await call('POST', `/v1/records/${target}/retract`, keys.olga, { reason: 'again' });
  assert.equal(again.status, 409, JSON.stringify(again.body));
  const rp = await call('POST', `/v1/records/${target}/replay`, keys.olga);
  assert.equal(rp.status, 201, JSON.stringify(rp.body));
  assert.equal(rp.body.record.outcome, 'replay_equal');
  const page = await newPage();
  await signIn(page, keys.olga);
  await page.goto(`${server.url}/console/#/records/${target}`);
  await page.locator('#retracted').filter({ hasText: ret.body.record_id }).waitFor();
  assert.match(await page.locator('#superseded-by').textContent(), new RegExp(ret.body.record_id));
  assert.match(await page.locator('#feedback').textContent(), new RegExp(fb.body.record_id));
  assert.match(await page.locator('#last-replay').textContent(), /replay_equal/);
  await page.locator('#verify-result').filter({ hasText: /Verified in your browser|not yet covered/ }).waitFor();
  await page.goto(`${server.url}/console/#/records/${ret.body.record_id}`);
  await page.locator('#summary').filter({ hasText: 'retracted' }).waitFor();
  await page.getByRole('link', { name: `The record it is about: ${target} →` }).waitFor();
  await close(page);
});

test('each role lands on a page it can use', async () => {
  // An admin key (no approver, no auditor role): the server page, with
  // the pack in force.
  const admin = await newPage(1440, 900);
  await signIn(admin, keys.ada);
  await admin.getByRole('heading', { name: 'The pack in force' }).waitFor();
  assert.match(admin.url(), /#\/server$/);
  assert.match(await admin.locator('#server').textContent(), /support@1\.0\.0.*sha256:[0-9a-f]{64}/s);
  // The pack's rules, from GET /v1/pack.
  const rules = admin.locator('#pack-rules');
  await rules.locator('tbody tr').first().waitFor();
  assert.match(await rules.locator('h2').textContent(), /^Rules of support@1\.0\.0$/);
  const pk = await call('GET', '/v1/pack', keys.ada);
  const want = pk.body.bundles.reduce((n, b) => n + b.rules.length, 0);
  assert.equal(await rules.locator('tbody tr').count(), want);
  assert.ok(want > 0);
  assert.match(await rules.textContent(), /R_HIGH_VALUE_REQUIRES_APPROVAL.*require approval.*GATE_FINANCE_APPROVAL/s);
  await shot(admin, 'server');
  // A page it cannot read says so, and links to its start page.
  await admin.goto(`${server.url}/console/#/records`);
  await admin.locator('#not-for-role').filter({ hasText: 'needs the role auditor; you signed in with admin' }).waitFor();
  await close(admin);
  // An approver typing #/records.
  const approver = await newPage();
  await signIn(approver, keys.maria);
  await approver.goto(`${server.url}/console/#/records`);
  await approver.locator('#not-for-role').filter({ hasText: 'needs the role auditor; you signed in with approver' }).waitFor();
  await approver.getByRole('link', { name: 'Go to your start page →' }).click();
  await approver.getByRole('heading', { name: 'Approvals' }).waitFor();
  await close(approver);
});

test('an admin creates a key (its token shown once), sees it work, and revokes it; the keys of another tenant stay apart', async () => {
  const admin = await newPage(1440, 900);
  await signIn(admin, keys.ada);
  await admin.getByRole('link', { name: 'Keys', exact: true }).click();
  await admin.getByRole('heading', { name: 'API keys' }).waitFor();
  // The keys of acme are listed, the admin's own without a revoke button.
  await admin.locator('tbody tr').first().waitFor();
  const listed = await admin.locator('tbody tr td:nth-child(2)').allTextContents();
  for (const who of ['maria', 'olga', 'ada']) assert.ok(listed.includes(who), listed.join(','));
  await admin.getByLabel('Who holds it').fill('nina');
  await admin.getByLabel('approver').check();
  await admin.getByLabel('auditor').check();
  await admin.getByRole('button', { name: 'Create key' }).click();
  const token = (await admin.locator('#new-token').textContent({ timeout: 15_000 })).trim();
  assert.match(token, /^writ_/);
  const row = admin.locator('tbody tr', { hasText: 'nina' });
  await row.waitFor();
  assert.match(await row.textContent(), /approver, auditor.*AGENT.*active.*ok/s);
  // An orchestrator's SERVICE key that may act for the agents: the form
  // sets actor_type and acts_for, the list shows them, the API holds them.
  await admin.getByLabel('Who holds it').fill('orchestrator');
  await admin.getByLabel('agent', { exact: true }).check();
  await admin.getByLabel('Acts as').selectOption('SERVICE');
  await admin.getByLabel(/May also act for/).fill('AGENT:agt_*, AGENT:bot_7');
  await admin.getByRole('button', { name: 'Create key' }).click();
  await admin.locator('#key-created h2', { hasText: 'orchestrator' }).waitFor({ timeout: 15_000 });
  const orch = admin.locator('tbody tr', { hasText: 'orchestrator' });
  await orch.waitFor();
  const orchCells = await orch.locator('td').allTextContents();
  assert.equal(orchCells[2], 'agent');
  assert.equal(orchCells[3], 'SERVICE and for AGENT:agt_*, AGENT:bot_7', orchCells.join(' | '));
  assert.equal(await orch.locator('td:nth-child(4) span').first().getAttribute('title'), 'actor_type: SERVICE', 'the field name on hover');
  const orchKey = (await call('GET', '/v1/keys', keys.ada)).body.keys.find((k) => k.subject === 'orchestrator');
  assert.equal(orchKey.actor_type, 'SERVICE');
  assert.deepEqual(orchKey.acts_for, ['AGENT:agt_*', 'AGENT:bot_7']);
  // The key the new token opens acts as the orchestrator service.
  const orchToken = (await admin.locator('#new-token').textContent()).trim();
  const orchWho = await call('GET', '/v1/whoami', orchToken);
  assert.equal(orchWho.body.actor_type, 'SERVICE', JSON.stringify(orchWho.body));
  assert.deepEqual(orchWho.body.acts_for, ['AGENT:agt_*', 'AGENT:bot_7'], JSON.stringify(orchWho.body));
  await shot(admin, 'keys');
  // A principal that is no TYPE:ID pattern is refused, and nothing is created.
  const before = (await call('GET', '/v1/keys', keys.ada)).body.keys.length;
  await admin.getByLabel('Who holds it').fill('mallory');
  await admin.getByLabel('agent', { exact: true }).check();
  await admin.getByLabel(/May also act for/).fill('everyone');
  await admin.getByRole('button', { name: 'Create key' }).click();
  await admin.locator('#key-created .error').waitFor();
  assert.match(await admin.locator('#key-created .error').textContent(), /^400: /);
  assert.equal((await call('GET', '/v1/keys', keys.ada)).body.keys.length, before);
  await admin.getByLabel(/May also act for/).fill('');
  // The token works at once, and the list never shows it again.
  const who = await call('GET', '/v1/whoami', token);
  assert.equal(who.status, 200);
  assert.equal(who.body.subject, 'nina');
  const list = await call('GET', '/v1/keys', keys.ada);
  assert.ok(!JSON.stringify(list.body).includes(token), 'the list shows no token');
  // A subject /v1/check would refuse is refused here too, and nothing is created.
  await admin.getByLabel('Who holds it').fill('<b>eve</b>');
  await admin.getByLabel('agent', { exact: true }).check();
  await admin.getByRole('button', { name: 'Create key' }).click();
  await admin.locator('#key-created .error').waitFor();
  assert.equal((await call('GET', '/v1/keys', keys.ada)).body.keys.length, list.body.keys.length);
  // Revoking asks twice, then the key opens nothing.
  const revoke = row.getByRole('button', { name: /^Revoke/ });
  await revoke.click();
  await row.getByRole('button', { name: 'Click again to revoke' }).waitFor();
  await row.getByRole('button', { name: 'Click again to revoke' }).click();
  await admin.locator('tbody tr', { hasText: 'nina' }).filter({ hasText: 'revoked' }).first().waitFor();
  assert.equal((await call('GET', '/v1/whoami', token)).status, 401);
  // An approver cannot reach the page, nor the routes.
  assert.equal((await call('GET', '/v1/keys', keys.maria)).status, 403);
  assert.equal((await call('POST', '/v1/keys', keys.olga, { subject: 'mallory', roles: ['admin'] })).status, 403);
  // The two refused creations are provoked.
  await close(admin, [failedLoad(400, /\/console\/api\/v1\/keys$/)]);
});

test('an ended session returns to sign-in and stops polling', async () => {
  const token = createKey('temp-approver', 'approver');
  const keyID = token.split('_').slice(1, 3).join('_');
  const page = await newPage();
  await signIn(page, token);
  await page.getByRole('heading', { name: 'Approvals' }).waitFor();
  const calls = [];
  page.on('request', (r) => { if (r.url().includes('/console/api/')) calls.push(r.url()); });
  writ('keys', 'revoke', '--data', data, keyID);
  // The inbox's next poll is refused: the page shows the sign-in form.
  await page.getByText('Your session ended: sign in again.').waitFor({ timeout: 10_000 });
  await page.getByLabel('API key').waitFor();
  assert.equal((await page.locator('#who').textContent()).trim(), '', 'no one is shown signed in');
  assert.equal(await page.locator('nav a').count(), 0);
  // Nothing polls any more: two poll intervals pass without a call.
  const after = calls.length;
  await page.waitForTimeout(4500);
  assert.equal(calls.length, after, `calls after the session ended: ${calls.slice(after).join(', ')}`);
  await shot(page, 'signin-session-ended');
  // The revoked key's refused poll is the failed load this test provokes.
  await close(page, [failedLoad(401, /\/console\/api\/v1\/approvals\?/)]);
});

test('no list breaks a word mid-cell at 1280, 1440 and 1920 px', async () => {
  for (const width of [1280, 1440, 1920]) {
    const page = await newPage(width, 900);
    await signIn(page, keys.olga);
    for (const hash of ['#/records', '#/inbox?state=all', '#/ledger']) {
      await page.goto(`${server.url}/console/${hash}`);
      await page.locator('tbody tr').first().waitFor();
      assert.deepEqual(await brokenWords(page), [], `${hash} at ${width} px`);
    }
    if (width === 1440) {
      await page.goto(`${server.url}/console/#/records`);
      await page.locator('tbody tr').first().waitFor();
      await shot(page, 'records');
    }
    await close(page);
  }
});

test('the console is usable 390 px wide', async () => {
  const page = await newPage(390, 844);
  await signIn(page, keys.maria);
  await page.getByRole('heading', { name: 'Approvals' }).waitFor();
  await shot(page, 'inbox-390');
  // Every state: pending first.
  await page.getByLabel('State').selectOption('all');
  await page.locator('.badge.denied').first().waitFor();
  const states = await page.locator('tbody .badge').allTextContents();
  const firstDecided = states.findIndex((s) => s !== 'pending');
  assert.ok(states.includes('approved') && states.includes('denied') && states[0] === 'pending', states.join(' '));
  assert.ok(states.slice(firstDecided).every((s) => s !== 'pending'), `pending first: ${states.join(' ')}`);
  const audit = await newPage(390, 844);
  await signIn(audit, keys.olga);
  await audit.goto(`${server.url}/console/#/records/${approvals.allowedRecord}`);
  await audit.locator('#verify-result').waitFor({ timeout: 15_000 });
  await shot(audit, 'record-390', false);
  assert.match(await audit.locator('#verify-result').textContent(), /Verified in your browser/);
  const overflow = await audit.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(overflow, false, 'nothing scrolls sideways at 390 px');
  await shot(audit, 'record-390', false);
  await close(page);
  await close(audit);
});

test('a record tampered with in the database fails verification in the browser', async () => {
  // A pending request whose stored envelope (what the approver reviews)
  // is edited too.
  const asked = await check(keys.bot, request({ idempotency_key: 'ik_e2e_tampered_envelope' }));
  const pending = asked.body.metadata.approval_ids[0];
  assert.ok(pending, JSON.stringify(asked.body));
  await stopServer();
  execFileSync(tamperBin, [path.join(data, 'writ.db'), approvals.allowedRecord, '"refund_amount_inr":15000', '"refund_amount_inr":150000']);
  execFileSync(tamperBin, ['-envelope', path.join(data, 'writ.db'), asked.body.metadata.record_id, '"amount_inr":15000', '"amount_inr":1500']);
  server = await startServer();
  const page = await newPage();
  await signIn(page, keys.olga);
  await page.getByRole('heading', { name: 'Records' }).waitFor();
  await page.goto(`${server.url}/console/#/records/${approvals.allowedRecord}`);
  const result = page.locator('#verify-result');
  await result.filter({ hasText: 'Verification failed' }).waitFor({ timeout: 15_000 });
  assert.match(await result.textContent(), /Verification failed: record hash, inclusion/);
  const steps = await page.locator('ul.steps').textContent();
  assert.match(steps, /record hash: the record's bytes hash to sha256:[0-9a-f]{64}, but its seal says sha256:[0-9a-f]{64}/);
  assert.match(steps, /inclusion: .*not the ones the ledger committed/);
  await shot(page, 'record-tampered', false);

  await page.getByRole('link', { name: 'Ledger' }).click();
  await page.getByRole('button', { name: 'Verify the whole ledger in your browser' }).click();
  assert.match(await page.locator('#ledger-result').textContent({ timeout: 15_000 }), /✗ 2 finding\(s\)/);
  const findings = await page.locator('#ledger-verify ul.steps').textContent();
  assert.ok(findings.includes(`${approvals.allowedRecord} record hash: the record's bytes hash to`), findings);
  assert.match(findings, /checkpoint: the first \d+ records give root/);
  await shot(page, 'ledger-tampered');

  // The story of the tampered record names it, instead of "internal
  // error".
  await page.goto(`${server.url}/console/#/records/${approvals.allowedRecord}`);
  await page.locator('#story-error').filter({ hasText: approvals.allowedRecord }).waitFor({ timeout: 15_000 });
  assert.match(await page.locator('#story-error').textContent(), /does not match its sealed record/);
  // The tampered record's story is refused (the server names it): provoked.
  await close(page, [failedLoad('5\\d\\d', /\/console\/api\/v1\/decisions\//)]);

  // The API names the tampered envelope, as a problem.
  const res = await fetch(`${server.url}/v1/records/${asked.body.metadata.record_id}/envelope?tenant_id=acme`, { headers: { Authorization: `Bearer ${keys.maria}` } });
  assert.equal(res.status, 500);
  assert.equal(res.headers.get('content-type'), 'application/problem+json');
  const p = await res.json();
  assert.match(p.detail, /fails its hash: the record pins sha256:[0-9a-f]{64}, the stored bytes hash to sha256:[0-9a-f]{64}/, p.detail);
  // The approver sees it failing, and cannot approve it blind.
  const approver = await newPage();
  await signIn(approver, keys.maria);
  await approver.goto(`${server.url}/console/#/approvals/${pending}`);
  await approver.locator('#tampered').waitFor();
  assert.match(await approver.locator('#tampered').textContent(), /fails its hash: the record pins sha256:[0-9a-f]{64}, the stored bytes hash to sha256:[0-9a-f]{64}/);
  assert.equal(await approver.getByRole('button', { name: 'Approve' }).isDisabled(), true, 'Approve is disabled');
  assert.equal(await approver.getByRole('button', { name: 'Deny' }).isDisabled(), false, 'Deny stays possible');
  await approver.locator('#no-approve').waitFor();
  await shot(approver, 'approval-tampered');
  // The inbox flags it too.
  await approver.goto(`${server.url}/console/#/inbox`);
  await approver.locator('tbody tr', { has: approver.locator(`a[href="#/approvals/${pending}"]`) }).getByText('envelope fails its check').waitFor();
  // The tampered envelope, and the story of its record, are refused with
  // a 500 that names them: provoked.
  await close(approver, [failedLoad(500, /\/console\/api\/v1\/(records\/[^/]+\/envelope|decisions\/[^/?]+)\?/)]);
});

// With WRIT_E2E_SCALE=N (say 100000), a tenant of N records made by writ
// ledger generate: how long the newest page of the records list and a
// prefix search take to render, measured from navigation to the rows
// being shown, and written to the metrics. Figures are reported, never
// asserted.
test('the records list at scale: newest page and prefix search', { skip: !process.env.WRIT_E2E_SCALE }, async () => {
  const n = process.env.WRIT_E2E_SCALE;
  const dir = path.join(tmp, 'scale');
  const t0 = Date.now();
  writ('ledger', 'generate', '--data', dir, '--request', 'examples/refund/requests/refund-high-value-human-review.json', '--records', n);
  // writ serve needs a binding key beside records (docs/security.md, "The
  // binding key"); generated records bind no idempotency claim a retry
  // could meet, so a fresh one does.
  writeFileSync(path.join(dir, 'binding.key'), randomBytes(32), { mode: 0o600 });
  metrics.scale = { records: Number(n), generate_ms: Date.now() - t0 };
  const auditor = JSON.parse(writ('keys', 'create', '--data', dir, '--tenant', 'tenant-1', '--subject', 'olga', '--role', 'auditor', '--json')).token;
  const srv = await startServer('examples/refund', dir);
  try {
    const page = await newPage(1440, 900);
    await signIn(page, auditor, srv.url);
    const timed = async (hash, what) => {
      await page.goto('about:blank');
      const start = Date.now();
      await page.goto(`${srv.url}/console/${hash}`);
      await page.locator('tbody tr').first().waitFor({ timeout: 60_000 });
      const ms = Date.now() - start;
      const api = Number(await page.locator('#records-timing').getAttribute('data-ms'));
      metrics.scale[what] = { render_ms: ms, api_ms: api, rows: await page.locator('tbody tr').count() };
    };
    await timed('#/records', 'newest_page');
    const newestSeq = Number(await page.locator('tbody tr td').first().textContent());
    assert.equal(newestSeq, Number(n), 'the newest record is first');
    await timed('#/records?decision_key_prefix=support.ref', 'decision_key_prefix');
    await timed('#/records?subject_prefix=customer%3A', 'subject_prefix');
    // A prefix no record has: the index range is empty.
    await page.goto(`${srv.url}/console/#/records?decision_key_prefix=no.such.`);
    const start = Date.now();
    await page.getByText('No records match.').waitFor({ timeout: 60_000 });
    metrics.scale.decision_key_prefix_none = { render_ms: Date.now() - start };
    await timed('#/records?order=chain', 'oldest_page');
    await close(page);
  } finally {
    await stopServer(srv);
  }
});
