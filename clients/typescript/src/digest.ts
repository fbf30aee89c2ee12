// Digests the clients agree on: a tool's result, a request, an action.

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

/** JSON with sorted object keys and no whitespace. */
export function sortedJSON(v: unknown): string {
  return JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && !Array.isArray(x)
    ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, (x as { [k: string]: unknown })[k]]))
    : x));
}
