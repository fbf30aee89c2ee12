// End-to-end tests of `writ gateway` with real MCP servers from the npm
// registry (the filesystem and everything servers), launched over stdio
// by the gateway, driven by the official TypeScript SDK client over
// stdio. WRIT_BIN names the writ binary (.ci/run builds it); without it
// the tests build one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const RECEIPT_KEY = 'io.github.writhq/receipt';

let tmp, writ, root, data, config, client;

function writBin() {
  if (process.env.WRIT_BIN) return process.env.WRIT_BIN;
  const bin = path.join(tmp, 'writ');
  execFileSync('go', ['build', '-o', bin, './cmd/writ'], { cwd: repo, stdio: 'inherit' });
  return bin;
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'writ-gateway-e2e-'));
  writ = writBin();
  root = path.join(tmp, 'root');
  fs.mkdirSync(path.join(root, 'allowed'), { recursive: true });
  fs.mkdirSync(path.join(root, 'outside'), { recursive: true });
  fs.writeFileSync(path.join(root, 'allowed', 'hello.txt'), 'hello from the allowed directory\n');
  data = path.join(tmp, 'data');
  const mods = path.join(here, 'node_modules', '@modelcontextprotocol');
  config = path.join(tmp, 'gateway.yaml');
  fs.writeFileSync(config, [
    'tenant: acme',
    'actor: {id: e2e-agent}',
    'upstreams:',
    '  - name: files',
    '    prefix: fs.',
    '    stdio:',
    '      command: node',
    `      args: [${JSON.stringify(path.join(mods, 'server-filesystem', 'dist', 'index.js'))}, ${JSON.stringify(root)}]`,
    '  - name: everything',
    '    prefix: ev.',
    '    stdio:',
    '      command: node',
    `      args: [${JSON.stringify(path.join(mods, 'server-everything', 'dist', 'index.js'))}, stdio]`,
    '',
  ].join('\n'));
  client = new Client({ name: 'writ-e2e', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: writ,
    args: ['gateway', '--config', config, '--pack', path.join(here, 'pack'), '--data', data],
    stderr: 'ignore',
  }));
});

after(async () => {
  if (client) await client.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

test('the gateway advertises only the tools the pack lists', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['ev.echo', 'ev.get-sum', 'ev.simulate-research-query', 'ev.trigger-elicitation-request', 'fs.list_allowed_directories', 'fs.read_text_file', 'fs.write_file']);
});

test('a tool is listed with every field its server lists, execution included', async () => {
  // The everything server, straight: its definition of the tool.
  const direct = new Client({ name: 'writ-e2e-direct', version: '1.0.0' }, { capabilities: { elicitation: {}, sampling: {} } });
  await direct.connect(new StdioClientTransport({
    command: 'node',
    args: [path.join(here, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js'), 'stdio'],
    stderr: 'ignore',
  }));
  const want = (await direct.listTools()).tools.find((t) => t.name === 'simulate-research-query');
  await direct.close();
  assert.deepEqual(want.execution, { taskSupport: 'required' }, 'the server lists execution');
  const got = (await client.listTools()).tools.find((t) => t.name === 'ev.simulate-research-query');
  assert.ok(got, 'the gateway lists ev.simulate-research-query');
  assert.deepEqual(got.execution, want.execution);
  assert.equal(got.title, want.title);
  assert.deepEqual(got.annotations, want.annotations);
});

// freePort is a loopback TCP port nothing listens on.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

test('a Streamable HTTP upstream\'s tools are listed with every field, execution included', async () => {
  // The everything server over Streamable HTTP (it answers tools/list as
  // a text/event-stream), in front of a second gateway.
  const port = await freePort();
  const server = spawn('node', [path.join(here, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js'), 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let gw;
  try {
    await new Promise((resolve, reject) => {
      let err = '';
      server.stderr.on('data', (b) => {
        err += b;
        if (err.includes('listening on port')) resolve();
      });
      server.on('exit', (code) => reject(new Error(`the everything server exited (${code}): ${err}`)));
    });
    const dir = fs.mkdtempSync(path.join(tmp, 'http-'));
    const cfg = path.join(dir, 'gateway.yaml');
    fs.writeFileSync(cfg, [
      'tenant: acme',
      'actor: {id: e2e-agent}',
      'upstreams:',
      '  - name: everything',
      '    prefix: ev.',
      '    http:',
      `      url: http://127.0.0.1:${port}/mcp`,
      '',
    ].join('\n'));
    gw = new Client({ name: 'writ-e2e-http', version: '1.0.0' });
    await gw.connect(new StdioClientTransport({
      command: writ,
      args: ['gateway', '--config', cfg, '--pack', path.join(here, 'pack'), '--data', path.join(dir, 'data')],
      stderr: 'ignore',
    }));
    const got = (await gw.listTools()).tools.find((t) => t.name === 'ev.simulate-research-query');
    assert.ok(got, 'the gateway lists ev.simulate-research-query');
    assert.deepEqual(got.execution, { taskSupport: 'required' });
    const echo = await gw.callTool({ name: 'ev.echo', arguments: { message: 'over http' } });
    assert.notEqual(echo.isError, true, text(echo));
    assert.match(text(echo), /over http/);
  } finally {
    if (gw) await gw.close();
    server.kill();
  }
});

test('a read is allowed and returned unchanged', async () => {
  const result = await client.callTool({ name: 'fs.read_text_file', arguments: { path: path.join(root, 'allowed', 'hello.txt') } });
  assert.notEqual(result.isError, true, text(result));
  assert.match(text(result), /hello from the allowed directory/);
});

test('a write in the allowed directory is forwarded', async () => {
  const file = path.join(root, 'allowed', 'note.txt');
  const result = await client.callTool({ name: 'fs.write_file', arguments: { path: file, content: 'ok' } });
  assert.notEqual(result.isError, true, text(result));
  assert.equal(fs.readFileSync(file, 'utf8'), 'ok');
});

test('a write outside the allowed path is blocked with the receipt', async () => {
  const file = path.join(root, 'outside', 'evil.txt');
  const result = await client.callTool({ name: 'fs.write_file', arguments: { path: file, content: 'no' } });
  assert.equal(result.isError, true);
  assert.equal(fs.existsSync(file), false, 'the blocked write reached the file system');
  assert.match(result.content[0].text, /writ blocked this call to fs\.write_file/);
  assert.match(result.content[0].text, /write_outside_allowed_path/);
  const receipt = result._meta[RECEIPT_KEY];
  assert.equal(receipt.safe_to_execute, false);
  assert.equal(receipt.outcome, 'goal_fail_terminal');
  assert.equal(receipt.reasons[0].code, 'write_outside_allowed_path');
  assert.deepEqual(JSON.parse(result.content[1].text), receipt);
  assert.equal(result.structuredContent, undefined);
});

test('the everything server: echo and get-sum through the gateway', async () => {
  const echo = await client.callTool({ name: 'ev.echo', arguments: { message: 'hi writ' } });
  assert.notEqual(echo.isError, true, text(echo));
  assert.match(text(echo), /hi writ/);
  const sum = await client.callTool({ name: 'ev.get-sum', arguments: { a: 2, b: 3 } });
  assert.notEqual(sum.isError, true, text(sum));
  assert.match(text(sum), /5/);
});

test('arguments that fail the tool schema are refused, not forwarded', async () => {
  const result = await client.callTool({ name: 'ev.get-sum', arguments: { a: 'two', b: 3 } });
  assert.equal(result.isError, true);
  assert.match(text(result), /input schema/);
});

test('an unknown tool is a protocol error', async () => {
  await assert.rejects(client.callTool({ name: 'fs.delete_everything', arguments: {} }));
});

test('every allowed call has its check and execution report under one decision; the ledger verifies', async () => {
  await client.close();
  client = null;
  const out = execFileSync(writ, ['records', 'list', '--data', data, '--tenant', 'acme', '--json', '--limit', '1000'], { encoding: 'utf8' });
  const records = out.trim().split('\n').map((l) => JSON.parse(l));
  const byDecision = new Map();
  for (const r of records) {
    if (!byDecision.has(r.decision_id)) byDecision.set(r.decision_id, []);
    byDecision.get(r.decision_id).push(r);
  }
  let allowed = 0;
  for (const [id, recs] of byDecision) {
    if (recs[0].status === 'REJECTED') continue;
    allowed++;
    assert.deepEqual(recs.map((r) => r.status).slice(1), ['CLOSED'], `decision ${id}: ${recs.map((r) => r.status)}`);
    assert.equal(recs[1].execution.status, 'succeeded', `decision ${id}`);
  }
  assert.equal(allowed, 4, 'four allowed calls (read, write, echo, get-sum)');
  const verify = spawnSync(writ, ['ledger', 'verify', '--data', data], { encoding: 'utf8' });
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
});
