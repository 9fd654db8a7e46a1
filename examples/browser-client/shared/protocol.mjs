// The exec protocol v1 message set (docs/exec-protocol.md) around a ClientPool, whatever
// carries the messages: JSON lines on stdin/stdout (Node) or JS objects through
// window.streamcheck (the browser page). Nothing the kit sends may throw out of here:
// a bad command becomes a `log` event.

import { parseStream } from './commands.mjs';
import { normalizePolicy } from './policy.mjs';

export const PROTOCOL = 1;

/**
 * @param {{pool: object, emit: (event: object) => void, hello: object,
 *          shutdown: () => void, networkCommands?: boolean}} options
 *   `hello`: the reply's name, version and capabilities; `networkCommands`: obey the
 *   `offline` / `online` commands (the Node client; a page hears the browser's own events).
 * @returns {(cmd: unknown) => void} the dispatcher for one command object
 */
export function makeDispatcher({ pool, emit, hello, shutdown, networkCommands = false }) {
  const log = (message) => emit({ type: 'log', message });
  const handlers = {
    hello(cmd) {
      if (cmd.protocol !== PROTOCOL) log(`the kit speaks protocol ${cmd.protocol}; this client speaks ${PROTOCOL}`);
      emit(helloReply(hello));
    },
    configure(cmd) {
      const { policy, problems } = normalizePolicy(cmd.policy);
      for (const problem of problems) log(`configure: ${problem}`);
      pool.configure(policy);
      emit({ type: 'configured' });
    },
    reset() {
      pool.reset();
      emit({ type: 'reset' });
    },
    stream(cmd) {
      if (typeof cmd.stream !== 'string' && typeof cmd.stream !== 'number') {
        log(`stream: needs a "stream" id: ${JSON.stringify(cmd)}`);
        return;
      }
      const id = String(cmd.stream);
      if (pool.has(id)) {
        log(`stream: ${id} is already open; command ignored`);
        return;
      }
      const { spec, problem } = parseStream(cmd);
      if (spec) pool.start(spec);
      else emit({ type: 'error', stream: id, kind: 'other', detail: `bad stream command: ${problem}` });
    },
    cancel(cmd) {
      if (!pool.cancel(String(cmd.stream))) log(`cancel: no open stream ${JSON.stringify(cmd.stream)}`);
    },
    shutdown,
  };
  if (networkCommands) {
    handlers.offline = () => pool.offline();
    handlers.online = () => pool.online();
  }

  return (cmd) => {
    if (typeof cmd !== 'object' || cmd === null || Array.isArray(cmd)) {
      log(`ignored a command that is not an object: ${String(JSON.stringify(cmd)).slice(0, 200)}`);
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
}

/** The hello reply: `{type: 'hello', protocol: 1, api, name, version, capabilities}`
 * (`api`: the adapter API the client is written against, docs/exec-protocol.md). */
export function helloReply({ api = 1, name, version, capabilities }) {
  return { type: 'hello', protocol: PROTOCOL, api, name, version, capabilities: [...capabilities] };
}
