import assert from 'node:assert/strict';
import { test } from 'node:test';

import { WENT_OFFLINE } from '../shared/resilience.mjs';
import { eventSourceTransport, networkFailure } from '../transports.mjs';

/** An EventSource that the test drives: open(), message(), fail(readyState). */
class FakeEventSource extends EventTarget {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSED = 2;
  static made = [];
  constructor(url) {
    super();
    this.url = url;
    this.readyState = FakeEventSource.CONNECTING;
    this.closed = false;
    FakeEventSource.made.push(this);
  }
  close() {
    this.closed = true;
    this.readyState = FakeEventSource.CLOSED;
  }
  open() {
    this.readyState = FakeEventSource.OPEN;
    this.onopen?.();
  }
  message(type, data, lastEventId = '') {
    this.dispatchEvent(new MessageEvent(type, { data, lastEventId }));
  }
  fail(readyState) {
    this.readyState = readyState;
    this.onerror?.();
  }
}

/** The part of a Call the transport talks to, recording what it hears. */
function fakeCall(spec = {}) {
  const heard = [];
  return {
    heard,
    spec: { method: 'GET', url: 'http://127.0.0.1:1/s', headers: {}, ...spec },
    url: spec.url ?? 'http://127.0.0.1:1/s',
    lastEventId: '',
    headersArrived: () => heard.push('headers'),
    bytesArrived: () => heard.push('bytes'),
    receive(event) {
      heard.push([event.type, event.data, event.id, event.hasId]);
      return event.type === 'done' ? { kind: 'done' } : null;
    },
  };
}

const fallback = { exchange: async () => ({ kind: 'via fetch' }), encodeBody: async () => null, networkFailure: () => ({}) };
const transport = eventSourceTransport(fallback, FakeEventSource);
const latest = () => FakeEventSource.made.at(-1);

test('a plain GET goes over EventSource: messages and the terminal event are heard', async () => {
  const call = fakeCall();
  const result = transport.exchange(call, new AbortController().signal, {});
  const source = latest();
  assert.equal(source.url, call.spec.url);
  source.open();
  source.message('message', 'a', '1');
  source.message('message', 'b', '1');
  source.message('unheard', 'c'); // no wildcard listener exists
  source.message('done', '', '1');
  assert.deepEqual(await result, { kind: 'done' });
  assert.ok(source.closed);
  assert.deepEqual(call.heard, [
    'headers',
    'bytes', ['message', 'a', '1', true],
    'bytes', ['message', 'b', '1', false],
    'bytes', ['done', '', '1', false],
  ]);
});

test('what EventSource cannot send or show goes over fetch: caller headers, a POST, comments, a Last-Event-ID', async () => {
  const signal = new AbortController().signal;
  const before = FakeEventSource.made.length;
  assert.deepEqual(await transport.exchange(fakeCall({ headers: { authorization: 'x' } }), signal, {}), { kind: 'via fetch' });
  assert.deepEqual(await transport.exchange(fakeCall({ method: 'POST' }), signal, {}), { kind: 'via fetch' });
  assert.deepEqual(await transport.exchange(fakeCall({ comments: true }), signal, {}), { kind: 'via fetch' });
  const resuming = fakeCall();
  resuming.lastEventId = '7';
  assert.deepEqual(await transport.exchange(resuming, signal, {}), { kind: 'via fetch' });
  assert.equal(FakeEventSource.made.length, before);
});

test('an error while CONNECTING is a broken connection; CLOSED is a refusal whose status is hidden', async () => {
  const broken = transport.exchange(fakeCall(), new AbortController().signal, {});
  latest().fail(FakeEventSource.CONNECTING);
  assert.equal((await broken).kind, 'reset');
  const refused = transport.exchange(fakeCall(), new AbortController().signal, {});
  const source = latest();
  source.fail(FakeEventSource.CLOSED);
  assert.equal((await refused).kind, 'refused');
  assert.ok(source.closed);
});

test('an abort closes the EventSource and ends the attempt with the abort reason', async () => {
  const controller = new AbortController();
  const result = transport.exchange(fakeCall(), controller.signal, {});
  controller.abort({ kind: 'stall' });
  assert.deepEqual(await result, { kind: 'stall' });
  assert.ok(latest().closed);
});

test('a fetch failure is a reset, or the network going away when the watch finds it down', () => {
  const failure = new TypeError('Failed to fetch');
  assert.deepEqual(networkFailure(null)(failure), { kind: 'reset', detail: 'TypeError: Failed to fetch' });
  assert.deepEqual(networkFailure({ check: () => false })(failure).kind, 'reset');
  assert.equal(networkFailure({ check: () => true })(failure), WENT_OFFLINE);
});
