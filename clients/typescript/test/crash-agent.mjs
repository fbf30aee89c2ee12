// An agent that crashes after its tool ran, before writ took the report:
// its client journals to the outbox FILE, and its fetch kills the process
// (SIGKILL: no handler, no flush) when the execution report is about to be
// sent. Run by guard.test.mjs: node crash-agent.mjs URL KEY OUTBOX REQUEST-JSON
import { Client } from '../dist/index.js';
import { FileOutbox } from '../dist/node.js';

const [url, apiKey, outbox, requestJSON] = process.argv.slice(2);
const { arguments: args, tool, ...parts } = JSON.parse(requestJSON);
const client = new Client(url, {
  apiKey, outbox: new FileOutbox(outbox),
  fetch: (u, init) => {
    if (String(u).endsWith('/execution')) process.kill(process.pid, 'SIGKILL');
    return fetch(u, init);
  },
});
const issueRefund = client.guard(tool, async (a) => {
  process.stdout.write('tool ran\n');
  return { refund_id: 'rf_crash', amount_inr: a.amount_inr };
}, { request: parts });
await issueRefund(args);
process.stdout.write('not reached\n');
