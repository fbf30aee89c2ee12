// State a governed call keeps beside writ: the approvals it waits on (the
// pending store) and the reports it owes (the outbox). The interfaces and
// the in-memory store are here; the file-backed ones, which need node:fs,
// are in node.ts (`@writhq/writ-client/node`).
import { resultDigest } from './digest.js';
import type { CheckRequest, ExecutionReport } from './types.js';

/** An approval a governed action waits on: what resuming its decision needs. */
export interface PendingApproval {
  decision_id: string;
  /** The idempotency key the action was checked with; resuming sends it again. */
  idempotency_key: string;
  /** The digest of the request as checked (see requestDigest in Blocked). */
  request_digest: string;
  approval_ids: string[];
  /** When the check was made (RFC 3339). */
  created_at: string;
}

/**
 * Where a guard keeps the approvals its actions wait on, by action digest
 * (see actionDigest). An entry is set when a check awaits an approval and
 * deleted when the decision permits or ends; a later call of the same
 * action resumes the decision of the entry instead of checking again.
 * Implement it over any store an agent already has (a database, a
 * framework's run state); each method may answer a promise.
 */
export interface PendingStore {
  get(action: string): Promise<PendingApproval | undefined> | PendingApproval | undefined;
  set(action: string, pending: PendingApproval): Promise<void> | void;
  delete(action: string): Promise<void> | void;
}

/** A PendingStore in memory: it lasts as long as the process. */
export class MemoryPendingStore implements PendingStore {
  private readonly m = new Map<string, PendingApproval>();
  get(action: string): PendingApproval | undefined { return this.m.get(action); }
  set(action: string, pending: PendingApproval): void { this.m.set(action, pending); }
  delete(action: string): void { this.m.delete(action); }
}

/**
 * The digest that names an action for the pending store: `sha256:` and the
 * hex SHA-256 of the JSON (sorted keys, no whitespace) of the request's
 * `tenant_id`, `decision_key`, `tool`, `arguments`, `actor`, `subject_ids`
 * and `workflow`, the members that are absent left out. Evidence, context
 * and the idempotency key are not part of it: a retry with fresh evidence
 * is the same action.
 */
export function actionDigest(request: CheckRequest): Promise<string> {
  const a: { [k: string]: unknown } = {};
  for (const k of ['tenant_id', 'decision_key', 'tool', 'arguments', 'actor', 'subject_ids', 'workflow'] as const) {
    if (request[k] !== undefined) a[k] = request[k];
  }
  return resultDigest(a);
}

/** A report the outbox holds: begun (the tool was about to run) and, once it ran, the report to send. */
export interface OutboxEntry {
  decision_id: string;
  idempotency_key?: string;
  /** When the tool was started (RFC 3339). */
  started_at: string;
  /** The execution report to send; absent while the tool's outcome is unknown. */
  report?: Omit<ExecutionReport, 'decision_id'>;
}

/**
 * A durable journal of execution reports. The guard calls `begin` before
 * the tool runs (a failure there keeps the tool from running), `settle`
 * with the report before sending it, and `done` once writ took it;
 * `Client.replayOutbox` sends what `pending` answers.
 */
export interface Outbox {
  begin(entry: OutboxEntry): Promise<void>;
  settle(decisionId: string, report: Omit<ExecutionReport, 'decision_id'>): Promise<void>;
  done(decisionId: string): Promise<void>;
  /** The entries not done, in the order they were begun. */
  pending(): Promise<OutboxEntry[]>;
}

/**
 * An idempotency key derived from a framework's call id and the action:
 * `ik_` and the first 24 hex digits of the SHA-256 of `callId`, a newline
 * and actionDigest(request). The same call of the same action always has
 * the same key, so checking it again (a restored run) answers the same
 * decision; another call, or the same call id with another action, has
 * another key.
 */
export async function idempotencyKeyFor(request: CheckRequest, callId: string): Promise<string> {
  const data = new TextEncoder().encode(callId + '\n' + await actionDigest(request));
  const h = new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', data));
  return 'ik_' + [...h.slice(0, 12)].map((x) => x.toString(16).padStart(2, '0')).join('');
}
