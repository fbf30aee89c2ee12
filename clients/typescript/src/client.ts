// The writ HTTP client: one method per route of writ's API an agent or an
// approver uses. No runtime dependency: fetch and Web Crypto.
import {
  Aborted, Blocked, Conflict, errorFor, InvalidArgument, ReportFailed, Timeout, Unavailable, Unreachable, WritError,
} from './errors.js';
import type { ExecutionReportBody } from './errors.js';
import { resultDigest } from './digest.js';
import { actionDigest, MemoryPendingStore } from './pending.js';
import type { Outbox, OutboxEntry, PendingStore } from './pending.js';
import type {
  ApprovalPage, ApprovalRequest, AttemptBody, CheckRequest, DecisionRecord, DecisionStory,
  ExecutionAck, ExecutionReport, InFlightPage, Problem, Receipt, RecordPage, Run, StartRunRequest,
  StepVerdict, RetractRequest, FeedbackRequest, AnnotationAck, RecordLinks, ReplayResult,
  AddEvidenceRequest, StoredEvidence,
} from './types.js';

export interface ClientOptions {
  /** A writ API key (`writ keys create`). Without one the server must be in development mode. */
  apiKey?: string;
  /** The tenant; required in development mode, the key's when left out. */
  tenantId?: string;
  /**
   * A JWT naming the human user the agent acts for, signed by an issuer the
   * key's tenant trusts: sent as `Writ-Delegation` with every call, it makes
   * `actor.delegated_user_id` authenticated (docs/trust.md).
   */
  delegationToken?: string;
  /** Retries of a 503 or 429 answer, each after its `Retry-After` (default 3). */
  maxRetries?: number;
  /** The longest wait before a retry, in seconds (default 30). */
  maxRetryWait?: number;
  /** The W3C `traceparent` to send when a call names none, e.g. the active span's. */
  traceparent?: () => string | undefined;
  /**
   * How long one call may take, in seconds, retries and their waits
   * included (default 30); a resume's `wait` is added to it. Past it the
   * call throws Timeout.
   */
  timeout?: number;
  /**
   * Where the guard keeps the approvals it waits on, by action (default: in
   * memory, for this client). A file store (`FilePendingStore` of
   * `@writhq/writ-client/node`) keeps them across restarts.
   */
  pending?: PendingStore;
  /**
   * A durable journal of execution reports (`FileOutbox` of
   * `@writhq/writ-client/node`): the guard writes to it before the tool
   * runs and before the report is sent, so `replayOutbox()` can send a
   * report the agent's crash lost.
   */
  outbox?: Outbox;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** How to wait before a retry (default: a timer); tests record the waits. */
  sleep?: (seconds: number) => Promise<void>;
}

export interface CallOptions {
  /** The W3C `traceparent` of this call: writ continues its trace. */
  traceparent?: string;
  /** Aborts the call: it throws Aborted. */
  signal?: AbortSignal;
  /** This call's timeout in seconds (default the client's `timeout`). */
  timeout?: number;
}

/** A receipt, with the `traceparent` writ answered. */
export type ReceiptWithTrace = Receipt & { readonly traceparent?: string };

/**
 * The parts of a check request besides the tool and its arguments: the
 * actor (required), subjects, evidence, context, outputs, workflow, … .
 */
export type CheckParts = Omit<CheckRequest, 'tool' | 'arguments'>;

/**
 * A check request typed from its parts: `checkRequest('payments.issue_refund',
 * args, { actor, subject_ids, evidence })`. The parts may not name another
 * tool or other arguments.
 */
export function checkRequest<A extends { [k: string]: unknown }>(tool: string, args: A, parts: CheckParts): CheckRequest {
  const { tool: _t, arguments: _a, ...rest } = parts as CheckParts & { tool?: unknown; arguments?: unknown };
  return { ...rest, tool, arguments: args };
}

type ReportInput = Omit<ExecutionReport, 'decision_id' | 'result_digest'> & {
  /** The result, to digest (see resultDigest); writ never takes the result. */
  result?: unknown;
  result_digest?: string;
};

export interface GovernOptions<R> {
  /** Wait this long for an approval (`30s`, `2m`; at most `5m`) when the receipt awaits one. */
  wait?: string;
  /** Aborts the governed call: before the tool runs it throws Aborted; after, ReportFailed. */
  signal?: AbortSignal;
  /** The timeout of each of the guard's calls to writ, in seconds (default the client's). */
  timeout?: number;
  /** Where to keep the approval this call waits on (default the client's `pending`). */
  pending?: PendingStore;
  /** Report the execution after the tool runs (default true). */
  report?: boolean;
  /** The id of the tool's result, for the report. */
  toolResultId?: (result: R) => string | undefined;
}

/** A fresh idempotency key: `ik_` and 24 random hex digits. */
export function newIdempotencyKey(): string {
  const b = new Uint8Array(12);
  globalThis.crypto.getRandomValues(b);
  return 'ik_' + [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
}

/** Whether a receipt is a human review that an approval can settle (not a terminal escalation). */
export function awaitsApproval(r: Receipt): boolean {
  return r.disposition.mode === 'human_review' && !r.human_review_terminal && (r.metadata.approval_ids?.length ?? 0) > 0;
}

/** writ's longest resume wait (`MaxResumeWait`), in seconds. */
export const maxWaitSeconds = 300;

const goUnits: { [u: string]: number } = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, 'μs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

/**
 * The seconds of a `wait` (a Go duration such as `30s`, `1m30s`, `500ms`),
 * or InvalidArgument when writ would refuse it: not a duration, or over 5m.
 */
export function waitSeconds(wait: string): number {
  let total = 0;
  const rest = wait.replace(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g, (_m, n: string, u: string) => {
    total += Number(n) * goUnits[u];
    return '';
  });
  if (rest !== '' || wait === '') throw new InvalidArgument('wait', `must be a duration such as '30s' or '2m', not '${wait}'`);
  if (total > maxWaitSeconds) throw new InvalidArgument('wait', `'${wait}' is over writ's maximum, 5m`);
  return total;
}

const defaultSleep = (s: number) => new Promise<void>((resolve) => setTimeout(resolve, s * 1000));

/**
 * A client of one writ server. Answers of 503 (overloaded, store down, a
 * fail-closed receipt) and 429 are retried up to `maxRetries` times, each
 * after the `Retry-After` the server sent. A check always carries an
 * idempotency key (one is generated when it has none), so a retry writes at
 * most one record.
 */
export class Client {
  readonly baseUrl: string;
  private readonly opts: ClientOptions;
  /** The pending store of the guard and the adapters (the `pending` option, or one in memory). */
  readonly pending: PendingStore;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.opts = options;
    this.pending = options.pending ?? new MemoryPendingStore();
  }

  // ---- boundary checks ----------------------------------------------

  /** `POST /v1/check`: may this side effect happen now? Answers the receipt, whatever its outcome. */
  async check(request: CheckRequest, o: CallOptions = {}): Promise<ReceiptWithTrace> {
    const body = this.withTenant(request);
    if (!body.idempotency_key) body.idempotency_key = newIdempotencyKey();
    const { data, headers } = await this.call('POST', '/v1/check', { body, ...o });
    return withTrace(data as Receipt, headers);
  }

  /**
   * `POST /v1/decisions/{id}/resume`: decide a blocked decision's action
   * again. With `wait`, writ waits for an approval the decision waits on;
   * if none is decided in time the blocked receipt comes back with
   * `metadata.repeated: "still_waiting"`.
   */
  async resume(decisionId: string, request: CheckRequest, opts: CallOptions & { wait?: string } = {}): Promise<ReceiptWithTrace> {
    const body: { [k: string]: unknown } = { request: this.withTenant(request) };
    if (this.opts.tenantId) body.tenant_id = this.opts.tenantId;
    let waited = 0;
    if (opts.wait) {
      waited = waitSeconds(opts.wait);
      body.wait = opts.wait;
    }
    const { data, headers } = await this.call('POST', `/v1/decisions/${seg('decisionId', decisionId)}/resume`,
      { body, ...opts, extraSeconds: waited });
    return withTrace(data as Receipt, headers);
  }

  /**
   * `POST /v1/decisions/{id}/execution`: report what happened to the
   * effect. Pass `result` to have its digest computed, or `result_digest`.
   */
  async reportExecution(decisionId: string, report: ReportInput, o: CallOptions = {}): Promise<ExecutionAck> {
    const body = await this.reportBody(report);
    const { data } = await this.call('POST', `/v1/decisions/${seg('decisionId', decisionId)}/execution`, { body, ...o });
    return data as ExecutionAck;
  }

  /** The report as sent: the result digested, the tenant set, no undefined member. */
  private async reportBody(report: ReportInput): Promise<ExecutionReportBody> {
    const { result, ...rest } = report;
    const body: { [k: string]: unknown } = { ...rest };
    if (this.opts.tenantId && !body.tenant_id) body.tenant_id = this.opts.tenantId;
    if (result !== undefined && !body.result_digest) body.result_digest = await resultDigest(result);
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    return body as ExecutionReportBody;
  }

  /**
   * Sends every report the outbox holds that writ has not taken (an agent
   * that crashed after its tool ran left them there); call it when the
   * agent starts. A tool that was begun but never finished has no report:
   * its outcome is unknown, so it is answered in `unknown` and left in the
   * outbox for a person to settle (`reportExecution`, then `outbox.done`).
   */
  async replayOutbox(o: CallOptions = {}): Promise<{ reported: ExecutionAck[]; unknown: OutboxEntry[]; failed: { decision_id: string; error: unknown }[] }> {
    const outbox = this.opts.outbox;
    const out = { reported: [] as ExecutionAck[], unknown: [] as OutboxEntry[], failed: [] as { decision_id: string; error: unknown }[] };
    if (!outbox) return out;
    for (const e of await outbox.pending()) {
      if (!e.report) {
        out.unknown.push(e);
        continue;
      }
      try {
        const { data } = await this.call('POST', `/v1/decisions/${seg('decisionId', e.decision_id)}/execution`, { body: e.report, ...o });
        await outbox.done(e.decision_id);
        out.reported.push(data as ExecutionAck);
      } catch (error) {
        out.failed.push({ decision_id: e.decision_id, error });
      }
    }
    return out;
  }

  /** `GET /v1/decisions/{id}`: the decision's story. */
  async decision(decisionId: string, o: CallOptions = {}): Promise<DecisionStory> {
    return (await this.call('GET', `/v1/decisions/${seg('decisionId', decisionId)}`, { query: this.query(), ...o })).data as DecisionStory;
  }

  /** `GET /v1/decisions/in_flight`: permits still awaiting their execution reports. */
  async inFlight(q: { expired_by?: string; limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<InFlightPage> {
    return (await this.call('GET', '/v1/decisions/in_flight', { query: this.query(q), ...o })).data as InFlightPage;
  }

  // ---- records ------------------------------------------------------

  /** `POST /v1/records/{id}/retract`: seal a retraction of the record (who, why); the record itself is never changed. */
  async retract(recordId: string, r: RetractRequest, o: CallOptions = {}): Promise<AnnotationAck> {
    return (await this.call('POST', `/v1/records/${seg('recordId', recordId)}/retract`, { body: this.withTenant(r), ...o })).data as AnnotationAck;
  }

  /** `POST /v1/records/{id}/feedback`: seal a feedback entry (score, label, comment, author, rule change) that links back to the record. */
  async feedback(recordId: string, f: FeedbackRequest, o: CallOptions = {}): Promise<AnnotationAck> {
    return (await this.call('POST', `/v1/records/${seg('recordId', recordId)}/feedback`, { body: this.withTenant(f), ...o })).data as AnnotationAck;
  }

  /** `GET /v1/records/{id}/links`: what supersedes the record, its retraction, its feedback and its last recorded replay. */
  async links(recordId: string, o: CallOptions = {}): Promise<RecordLinks> {
    return (await this.call('GET', `/v1/records/${seg('recordId', recordId)}/links`, { query: this.query(), ...o })).data as RecordLinks;
  }

  /** `POST /v1/records/{id}/replay`: replay the record and seal the result as a record. */
  async recordReplay(recordId: string, o: CallOptions = {}): Promise<{ result: ReplayResult; record: AnnotationAck }> {
    return (await this.call('POST', `/v1/records/${seg('recordId', recordId)}/replay`, { query: this.query(), ...o })).data as { result: ReplayResult; record: AnnotationAck };
  }

  /** `GET /v1/records/{id}`: the record exactly as sealed (keep these bytes to verify its hash). */
  async recordBytes(recordId: string, o: CallOptions = {}): Promise<Uint8Array> {
    return (await this.call('GET', `/v1/records/${seg('recordId', recordId)}`, { query: this.query(), raw: true, ...o })).data as Uint8Array;
  }

  /** `GET /v1/records/{id}`, decoded. */
  async record(recordId: string, o: CallOptions = {}): Promise<DecisionRecord> {
    return JSON.parse(new TextDecoder().decode(await this.recordBytes(recordId, o))) as DecisionRecord;
  }

  /**
   * `GET /v1/records`: a page of the tenant's records, oldest first (`order: 'newest'`: newest first).
   * Every seed query key is a filter: decision_key, subject_id, status, approval_mode_effective,
   * policy_decision_id, trace_id and approver; refers_to lists the records about a record, and
   * scorecard: 'failed' the records whose scorecard failed their spec's pass mark.
   */
  async records(q: { decision_key?: string; status?: string; subject_id?: string; trace_id?: string;
    approval_mode_effective?: string; policy_decision_id?: string; approver?: string;
    refers_to?: string; scorecard?: 'failed';
    decision_key_prefix?: string; subject_prefix?: string; outcome?: string; order?: 'chain' | 'newest';
    from?: string; to?: string; limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<RecordPage> {
    return (await this.call('GET', '/v1/records', { query: this.query(q), ...o })).data as RecordPage;
  }

  // ---- approvals ----------------------------------------------------

  /** `GET /v1/approvals`: a page of approval requests, oldest first. */
  async approvals(q: { state?: string; gate_id?: string; decision_key?: string; older_than?: string;
    created_before?: string; limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<ApprovalPage> {
    return (await this.call('GET', '/v1/approvals', { query: this.query(q), ...o })).data as ApprovalPage;
  }

  /** `GET /v1/approvals/{id}`. */
  async approval(approvalId: string, o: CallOptions = {}): Promise<ApprovalRequest> {
    return (await this.call('GET', `/v1/approvals/${seg('approvalId', approvalId)}`, { query: this.query(), ...o })).data as ApprovalRequest;
  }

  /** `POST /v1/approvals/{id}/approve` (an approver's key: the approver is its subject). */
  approve(approvalId: string, reason: string, approver?: string, o: CallOptions = {}): Promise<ApprovalRequest> {
    return this.decide(approvalId, 'approve', reason, approver, o);
  }

  /** `POST /v1/approvals/{id}/deny`. */
  deny(approvalId: string, reason: string, approver?: string, o: CallOptions = {}): Promise<ApprovalRequest> {
    return this.decide(approvalId, 'deny', reason, approver, o);
  }

  /**
   * `POST /v1/approvals/{id}/withdraw`: the requester (an agent's key)
   * withdraws a pending approval request it no longer needs; sealed as a
   * record, and a resume of its decision then ends it (`approval_withdrawn`).
   */
  async withdraw(approvalId: string, reason?: string, o: CallOptions = {}): Promise<ApprovalRequest> {
    const body: { [k: string]: unknown } = {};
    if (this.opts.tenantId) body.tenant_id = this.opts.tenantId;
    if (reason) body.reason = reason;
    return (await this.call('POST', `/v1/approvals/${seg('approvalId', approvalId)}/withdraw`, { body, ...o })).data as ApprovalRequest;
  }

  /**
   * Withdraws the approvals the guard waits on for this action (see
   * actionDigest) and forgets it, so its next call is decided afresh.
   * Answers the withdrawn requests; none when the store holds no approval
   * for the action. A request decided meanwhile (409) is left as it is.
   */
  async withdrawPending(request: CheckRequest, reason?: string,
    o: CallOptions & { pending?: PendingStore } = {}): Promise<ApprovalRequest[]> {
    const store = o.pending ?? this.pending;
    const action = await actionDigest(this.withTenant(request));
    const held = await store.get(action);
    if (!held) return [];
    const out: ApprovalRequest[] = [];
    for (const id of held.approval_ids) {
      try {
        out.push(await this.withdraw(id, reason, o));
      } catch (err) {
        if (!(err instanceof Conflict)) throw err;
      }
    }
    await store.delete(action);
    return out;
  }

  private async decide(id: string, verb: string, reason: string, approver: string | undefined, o: CallOptions): Promise<ApprovalRequest> {
    const body: { [k: string]: unknown } = { reason };
    if (this.opts.tenantId) body.tenant_id = this.opts.tenantId;
    if (approver) body.approver = approver;
    return (await this.call('POST', `/v1/approvals/${seg('approvalId', id)}/${verb}`, { body, ...o })).data as ApprovalRequest;
  }

  // ---- evidence -------------------------------------------------------

  /**
   * `POST /v1/evidence`: store an evidence item. Either its fields, from an
   * API key with the `issuer` role (writ sets the issuer from the key), or
   * `jws` alone: an item an issuer signed, which any key of the tenant may
   * carry in. Answers the stored item with its content address.
   */
  async submitEvidence(item: Omit<AddEvidenceRequest, 'tenant_id'> & { tenant_id?: string }, o: CallOptions = {}): Promise<StoredEvidence> {
    return (await this.call('POST', '/v1/evidence', { body: this.withTenant(item), ...o })).data as StoredEvidence;
  }

  /** `GET /v1/evidence/{id}`: a stored item by id or content address (`sha256:…`), with its revocation. */
  async evidence(id: string, o: CallOptions = {}): Promise<StoredEvidence> {
    return (await this.call('GET', `/v1/evidence/${seg('id', id)}`, { query: this.query(), ...o })).data as StoredEvidence;
  }

  /** `POST /v1/evidence/{id}/revoke`: revoke an item (an issuer key); a sealed record, never an edit. */
  async revokeEvidence(id: string, reason: string, o: CallOptions = {}): Promise<StoredEvidence> {
    return (await this.call('POST', `/v1/evidence/${seg('id', id)}/revoke`, { body: this.withTenant({ reason }), ...o })).data as StoredEvidence;
  }

  // ---- runs and attempts --------------------------------------------

  /** `POST /v1/runs`: start a run of a workflow of the pinned pack. */
  async startRun(req: StartRunRequest, o: CallOptions = {}): Promise<Run> {
    return (await this.call('POST', '/v1/runs', { body: this.withTenant(req), ...o })).data as Run;
  }

  /** `POST /v1/runs/{id}/steps/{step}/attempts`: answers the step's verdict. */
  async submitAttempt(runId: string, stepId: string, attempt: AttemptBody, o: CallOptions = {}): Promise<StepVerdict> {
    return (await this.call('POST', `/v1/runs/${seg('runId', runId)}/steps/${seg('stepId', stepId)}/attempts`,
      { query: this.query(), body: attempt, ...o })).data as StepVerdict;
  }

  /** `GET /v1/runs/{id}`: a run, with its history. */
  async run(runId: string, o: CallOptions = {}): Promise<Run> {
    return (await this.call('GET', `/v1/runs/${seg('runId', runId)}`, { query: this.query(), ...o })).data as Run;
  }

  /** `GET /healthz`. */
  async health(o: CallOptions = {}): Promise<{ [k: string]: unknown }> {
    return (await this.call('GET', '/healthz', { ...o })).data as { [k: string]: unknown };
  }

  // ---- the guard ----------------------------------------------------

  /**
   * Governs one call: check, run, report. When the receipt awaits an
   * approval the action is kept in the pending store, and with `wait` the
   * decision is resumed waiting for it; if the call is still not permitted
   * it throws Blocked (with what resuming needs) and `run` never runs. A
   * later call of the same action (see actionDigest) resumes that decision
   * instead of opening another approval. Otherwise `run` runs and its
   * execution is reported: `succeeded` with the digest of its result, or
   * `failed` with the error's name as the code (and the error is thrown
   * again). A report writ does not take throws ReportFailed with the result.
   */
  async governed<R>(request: CheckRequest, run: (receipt: Receipt) => Promise<R> | R, o: GovernOptions<R> = {}):
    Promise<{ result: R; receipt: Receipt; ack?: ExecutionAck }> {
    const { receipt, idempotencyKey } = await this.permitted(request, o);
    return this.runAndReport(receipt, () => run(receipt), { ...o, idempotencyKey });
  }

  /**
   * The run half of `governed`, for a receipt that permits: run the tool,
   * then report its execution (`succeeded` with the digest of its result,
   * or `failed` with the error's name as the code, and rethrow). Refuses a
   * receipt that does not permit (Blocked) without running anything. With
   * an outbox, the decision is journalled before the tool runs and the
   * report before it is sent.
   */
  async runAndReport<R>(receipt: Receipt, run: () => Promise<R> | R,
    o: GovernOptions<R> & { idempotencyKey?: string } = {}): Promise<{ result: R; receipt: Receipt; ack?: ExecutionAck }> {
    if (receipt.safe_to_execute !== true) throw new Blocked(receipt);
    if (o.signal?.aborted) throw new Aborted('writ: the call was aborted before the tool ran', { cause: o.signal.reason });
    const outbox = o.report === false ? undefined : this.opts.outbox;
    const started = new Date().toISOString();
    const common = { idempotency_key: o.idempotencyKey, started_at: started };
    const call: CallOptions = { signal: o.signal, timeout: o.timeout };
    // Written before the tool runs: a crash from here on leaves a trace.
    await outbox?.begin({ decision_id: receipt.decision_id, idempotency_key: o.idempotencyKey, started_at: started });
    let result: R;
    try {
      result = await run();
    } catch (err) {
      if (o.report !== false) {
        const e = err instanceof Error ? err : new Error(String(err));
        const report = await this.reportBody({
          ...common, ended_at: new Date().toISOString(), status: 'failed',
          error: { code: e.name || 'Error', message: e.message.slice(0, 1024) },
        });
        // The tool's own error matters more; a report writ did not take
        // stays in the outbox for replayOutbox.
        await this.sendReport(receipt.decision_id, report, call, outbox).catch(() => undefined);
      }
      throw err;
    }
    if (o.report === false) return { result, receipt };
    let report: ExecutionReportBody = { ...common, status: 'succeeded' };
    try {
      report = await this.reportBody({
        ...common, ended_at: new Date().toISOString(), status: 'succeeded', result,
        tool_result_id: o.toolResultId?.(result),
      });
      const ack = await this.sendReport(receipt.decision_id, report, call, outbox);
      return { result, receipt, ack };
    } catch (err) {
      throw new ReportFailed(receipt, result, err, report);
    }
  }

  private async sendReport(decisionId: string, report: ExecutionReportBody, o: CallOptions, outbox?: Outbox): Promise<ExecutionAck> {
    let journalled: unknown;
    try {
      await outbox?.settle(decisionId, report);
    } catch (err) {
      journalled = err; // still try to send it
    }
    const { data } = await this.call('POST', `/v1/decisions/${seg('decisionId', decisionId)}/execution`, { body: report, ...o });
    if (outbox && journalled === undefined) await outbox.done(decisionId).catch(() => undefined);
    return data as ExecutionAck;
  }

  /**
   * The check half of `governed`: the permitting receipt, or Blocked.
   * `wait` (or `{ wait, signal, timeout, pending }`) as for `governed`.
   */
  async permit(request: CheckRequest, wait?: string | Omit<GovernOptions<unknown>, 'report' | 'toolResultId'>): Promise<Receipt> {
    return (await this.permitted(request, typeof wait === 'string' ? { wait } : (wait ?? {}))).receipt;
  }

  private async permitted(request: CheckRequest, o: Omit<GovernOptions<unknown>, 'report' | 'toolResultId'>):
    Promise<{ receipt: Receipt; idempotencyKey: string }> {
    const waited = o.wait ? waitSeconds(o.wait) : 0; // refused before any request
    const call: CallOptions = { signal: o.signal, timeout: o.timeout };
    const store = o.pending ?? this.pending;
    const action = await actionDigest(this.withTenant(request));
    const held = await store.get(action);
    let receipt: Receipt | undefined;
    let req: CheckRequest = request;
    if (held && (!request.idempotency_key || request.idempotency_key === held.idempotency_key)) {
      // The same action already waits on an approval: decide that one again.
      req = { ...request, idempotency_key: held.idempotency_key };
      try {
        // With no wait of its own, 1ms: an undecided approval answers
        // still_waiting and nothing is written, rather than a fresh decision.
        receipt = await this.resume(held.decision_id, req, { ...call, wait: waited > 0 ? o.wait : '1ms' });
      } catch (err) {
        if (!(err instanceof Conflict)) throw err;
        await store.delete(action); // the decision was settled meanwhile: decide afresh
        req = { ...request, idempotency_key: request.idempotency_key === held.idempotency_key ? newIdempotencyKey() : request.idempotency_key };
      }
    }
    if (!receipt) {
      req = { ...req, idempotency_key: req.idempotency_key || newIdempotencyKey() };
      receipt = await this.check(req, call);
      if (awaitsApproval(receipt)) {
        await store.set(action, {
          decision_id: receipt.decision_id, idempotency_key: req.idempotency_key as string,
          request_digest: await resultDigest(this.withTenant(req)), approval_ids: receipt.metadata.approval_ids ?? [],
          created_at: new Date().toISOString(),
        });
        if (waited > 0) receipt = await this.resume(receipt.decision_id, req, { ...call, wait: o.wait });
      }
    }
    const idempotencyKey = req.idempotency_key as string;
    if (receipt.safe_to_execute !== true) {
      if (!awaitsApproval(receipt)) await store.delete(action);
      throw new Blocked(receipt, { request: req, idempotencyKey, requestDigest: await resultDigest(this.withTenant(req)) });
    }
    await store.delete(action); // the permit uses the approval up
    return { receipt, idempotencyKey };
  }

  /**
   * A tool function governed by writ: each call's single argument object is
   * the check's `arguments`, and `request` (fixed members, or a function of
   * the arguments) fills the rest of the check request (see checkRequest).
   */
  guard<A extends { [k: string]: unknown }, R>(tool: string, fn: (args: A) => Promise<R> | R,
    o: GovernOptions<R> & { request: CheckParts | ((args: A) => CheckParts) }): (args: A, call?: CallOptions) => Promise<R> {
    return async (args: A, call: CallOptions = {}) => {
      const parts = typeof o.request === 'function' ? o.request(args) : o.request;
      const opts = { ...o, signal: call.signal ?? o.signal, timeout: call.timeout ?? o.timeout };
      return (await this.governed(checkRequest(tool, args, parts), () => fn(args), opts)).result;
    };
  }

  // ---- plumbing -----------------------------------------------------

  private withTenant<T extends object>(body: T): T & { tenant_id?: string; idempotency_key?: string } {
    const out = { ...body } as T & { tenant_id?: string; idempotency_key?: string };
    if (this.opts.tenantId && !out.tenant_id) out.tenant_id = this.opts.tenantId;
    return out;
  }

  private query(q: { [k: string]: string | number | undefined } = {}): URLSearchParams {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') p.set(k, String(v));
    if (this.opts.tenantId) p.set('tenant_id', this.opts.tenantId);
    return p;
  }

  private async call(method: string, path: string,
    o: { query?: URLSearchParams; body?: unknown; raw?: boolean; extraSeconds?: number } & CallOptions):
    Promise<{ data: unknown; headers: Headers }> {
    const qs = o.query?.toString();
    const url = this.baseUrl + path + (qs ? '?' + qs : '');
    const headers: { [k: string]: string } = { Accept: 'application/json' };
    if (o.body !== undefined) headers['Content-Type'] = 'application/json';
    if (this.opts.apiKey) headers.Authorization = `Bearer ${this.opts.apiKey}`;
    if (this.opts.delegationToken) headers['Writ-Delegation'] = this.opts.delegationToken;
    const tp = o.traceparent ?? this.opts.traceparent?.();
    if (tp) headers.traceparent = tp;
    const f = this.opts.fetch ?? globalThis.fetch;
    const sleep = this.opts.sleep ?? defaultSleep;
    const maxRetries = this.opts.maxRetries ?? 3;
    const seconds = (o.timeout ?? this.opts.timeout ?? 30) + (o.extraSeconds ?? 0);
    if (o.signal?.aborted) throw new Aborted(`writ: ${method} ${path} aborted before it was sent`, { cause: o.signal.reason });
    // One signal for the whole call, retries included: the caller's abort
    // or the timeout, whichever comes first, each its own error.
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Timeout(`writ: ${method} ${path} timed out after ${seconds}s`, seconds)), seconds * 1000);
    const onAbort = () => ctl.abort(new Aborted(`writ: ${method} ${path} aborted`, { cause: o.signal?.reason }));
    o.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (let attempt = 0; ; attempt++) {
        const res = await f(url, {
          method, headers, signal: ctl.signal,
          body: o.body === undefined ? undefined : JSON.stringify(o.body),
        });
        if (res.ok) {
          const data = o.raw ? new Uint8Array(await res.arrayBuffer()) : await res.json();
          return { data, headers: res.headers };
        }
        const text = await res.text();
        if ((res.status === 503 || res.status === 429) && attempt < maxRetries) {
          await abortable(sleep(this.retryAfter(res.headers.get('retry-after'), attempt + 1)), ctl.signal);
          continue;
        }
        throw this.error(res, text);
      }
    } catch (err) {
      if (err instanceof WritError) throw err;
      if (ctl.signal.aborted && ctl.signal.reason instanceof WritError) throw ctl.signal.reason;
      throw new Unreachable(`writ: ${method} ${path}: ${transportMessage(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
    }
  }

  private retryAfter(value: string | null, attempt: number): number {
    let wait: number | undefined;
    if (value && /^\d+$/.test(value.trim())) wait = Number(value.trim());
    else if (value) {
      const when = Date.parse(value);
      if (!Number.isNaN(when)) wait = Math.max(0, (when - Date.now()) / 1000);
    }
    if (wait === undefined) wait = Math.min(2 ** (attempt - 1), 8);
    return Math.min(wait, this.opts.maxRetryWait ?? 30);
  }

  private error(res: Response, text: string): WritError {
    let doc: { [k: string]: unknown } = {};
    try {
      const parsed = JSON.parse(text);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) doc = parsed;
    } catch { /* not JSON */ }
    const ctype = (res.headers.get('content-type') ?? '').split(';')[0].trim();
    if (ctype === 'application/json' && doc.receipt_type) {
      // A fail-closed receipt: writ could not commit the record.
      const receipt = withTrace(doc as unknown as Receipt, res.headers);
      const problem: Problem = {
        type: 'urn:writ:problem:unavailable', title: 'Service unavailable', status: res.status, code: 'unavailable',
        detail: `writ could not commit the decision record (fail-closed receipt: ${receipt.reasons.map((r) => r.code).join(', ')})`,
      };
      return new Unavailable(problem, receipt);
    }
    if (typeof doc.code !== 'string') {
      doc = { type: 'about:blank', title: `HTTP ${res.status}`, status: res.status, detail: text.slice(0, 200), code: codeOf(res.status) };
    }
    return errorFor({ ...(doc as unknown as Problem), status: typeof doc.status === 'number' ? doc.status : res.status });
  }
}

/** Waits for p, or throws the signal's reason when it aborts first. */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then((v) => { signal.removeEventListener('abort', onAbort); resolve(v); },
      (e) => { signal.removeEventListener('abort', onAbort); reject(e); });
  });
}

/** fetch's error, with the system error under it (ECONNREFUSED, …) when there is one. */
function transportMessage(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const under = e?.cause?.code ?? e?.cause?.message;
  return (e?.message ?? String(err)) + (under ? ` (${under})` : '');
}

function codeOf(status: number): Problem['code'] {
  const m: { [s: number]: Problem['code'] } = { 400: 'invalid', 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found',
    409: 'conflict', 413: 'too_large', 429: 'rate_limited', 503: 'unavailable' };
  return m[status] ?? 'internal';
}

function withTrace(r: Receipt, headers: Headers): ReceiptWithTrace {
  const tp = headers.get('traceparent');
  return tp ? Object.defineProperty({ ...r }, 'traceparent', { value: tp, enumerable: false }) as ReceiptWithTrace : r;
}

function seg(field: string, s: string): string {
  if (typeof s !== 'string' || !s) throw new InvalidArgument(field, 'an id is required');
  return encodeURIComponent(s);
}
