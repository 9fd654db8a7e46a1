import assert from 'node:assert/strict';
import { test } from 'node:test';

import { encodeBody, fromBase64, readResponse, readSome } from '../shared/fetch-stream.mjs';

const text = (bytes) => new TextDecoder().decode(bytes);

test('a JSON body is its UTF-8 JSON text', async () => {
  const body = await encodeBody({ json: { prompt: 'héllo', n: 1 } });
  assert.equal(body.contentType, 'application/json');
  assert.equal(text(body.bytes), '{"prompt":"héllo","n":1}');
  assert.equal(await encodeBody(null), null);
});

test('a multipart body holds the fields and the whole file under one boundary', async () => {
  const file = Uint8Array.from([0, 1, 2, 250, 255]);
  const base64 = Buffer.from(file).toString('base64');
  const body = await encodeBody({
    multipart: { fields: { prompt: 'bigger' }, files: [{ name: 'image', filename: 'a.png', content_type: 'image/png', base64 }] },
  });
  const boundary = body.contentType.match(/boundary=(.+)$/)[1];
  const latin = Buffer.from(body.bytes).toString('latin1');
  assert.ok(latin.includes(`--${boundary}`));
  assert.ok(latin.includes('name="prompt"\r\n\r\nbigger\r\n'));
  assert.ok(latin.includes('filename="a.png"'));
  assert.ok(latin.includes(Buffer.from(file).toString('latin1')));
});

test('bad bodies are refused', async () => {
  await assert.rejects(encodeBody('text'), TypeError);
  await assert.rejects(encodeBody({ xml: '<a/>' }), TypeError);
});

test('fromBase64 decodes every byte value', () => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  assert.deepEqual(fromBase64(Buffer.from(all).toString('base64')), all);
});

test('readSome keeps the first bytes of a body', async () => {
  assert.equal(await readSome(new Response('x'.repeat(2000)).body, 10), 'xxxxxxxxxx');
  assert.equal(await readSome(null), '');
});

test('a status other than 200 is a status failure with its headers and message', async () => {
  const response = new Response('token expired', { status: 401, headers: { 'retry-after': '3' } });
  const result = await readResponse({}, response, {});
  assert.equal(result.kind, 'status');
  assert.equal(result.status, 401);
  assert.equal(result.detail, 'token expired');
  assert.equal(result.header('Retry-After'), '3');
});

test('a 200 that is not text/event-stream is a content-type failure; one that is is read', async () => {
  const html = new Response('<p>', { headers: { 'content-type': 'text/html' } });
  assert.equal((await readResponse({}, html, {})).kind, 'content_type');
  const sse = new Response('data: a\n\n', { headers: { 'content-type': 'Text/Event-Stream; charset=utf-8' } });
  const call = { readBody: async (reader) => ({ kind: 'read', first: text((await reader.read()).value) }) };
  assert.deepEqual(await readResponse(call, sse, {}), { kind: 'read', first: 'data: a\n\n' });
});
