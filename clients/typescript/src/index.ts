// writ: a TypeScript client of the writ governance runtime. ESM, no runtime
// dependency (fetch and Web Crypto). See README.md beside this package.
export { Client, awaitsApproval, checkRequest, maxWaitSeconds, newIdempotencyKey, waitSeconds } from './client.js';
export type { CallOptions, CheckParts, ClientOptions, GovernOptions, ReceiptWithTrace } from './client.js';
export { resultDigest, sortedJSON } from './digest.js';
export { MemoryPendingStore, actionDigest, idempotencyKeyFor } from './pending.js';
export type { Outbox, OutboxEntry, PendingApproval, PendingStore } from './pending.js';
export {
  Aborted, Blocked, Conflict, Forbidden, Internal, Invalid, InvalidArgument, NotFound, ProblemError, RateLimited,
  ReportFailed, Timeout, TooLarge, TransportError, Unauthenticated, Unavailable, Unreachable, WritError, errorFor,
} from './errors.js';
export type { BlockedState, ExecutionReportBody } from './errors.js';
export type * from './types.js';
