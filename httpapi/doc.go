// Package httpapi is writ's HTTP/JSON face: a [Server] that exposes a
// [writ.Service], a [writ.Ledger], [writ.Workflows], [writ.Approvals],
// [writ.Replays] and [writ.ShadowReports] over HTTP, a [Client] that
// satisfies all six against
// such a server, and the OpenAPI 3.1 document that describes the wire
// contract between them (see [OpenAPI] and docs/http-api.md).
//
// The server does wiring only: it authenticates callers, decodes requests
// strictly, hands them to the service and encodes what comes back.
// Decisions, validation beyond the shape of the input, and storage belong
// to the service. Who may call which route is said in one table
// (routes); with an authenticator (Config.Authenticate), every request
// but health and the document needs an API key holding one of its route's
// roles, and acts for the key's tenant only.
//
// What the package must never do:
//
//   - Re-encode a sealed record. Records are served as the exact bytes the
//     ledger keeps (writ.StoredRecord.Raw); re-encoding would change bytes
//     that were hashed and signed.
//   - Leak internal errors. Errors are mapped to HTTP statuses in one place
//     (statusOf); an internal error is logged and shown to callers only as
//     "internal error".
//   - Call the service, the ledger, the workflows, the approvals or the
//     replays on bad input, or for a caller not allowed to. A request that fails
//     authentication or decoding, or whose query is malformed, is answered
//     with a problem and changes nothing.
//   - Turn a fail-closed receipt into success. When the service returns a
//     receipt together with an error (the record was not committed), the
//     answer is 503 with the receipt, never 200.
//   - Log request bodies.
//   - Let a request reach another tenant than its API key's: a tenant_id
//     naming another is refused before the service is called, and ids are
//     looked up within the key's tenant, so a foreign id is not found.
//   - Serve a protected route when the authenticator fails: the answer is
//     then 503, never a pass.
package httpapi
