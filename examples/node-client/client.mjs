#!/usr/bin/env node
// The exec adapter protocol v1 (docs/exec-protocol.md) around the resilient streaming client:
// commands arrive as JSON lines on stdin, events leave as JSON lines on stdout. The message
// set, the resilience layer and the fetch transport are shared with the browser client
// (../browser-client/shared/); this file is the Node shell: stdio, undici, process exit.
// Nothing the kit sends may crash the process: a bad line becomes a `log` event.

import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

import { ClientPool } from '../browser-client/shared/pool.mjs';
import { DEFAULT_POLICY, normalizePolicy } from '../browser-client/shared/policy.mjs';
import { makeDispatcher } from '../browser-client/shared/protocol.mjs';
import { StreamingClient } from '../browser-client/shared/resilience.mjs';
import { initTransport, nodeTransport } from './transport.mjs';

const NAME = 'streamcheck-node-client';
const VERSION = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')).version;
const CAPABILITIES = [
  'get', 'post', 'multipart', 'breaker', 'stall', 'offline', 'resume', 'configurable', 'comments',
  'raw_data', 'event_fields',
];

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function log(message) {
  emit({ type: 'log', message });
}

function main(pool) {
  let stopping = false;
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    pool.shutdown();
    // Let the aborts reach the sockets, then leave well inside the protocol's 2 s.
    setTimeout(() => process.exit(0), 50);
  };
  const dispatch = makeDispatcher({
    pool,
    emit,
    hello: { api: 2, name: NAME, version: VERSION, capabilities: CAPABILITIES },
    shutdown,
    networkCommands: true, // no browser here: the kit's offline/online commands are the events
  });

  const onLine = (line) => {
    if (line.trim() === '') return;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (err) {
      log(`ignored a line that is not JSON (${err.message}): ${line.slice(0, 200)}`);
      return;
    }
    dispatch(cmd);
  };

  createInterface({ input: process.stdin, crlfDelay: Infinity }).on('line', onLine).on('close', shutdown);
  process.on('SIGTERM', shutdown);
  process.on('uncaughtException', (err) => log(`internal error: ${err?.stack ?? err}`));
  process.on('unhandledRejection', (err) => log(`internal error: ${err?.stack ?? err}`));
}

// The kit went away: nobody is left to read our events.
process.stdout.on('error', () => process.exit(0));

const transportReady = await initTransport();
const pool = new ClientPool({
  emit,
  policy: normalizePolicy(DEFAULT_POLICY).policy,
  makeClient: ({ emit: send, policy }) => new StreamingClient({ emit: send, policy, transport: nodeTransport() }),
});
if (!transportReady) log('undici Agent not found: connect_timeout is not enforced');
main(pool);
