// writ in a LangGraph (@langchain/langgraph) graph: a node checks with
// writ, and the receipt's disposition.mode picks the graph's next move.
//
//   disposition.mode                  the graph
//   -------------------------------   ----------------------------------------------
//   continue_downstream               Command to the tool node, which runs the tool
//                                     and reports its execution to writ
//   human_review (not terminal)       Command to a review node that calls interrupt();
//                                     resumed (Command({ resume })) after an approver
//                                     decided writ's approval request, it resumes the
//                                     writ decision and goes on to the tool, or stops
//   upstream_replan                   Command back to routing.return_to_node, the
//                                     upstream node the pack names
//   local_replan                      Command back to the proposing node, with the
//                                     receipt (what evidence is missing)
//   terminal_block, terminal review   Command to END, with the receipt
//
// The check and the review are separate nodes because LangGraph runs an
// interrupted node again from its start when it resumes: the check must
// not be made twice.
import { Annotation, Command, END, interrupt, START, StateGraph } from '@langchain/langgraph';
import { awaitsApproval, newIdempotencyKey } from '@writhq/writ-client';

const last = (_old, next) => next;

export const RefundState = Annotation.Root({
  ask: Annotation({ reducer: last, default: () => '' }),
  // The facts the check carries (actor, subjects, evidence, context).
  facts: Annotation({ reducer: last, default: () => ({}) }),
  proposal: Annotation({ reducer: last, default: () => null }),
  check: Annotation({ reducer: last, default: () => null }),
  receipt: Annotation({ reducer: last, default: () => null }),
  result: Annotation({ reducer: last, default: () => null }),
  // Every node visited, in order.
  trail: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/**
 * governedRefundGraph builds the graph: returns_intake (upstream) →
 * support_agent (the model proposes a refund) → writ_check → issue_refund
 * | human_review | back upstream | END. `model` is a LangChain chat model
 * answering a JSON tool call; `issue` is the side effect; `onUpstream`
 * is what the returns desk does when the refund is sent back to it.
 */
export function governedRefundGraph({ client, model, issue, onUpstream, checkpointer, wait = '30s' }) {
  return new StateGraph(RefundState)
    .addNode('returns_intake', async (s) => ({
      trail: ['returns_intake'],
      facts: s.receipt ? await onUpstream(s.facts, s.receipt) : s.facts,
      receipt: null,
    }))
    .addNode('support_agent', async (s) => {
      const answer = await model.invoke([{ role: 'user', content: s.ask }]);
      return { trail: ['support_agent'], proposal: JSON.parse(answer.content) };
    })
    .addNode('writ_check', async (s) => {
      const { tool, arguments: args } = s.proposal;
      const check = { ...s.facts, tool, arguments: args, idempotency_key: newIdempotencyKey() };
      const receipt = await client.check(check);
      return new Command({ goto: route(receipt), update: { trail: ['writ_check'], check, receipt } });
    }, { ends: ['issue_refund', 'human_review', 'returns_intake', 'support_agent', END] })
    .addNode('human_review', async (s) => {
      // Pauses the graph; the value given to Command({ resume }) comes back.
      const review = interrupt({
        decision_id: s.receipt.decision_id, approval_ids: s.receipt.metadata.approval_ids,
        reasons: s.receipt.reasons, target_hint: s.receipt.routing.target_hint,
      });
      if (!review?.decided) return new Command({ goto: END, update: { trail: ['human_review'] } });
      // The approver decided in writ; writ's decision, not the resume value, permits.
      const receipt = await client.resume(s.receipt.decision_id, s.check, { wait });
      return new Command({
        goto: receipt.safe_to_execute ? 'issue_refund' : END,
        update: { trail: ['human_review'], receipt },
      });
    }, { ends: ['issue_refund', END] })
    .addNode('issue_refund', async (s) => {
      const { result } = await client.runAndReport(s.receipt, () => issue(s.proposal.arguments),
        { idempotencyKey: s.check.idempotency_key, toolResultId: (r) => r.refund_id });
      return { trail: ['issue_refund'], result };
    })
    .addEdge(START, 'returns_intake')
    .addEdge('returns_intake', 'support_agent')
    .addEdge('support_agent', 'writ_check')
    .addEdge('issue_refund', END)
    .compile({ checkpointer });
}

/** The node a receipt sends the graph to. */
export function route(receipt) {
  switch (receipt.disposition.mode) {
    case 'continue_downstream': return receipt.safe_to_execute ? 'issue_refund' : END;
    case 'human_review': return awaitsApproval(receipt) ? 'human_review' : END;
    case 'upstream_replan': return receipt.routing.return_to_node ?? END;
    case 'local_replan': return 'support_agent';
    default: return END; // terminal_block
  }
}
