// An attempt over fetch + ReadableStream, for the resilience layer (resilience.mjs): the
// request, the status and content-type checks, and the SSE body. Portable: it uses only
// what browsers and Node 20 both have (fetch, Response, FormData, Blob, TextDecoder, atob).
// The shell adds what its platform needs through `init` (Node: undici's dispatcher;
// the browser: the cache mode) and classifies network errors itself.

/**
 * @param {{networkFailure: (err: unknown) => {kind: string, detail: string},
 *          init?: () => object, cacheHeaders?: boolean}} options
 *   `init()`: extra RequestInit fields for every request; `cacheHeaders`: send
 *   Cache-Control and Pragma ourselves (false when the cache mode makes fetch add them).
 */
export function makeFetchTransport({ networkFailure, init = () => ({}), cacheHeaders = true, ...hooks }) {
  return {
    ...hooks,
    encodeBody,
    networkFailure,
    async exchange(call, signal, progress) {
      const request = { ...init(), method: call.spec.method, headers: call.requestHeaders({ cacheHeaders }), signal };
      if (call.body) request.body = call.body.bytes;
      const response = await fetch(call.url, request);
      call.headersArrived(progress);
      // A GET stays a GET through any redirect, so a retry or a resume can go straight where
      // it led. Which status redirected a POST (303: now a GET; 307: still a POST) fetch
      // does not say, so a POST's later attempts repeat the original request.
      if (response.redirected && call.spec.method === 'GET') call.url = response.url;
      return readResponse(call, response, progress);
    },
  };
}

/** A response: a status failure, a content-type failure, or the SSE body read to its end. */
export async function readResponse(call, response, progress) {
  if (response.status !== 200) {
    const text = await readSome(response.body);
    const header = (name) => response.headers.get(name);
    return { kind: 'status', status: response.status, header, detail: text.slice(0, 200) };
  }
  const type = response.headers.get('content-type') ?? '';
  if (!type.toLowerCase().startsWith('text/event-stream')) {
    await response.body?.cancel().catch(() => {});
    return { kind: 'content_type', detail: `content-type ${JSON.stringify(type)}` };
  }
  return call.readBody(response.body.getReader(), progress);
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
      const blob = new Blob([fromBase64(file.base64 ?? '')], { type: file.content_type ?? 'application/octet-stream' });
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

export function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
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
  } catch {
    // a body that breaks while we read the error's detail: keep what arrived
  } finally {
    reader.cancel().catch(() => {});
  }
  const joined = new Uint8Array(size);
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.byteLength;
  }
  return new TextDecoder().decode(joined.subarray(0, limit));
}
