import assert from 'node:assert/strict';
import { test } from 'node:test';

import { networkFailure, nodeTransport } from '../transport.mjs';

test('a failure whose code proves nothing was sent is a connect failure; any other is a reset', () => {
  const refused = new TypeError('fetch failed', { cause: Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }) });
  assert.deepEqual(networkFailure(refused), { kind: 'connect', detail: 'ECONNREFUSED' });
  const timeout = Object.assign(new Error('connect timeout'), { code: 'UND_ERR_CONNECT_TIMEOUT' });
  assert.equal(networkFailure(timeout).kind, 'connect');
  const reset = new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
  assert.deepEqual(networkFailure(reset), { kind: 'reset', detail: 'ECONNRESET' });
  assert.deepEqual(networkFailure(new Error('terminated')), { kind: 'reset', detail: 'terminated' });
});

test('the Node transport is the shared fetch transport with its own hooks', () => {
  const transport = nodeTransport();
  for (const name of ['exchange', 'encodeBody', 'networkFailure', 'configure', 'offline', 'shutdown']) {
    assert.equal(typeof transport[name], 'function', name);
  }
  assert.equal(transport.networkFailure, networkFailure);
  transport.configure({ connect_timeout: 1 });
  transport.offline();
  transport.shutdown();
});
