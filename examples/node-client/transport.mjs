// What the resilient layer needs from the network: fetch with a connect timeout, and
// request bodies serialised once so that every retry sends the same bytes.

let Agent = null;

/**
 * Find undici's Agent behind Node's global fetch (no dependency needed): it is the class of
 * the global dispatcher, which exists once fetch has run. Without it there is no connect timeout.
 */
export async function initTransport() {
  try {
    await fetch('data:,');
    Agent = globalThis[Symbol.for('undici.globalDispatcher.1')]?.constructor ?? null;
  } catch {
    Agent = null;
  }
  return Agent !== null;
}

/** A dispatcher whose only timeout is the TCP connect; the policy owns every other one. */
export function makeDispatcher(connectTimeout) {
  if (Agent === null) return undefined;
  const connect = connectTimeout === null ? {} : { timeout: Math.ceil(connectTimeout * 1000) };
  return new Agent({ connect, headersTimeout: 0, bodyTimeout: 0 });
}

/** Failure codes that prove no request byte reached the server (safe to re-send anything). */
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Classify a fetch/read error: `connect` when nothing was sent, otherwise `reset`. */
export function networkFailure(err) {
  const code = err?.cause?.code ?? err?.code ?? null;
  const detail = code ?? err?.cause?.message ?? err?.message ?? String(err);
  return NOT_SENT.has(code) ? { kind: 'connect', detail } : { kind: 'reset', detail };
}

/**
 * The protocol's `body` as bytes plus a content type: `{json: any}` or
 * `{multipart: {fields: {...}, files: [{name, filename, content_type, base64}]}}`.
 * Multipart goes through FormData + Blob, serialised once (one boundary for every attempt).
 */
export async function encodeBody(body) {
  if (body === null || body === undefined) return null;
  if (typeof body !== 'object') throw new TypeError('body must be null, {json} or {multipart}');
  if ('json' in body) {
    return { bytes: new TextEncoder().encode(JSON.stringify(body.json)), contentType: 'application/json' };
  }
  if ('multipart' in body && typeof body.multipart === 'object' && body.multipart !== null) {
    const { fields = {}, files = [] } = body.multipart;
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, String(value));
    for (const file of files) {
      const blob = new Blob([Buffer.from(file.base64 ?? '', 'base64')], {
        type: file.content_type ?? 'application/octet-stream',
      });
      form.append(file.name, blob, file.filename ?? file.name);
    }
    const encoded = new Response(form);
    return {
      bytes: new Uint8Array(await encoded.arrayBuffer()),
      contentType: encoded.headers.get('content-type'),
    };
  }
  throw new TypeError('body must be null, {json} or {multipart}');
}

/** Up to `limit` bytes of a response body as text (for error details), then the body is dropped. */
export async function readSome(stream, limit = 512) {
  if (!stream) return '';
  const reader = stream.getReader();
  const parts = [];
  let size = 0;
  try {
    while (size < limit) {
      const { value, done } = await reader.read();
      if (done) break;
      parts.push(value);
      size += value.byteLength;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return Buffer.concat(parts).subarray(0, limit).toString('utf8');
}
