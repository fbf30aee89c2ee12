// `@writhq/writ-client/openai-agents`: a tool of the OpenAI Agents SDK
// (`@openai/agents`, a peer dependency) governed by writ. Its
// `needsApproval` is writ's receipt, its approvals are writ's, and it runs
// the tool under writ's permit and reports the execution.
//
//   writ receipt                               the SDK
//   allow / allow_with_warning                 needsApproval false; execute runs and reports
//   human_review an approval can settle        needsApproval true: the run stops with an
//                                              interruption; approveInWrit / rejectInWrit
//   replans, terminal_block, terminal review   execute answers the model the receipt (blockedOutput)
//
// The check is made once per tool call. Its idempotency key is derived
// from the SDK's call id and the action (idempotencyKeyFor), and a call
// that awaits an approval is kept in the pending store under that key
// (the `pending` option, else the client's): a run state restored in
// another process, with this tool's memory lost, finds the decision there
// and resumes it, so the approval the approver decides is the one the run
// waits on, not a second one. Give a durable store (FilePendingStore, or
// your own over the database the run state is saved in) for that.
import { tool } from '@openai/agents';
import type { FunctionTool, RunState, RunToolApprovalItem, ToolExecuteArgument, ToolInputParameters, ToolOptions } from '@openai/agents';

/** The tool's parameters: a zod object or a JSON schema, as `tool()` takes. */
type Params = Exclude<ToolInputParameters, undefined>;
import { awaitsApproval, checkRequest, Client } from './client.js';
import { resultDigest } from './digest.js';
import { ReportFailed } from './errors.js';
import type { CheckParts } from './client.js';
import { idempotencyKeyFor, type PendingStore } from './pending.js';
import type { CheckRequest, Receipt } from './types.js';

export interface GovernedToolOptions<P extends Params, R> {
  /** The tool's name for the model (the SDK's function names may not hold dots). */
  name: string;
  /** The tool's name in the pack's tool manifest (default `name`). */
  writTool?: string;
  description: string;
  parameters: P;
  /** The rest of the check request for this input: actor (required), subjects, evidence, context, outputs. */
  request: (input: ToolExecuteArgument<P>) => CheckParts;
  /** The side effect; it runs only under a permitting receipt. */
  run: (input: ToolExecuteArgument<P>) => Promise<R> | R;
  /** The id of the tool's result, for the execution report. */
  toolResultId?: (result: R) => string | undefined;
  /** How long execute waits for writ's approval after the SDK's (default 30s, at most 5m). */
  wait?: string;
  /** Where calls awaiting an approval are kept (default the client's `pending`). */
  pending?: PendingStore;
  /**
   * Called when the tool ran but writ did not take its report: the model
   * is answered the result all the same (the effect happened; an error
   * would have it call the tool again), and this gets the ReportFailed to
   * send `e.report` again. Default: console.error with the decision id.
   * With the client's outbox the report is also journalled for replayOutbox.
   */
  onReportFailed?: (e: ReportFailed) => Promise<void> | void;
}

/** The writ side of a governed tool, for the approver's helpers and tests. */
export interface WritCalls {
  /** The latest receipt of a tool call this process has seen. */
  receipt(callId: string): Receipt | undefined;
  /** The receipt of an interruption's call (checked again, idempotently, when this process has none). */
  receiptOf(interruption: RunToolApprovalItem): Promise<Receipt>;
}

export type GovernedTool<P extends Params, R> = FunctionTool<unknown, P, R | string> & { writ: WritCalls };

interface Call { request: CheckRequest; receipt: Receipt }

/** `tool()` with writ in front: see the module's comment. */
export function governedTool<P extends Params, R>(client: Client, o: GovernedToolOptions<P, R>): GovernedTool<P, R> {
  const writTool = o.writTool ?? o.name;
  const wait = o.wait ?? '30s';
  const calls = new Map<string, Promise<Call>>(); // callId → the check, made once
  const seen = new Map<string, Call>();
  const store = o.pending ?? client.pending;
  // The store holds a call while its decision awaits an approval.
  async function keep(key: string, request: CheckRequest, receipt: Receipt): Promise<void> {
    if (!awaitsApproval(receipt)) return store.delete(key);
    if (await store.get(key)) return;
    return store.set(key, {
      decision_id: receipt.decision_id, idempotency_key: key, request_digest: await resultDigest(request),
      approval_ids: receipt.metadata.approval_ids ?? [], created_at: new Date().toISOString(),
    });
  }

  function decide(input: ToolExecuteArgument<P>, callId: string): Promise<Call> {
    let c = calls.get(callId);
    if (!c) {
      c = (async () => {
        const request = checkRequest(writTool, input as { [k: string]: unknown }, { ...o.request(input), tool_call_id: callId });
        const key = await idempotencyKeyFor(request, callId);
        request.idempotency_key = key;
        const held = await store.get(key);
        // A call this process has not seen but the store holds: resume its
        // decision (1ms: an undecided approval answers still_waiting and
        // nothing is written) rather than decide it again.
        const receipt = held ? await client.resume(held.decision_id, request, { wait: '1ms' }) : await client.check(request);
        await keep(key, request, receipt);
        return { request, receipt };
      })();
      // A failed check is made again next time; a made one is kept by call id.
      c.then((call) => seen.set(callId, call), () => calls.delete(callId));
      calls.set(callId, c);
    }
    return c;
  }

  // tool()'s options type picks strict or not by a conditional type of P,
  // which TypeScript cannot resolve for a generic P: hence the one cast.
  const t = tool<P, unknown, R | string>({
    name: o.name, description: o.description, parameters: o.parameters,
    needsApproval: async (_ctx, input, callId) => awaitsApproval((await decide(input, callId ?? '')).receipt),
    execute: async (input, _ctx, details) => {
      const callId = details?.toolCall?.callId;
      if (!callId) throw new Error('writ: the SDK gave no call id for this tool call');
      const c = await decide(input, callId);
      if (!c.receipt.safe_to_execute && awaitsApproval(c.receipt)) {
        // The SDK's approval was given; writ's decides.
        c.receipt = await client.resume(c.receipt.decision_id, c.request, { wait });
        await keep(c.request.idempotency_key as string, c.request, c.receipt);
      }
      if (!c.receipt.safe_to_execute) return blockedOutput(c.receipt);
      try {
        const { result } = await client.runAndReport(c.receipt, () => o.run(input),
          { toolResultId: o.toolResultId, idempotencyKey: c.request.idempotency_key });
        return result;
      } catch (err) {
        if (!(err instanceof ReportFailed)) throw err;
        await (o.onReportFailed ?? defaultReportFailed)(err);
        return err.result as R;
      }
    },
  } as ToolOptions<P, unknown, undefined>) as GovernedTool<P, R>;
  t.writ = {
    receipt: (callId) => seen.get(callId)?.receipt,
    receiptOf: async (interruption) => {
      const raw = interruption.rawItem as { callId?: string; arguments?: string };
      if (!raw.callId) throw new Error('writ: the interruption is not a function call');
      return (await decide(JSON.parse(raw.arguments ?? '{}') as ToolExecuteArgument<P>, raw.callId)).receipt;
    },
  };
  return t;
}

function defaultReportFailed(e: ReportFailed): void {
  console.error(`writ: the tool ran but writ did not take its report (decision ${e.decisionId}); send it again: ${e.message}`);
}

/** What the model sees instead of the tool's result when writ did not permit it. */
export function blockedOutput(r: Receipt): string {
  return JSON.stringify({
    blocked_by_writ: true, decision_id: r.decision_id, outcome: r.outcome, mode: r.disposition.mode,
    reasons: r.reasons, safe_next_steps: r.safe_next_steps, what_would_change_this: r.what_would_change_this,
    return_to_node: r.routing.return_to_node,
  });
}

/** The writ approval request an interruption of a governed tool waits on. */
export async function approvalOf(governed: { writ: WritCalls }, interruption: RunToolApprovalItem): Promise<string> {
  const id = (await governed.writ.receiptOf(interruption)).metadata.approval_ids?.[0];
  if (!id) throw new Error('writ: this interruption waits on no writ approval');
  return id;
}

/** An approver approves in writ (the recorded approval), then in the SDK's run state. */
export async function approveInWrit(approver: Client, governed: { writ: WritCalls }, state: RunState<any, any>,
  interruption: RunToolApprovalItem, reason: string): Promise<void> {
  await approver.approve(await approvalOf(governed, interruption), reason);
  state.approve(interruption);
}

/** An approver denies in writ, then rejects the call in the SDK's run state. */
export async function rejectInWrit(approver: Client, governed: { writ: WritCalls }, state: RunState<any, any>,
  interruption: RunToolApprovalItem, reason: string): Promise<void> {
  await approver.deny(await approvalOf(governed, interruption), reason);
  state.reject(interruption);
}
