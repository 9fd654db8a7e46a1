import assert from 'node:assert/strict';
import { test } from 'node:test';

import { NetworkWatch } from '../network.mjs';

function setup(onLine = true) {
  const calls = [];
  const pool = { offline: () => calls.push('offline'), online: () => calls.push('online') };
  const target = new EventTarget();
  const navigator = { onLine };
  return { calls, target, navigator, watch: new NetworkWatch(pool, target, navigator) };
}

test('the window events reach the pool; a repeated offline is told once', () => {
  const { calls, target, watch } = setup();
  watch.start();
  assert.deepEqual(calls, []);
  target.dispatchEvent(new Event('offline'));
  target.dispatchEvent(new Event('offline'));
  assert.equal(watch.isOffline, true);
  target.dispatchEvent(new Event('online'));
  assert.deepEqual(calls, ['offline', 'online']);
  assert.equal(watch.isOffline, false);
});

test('a page that loads offline starts offline: navigator.onLine is read at the start', () => {
  const { calls, watch } = setup(false);
  watch.start();
  assert.deepEqual(calls, ['offline']);
});

test('check() finds the network down before the event is dispatched', () => {
  const { calls, navigator, watch } = setup();
  watch.start();
  assert.equal(watch.check(), false);
  navigator.onLine = false;
  assert.equal(watch.check(), true);
  assert.equal(watch.check(), true);
  assert.deepEqual(calls, ['offline']);
});

test('resync() after a reset tells the pool again that the network is down', () => {
  const { calls, watch } = setup(false);
  watch.start();
  watch.resync();
  assert.deepEqual(calls, ['offline', 'offline']);
});

test('stop() unwires the listeners', () => {
  const { calls, target, watch } = setup();
  watch.start().stop();
  target.dispatchEvent(new Event('offline'));
  assert.deepEqual(calls, []);
});
