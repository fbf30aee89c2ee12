// writ under the OpenAI Agents SDK (@openai/agents), with the adapter
// `@writhq/writ-client/openai-agents`: a refund tool whose needsApproval is
// writ's receipt, whose approvals are writ's, and which runs under writ's
// permit and reports its execution. A replan or a block is answered to the
// model as the receipt, so it replans. See docs/frameworks.md.
import { z } from 'zod';
import type { Client, CheckParts, ReportFailed } from '@writhq/writ-client';
import { governedTool } from '@writhq/writ-client/openai-agents';

export { approveInWrit, rejectInWrit, approvalOf } from '@writhq/writ-client/openai-agents';

export const RefundArgs = z.object({ order_id: z.string(), amount_inr: z.number(), currency: z.literal('INR') });
export type Refund = z.infer<typeof RefundArgs>;

/**
 * refundTool is the `issue_refund` tool governed by writ: `facts` are the
 * check's actor, subjects, evidence and context; `issue` is the payment
 * provider's refund; `onReportFailed` keeps a report writ did not take.
 */
export function refundTool<R extends { refund_id: string }>(client: Client, facts: CheckParts,
  issue: (refund: Refund) => Promise<R>, o: { wait?: string; onReportFailed?: (e: ReportFailed) => void } = {}) {
  return governedTool(client, {
    name: 'issue_refund',
    writTool: 'payments.issue_refund', // the SDK's function names may not hold dots
    description: 'Refund an order to the original payment method.',
    parameters: RefundArgs,
    request: (input) => ({
      ...facts,
      outputs: { refund_amount_inr: input.amount_inr, currency: input.currency, order_id: input.order_id },
    }),
    run: issue,
    toolResultId: (r) => r.refund_id,
    ...o,
  });
}
