// The shared resilience layer over a scripted transport: what the page does with what its
// transport reports, without a network.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { normalizePolicy } from '../shared/policy.mjs';
import { StreamingClient } from '../shared/resilience.mjs';

const POLICY = normalizePolicy({
  backoff: { family: 'seed', base: 0.01, caps: [[1, 0.02]], jitter: 0.5 },
  breaker: { kind: 'consecutive', threshold: 3, cooldown: 5 },
  stall_timeout: 5,
  stall_check_interval: 1,
}).policy;

/** A transport whose attempts play `script` in turn: a result, or events then the terminal one. */
function scripted(script) {
  const attempts = [];
  return {
    attempts,
    encodeBody: async () => null,
    networkFailure: (err) => ({ kind: 'reset', detail: String(err) }),
    async exchange(call, signal, progress) {
      const step = script[Math.min(attempts.length, script.length - 1)];
      attempts.push(call.lastEventId);
      if (step === 'hang') {
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
      }
      if (!Array.isArray(step)) return step;
      call.headersArrived(progress);
      for (const data of step) {
        const outcome = call.receive({ type: 'message', data, id: '', hasId: false }, progress);
        if (outcome !== null) return outcome;
      }
      return { kind: 'truncated', detail: 'script ended' };
    },
  };
}

function run(script, spec = {}) {
  const events = [];
  const transport = scripted(script);
  const client = new StreamingClient({ emit: (e) => events.push(e), policy: POLICY, transport, rng: () => 0.5 });
  const ended = new Promise((resolve) => {
    client.emit = (e) => {
      events.push(e);
      if (e.type === 'done' || e.type === 'error') resolve();
    };
  });
  client.start({ id: 's', url: 'http://x/', method: 'GET', headers: {}, body: null, idempotent: true, cancelAfter: null, lastEventId: '', ...spec });
  const states = () => events.filter((e) => e.type === 'state').map((e) => e.state);
  return { client, events, transport, ended, states };
}

test('a 503 is retried and the answer delivered once', async () => {
  const { events, ended, states } = run([{ kind: 'status', status: 503, header: () => null }, ['a', 'b', '[DONE]']]);
  await ended;
  assert.deepEqual(events.filter((e) => e.type === 'chunk').map((e) => e.data), ['a', 'b']);
  assert.deepEqual(states(), ['connecting', 'retrying', 'connecting', 'committed', 'done']);
});

test('a 401 ends the stream at once with its status', async () => {
  const { events, ended, transport } = run([{ kind: 'status', status: 401, header: () => null, detail: 'sign in' }]);
  await ended;
  const error = events.at(-1);
  assert.deepEqual([error.kind, error.status, transport.attempts.length], ['non_retryable_status', 401, 1]);
  assert.match(error.detail, /sign in/);
});

test('offline drops the attempt and waits; online reconnects at once', async () => {
  const { client, ended, states, transport } = run(['hang', ['a', '[DONE]']]);
  await new Promise((resolve) => setTimeout(resolve, 10));
  client.offline();
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(transport.attempts.length, 1, 'no attempt while offline');
  client.online();
  await ended;
  assert.equal(transport.attempts.length, 2);
  assert.deepEqual(states(), ['connecting', 'offline', 'connecting', 'committed', 'done']);
});

test('a non-idempotent request that goes offline ends with offline', async () => {
  const { client, ended, events } = run(['hang'], { method: 'POST', idempotent: false });
  await new Promise((resolve) => setTimeout(resolve, 10));
  client.offline();
  await ended;
  assert.equal(events.at(-1).kind, 'offline');
});
