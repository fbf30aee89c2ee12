// writ under the OpenAI Agents SDK (@openai/agents): a tool whose
// `needsApproval` is writ's receipt, and whose approvals are writ's.
//
//   writ receipt                                 the SDK
//   ------------------------------------------   -------------------------------------------
//   allow / allow_with_warning                   needsApproval false; execute runs the tool
//                                                and reports its execution to writ
//   human_review (an approval can settle it)     needsApproval true: the run stops with an
//                                                interruption; approve or reject it with
//                                                approveInWrit / rejectInWrit, which decide
//                                                writ's approval request first
//   local_replan, upstream_replan,               needsApproval false; execute does not run
//   terminal_block, terminal human_review        the tool and answers the model the receipt
//                                                (outcome, reasons, safe next steps, routing)
//                                                so it replans
//
// The check is made once per tool call (the SDK's callId), so an
// interruption and its resumption are one writ decision.
import { tool } from '@openai/agents';
import { awaitsApproval, newIdempotencyKey } from '@writhq/writ-client';

/**
 * governedTool is `tool()` with writ in front. `request(input)` returns
 * the rest of the check request (actor, evidence, context, …); `run(input)`
 * is the side effect; `writTool` is the tool's name in the pack's tool
 * manifest when it is not `name`. `wait` is how long execute waits for writ's approval
 * after the SDK's (default 30s).
 */
export function governedTool(client, { name, writTool = name, description, parameters, request, run, toolResultId, wait = '30s' }) {
  const calls = new Map(); // callId → { req, receipt }

  async function decide(input, callId) {
    let c = calls.get(callId);
    if (!c) {
      const req = { tool: writTool, arguments: input, ...request(input), idempotency_key: newIdempotencyKey() };
      c = { req, receipt: await client.check(req) };
      calls.set(callId, c);
    }
    return c;
  }

  const t = tool({
    name, description, parameters,
    needsApproval: async (_ctx, input, callId) => awaitsApproval((await decide(input, callId)).receipt),
    execute: async (input, _ctx, details) => {
      const c = await decide(input, details?.toolCall?.callId ?? newIdempotencyKey());
      if (!c.receipt.safe_to_execute && awaitsApproval(c.receipt)) {
        // The SDK's approval was given; writ's decides.
        c.receipt = await client.resume(c.receipt.decision_id, c.req, { wait });
      }
      if (!c.receipt.safe_to_execute) return blockedOutput(c.receipt);
      const { result } = await client.runAndReport(c.receipt, () => run(input),
        { toolResultId, idempotencyKey: c.req.idempotency_key });
      return result;
    },
  });
  t.writReceipt = (callId) => calls.get(callId)?.receipt;
  return t;
}

/** What the model sees instead of the tool's result when writ did not permit it. */
export function blockedOutput(r) {
  return JSON.stringify({
    blocked_by_writ: true, decision_id: r.decision_id, outcome: r.outcome, mode: r.disposition.mode,
    reasons: r.reasons, safe_next_steps: r.safe_next_steps, what_would_change_this: r.what_would_change_this,
    return_to_node: r.routing.return_to_node,
  });
}

/** The writ approval request an interruption of a governed tool waits on. */
export function approvalOf(governed, interruption) {
  return governed.writReceipt(interruption.rawItem.callId)?.metadata.approval_ids?.[0];
}

/** An approver approves in writ (the recorded approval), then in the SDK's run state. */
export async function approveInWrit(approver, governed, state, interruption, reason) {
  await approver.approve(approvalOf(governed, interruption), reason);
  state.approve(interruption);
}

/** An approver denies in writ, then rejects the call in the SDK's run state. */
export async function rejectInWrit(approver, governed, state, interruption, reason) {
  await approver.deny(approvalOf(governed, interruption), reason);
  state.reject(interruption);
}
