#!/usr/bin/env node
// The exec adapter protocol v1 (docs/exec-protocol.md) around the resilient streaming client:
// commands arrive as JSON lines on stdin, events leave as JSON lines on stdout.
// Nothing the kit sends may crash the process: a bad line becomes a `log` event.

import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

import { parseStream } from './commands.mjs';
import { DEFAULT_POLICY, normalizePolicy } from './policy.mjs';
import { ClientPool } from './pool.mjs';
import { initTransport } from './transport.mjs';

const PROTOCOL = 1;
const NAME = 'streamcheck-node-client';
const VERSION = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')).version;
const CAPABILITIES = ['get', 'post', 'breaker', 'stall', 'offline', 'resume', 'configurable'];

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function log(message) {
  emit({ type: 'log', message });
}

function main(client) {
  let stopping = false;
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    client.shutdown();
    // Let the aborts reach the sockets, then leave well inside the protocol's 2 s.
    setTimeout(() => process.exit(0), 50);
  };

  const handlers = {
    hello(cmd) {
      if (cmd.protocol !== PROTOCOL) log(`the kit speaks protocol ${cmd.protocol}; this client speaks ${PROTOCOL}`);
      emit({ type: 'hello', protocol: PROTOCOL, name: NAME, version: VERSION, capabilities: CAPABILITIES });
    },
    configure(cmd) {
      const { policy, problems } = normalizePolicy(cmd.policy);
      for (const problem of problems) log(`configure: ${problem}`);
      client.configure(policy);
      emit({ type: 'configured' });
    },
    reset() {
      client.reset();
      emit({ type: 'reset' });
    },
    stream(cmd) {
      if (typeof cmd.stream !== 'string' && typeof cmd.stream !== 'number') {
        log(`stream: needs a "stream" id: ${JSON.stringify(cmd)}`);
        return;
      }
      const id = String(cmd.stream);
      if (client.has(id)) {
        log(`stream: ${id} is already open; command ignored`);
        return;
      }
      const { spec, problem } = parseStream(cmd);
      if (spec) client.start(spec);
      else emit({ type: 'error', stream: id, kind: 'other', detail: `bad stream command: ${problem}` });
    },
    cancel(cmd) {
      if (!client.cancel(String(cmd.stream))) log(`cancel: no open stream ${JSON.stringify(cmd.stream)}`);
    },
    offline() {
      client.offline();
    },
    online() {
      client.online();
    },
    shutdown,
  };

  const onLine = (line) => {
    if (line.trim() === '') return;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (err) {
      log(`ignored a line that is not JSON (${err.message}): ${line.slice(0, 200)}`);
      return;
    }
    if (typeof cmd !== 'object' || cmd === null || Array.isArray(cmd)) {
      log(`ignored a line that is not a JSON object: ${line.slice(0, 200)}`);
      return;
    }
    const handler = Object.hasOwn(handlers, cmd.cmd) ? handlers[cmd.cmd] : undefined;
    if (!handler) {
      log(`ignored an unknown command: ${JSON.stringify(cmd.cmd)}`);
      return;
    }
    try {
      handler(cmd);
    } catch (err) {
      log(`${cmd.cmd} failed: ${err?.stack ?? err}`);
    }
  };

  createInterface({ input: process.stdin, crlfDelay: Infinity }).on('line', onLine).on('close', shutdown);
  process.on('SIGTERM', shutdown);
  process.on('uncaughtException', (err) => log(`internal error: ${err?.stack ?? err}`));
  process.on('unhandledRejection', (err) => log(`internal error: ${err?.stack ?? err}`));
}

// The kit went away: nobody is left to read our events.
process.stdout.on('error', () => process.exit(0));

const transportReady = await initTransport();
const client = new ClientPool({ emit, policy: normalizePolicy(DEFAULT_POLICY).policy });
if (!transportReady) log('undici Agent not found: connect_timeout is not enforced');
main(client);
