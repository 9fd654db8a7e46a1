// Redirects followed by hand (Node's fetch shows them; a browser's does not), against a
// local HTTP server.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import { MAX_REDIRECTS, makeFetchTransport } from '../shared/fetch-stream.mjs';

const seen = [];
let base;
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => {
    body += c;
  });
  req.on('end', () => {
    seen.push(`${req.method} ${req.url} ${body}`.trim());
    const [, code, rest] = req.url.match(/^\/(\d+)(.*)$/) ?? [];
    if (req.url === '/loop') res.writeHead(307, { location: '/loop' }).end();
    else if (req.url === '/empty') res.writeHead(302, { location: '' }).end();
    else if (req.url === '/none') res.writeHead(302).end('no location');
    else if (code) res.writeHead(Number(code), { location: rest || '/end' }).end();
    else res.writeHead(503, { 'retry-after': '1' }).end('at the end');
  });
});
before(
  () =>
    new Promise((resolve) => {
      server.listen(0, '127.0.0.1', () => {
        base = `http://127.0.0.1:${server.address().port}`;
        resolve();
      });
    }),
);
after(() => server.close());

const transport = makeFetchTransport({ networkFailure: (e) => ({ kind: 'reset', detail: String(e) }), followRedirects: true });

function call(path, method = 'POST') {
  return {
    url: `${base}${path}`,
    method,
    sendsBody: true,
    body: { bytes: new TextEncoder().encode('payload'), contentType: 'text/plain' },
    requestHeaders: () => ({}),
    headersArrived: () => {},
  };
}

async function run(path, method) {
  seen.length = 0;
  const c = call(path, method);
  const result = await transport.exchange(c, new AbortController().signal, {});
  return { c, result, seen: [...seen] };
}

test('a 303 turns a POST into a GET without its body; later attempts go there', async () => {
  const { c, result, seen: requests } = await run('/303');
  assert.deepEqual(requests, ['POST /303 payload', 'GET /end']);
  assert.deepEqual([result.kind, result.status], ['status', 503]);
  assert.deepEqual([new URL(c.url).pathname, c.method, c.sendsBody], ['/end', 'GET', false]);
});

test('a 307 and a 308 keep the method and the body; a 301 or 302 after a POST does not', async () => {
  assert.deepEqual((await run('/307')).seen, ['POST /307 payload', 'POST /end payload']);
  assert.deepEqual((await run('/308')).seen, ['POST /308 payload', 'POST /end payload']);
  assert.deepEqual((await run('/301')).seen, ['POST /301 payload', 'GET /end']);
  assert.deepEqual((await run('/302')).seen, ['POST /302 payload', 'GET /end']);
});

test('a redirect that leads nowhere is a status failure, not a network error', async () => {
  const loop = await run('/loop');
  assert.equal(loop.seen.length, MAX_REDIRECTS + 1);
  assert.deepEqual([loop.result.kind, loop.result.status], ['status', 307]);
  const empty = await run('/empty');
  assert.deepEqual([empty.seen.length, empty.result.kind, empty.result.status], [1, 'status', 302]);
});

test('a 3xx without a Location is the answer', async () => {
  const { result, seen: requests } = await run('/none');
  assert.deepEqual(requests, ['POST /none payload']);
  assert.deepEqual([result.kind, result.status, result.detail], ['status', 302, 'no location']);
});
