// Validation of the protocol's `stream` command (pure).

/**
 * Validate a `stream` command into the shape the client uses.
 * @returns {{spec?: object, problem?: string}}
 */
export function parseStream(cmd) {
  const method = cmd.method ?? 'GET';
  if (typeof cmd.url !== 'string') return { problem: 'url must be a string' };
  try {
    new URL(cmd.url);
  } catch {
    return { problem: `url is not a valid URL: ${JSON.stringify(cmd.url)}` };
  }
  if (method !== 'GET' && method !== 'POST') return { problem: `method must be GET or POST, got ${method}` };
  const headers = cmd.headers ?? {};
  if (typeof headers !== 'object' || Array.isArray(headers) || !Object.values(headers).every(isString)) {
    return { problem: 'headers must be an object of strings' };
  }
  const idempotent = cmd.idempotent ?? method === 'GET';
  if (typeof idempotent !== 'boolean') return { problem: 'idempotent must be a boolean' };
  const cancelAfter = cmd.cancel_after ?? null;
  if (cancelAfter !== null && !(Number.isInteger(cancelAfter) && cancelAfter >= 0)) {
    return { problem: 'cancel_after must be null or a non-negative integer' };
  }
  const body = cmd.body ?? null;
  if (body !== null && (typeof body !== 'object' || !('json' in body || 'multipart' in body))) {
    return { problem: 'body must be null, {"json": ...} or {"multipart": {...}}' };
  }
  const client = cmd.client ?? 'default';
  if (typeof client !== 'string') return { problem: `"client" must be a string, got ${JSON.stringify(client)}` };
  const lastEventId = cmd.last_event_id ?? '';
  if (typeof lastEventId !== 'string' || /[\r\n\0]/.test(lastEventId)) {
    return { problem: 'last_event_id must be null or a string without CR, LF or NUL' };
  }
  const comments = cmd.comments ?? false;
  if (typeof comments !== 'boolean') return { problem: 'comments must be a boolean' };
  const spec = { id: String(cmd.stream), url: cmd.url, method, headers, body, idempotent, cancelAfter, client };
  return { spec: { ...spec, lastEventId, comments } };
}

function isString(v) {
  return typeof v === 'string';
}
