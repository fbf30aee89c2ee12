// Package httpapi is writ's HTTP/JSON face: a [Server] that exposes a
// [writ.Service], a [writ.Ledger] and [writ.Workflows] over HTTP, a
// [Client] that satisfies all three against such a server, and the OpenAPI
// 3.1 document that describes the wire contract between them (see
// [OpenAPI] and docs/http-api.md).
//
// The server does wiring only: it decodes requests strictly, hands them to
// the service and encodes what comes back. Decisions, validation beyond the
// shape of the input, and storage belong to the service.
//
// What the package must never do:
//
//   - Re-encode a sealed record. Records are served as the exact bytes the
//     ledger keeps (writ.StoredRecord.Raw); re-encoding would change bytes
//     that were hashed and signed.
//   - Leak internal errors. Errors are mapped to HTTP statuses in one place
//     (statusOf); an internal error is logged and shown to callers only as
//     "internal error".
//   - Call the service, the ledger or the workflows on bad input. A
//     request that fails decoding, or whose query is malformed, is
//     answered with a problem and changes nothing.
//   - Turn a fail-closed receipt into success. When the service returns a
//     receipt together with an error (the record was not committed), the
//     answer is 503 with the receipt, never 200.
//   - Log request bodies.
package httpapi
