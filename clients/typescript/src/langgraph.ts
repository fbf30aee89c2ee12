// `@writhq/writ-client/langgraph`: writ's check, approval, run and report
// as nodes of a LangGraph (`@langchain/langgraph`, a peer dependency)
// graph. The check node answers a Command chosen by the receipt's
// disposition.mode:
//
//   continue_downstream               the tool node, which runs the tool and reports
//   human_review (not terminal)       the review node: interrupt(); resumed with
//                                     Command({ resume: { decided: true } }) after the
//                                     approver decided in writ, it resumes the decision
//   upstream_replan                   routing.return_to_node, the node the pack names
//   local_replan                      the proposing node (nodes.replan)
//   terminal_block, terminal review   END
//
// The check and the review are separate nodes because LangGraph runs an
// interrupted node again from its start when it resumes: the check must
// not be made twice. The decision lives in the state's `writ` channel
// (writChannel), so any checkpointer keeps it: a graph resumed in another
// process resumes the same decision.
import { Annotation, Command, END, interrupt } from '@langchain/langgraph';
import { awaitsApproval, Client, newIdempotencyKey } from './client.js';
import { ReportFailed } from './errors.js';
import type { ExecutionReportBody } from './errors.js';
import type { CheckRequest, Receipt } from './types.js';

/** What the `writ` channel holds: the check as made, writ's latest receipt, and the tool's result once it ran. */
export interface WritStep {
  request: CheckRequest;
  receipt: Receipt;
  result?: unknown;
  /** The report writ did not take after the tool ran (ReportFailed): send it again with reportExecution. */
  unreported?: { report: ExecutionReportBody; error: string };
}

/** The state channel the nodes read and write; put it in your Annotation.Root as `writ`. */
export const writChannel = () => Annotation<WritStep | null>({ reducer: (_old, next) => next, default: () => null });

/** The nodes' names in your graph. */
export interface WritNodeNames {
  /** The node that runs the tool. */
  tool: string;
  /** The node that waits for an approval (interrupt()). */
  review: string;
  /** The node that proposes the action, for a local replan. */
  replan: string;
  /** The nodes a pack's routing.return_to_node may name (upstream replans). */
  upstream?: string[];
}

export interface GovernedNodesOptions<S, R> {
  /** The check request of the action the state proposes (see checkRequest); an idempotency key is added when it has none. */
  check: (state: S) => CheckRequest;
  /** The side effect; it runs only under a permitting receipt. */
  run: (state: S, receipt: Receipt) => Promise<R> | R;
  toolResultId?: (result: R) => string | undefined;
  nodes: WritNodeNames;
  /** How long the review node waits for writ's decision once resumed (default 30s, at most 5m). */
  wait?: string;
  /**
   * Called when the tool ran but writ did not take its report. The tool
   * node still answers the result (the effect happened: failing the node
   * would have the graph run it again on the next invoke), with the report
   * in the step's `unreported`. Default: console.error with the decision id.
   */
  onReportFailed?: (e: ReportFailed) => Promise<void> | void;
  /** More of the state to update with each node's answer (a trail, a message). */
  update?: (node: 'check' | 'review' | 'tool', step: WritStep) => Record<string, unknown>;
}

/** The review's interrupt value: what an approver's UI shows. */
export interface ReviewRequest {
  decision_id: string;
  approval_ids: string[];
  reasons: Receipt['reasons'];
  target_hint?: string;
}

/** The node a receipt sends the graph to. */
export function route(receipt: Receipt, nodes: WritNodeNames): string {
  switch (receipt.disposition.mode) {
    case 'continue_downstream': return receipt.safe_to_execute ? nodes.tool : END;
    case 'human_review': return awaitsApproval(receipt) ? nodes.review : END;
    case 'upstream_replan': {
      const to = receipt.routing.return_to_node;
      return to && (nodes.upstream ?? []).includes(to) ? to : END;
    }
    case 'local_replan': return nodes.replan;
    default: return END; // terminal_block
  }
}

/**
 * The check, review and tool nodes, with the `ends` each Command may go
 * to: `graph.addNode('writ_check', w.check, { ends: w.ends.check })`.
 */
export function governedNodes<S extends { writ?: WritStep | null }, R>(client: Client, o: GovernedNodesOptions<S, R>) {
  const wait = o.wait ?? '30s';
  const more = (node: 'check' | 'review' | 'tool', step: WritStep) => ({ ...o.update?.(node, step), writ: step });
  const held = (s: S): WritStep => {
    if (!s.writ) throw new Error('writ: no check in the state; the check node must run first');
    return s.writ;
  };
  return {
    check: async (s: S): Promise<Command> => {
      const proposed = o.check(s);
      // The key is kept in the state, for the resume and the report.
      const request = { ...proposed, idempotency_key: proposed.idempotency_key || newIdempotencyKey() };
      const step = { request, receipt: await client.check(request) };
      const receipt = step.receipt;
      return new Command({ goto: route(receipt, o.nodes), update: more('check', step) });
    },
    review: async (s: S): Promise<Command> => {
      const { request, receipt } = held(s);
      const review = interrupt<ReviewRequest, { decided?: boolean } | undefined>({
        decision_id: receipt.decision_id, approval_ids: receipt.metadata.approval_ids ?? [],
        reasons: receipt.reasons, target_hint: receipt.routing.target_hint,
      });
      if (!review?.decided) return new Command({ goto: END, update: more('review', { request, receipt }) });
      // The approver decided in writ; writ's decision, not the resume value, permits.
      const next = await client.resume(receipt.decision_id, request, { wait });
      return new Command({ goto: next.safe_to_execute ? o.nodes.tool : END, update: more('review', { request, receipt: next }) });
    },
    tool: async (s: S): Promise<Record<string, unknown>> => {
      const { request, receipt } = held(s);
      try {
        const { result } = await client.runAndReport(receipt, () => o.run(s, receipt),
          { toolResultId: o.toolResultId, idempotencyKey: request.idempotency_key });
        return more('tool', { request, receipt, result });
      } catch (err) {
        if (!(err instanceof ReportFailed)) throw err;
        await (o.onReportFailed ?? ((e: ReportFailed) => console.error(
          `writ: the tool ran but writ did not take its report (decision ${e.decisionId}); send it again: ${e.message}`)))(err);
        return more('tool', { request, receipt, result: err.result, unreported: { report: err.report, error: err.message } });
      }
    },
    ends: {
      check: [o.nodes.tool, o.nodes.review, o.nodes.replan, ...(o.nodes.upstream ?? []), END],
      review: [o.nodes.tool, END],
    },
  };
}
