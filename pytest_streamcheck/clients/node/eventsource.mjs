#!/usr/bin/env node
// eventsource (npm) behind exec protocol v1: one `new EventSource(url)` per stream, as an
// application opens one, listening for the event types an LLM stream sends. The library
// follows the WHATWG algorithm: it reconnects after a network error or a clean end (with
// Last-Event-ID), and fails the connection for good on a status other than 200 or a
// wrong Content-Type. A GET without headers of its own, as EventSource is.

import { EventSource } from 'eventsource';

import { isTerminal, packageVersion, serve, TERMINAL_EVENTS } from './protocol.mjs';

// EventSource hands a named event only to listeners of that name: an application listens
// for the types its API sends. These are the kit's wire formats' types and the few its SSE
// cases write by hand (the same list as the kit's native browser page,
// pytest_streamcheck/browser/eventsource.js). `error` is the EventSource's own.
const NAMED_EVENTS = [
  'token', 'content_block_delta', 'response.output_text.delta',
  'message_start', 'content_block_start', 'content_block_stop', 'message_delta', 'ping',
  'response.created', 'response.in_progress', 'response.output_item.added',
  'response.content_part.done', 'response.output_text.done',
  'delta', 'usage', 'tool_call', ' delta', 'x:y',
  ...TERMINAL_EVENTS,
];

function open(stream) {
  const cmd = stream.cmd;
  if (cmd.method !== 'GET') {
    stream.error('other', `EventSource cannot send a ${cmd.method}`);
    return;
  }
  const dropped = Object.keys(cmd.headers ?? {});
  if (dropped.length) stream.log(`EventSource sends no headers of its own: ${dropped.join(', ')} dropped`);
  if (cmd.last_event_id !== null && cmd.last_event_id !== undefined) {
    stream.log('EventSource cannot send Last-Event-ID on its first request: opened without it');
  }
  stream.state('connecting');
  const source = new EventSource(cmd.url);
  stream.onStop(() => source.close());
  const onEvent = (e) => {
    if (stream.ended) return;
    if (isTerminal(e.data, e.type)) {
      stream.done();
      stream.stop();
      return;
    }
    stream.chunk(e.data, { id: e.lastEventId || undefined, event: e.type });
  };
  source.onmessage = onEvent;
  for (const name of NAMED_EVENTS) source.addEventListener(name, onEvent);
  source.onerror = (e) => {
    if (stream.ended) return;
    if (e instanceof MessageEvent) {
      onEvent(e); // the server's own `event: error`
      return;
    }
    if (source.readyState === EventSource.CLOSED) {
      // Failed for good: a status other than 200, a 204, or a wrong Content-Type.
      const status = Number.isInteger(e.code) && e.code !== 200 ? e.code : undefined; // 200: a wrong type
      stream.error('non_retryable_status', e.message ?? 'EventSource failed the connection', status);
      source.close();
    } else {
      // CONNECTING: the library reconnects after its reconnection time.
      stream.state('retrying', { detail: e.message ?? 'EventSource reconnects' });
    }
  };
}

serve({
  name: 'eventsource',
  version: packageVersion('eventsource'),
  profile: 'eventsource-npm',
  capabilities: ['get', 'resume', 'raw_data', 'event_fields'],
  open,
});
