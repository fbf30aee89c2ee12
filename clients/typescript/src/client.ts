// The writ HTTP client: one method per route of writ's API an agent or an
// approver uses. No runtime dependency: fetch and Web Crypto.
import { Blocked, errorFor, ReportFailed, Unavailable, WritError } from './errors.js';
import type {
  ApprovalPage, ApprovalRequest, AttemptBody, CheckRequest, DecisionRecord, DecisionStory,
  ExecutionAck, ExecutionReport, InFlightPage, Problem, Receipt, RecordPage, Run, StartRunRequest,
  StepVerdict,
} from './types.js';

export interface ClientOptions {
  /** A writ API key (`writ keys create`). Without one the server must be in development mode. */
  apiKey?: string;
  /** The tenant; required in development mode, the key's when left out. */
  tenantId?: string;
  /** Retries of a 503 or 429 answer, each after its `Retry-After` (default 3). */
  maxRetries?: number;
  /** The longest wait before a retry, in seconds (default 30). */
  maxRetryWait?: number;
  /** The W3C `traceparent` to send when a call names none, e.g. the active span's. */
  traceparent?: () => string | undefined;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** How to wait before a retry (default: a timer); tests record the waits. */
  sleep?: (seconds: number) => Promise<void>;
}

export interface CallOptions {
  /** The W3C `traceparent` of this call: writ continues its trace. */
  traceparent?: string;
  signal?: AbortSignal;
}

/** A receipt, with the `traceparent` writ answered. */
export type ReceiptWithTrace = Receipt & { readonly traceparent?: string };

type ReportInput = Omit<ExecutionReport, 'decision_id' | 'result_digest'> & {
  /** The result, to digest (see resultDigest); writ never takes the result. */
  result?: unknown;
  result_digest?: string;
};

export interface GovernOptions<R> {
  /** Wait this long for an approval (`30s`, `2m`; at most `5m`) when the receipt awaits one. */
  wait?: string;
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

/**
 * The `sha256:<hex>` digest of a tool's result, for an execution report:
 * bytes as they are, a string as UTF-8, anything else as JSON with sorted
 * keys and no whitespace (the Python client's digest is the same).
 */
export async function resultDigest(result: unknown): Promise<string> {
  let data: Uint8Array<ArrayBuffer>;
  if (result instanceof Uint8Array) data = new Uint8Array(result);
  else if (typeof result === 'string') data = new TextEncoder().encode(result);
  else data = new TextEncoder().encode(sortedJSON(result === undefined ? null : result));
  const h = new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', data));
  return 'sha256:' + [...h].map((x) => x.toString(16).padStart(2, '0')).join('');
}

function sortedJSON(v: unknown): string {
  return JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && !Array.isArray(x)
    ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, (x as { [k: string]: unknown })[k]]))
    : x));
}

/** Whether a receipt is a human review that an approval can settle (not a terminal escalation). */
export function awaitsApproval(r: Receipt): boolean {
  return r.disposition.mode === 'human_review' && !r.human_review_terminal && (r.metadata.approval_ids?.length ?? 0) > 0;
}

function waitSeconds(wait: string): number {
  let total = 0;
  const rest = wait.replace(/(\d+(?:\.\d+)?)(ms|s|m|h)/g, (_m, n: string, u: string) => {
    total += Number(n) * ({ ms: 0.001, s: 1, m: 60, h: 3600 } as { [u: string]: number })[u];
    return '';
  });
  if (rest !== '' || wait === '') throw new TypeError(`wait must be a duration such as '30s' or '2m', not '${wait}'`);
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

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.opts = options;
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
    if (opts.wait) {
      waitSeconds(opts.wait);
      body.wait = opts.wait;
    }
    const { data, headers } = await this.call('POST', `/v1/decisions/${seg(decisionId)}/resume`, { body, ...opts });
    return withTrace(data as Receipt, headers);
  }

  /**
   * `POST /v1/decisions/{id}/execution`: report what happened to the
   * effect. Pass `result` to have its digest computed, or `result_digest`.
   */
  async reportExecution(decisionId: string, report: ReportInput, o: CallOptions = {}): Promise<ExecutionAck> {
    const { result, ...rest } = report;
    const body: { [k: string]: unknown } = { ...rest };
    if (this.opts.tenantId && !body.tenant_id) body.tenant_id = this.opts.tenantId;
    if (result !== undefined && !body.result_digest) body.result_digest = await resultDigest(result);
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    const { data } = await this.call('POST', `/v1/decisions/${seg(decisionId)}/execution`, { body, ...o });
    return data as ExecutionAck;
  }

  /** `GET /v1/decisions/{id}`: the decision's story. */
  async decision(decisionId: string): Promise<DecisionStory> {
    return (await this.call('GET', `/v1/decisions/${seg(decisionId)}`, { query: this.query() })).data as DecisionStory;
  }

  /** `GET /v1/decisions/in_flight`: permits still awaiting their execution reports. */
  async inFlight(q: { expired_by?: string; limit?: number; cursor?: string } = {}): Promise<InFlightPage> {
    return (await this.call('GET', '/v1/decisions/in_flight', { query: this.query(q) })).data as InFlightPage;
  }

  // ---- records ------------------------------------------------------

  /** `GET /v1/records/{id}`: the record exactly as sealed (keep these bytes to verify its hash). */
  async recordBytes(recordId: string): Promise<Uint8Array> {
    return (await this.call('GET', `/v1/records/${seg(recordId)}`, { query: this.query(), raw: true })).data as Uint8Array;
  }

  /** `GET /v1/records/{id}`, decoded. */
  async record(recordId: string): Promise<DecisionRecord> {
    return JSON.parse(new TextDecoder().decode(await this.recordBytes(recordId))) as DecisionRecord;
  }

  /** `GET /v1/records`: a page of the tenant's records, oldest first. */
  async records(q: { decision_key?: string; status?: string; subject_id?: string; trace_id?: string;
    from?: string; to?: string; limit?: number; cursor?: string } = {}): Promise<RecordPage> {
    return (await this.call('GET', '/v1/records', { query: this.query(q) })).data as RecordPage;
  }

  // ---- approvals ----------------------------------------------------

  /** `GET /v1/approvals`: a page of approval requests, oldest first. */
  async approvals(q: { state?: string; gate_id?: string; decision_key?: string; older_than?: string;
    created_before?: string; limit?: number; cursor?: string } = {}): Promise<ApprovalPage> {
    return (await this.call('GET', '/v1/approvals', { query: this.query(q) })).data as ApprovalPage;
  }

  /** `GET /v1/approvals/{id}`. */
  async approval(approvalId: string): Promise<ApprovalRequest> {
    return (await this.call('GET', `/v1/approvals/${seg(approvalId)}`, { query: this.query() })).data as ApprovalRequest;
  }

  /** `POST /v1/approvals/{id}/approve` (an approver's key: the approver is its subject). */
  approve(approvalId: string, reason: string, approver?: string): Promise<ApprovalRequest> {
    return this.decide(approvalId, 'approve', reason, approver);
  }

  /** `POST /v1/approvals/{id}/deny`. */
  deny(approvalId: string, reason: string, approver?: string): Promise<ApprovalRequest> {
    return this.decide(approvalId, 'deny', reason, approver);
  }

  private async decide(id: string, verb: string, reason: string, approver?: string): Promise<ApprovalRequest> {
    const body: { [k: string]: unknown } = { reason };
    if (this.opts.tenantId) body.tenant_id = this.opts.tenantId;
    if (approver) body.approver = approver;
    return (await this.call('POST', `/v1/approvals/${seg(id)}/${verb}`, { body })).data as ApprovalRequest;
  }

  // ---- runs and attempts --------------------------------------------

  /** `POST /v1/runs`: start a run of a workflow of the pinned pack. */
  async startRun(req: StartRunRequest): Promise<Run> {
    return (await this.call('POST', '/v1/runs', { body: this.withTenant(req) })).data as Run;
  }

  /** `POST /v1/runs/{id}/steps/{step}/attempts`: answers the step's verdict. */
  async submitAttempt(runId: string, stepId: string, attempt: AttemptBody): Promise<StepVerdict> {
    return (await this.call('POST', `/v1/runs/${seg(runId)}/steps/${seg(stepId)}/attempts`,
      { query: this.query(), body: attempt })).data as StepVerdict;
  }

  /** `GET /v1/runs/{id}`: a run, with its history. */
  async run(runId: string): Promise<Run> {
    return (await this.call('GET', `/v1/runs/${seg(runId)}`, { query: this.query() })).data as Run;
  }

  /** `GET /healthz`. */
  async health(): Promise<{ [k: string]: unknown }> {
    return (await this.call('GET', '/healthz', {})).data as { [k: string]: unknown };
  }

  // ---- the guard ----------------------------------------------------

  /**
   * Governs one call: check (an idempotency key is generated when the
   * request has none); when the receipt awaits an approval and `wait` is
   * set, resume waiting for it; if the call is still not permitted, throw
   * Blocked carrying the receipt, and `run` never runs. Otherwise run it and
   * report its execution: `succeeded` with the digest of its result, or
   * `failed` with the error's name as the code (and rethrow the error).
   */
  async governed<R>(request: CheckRequest, run: (receipt: Receipt) => Promise<R> | R, o: GovernOptions<R> = {}):
    Promise<{ result: R; receipt: Receipt; ack?: ExecutionAck }> {
    const req: CheckRequest = { ...request, idempotency_key: request.idempotency_key || newIdempotencyKey() };
    const receipt = await this.permit(req, o.wait);
    return this.runAndReport(receipt, () => run(receipt), { ...o, idempotencyKey: req.idempotency_key });
  }

  /**
   * The run half of `governed`, for a receipt that permits: run the tool,
   * then report its execution (`succeeded` with the digest of its result,
   * or `failed` with the error's name as the code, and rethrow). Refuses a
   * receipt that does not permit (Blocked) without running anything.
   */
  async runAndReport<R>(receipt: Receipt, run: () => Promise<R> | R, o: GovernOptions<R> & { idempotencyKey?: string } = {}):
    Promise<{ result: R; receipt: Receipt; ack?: ExecutionAck }> {
    if (receipt.safe_to_execute !== true) throw new Blocked(receipt);
    const common = { idempotency_key: o.idempotencyKey, started_at: new Date().toISOString() };
    let result: R;
    try {
      result = await run();
    } catch (err) {
      if (o.report !== false) {
        const e = err instanceof Error ? err : new Error(String(err));
        await this.reportExecution(receipt.decision_id, {
          ...common, ended_at: new Date().toISOString(), status: 'failed',
          error: { code: e.name || 'Error', message: e.message.slice(0, 1024) },
        }).catch(() => undefined); // the tool's own error matters more
      }
      throw err;
    }
    if (o.report === false) return { result, receipt };
    try {
      const ack = await this.reportExecution(receipt.decision_id, {
        ...common, ended_at: new Date().toISOString(), status: 'succeeded', result,
        tool_result_id: o.toolResultId?.(result),
      });
      return { result, receipt, ack };
    } catch (err) {
      throw new ReportFailed(receipt, result, err);
    }
  }

  /** The check half of `governed`: the permitting receipt, or Blocked. */
  async permit(request: CheckRequest, wait?: string): Promise<Receipt> {
    let r: Receipt = await this.check(request);
    if (!r.safe_to_execute && wait && awaitsApproval(r)) r = await this.resume(r.decision_id, request, { wait });
    if (r.safe_to_execute !== true) throw new Blocked(r);
    return r;
  }

  /**
   * A tool function governed by writ: each call's single argument object is
   * the check's `arguments`, and `request` (fixed members, or a function of
   * the arguments) fills the rest of the check request.
   */
  guard<A extends { [k: string]: unknown }, R>(tool: string, fn: (args: A) => Promise<R> | R,
    o: GovernOptions<R> & { request?: Partial<CheckRequest> | ((args: A) => Partial<CheckRequest>) } = {}):
    (args: A) => Promise<R> {
    return async (args: A) => {
      const extra = typeof o.request === 'function' ? o.request(args) : (o.request ?? {});
      const req = { tool, arguments: args, ...extra } as CheckRequest;
      return (await this.governed(req, () => fn(args), o)).result;
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

  private async call(method: string, path: string, o: { query?: URLSearchParams; body?: unknown; raw?: boolean } & CallOptions):
    Promise<{ data: unknown; headers: Headers }> {
    const qs = o.query?.toString();
    const url = this.baseUrl + path + (qs ? '?' + qs : '');
    const headers: { [k: string]: string } = { Accept: 'application/json' };
    if (o.body !== undefined) headers['Content-Type'] = 'application/json';
    if (this.opts.apiKey) headers.Authorization = `Bearer ${this.opts.apiKey}`;
    const tp = o.traceparent ?? this.opts.traceparent?.();
    if (tp) headers.traceparent = tp;
    const f = this.opts.fetch ?? globalThis.fetch;
    const sleep = this.opts.sleep ?? defaultSleep;
    const maxRetries = this.opts.maxRetries ?? 3;
    for (let attempt = 0; ; attempt++) {
      const res = await f(url, {
        method, headers, signal: o.signal,
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
      });
      if (res.ok) {
        const data = o.raw ? new Uint8Array(await res.arrayBuffer()) : await res.json();
        return { data, headers: res.headers };
      }
      const text = await res.text();
      if ((res.status === 503 || res.status === 429) && attempt < maxRetries) {
        await sleep(this.retryAfter(res.headers.get('retry-after'), attempt + 1));
        continue;
      }
      throw this.error(res, text);
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

function codeOf(status: number): Problem['code'] {
  const m: { [s: number]: Problem['code'] } = { 400: 'invalid', 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found',
    409: 'conflict', 413: 'too_large', 429: 'rate_limited', 503: 'unavailable' };
  return m[status] ?? 'internal';
}

function withTrace(r: Receipt, headers: Headers): ReceiptWithTrace {
  const tp = headers.get('traceparent');
  return tp ? Object.defineProperty({ ...r }, 'traceparent', { value: tp, enumerable: false }) as ReceiptWithTrace : r;
}

function seg(s: string): string {
  if (!s) throw new TypeError('an id is required');
  return encodeURIComponent(s);
}
