// The kit's side of the page (docs/exec-protocol.md, as JS objects): the kit calls
// window.streamcheck.hello() and window.streamcheck.command(cmd); every reply and stream
// event leaves through window.streamcheckEmit(obj), which the kit exposes before the page
// loads. Offline and online are not commands here: the client hears the browser's events.

import { createClient, NAME, VERSION } from './client.mjs';
import { helloReply, makeDispatcher } from './shared/protocol.mjs';

const CAPABILITIES = [
  'get', 'post', 'multipart', 'breaker', 'stall', 'offline', 'resume', 'configurable', 'comments',
  'raw_data', 'event_fields',
];

/**
 * Define window.streamcheck around a new client.
 * @param {{get?: 'fetch' | 'eventsource', networkEvents?: boolean, name?: string}} options
 *   passed to createClient; `name` tells the page's variant apart in the report.
 */
export function installStreamcheck({ name = NAME, ...options } = {}) {
  const emit = emitter(window);
  const pool = createClient({ ...options, emit });
  const hello = { api: 2, name, version: VERSION, capabilities: CAPABILITIES };
  const dispatch = makeDispatcher({ pool, emit, hello, shutdown: () => pool.shutdown() });
  window.streamcheck = {
    hello: () => helloReply(hello),
    command: (cmd) => dispatch(cmd),
  };
  return pool;
}

/**
 * window.streamcheckEmit, in order; until the kit has defined it, events wait in a queue.
 * The binding answers with a promise: a rejection (the kit went away) is dropped.
 */
export function emitter(win, pollMs = 10) {
  const queue = [];
  let timer = null;
  const flush = () => {
    timer = null;
    if (typeof win.streamcheckEmit !== 'function') {
      timer = setTimeout(flush, pollMs);
      return;
    }
    while (queue.length > 0) send(queue.shift());
  };
  const send = (event) => {
    try {
      Promise.resolve(win.streamcheckEmit(event)).catch(() => {});
    } catch {
      // the binding is gone (the page is closing)
    }
  };
  return (event) => {
    if (queue.length === 0 && typeof win.streamcheckEmit === 'function') return send(event);
    queue.push(event);
    if (timer === null) flush();
    return undefined;
  };
}
