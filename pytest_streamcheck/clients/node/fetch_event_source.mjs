#!/usr/bin/env node
// @microsoft/fetch-event-source 2.0.1 behind exec protocol v1, used as an application
// uses it: fetchEventSource(url, {method, headers, body, onmessage, onerror,
// openWhenHidden: true}) with the library's default onopen and its default retry
// (onerror returns nothing, so the library waits its retry interval and reconnects).
//
// The library is written for a browser. In Node it reads `window.setTimeout`,
// `window.clearTimeout` and `window.fetch`, and its dispose() calls
// `document.removeEventListener` even with openWhenHidden set, so this file gives it what
// a Node application has to: a `window` holding Node's own timers and fetch, and a
// `document` that is never hidden and has no events. Nothing of the library is patched.

import { fetchEventSource } from '@microsoft/fetch-event-source';

import { describe, fetchBody, isTerminal, packageVersion, serve } from './protocol.mjs';

// The Node shims (docs/clients-node.md): the only globals the library touches.
if (typeof globalThis.window === 'undefined') {
  globalThis.window = { setTimeout, clearTimeout, fetch: (...args) => globalThis.fetch(...args) };
}
if (typeof globalThis.document === 'undefined') {
  globalThis.document = { hidden: false, addEventListener() {}, removeEventListener() {} };
}

function open(stream) {
  const cmd = stream.cmd;
  const headers = { ...(cmd.headers ?? {}) };
  const { body, contentType } = fetchBody(cmd.body);
  if (contentType && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) {
    headers['content-type'] = contentType;
  }
  if (cmd.last_event_id !== null && cmd.last_event_id !== undefined) {
    headers['last-event-id'] = cmd.last_event_id; // the application resumes: a header it sets
  }
  stream.state('connecting');
  let ended = false;
  const finished = fetchEventSource(cmd.url, {
    method: cmd.method,
    headers,
    body,
    signal: stream.signal,
    openWhenHidden: true,
    onmessage(msg) {
      if (stream.ended) return;
      if (isTerminal(msg.data, msg.event)) {
        ended = true;
        stream.done();
        stream.stop(); // the application stops reading at the end of the answer
        return;
      }
      stream.chunk(msg.data, { id: msg.id || undefined, event: msg.event || undefined });
    },
    onerror(err) {
      // Returning nothing: the library retries after its interval (1 s, or a retry: field's).
      stream.state('retrying', { detail: describe(err) });
    },
  });
  finished.then(
    () => {
      if (ended || stream.ended) return;
      // The body ended cleanly (onclose) without the answer's terminal event: the
      // library does not reconnect, and the application is left with a cut answer.
      stream.error('truncated', 'fetchEventSource resolved (the body closed) before the terminal event');
    },
    (err) => stream.error('other', describe(err)),
  );
}

serve({
  name: 'fetch-event-source',
  version: packageVersion('@microsoft/fetch-event-source'),
  profile: 'fetch-event-source',
  capabilities: ['get', 'post', 'multipart', 'resume', 'raw_data', 'event_fields'],
  open,
});
