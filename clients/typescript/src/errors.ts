// Errors the writ client throws. Every error writ answers is an RFC 9457
// problem: the client throws it as a ProblemError (or the subclass named
// for its code) carrying the problem. A governed call writ does not
// permit throws Blocked, carrying the receipt.
import type { Problem, Receipt } from './types.js';

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
 * The governed call was not permitted; `receipt` says why and what would
 * change it. `mode` (the receipt's `disposition.mode`) says where the
 * workflow goes next.
 */
export class Blocked extends WritError {
  readonly receipt: Receipt;
  constructor(receipt: Receipt) {
    const codes = receipt.reasons.map((r) => r.code).join(', ') || 'no reason given';
    super(`writ: ${receipt.outcome} (${receipt.disposition.mode}) for decision ${receipt.decision_id}: ${codes}`);
    this.receipt = receipt;
  }
  get mode(): Receipt['disposition']['mode'] { return this.receipt.disposition.mode; }
}

/**
 * The tool ran but writ did not take its execution report. `result` is
 * what the tool returned (the effect happened), `receipt` the permit and
 * `cause` the report's error; report again, the same report is idempotent.
 */
export class ReportFailed extends WritError {
  readonly receipt: Receipt;
  readonly result: unknown;
  constructor(receipt: Receipt, result: unknown, cause: unknown) {
    super(`writ: the execution report of decision ${receipt.decision_id} failed`, { cause });
    this.receipt = receipt;
    this.result = result;
  }
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
