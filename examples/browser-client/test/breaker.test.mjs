import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CLOSED, HALF_OPEN, OPEN, makeBreaker } from '../shared/breaker.mjs';

const config = { kind: 'consecutive', threshold: 3, cooldown: 10, ratio: 0.5, min_throughput: 4, window: 5 };

test('consecutive: threshold failures open it; a success in between resets the count', () => {
  const b = makeBreaker(config);
  b.recordFailure(0, false);
  b.recordFailure(0, false);
  b.recordSuccess(0, false);
  b.recordFailure(1, false);
  b.recordFailure(1, false);
  assert.equal(b.state(1), CLOSED);
  b.recordFailure(2, false);
  assert.equal(b.state(2), OPEN);
  assert.deepEqual(b.admit(5), { admit: false, until: 12 });
  assert.equal(b.state(12), HALF_OPEN);
});

test('half-open admits exactly one probe among many callers', () => {
  const b = makeBreaker(config);
  for (let i = 0; i < 3; i += 1) b.recordFailure(0, false);
  const tickets = Array.from({ length: 10 }, () => b.admit(10));
  assert.equal(tickets.filter((t) => t.admit).length, 1);
  assert.ok(tickets[0].probe);
  assert.ok(tickets.slice(1).every((t) => !t.admit && t.until === null));
});

test('probe failure reopens, probe success closes, an abandoned probe frees the slot', () => {
  const b = makeBreaker(config);
  let changes = 0;
  b.onChange = () => {
    changes += 1;
  };
  for (let i = 0; i < 3; i += 1) b.recordFailure(0, false);
  assert.ok(b.admit(10).probe);
  b.recordFailure(11, true);
  assert.deepEqual(b.admit(12), { admit: false, until: 21 });
  assert.ok(b.admit(21).probe);
  b.probeAbandoned(21, true);
  assert.ok(b.admit(21).probe);
  b.recordSuccess(22, false); // a straggler admitted before the trip does not close it
  assert.equal(b.state(22), HALF_OPEN);
  b.recordSuccess(22, true);
  assert.equal(b.state(22), CLOSED);
  assert.equal(changes, 4);
});

test('ratio: opens at the ratio once min_throughput calls are in the window', () => {
  const b = makeBreaker({ ...config, kind: 'ratio' });
  b.recordSuccess(0, false);
  b.recordFailure(0, false);
  b.recordFailure(0, false);
  assert.equal(b.state(0), CLOSED); // 3 calls < min_throughput
  b.recordSuccess(0, false);
  b.recordFailure(0, false);
  assert.equal(b.state(0), OPEN); // 3/5 >= 0.5
});

test('ratio: outcomes older than the window do not count', () => {
  const b = makeBreaker({ ...config, kind: 'ratio' });
  for (let i = 0; i < 3; i += 1) b.recordFailure(0, false);
  b.recordFailure(6, false);
  assert.equal(b.state(6), CLOSED);
});

test('reset closes it; kind none never opens', () => {
  const b = makeBreaker(config);
  for (let i = 0; i < 3; i += 1) b.recordFailure(0, false);
  b.reset();
  assert.equal(b.state(0), CLOSED);
  const none = makeBreaker({ ...config, kind: 'none' });
  for (let i = 0; i < 100; i += 1) none.recordFailure(0, false);
  assert.deepEqual(none.admit(0), { admit: true, probe: false });
});
