// Type tests, checked by `tsc --strict` in npm test: each line under an
// expect-error directive must not compile, every other line must.
import { Blocked, Client, checkRequest } from '../dist/index.js';
import type { CheckParts, CheckRequest, Receipt } from '../dist/index.js';

const writ = new Client('http://127.0.0.1:8080', { timeout: 10 });
const actor = { type: 'AGENT', id: 'agt_support_service' } as const;
const parts: CheckParts = { actor, subject_ids: ['customer:cus_77'], context: { fraud_score: 12 } };

// A request typed from its parts, no cast.
const req: CheckRequest = checkRequest('payments.issue_refund', { order_id: 'ord_881', amount_inr: 4200 }, parts);
void req;

// @ts-expect-error the actor is required
checkRequest('payments.issue_refund', { order_id: 'ord_881' }, { subject_ids: ['customer:cus_77'] });
// @ts-expect-error an actor's type is AGENT, HUMAN or SERVICE
checkRequest('payments.issue_refund', {}, { actor: { type: 'ROBOT', id: 'r' } });

// The guard keeps the tool's argument and result types.
const issueRefund = writ.guard('payments.issue_refund',
  async (a: { order_id: string; amount_inr: number }) => ({ refund_id: `rf_${a.order_id}` }),
  { request: (a) => ({ ...parts, outputs: { refund_amount_inr: a.amount_inr } }), wait: '30s', toolResultId: (r) => r.refund_id });
export async function typed(signal: AbortSignal): Promise<string> {
  const r = await issueRefund({ order_id: 'ord_881', amount_inr: 4200 }, { signal });
  // @ts-expect-error amount_inr is a number
  await issueRefund({ order_id: 'ord_881', amount_inr: '4200' });
  return r.refund_id;
}

// @ts-expect-error a guard's request names its actor
writ.guard('payments.issue_refund', (a: { order_id: string }) => a, { request: { subject_ids: [] } });

export function resumable(e: Blocked): Promise<Receipt> | undefined {
  return e.request && writ.resume(e.decisionId, e.request, { wait: '2m' });
}
