// The browser's two transports under the one resilience layer (shared/resilience.mjs):
// fetch + ReadableStream with the hand-written SSE parser (shared/sse.mjs), and the
// browser's native EventSource. README.md says which streams go over which, and why.

import { makeFetchTransport } from './shared/fetch-stream.mjs';
import { WENT_OFFLINE } from './shared/resilience.mjs';
import { TERMINAL_EVENTS } from './shared/sse.mjs';

/**
 * A browser's fetch rejects with a bare `TypeError: Failed to fetch` for a refused
 * connect, a reset, a CORS failure and the network being down alike: the page cannot tell
 * whether the request reached the server, so the failure is a `reset` (a non-idempotent
 * request is then never re-sent). With a NetworkWatch, a failure while `navigator.onLine`
 * is false is the network going away: the offline event may not be dispatched yet.
 * @param {{check(): boolean} | null} network
 */
export function networkFailure(network) {
  return (err) => {
    if (network?.check()) return WENT_OFFLINE;
    const detail = err?.name ? `${err.name}: ${err.message}` : String(err);
    return { kind: 'reset', detail };
  };
}

/**
 * fetch as a page sends it: the cache mode "no-store" makes the browser add
 * `Cache-Control: no-cache` and `Pragma: no-cache` itself (as for EventSource), so the
 * request carries no header of ours but Accept, the caller's, Content-Type and Last-Event-ID.
 */
export function fetchTransport(network) {
  return makeFetchTransport({
    networkFailure: networkFailure(network),
    init: () => ({ cache: 'no-store' }),
    cacheHeaders: false,
  });
}

/**
 * GET streams over the native EventSource where it can make the request and hand over
 * what the consumer asks for: no caller headers and no Last-Event-ID to choose (neither
 * can be set on an EventSource), no comments wanted (it never shows them). Every other
 * request goes over `fallback` (a fetchTransport). What EventSource hides:
 * - the status of a failed response, and its headers (Retry-After): when it fails the
 *   connection (readyState CLOSED: a status other than 200, or not text/event-stream),
 *   the page only knows that the server answered with something else. Chromium's
 *   Resource Timing entry for it says responseStatus 0. As the seed article's matrix
 *   says of a failure without a status, it is retried;
 * - events of types nobody listens for (there is no wildcard listener): only `message`
 *   and the terminal types are heard;
 * - comments and partial lines: the stall watch sees data events only, whatever the
 *   idle rule.
 */
export function eventSourceTransport(fallback, EventSourceClass = globalThis.EventSource) {
  return {
    ...fallback,
    exchange(call, signal, progress) {
      const { spec } = call;
      const shaped =
        spec.method === 'GET' && Object.keys(spec.headers).length === 0 && call.lastEventId === '' && !spec.comments;
      if (!shaped || signal.aborted) return fallback.exchange(call, signal, progress);
      return listen(new EventSourceClass(call.url), EventSourceClass.CLOSED, call, signal, progress);
    },
  };
}

function listen(source, CLOSED, call, signal, progress) {
  return new Promise((resolve) => {
    const types = ['message', ...TERMINAL_EVENTS];
    let finished = false;
    const finish = (result) => {
      if (finished) return;
      finished = true;
      source.close();
      for (const type of types) source.removeEventListener(type, onMessage);
      signal.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const onAbort = () => finish(signal.reason);
    const onMessage = (message) => {
      const id = message.lastEventId;
      const event = { type: message.type, data: message.data, id, hasId: id !== call.lastEventId };
      call.bytesArrived(progress); // all it can see of the bytes
      call.lastEventId = id;
      const outcome = call.receive(event, progress);
      if (outcome !== null) finish(outcome);
    };
    source.onopen = () => call.headersArrived(progress);
    source.onerror = () => {
      // CONNECTING: the connection broke or ended, and EventSource would reconnect by itself
      // (we do it instead, with our backoff). CLOSED: it failed the connection for good.
      if (source.readyState === CLOSED) {
        finish({ kind: 'refused', detail: 'EventSource failed the connection; the browser hides the status' });
      } else {
        finish({ kind: 'reset', detail: 'the EventSource connection broke or ended' });
      }
    };
    for (const type of types) source.addEventListener(type, onMessage);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
