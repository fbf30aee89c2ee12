// writ: a TypeScript client of the writ governance runtime. ESM, no runtime
// dependency (fetch and Web Crypto). See README.md beside this package.
export { Client, awaitsApproval, newIdempotencyKey, resultDigest } from './client.js';
export type { CallOptions, ClientOptions, GovernOptions, ReceiptWithTrace } from './client.js';
export {
  Blocked, Conflict, Forbidden, Internal, Invalid, NotFound, ProblemError, RateLimited, ReportFailed,
  TooLarge, Unauthenticated, Unavailable, WritError, errorFor,
} from './errors.js';
export type * from './types.js';
