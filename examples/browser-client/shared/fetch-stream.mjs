// An attempt over fetch + ReadableStream, for the resilience layer (resilience.mjs): the
// request, the status and content-type checks, and the SSE body. Portable: it uses only
// what browsers and Node 20 both have (fetch, Response, FormData, Blob, TextDecoder, atob).
// The shell adds what its platform needs through `init` (Node: undici's dispatcher;
// the browser: the cache mode) and classifies network errors itself.

/** Statuses whose Location a fetch with `redirect: "manual"` follows by hand. */
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
export const MAX_REDIRECTS = 20; // WHATWG Fetch: a 21st redirect is a network error

/**
 * @param {{networkFailure: (err: unknown) => {kind: string, detail: string},
 *          init?: () => object, cacheHeaders?: boolean, followRedirects?: boolean}} options
 *   `init()`: extra RequestInit fields for every request; `cacheHeaders`: send
 *   Cache-Control and Pragma ourselves (false when the cache mode makes fetch add them);
 *   `followRedirects`: follow redirects by hand, where the platform shows them (Node's
 *   fetch does; a browser's `redirect: "manual"` answers with an opaque response), so a
 *   redirect that leads nowhere is an error and later attempts go as the redirects left
 *   the request. Any other key is kept as a transport hook (configure, offline, shutdown).
 */
export function makeFetchTransport({ networkFailure, init = () => ({}), cacheHeaders = true, followRedirects = false, ...hooks }) {
  const send = (call, signal, redirect) => {
    const request = { ...init(), method: call.method, headers: call.requestHeaders({ cacheHeaders }), signal, redirect };
    if (call.body && call.sendsBody) request.body = call.body.bytes;
    return fetch(call.url, request);
  };
  return {
    ...hooks,
    encodeBody,
    networkFailure,
    async exchange(call, signal, progress) {
      if (followRedirects) return followed(call, signal, progress, (c) => send(c, signal, 'manual'));
      const response = await send(call, signal, 'follow');
      call.headersArrived(progress);
      // A GET stays a GET through any redirect, so a retry or a resume can go straight where
      // it led. Which status redirected a POST (303: now a GET; 307: still a POST) fetch
      // does not say, so a POST's later attempts repeat the original request.
      if (response.redirected && call.method === 'GET') call.url = response.url;
      return readResponse(call, response, progress);
    },
  };
}

/**
 * Follow redirects by hand (WHATWG Fetch §4.4): a 303, and a 301 or 302 after a POST, go
 * on as a GET without the body; 307 and 308 keep the method and the body bytes. A 3xx
 * without a Location is the answer; an empty or bad Location, or a 21st redirect, ends the
 * attempt as a status failure that is never retried. The call keeps where they led.
 */
async function followed(call, signal, progress, send) {
  for (let hops = 0; ; hops += 1) {
    const response = await send(call);
    const location = response.headers.get('location');
    if (!REDIRECTS.has(response.status) || location === null) {
      call.headersArrived(progress);
      return readResponse(call, response, progress);
    }
    await response.body?.cancel().catch(() => {});
    const status = response.status;
    const header = (name) => response.headers.get(name);
    let next = null;
    try {
      next = location.trim() === '' ? null : new URL(location, call.url);
    } catch {
      next = null;
    }
    if (next === null) return { kind: 'status', status, header, detail: `a redirect to ${JSON.stringify(location)} cannot be followed` };
    if (hops >= MAX_REDIRECTS) return { kind: 'status', status, header, detail: `more than ${MAX_REDIRECTS} redirects` };
    if (status === 303 ? call.method !== 'HEAD' : status <= 302 && call.method === 'POST') {
      call.method = 'GET';
      call.sendsBody = false;
    }
    call.url = next.href;
  }
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
