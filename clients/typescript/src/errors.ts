// Errors the writ client throws. Every error writ answers is an RFC 9457
// problem: the client throws it as a ProblemError (or the subclass named
// for its code) carrying the problem. A governed call writ does not
// permit throws Blocked, carrying the receipt.
import type { CheckRequest, ExecutionReport, Problem, Receipt } from './types.js';

/** An execution report as sent, without the decision id (it is in the path). */
export type ExecutionReportBody = Omit<ExecutionReport, 'decision_id'>;

/** The base of every error the client throws. */
export class WritError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** writ answered an RFC 9457 problem; `problem` holds it whole. */
export class ProblemError extends WritError {
  readonly problem: Problem;
  constructor(problem: Problem) {
    const located = (problem.errors ?? []).map((e) => `${e.field ?? e.file ?? '?'}: ${e.message}`);
    super(`writ: ${problem.status} ${problem.code}: ${problem.detail ?? problem.title}` +
      (located.length ? ` (${located.join('; ')})` : ''));
    this.problem = problem;
  }
  get status(): number { return this.problem.status; }
  get code(): string { return this.problem.code; }
}

/** 400 (405, 415): the input is malformed or breaks a rule; nothing was written. */
export class Invalid extends ProblemError {}
/** 401: no API key, or one that is malformed, unknown or revoked. */
export class Unauthenticated extends ProblemError {}
/** 403: the key holds none of the route's roles, or names another tenant. */
export class Forbidden extends ProblemError {}
/** 404: no such record, decision, run or approval request for the tenant. */
export class NotFound extends ProblemError {}
/** 409: contradicts what is recorded. */
export class Conflict extends ProblemError {}
/** 413: the body or the stored envelope is over the limit. */
export class TooLarge extends ProblemError {}
/** 429: over the server's rate limit (after the client's retries). */
export class RateLimited extends ProblemError {}
/** 500: a bug or an unexpected failure in writ. */
export class Internal extends ProblemError {}

/**
 * 503: writ is overloaded or its store is down (after the client's
 * retries). When writ answered a fail-closed receipt (the record could not
 * be committed), `receipt` holds it; the action must not run.
 */
export class Unavailable extends ProblemError {
  readonly receipt?: Receipt;
  constructor(problem: Problem, receipt?: Receipt) {
    super(problem);
    this.receipt = receipt;
  }
}

/**
 * writ gave no answer: the base of the transport failures. The request may
 * or may not have reached writ; a check retried with the same idempotency
 * key writes at most one record.
 */
export class TransportError extends WritError {}

/** writ could not be reached: connection refused or reset, name not found, a body cut short. `cause` is fetch's error. */
export class Unreachable extends TransportError {}

/** The call ran past its timeout (`timeout` of the client or of the call), retries included. */
export class Timeout extends TransportError {
  /** The timeout that ran out, in seconds. */
  readonly seconds: number;
  constructor(message: string, seconds: number, options?: { cause?: unknown }) {
    super(message, options);
    this.seconds = seconds;
  }
}

/** The caller's `AbortSignal` aborted the call; `cause` is the signal's reason. */
export class Aborted extends TransportError {}

/**
 * The client refused the call before sending anything, because writ would
 * refuse it too (a `wait` over 5m, an empty id): nothing was written and
 * no tool ran. `field` names the member.
 */
export class InvalidArgument extends WritError {
  readonly field: string;
  constructor(field: string, message: string) {
    super(`writ: ${field}: ${message}`);
    this.field = field;
  }
}

/** What resuming a blocked call needs: the request as checked and its key. */
export interface BlockedState {
  /** The check request as it was sent, idempotency key included. */
  readonly request: CheckRequest;
  /** The idempotency key the check was made with. */
  readonly idempotencyKey: string;
  /** `sha256:` and the hex SHA-256 of the request as JSON with sorted keys (see resultDigest). */
  readonly requestDigest: string;
}

/**
 * The governed call was not permitted; `receipt` says why and what would
 * change it. `mode` (the receipt's `disposition.mode`) says where the
 * workflow goes next. `decisionId`, `request`, `idempotencyKey` and
 * `requestDigest` are what `client.resume` needs to decide it again.
 */
export class Blocked extends WritError {
  readonly receipt: Receipt;
  readonly request?: CheckRequest;
  readonly idempotencyKey?: string;
  readonly requestDigest?: string;
  constructor(receipt: Receipt, state?: BlockedState) {
    const codes = receipt.reasons.map((r) => r.code).join(', ') || 'no reason given';
    super(`writ: ${receipt.outcome} (${receipt.disposition.mode}) for decision ${receipt.decision_id}: ${codes}`);
    this.receipt = receipt;
    this.request = state?.request;
    this.idempotencyKey = state?.idempotencyKey;
    this.requestDigest = state?.requestDigest;
  }
  get mode(): Receipt['disposition']['mode'] { return this.receipt.disposition.mode; }
  get decisionId(): string { return this.receipt.decision_id; }
  /** The approval requests the decision waits on (empty unless an approval can settle it). */
  get approvalIds(): string[] { return this.receipt.metadata.approval_ids ?? []; }
}

/**
 * The tool ran but writ did not take its execution report: writ was
 * unreachable or down, the call timed out or was aborted, or writ answered
 * an error. `result` is what the tool returned (the effect happened),
 * `receipt` the permit, `report` the report to send again
 * (`client.reportExecution(err.decisionId, err.report)`: the same report
 * is idempotent) and `cause` the report's error. Never run the tool again
 * for it.
 */
export class ReportFailed extends WritError {
  readonly receipt: Receipt;
  readonly result: unknown;
  readonly report: ExecutionReportBody;
  constructor(receipt: Receipt, result: unknown, cause: unknown, report: ExecutionReportBody = { status: 'succeeded' }) {
    super(`writ: the execution report of decision ${receipt.decision_id} failed` +
      (cause instanceof Error ? `: ${cause.message}` : ''), { cause });
    this.receipt = receipt;
    this.result = result;
    this.report = report;
  }
  get decisionId(): string { return this.receipt.decision_id; }
}

const byCode: Record<string, new (p: Problem) => ProblemError> = {
  invalid: Invalid, unauthenticated: Unauthenticated, forbidden: Forbidden, not_found: NotFound,
  conflict: Conflict, too_large: TooLarge, rate_limited: RateLimited, unavailable: Unavailable,
  internal: Internal,
};

const byStatus: Record<number, new (p: Problem) => ProblemError> = {
  400: Invalid, 405: Invalid, 415: Invalid, 401: Unauthenticated, 403: Forbidden, 404: NotFound,
  409: Conflict, 413: TooLarge, 429: RateLimited, 500: Internal, 503: Unavailable,
};

/** The error for a problem: by its code, else by its HTTP status. */
export function errorFor(problem: Problem): ProblemError {
  const C = byCode[problem.code] ?? byStatus[problem.status] ?? ProblemError;
  return new C(problem);
}
