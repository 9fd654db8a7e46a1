import assert from 'node:assert/strict';
import { test } from 'node:test';

import { makeDispatcher } from '../shared/protocol.mjs';
import { emitter } from '../streamcheck.mjs';

function setup(options = {}) {
  const events = [];
  const did = [];
  const pool = {
    configure: (policy) => did.push(['configure', policy.stall_timeout]),
    reset: () => did.push(['reset']),
    has: () => false,
    start: (spec) => did.push(['start', spec.id, spec.method]),
    cancel: () => false,
    offline: () => did.push(['offline']),
    online: () => did.push(['online']),
  };
  const hello = { name: 'n', version: '1', capabilities: ['get'] };
  const dispatch = makeDispatcher({ pool, emit: (e) => events.push(e), hello, shutdown: () => did.push(['shutdown']), ...options });
  return { events, did, dispatch };
}

test('the message set: hello, configure, reset, stream, shutdown', () => {
  const { events, did, dispatch } = setup();
  dispatch({ cmd: 'hello', protocol: 1 });
  dispatch({ cmd: 'configure', policy: { stall_timeout: 1.5 } });
  dispatch({ cmd: 'reset' });
  dispatch({ cmd: 'stream', stream: 's1', url: 'http://127.0.0.1:9/x', method: 'POST', body: { json: {} } });
  dispatch({ cmd: 'shutdown' });
  assert.deepEqual(events, [
    { type: 'hello', protocol: 1, api: 1, name: 'n', version: '1', capabilities: ['get'] },
    { type: 'configured' },
    { type: 'reset' },
  ]);
  assert.deepEqual(did, [['configure', 1.5], ['reset'], ['start', 's1', 'POST'], ['shutdown']]);
});

test('offline and online are commands only where no browser tells the client (Node)', () => {
  const page = setup();
  page.dispatch({ cmd: 'offline' });
  assert.deepEqual(page.did, []);
  assert.match(page.events[0].message, /unknown command/);
  const node = setup({ networkCommands: true });
  node.dispatch({ cmd: 'offline' });
  node.dispatch({ cmd: 'online' });
  assert.deepEqual(node.did, [['offline'], ['online']]);
});

test('bad commands become log or error events, never a throw', () => {
  const { events, dispatch } = setup();
  dispatch(null);
  dispatch([1]);
  dispatch({ cmd: 'stream', url: 'http://x/' });
  dispatch({ cmd: 'stream', stream: 's2', url: 'not a url' });
  assert.equal(events.length, 4);
  assert.ok(events.slice(0, 3).every((e) => e.type === 'log'));
  assert.deepEqual({ ...events[3], detail: undefined }, { type: 'error', stream: 's2', kind: 'other', detail: undefined });
});

test('events wait, in order, until the kit has defined window.streamcheckEmit', async () => {
  const win = {};
  const emit = emitter(win, 1);
  emit({ n: 1 });
  emit({ n: 2 });
  const got = [];
  win.streamcheckEmit = async (e) => got.push(e.n);
  await new Promise((resolve) => setTimeout(resolve, 20));
  emit({ n: 3 });
  assert.deepEqual(got, [1, 2, 3]);
  win.streamcheckEmit = () => {
    throw new Error('page closing');
  };
  emit({ n: 4 }); // dropped quietly
});
