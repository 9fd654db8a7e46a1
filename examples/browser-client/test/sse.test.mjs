import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SSEDecoder, headerBytes, isTerminal } from '../shared/sse.mjs';

const enc = (s) => new TextEncoder().encode(s);

function decodeAll(chunks, lastEventId = '') {
  const d = new SSEDecoder(lastEventId);
  const events = chunks.flatMap((c) => d.feed(typeof c === 'string' ? enc(c) : c));
  d.close();
  return { events, decoder: d };
}

function everySplit(bytes) {
  const results = [];
  for (let i = 0; i <= bytes.length; i += 1) {
    for (let j = i; j <= bytes.length; j += 1) {
      results.push(decodeAll([bytes.slice(0, i), bytes.slice(i, j), bytes.slice(j)]).events);
    }
  }
  return results;
}

test('the spec example: multi-line data, comments and the default event type', () => {
  const { events } = decodeAll([': test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n']);
  assert.deepEqual(
    events.map((e) => [e.type, e.data, e.id]),
    [
      ['message', 'first event', '1'],
      ['message', 'second event', ''],
      ['message', ' third event', ''],
    ],
  );
});

test('data lines join with LF, and an empty data field still dispatches', () => {
  const { events } = decodeAll(['data\n\ndata\ndata\n\ndata:\n\ndata: a\ndata: b\n\nevent: x\n\n']);
  assert.deepEqual(events.map((e) => e.data), ['', '\n', '', 'a\nb']);
});

test('CR, LF and CRLF all end lines, also with the CR at the end of a chunk', () => {
  const { events } = decodeAll(['data: a\r', '\ndata: b\r\r', 'data: c\n\r\n', 'event: x\rdata: d\r\r']);
  assert.deepEqual(events.map((e) => [e.type, e.data]), [['message', 'a\nb'], ['message', 'c'], ['x', 'd']]);
});

test('one leading BOM is stripped, even when split; a second one is data', () => {
  const bytes = enc('\uFEFFdata: a\n\n\uFEFFdata: b\n\n');
  const { events } = decodeAll([bytes.slice(0, 1), bytes.slice(1, 2), bytes.slice(2)]);
  assert.deepEqual(events.map((e) => e.data), ['a']);
});

test('the last event id persists, an id with NUL is ignored, hasId marks the own id', () => {
  const { events, decoder } = decodeAll(['id: 7\ndata: a\n\ndata: b\n\nid: x\0y\ndata: c\n\nid\ndata: d\n\n']);
  assert.deepEqual(events.map((e) => [e.data, e.id, e.hasId]), [
    ['a', '7', true],
    ['b', '7', false],
    ['c', '7', false],
    ['d', '', true],
  ]);
  assert.equal(decoder.lastEventId, '');
});

test('an id-only block moves the last event id without dispatching', () => {
  const { events, decoder } = decodeAll(['id: 3\n\n'], '2');
  assert.equal(events.length, 0);
  assert.equal(decoder.lastEventId, '3');
});

test('retry takes ASCII digits only', () => {
  const d = new SSEDecoder();
  d.feed(enc('retry: 1500\n\nretry: 12a\n\nretry: -5\n\nretry:  7\n\n'));
  assert.equal(d.retry, 1500);
});

test('an unterminated final event is discarded', () => {
  const { events } = decodeAll(['data: a\n\ndata: b\n']);
  assert.deepEqual(events.map((e) => e.data), ['a']);
});

test('unknown fields are ignored and a field without a colon has an empty value', () => {
  const { events } = decodeAll(['foo: bar\nevent\ndata: a\n\n']);
  assert.deepEqual(events.map((e) => [e.type, e.data]), [['message', 'a']]);
});

test('every split of the bytes, inside characters and between CR and LF, gives the same events', () => {
  const bytes = enc('\uFEFF: c\r\nid: 1\r\ndata: h\u00e9\u4e16\ud83d\ude00\r\n\r\nevent: e\rdata: x\r\rdata: y\n\n');
  const expected = decodeAll([bytes]).events;
  assert.equal(expected.length, 3);
  for (const events of everySplit(bytes)) assert.deepEqual(events, expected);
});

test('invalid UTF-8 becomes U+FFFD', () => {
  const { events } = decodeAll([new Uint8Array([100, 97, 116, 97, 58, 32, 0xff, 10, 10])]);
  assert.equal(events[0].data, '\uFFFD');
});

test('terminal events: [DONE], done, message_stop, response.completed', () => {
  assert.ok(isTerminal({ type: 'message', data: '[DONE]' }));
  for (const type of ['done', 'message_stop', 'response.completed']) assert.ok(isTerminal({ type, data: '{}' }));
  assert.ok(!isTerminal({ type: 'message', data: 'DONE' }));
});

test('a header value carries the UTF-8 bytes of the id, one character per byte', () => {
  assert.equal(headerBytes('42'), '42');
  const value = headerBytes('été-²🙂');
  assert.ok([...value].every((c) => c.charCodeAt(0) <= 0xff));
  const bytes = Uint8Array.from([...value].map((c) => c.charCodeAt(0)));
  assert.equal(new TextDecoder().decode(bytes), 'été-²🙂');
});

test('comments, when asked for, come in stream order with one leading space removed', () => {
  const d = new SSEDecoder('', { comments: true });
  const items = d.feed(enc(':  two spaces\n:\ndata: a\n: inside\ndata: b\n\n:tight\r\n'));
  assert.deepEqual(items.map((e) => ('comment' in e ? ['comment', e.comment] : ['event', e.data])), [
    ['comment', ' two spaces'],
    ['comment', ''],
    ['comment', 'inside'],
    ['event', 'a\nb'],
    ['comment', 'tight'],
  ]);
  assert.equal(new SSEDecoder().feed(enc(': hidden\n\n')).length, 0);
});
