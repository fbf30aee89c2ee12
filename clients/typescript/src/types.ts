// Friendly names for the schemas of writ's OpenAPI document. The types
// themselves are generated (src/schema.ts, `npm run generate`), so they are
// exactly the document's.
import type { components } from './schema.js';

type S = components['schemas'];

export type CheckRequest = S['CheckRequest'];
export type Receipt = S['Receipt'];
export type Outcome = S['Outcome'];
export type DispositionMode = S['DispositionMode'];
export type Reason = S['Reason'];
export type DecisionRecord = S['Record'];
export type RecordPage = S['RecordPage'];
export type ExecutionReport = S['ExecutionReport'];
export type ExecutionAck = S['ExecutionAck'];
export type ResumeBody = S['ResumeBody'];
export type DecisionStory = S['DecisionStory'];
export type InFlightPage = S['InFlightPage'];
export type RetractRequest = S['RetractRequest'];
export type FeedbackRequest = S['FeedbackRequest'];
export type AnnotationAck = S['AnnotationAck'];
export type RecordLinks = S['RecordLinks'];
export type ReplayResult = S['ReplayResult'];
export type ApprovalRequest = S['ApprovalRequest'];
export type ApprovalPage = S['ApprovalPage'];
export type StartRunRequest = S['StartRunRequest'];
export type AddEvidenceRequest = S['AddEvidenceRequest'];
export type StoredEvidence = S['StoredEvidence'];
export type AttemptBody = S['AttemptBody'];
export type StepVerdict = S['StepVerdict'];
export type Run = S['Run'];
export type Actor = S['Actor'];
export type ActorRef = S['ActorRef'];
export type Provenance = S['Provenance'];
export type Problem = S['Problem'];
export type ProblemDetail = S['ProblemDetail'];
export type { components, paths } from './schema.js';
