// writ in a LangGraph (@langchain/langgraph) graph, with the adapter
// `@writhq/writ-client/langgraph`: returns_intake (upstream) → support_agent
// (the model proposes a refund) → writ_check → issue_refund | human_review
// | back upstream | END, the check's Command chosen by the receipt's
// disposition.mode. See docs/frameworks.md.
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph';
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { checkRequest } from '@writhq/writ-client';
import type { CheckParts, Client, Receipt } from '@writhq/writ-client';
import { governedNodes, writChannel } from '@writhq/writ-client/langgraph';

const last = <T>(_old: T, next: T) => next;
export interface Proposal { tool: string; arguments: { [k: string]: unknown } }

export const RefundState = Annotation.Root({
  ask: Annotation<string>({ reducer: last, default: () => '' }),
  facts: Annotation<CheckParts>({ reducer: last, default: () => ({ actor: { type: 'AGENT', id: 'unknown' } }) }),
  proposal: Annotation<Proposal | null>({ reducer: last, default: () => null }),
  writ: writChannel(), // the check, writ's receipt and the tool's result
  trail: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }), // every node visited
});
type State = typeof RefundState.State;

export interface RefundGraph<R> {
  client: Client;
  model: BaseChatModel;
  issue: (args: Proposal['arguments']) => Promise<R>;
  onUpstream: (facts: CheckParts, receipt: Receipt) => Promise<CheckParts>;
  checkpointer: BaseCheckpointSaver;
  wait?: string;
}

export function governedRefundGraph<R extends { refund_id: string }>(g: RefundGraph<R>) {
  const nodes = { tool: 'issue_refund', review: 'human_review', replan: 'support_agent', upstream: ['returns_intake'] };
  const w = governedNodes<State, R>(g.client, {
    nodes, wait: g.wait,
    check: (s) => checkRequest(s.proposal!.tool, s.proposal!.arguments, s.facts),
    run: (s) => g.issue(s.proposal!.arguments),
    toolResultId: (r) => r.refund_id,
    update: (node) => ({ trail: [{ check: 'writ_check', review: 'human_review', tool: 'issue_refund' }[node]] }),
  });
  return new StateGraph(RefundState)
    .addNode('returns_intake', async (s: State) => ({
      trail: ['returns_intake'], writ: null,
      facts: s.writ ? await g.onUpstream(s.facts, s.writ.receipt) : s.facts,
    }))
    .addNode('support_agent', async (s: State) => {
      const answer = await g.model.invoke([{ role: 'user', content: s.ask }]);
      return { trail: ['support_agent'], proposal: JSON.parse(String(answer.content)) as Proposal };
    })
    .addNode('writ_check', w.check, { ends: w.ends.check })
    .addNode('human_review', w.review, { ends: w.ends.review })
    .addNode('issue_refund', w.tool)
    .addEdge(START, 'returns_intake')
    .addEdge('returns_intake', 'support_agent')
    .addEdge('support_agent', 'writ_check')
    .addEdge('issue_refund', END)
    .compile({ checkpointer: g.checkpointer });
}
