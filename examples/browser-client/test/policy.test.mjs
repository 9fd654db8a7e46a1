import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  DEFAULT_POLICY,
  RetryState,
  backoffDelay,
  capFor,
  isRetryable,
  normalizePolicy,
  parseRetryAfter,
} from '../shared/policy.mjs';

const seeded = (seed = 1) => {
  // mulberry32: a tiny seeded generator, so the tests are reproducible
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
};
const headers = (map) => (name) => map[name] ?? null;
const policy = (over = {}) => normalizePolicy({ ...DEFAULT_POLICY, ...over }).policy;

test('the seed matrix: never 400/401/403/404/422, always 429/503, 5xx and network retried', () => {
  const r = DEFAULT_POLICY.retry;
  for (const s of [400, 401, 403, 404, 422, 418, 409, 408, 200, 204, 301]) assert.equal(isRetryable(r, s), false, s);
  for (const s of [429, 500, 502, 503, 504, 599]) assert.equal(isRetryable(r, s), true, s);
  assert.equal(isRetryable(r, null), true);
  assert.equal(isRetryable({ ...r, extra: [408] }, 408), true);
  assert.equal(isRetryable({ ...r, retry_5xx: false }, 500), false);
  assert.equal(isRetryable({ ...r, retry_network: false }, null), false);
});

test('caps widen: 2 s for attempts 1-5, 3 s from 6, 5 s from 11', () => {
  const b = DEFAULT_POLICY.backoff;
  assert.deepEqual([1, 5, 6, 10, 11, 40].map((n) => capFor(b, n)), [2, 2, 3, 3, 5, 5]);
});

test('seed family: the capped exponential plus 0..50 %', () => {
  const b = DEFAULT_POLICY.backoff;
  assert.equal(backoffDelay(b, 1, () => 0), 0.2);
  assert.equal(backoffDelay(b, 3, () => 0.5), 0.8 * 1.25);
  assert.equal(backoffDelay(b, 7, () => 0.999999), 3 * (1 + 0.5 * 0.999999));
});

test('every family stays inside its envelope over many draws', () => {
  const rng = seeded(42);
  const base = { base: 0.2, caps: [[1, 2], [6, 3], [11, 60]], jitter: 0.5 };
  const envelope = {
    seed: (e) => [e, e * 1.5],
    full: (e) => [0, e],
    equal: (e) => [e / 2, e],
    none: (e) => [e, e],
  };
  for (const family of ['seed', 'full', 'equal', 'none', 'decorrelated']) {
    const b = { ...base, family };
    let previous = null;
    for (let i = 0; i < 5000; i += 1) {
      const attempt = 1 + (i % 14);
      const exp = Math.min(b.base * 2 ** (attempt - 1), capFor(b, attempt));
      const [low, high] = family === 'decorrelated' ? [b.base, capFor(b, attempt)] : envelope[family](exp);
      const d = backoffDelay(b, attempt, rng, previous);
      previous = d;
      assert.ok(d >= low - 1e-12 && d <= high + 1e-12, `${family} #${attempt}: ${d} not in [${low}, ${high}]`);
    }
  }
});

test('Retry-After: ms first, then seconds, then an HTTP date; garbage and negatives are null', () => {
  const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
  const ra = (map, cap = 60) => parseRetryAfter(headers(map), now, cap);
  assert.equal(ra({ 'retry-after-ms': '1500', 'retry-after': '9' }), 1.5);
  assert.equal(ra({ 'retry-after-ms': 'soon', 'retry-after': '9' }), 9);
  assert.equal(ra({ 'retry-after': '2.5' }), 2.5);
  assert.equal(ra({ 'retry-after': '0' }), 0);
  assert.equal(ra({ 'retry-after': 'Wed, 21 Oct 2015 07:28:07 GMT' }), 7);
  assert.equal(ra({ 'retry-after': 'Wed, 21 Oct 2015 07:27:00 GMT' }), 0);
  assert.equal(ra({ 'retry-after': '120' }, 1.2), 1.2);
  for (const bad of ['-5', 'soon', '', '1e3', 'NaN']) assert.equal(ra({ 'retry-after': bad }), null, bad);
  assert.equal(ra({}), null);
});

const ctx = { nowEpochMs: 0, resumable: false, idempotent: true, requestSent: true };

test('decide: 401 gives up at once, 503 retries with the hint, max_attempts exhausts', () => {
  const state = new RetryState(policy({ max_attempts: 3 }), () => 0);
  state.onAttempt();
  assert.deepEqual(state.decide({ kind: 'status', status: 401 }, ctx).action, 'give_up');
  const hinted = state.decide({ kind: 'status', status: 503, header: headers({ 'retry-after': '1' }) }, ctx);
  assert.equal(hinted.action, 'retry');
  assert.equal(hinted.delay, 1);
  state.onAttempt();
  assert.equal(state.decide({ kind: 'reset' }, ctx).delay, 0.4); // second retry: 0.2 * 2
  state.onAttempt();
  assert.deepEqual(state.decide({ kind: 'reset' }, ctx), { action: 'give_up', reason: 'exhausted' });
});

test('decide: after the commit only a resume may follow', () => {
  const state = new RetryState(policy(), () => 0);
  state.onAttempt();
  state.onChunk();
  assert.equal(state.decide({ kind: 'truncated' }, ctx).action, 'surface');
  const resumed = state.decide({ kind: 'truncated' }, { ...ctx, resumable: true });
  assert.equal(resumed.action, 'retry');
  assert.equal(resumed.resume, true);
});

test('decide: a non-idempotent request is re-sent only if it never left', () => {
  const state = new RetryState(policy(), () => 0);
  state.onAttempt();
  const once = { ...ctx, idempotent: false };
  assert.equal(state.decide({ kind: 'connect' }, { ...once, requestSent: false }).action, 'retry');
  assert.deepEqual(state.decide({ kind: 'status', status: 503 }, once), { action: 'give_up', reason: 'not_idempotent' });
});

test('normalizePolicy keeps good fields and names the bad ones', () => {
  const { policy: p, problems } = normalizePolicy({ backoff: { base: 0.01, family: 'weird' }, max_attempts: 0 });
  assert.equal(p.backoff.base, 0.01);
  assert.equal(p.backoff.family, 'seed');
  assert.equal(p.max_attempts, null);
  assert.equal(problems.length, 2);
  assert.equal(normalizePolicy('nope').problems.length, 1);
});
