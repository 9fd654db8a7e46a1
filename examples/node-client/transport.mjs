// Node's side of the shared fetch transport (../browser-client/shared/fetch-stream.mjs):
// undici's dispatcher with a connect timeout, and network errors classified by their code.

import { makeFetchTransport } from '../browser-client/shared/fetch-stream.mjs';

let Agent = null;

/**
 * Find undici's Agent behind Node's global fetch (no dependency needed): it is the class of
 * the global dispatcher, which exists once fetch has run. Without it there is no connect timeout.
 */
export async function initTransport() {
  try {
    await fetch('data:,');
    Agent = globalThis[Symbol.for('undici.globalDispatcher.1')]?.constructor ?? null;
  } catch {
    Agent = null;
  }
  return Agent !== null;
}

/** A dispatcher whose only timeout is the TCP connect; the policy owns every other one. */
export function makeDispatcher(connectTimeout) {
  if (Agent === null) return undefined;
  const connect = connectTimeout === null ? {} : { timeout: Math.ceil(connectTimeout * 1000) };
  return new Agent({ connect, headersTimeout: 0, bodyTimeout: 0 });
}

/** Failure codes that prove no request byte reached the server (safe to re-send anything). */
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Classify a fetch/read error: `connect` when nothing was sent, otherwise `reset`. */
export function networkFailure(err) {
  const code = err?.cause?.code ?? err?.code ?? null;
  const detail = code ?? err?.cause?.message ?? err?.message ?? String(err);
  return NOT_SENT.has(code) ? { kind: 'connect', detail } : { kind: 'reset', detail };
}

/**
 * The transport of one client instance: its own dispatcher, replaced on `configure` (the
 * connect timeout) and on `offline` (undici reconnects after an aborted in-flight request;
 * a fresh dispatcher means nothing connects while offline).
 */
export function nodeTransport() {
  let dispatcher;
  let connectTimeout = null;
  return makeFetchTransport({
    networkFailure,
    init: () => ({ dispatcher }),
    followRedirects: true, // undici's "manual" mode shows the 3xx and its Location
    configure(policy) {
      connectTimeout = policy.connect_timeout;
      dispatcher?.close().catch(() => {});
      dispatcher = makeDispatcher(policy.connect_timeout);
    },
    offline() {
      dispatcher?.destroy?.().catch(() => {});
      dispatcher = makeDispatcher(connectTimeout);
    },
    shutdown() {
      dispatcher?.destroy?.().catch(() => {});
    },
  });
}
