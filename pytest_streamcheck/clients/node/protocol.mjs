// Exec protocol v1 (docs/exec-protocol.md), the plumbing shared by the adapters of this
// directory: JSON lines on stdin/stdout, the handshake, reset, cancel, shutdown, and one
// handle per stream that guarantees exactly one `done` or `error` per stream. What each
// library does with a stream lives in its own file (openai.mjs, anthropic.mjs,
// fetch_event_source.mjs, eventsource.mjs); nothing here retries, times or parses.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

const require = createRequire(import.meta.url);

/** The installed version of npm package `name`, read from its package.json. */
export function packageVersion(name) {
  try {
    // Some packages do not export ./package.json: find it next to the resolved entry.
    const entry = require.resolve(name);
    let dir = entry;
    for (let i = 0; i < 6; i += 1) {
      dir = dir.slice(0, dir.lastIndexOf('/'));
      try {
        const pkg = JSON.parse(readFileSync(`${dir}/package.json`, 'utf8'));
        if (pkg.name === name) return pkg.version;
      } catch {
        // not at this level
      }
    }
  } catch {
    // not resolvable (an ESM-only package): fall through
  }
  try {
    return JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

/**
 * Drop every pooled connection, as a fresh application process starts with none. Node's
 * fetch (which all four libraries use) pools keep-alive connections in undici's global
 * dispatcher: a connection kept from the last case would carry the next case's first
 * request and skip the fault the kit's proxy queued for its first connection. The
 * dispatcher is swapped for a new one of its own class (undici's Agent) through the
 * global key Node's fetch reads it from; the libraries are not touched.
 */
const DISPATCHER = Symbol.for('undici.globalDispatcher.1');

function freshConnections() {
  const old = globalThis[DISPATCHER];
  if (!old) return; // nothing fetched yet: no pool
  try {
    globalThis[DISPATCHER] = new old.constructor();
    Promise.resolve(old.destroy?.()).catch(() => {});
  } catch (err) {
    emit({ type: 'log', message: `could not renew the connection pool: ${describe(err)}` });
  }
}

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

/**
 * The process's own event-loop lag (exec protocol "lag"): a timer due every 5 ms on a
 * fixed grid; each wake-up's due and actual time, on the wall clock in seconds (the kit
 * reads the same system clock), go out in a batch every 50 ms and when the kit asks.
 * All fifty users of a herd case live in this one loop: when it runs late, every retry
 * timer in it does, and the kit must count that as noise, not as the library's delay.
 */
const LAG_INTERVAL_MS = 5;
const LAG_BATCH_MS = 50;

class LagProbe {
  constructor() {
    this.rows = [];
    this.timer = undefined;
    this.due = 0;
    this.sent = 0;
  }

  start() {
    if (this.timer !== undefined) return;
    this.due = performance.now() + LAG_INTERVAL_MS;
    this.sent = performance.now();
    this._arm();
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.flush(false);
  }

  flush(asked) {
    const rows = this.rows;
    this.rows = [];
    this.sent = performance.now();
    if (rows.length || asked) emit({ type: 'lag', rows, ...(asked ? { flushed: true } : {}) });
  }

  _arm() {
    this.timer = setTimeout(() => this._wake(), Math.max(0, this.due - performance.now()));
  }

  _wake() {
    const woke = performance.now();
    const origin = performance.timeOrigin;
    this.rows.push((origin + this.due) / 1000, (origin + woke) / 1000);
    this.due += LAG_INTERVAL_MS;
    if (this.due <= woke) this.due = woke + LAG_INTERVAL_MS; // missed wake-ups are not made up
    if (woke - this.sent >= LAG_BATCH_MS) this.flush(false);
    this._arm();
  }
}

/** The end-of-answer markers of the common LLM formats: an application's end check. */
export const TERMINAL_DATA = '[DONE]';
export const TERMINAL_EVENTS = new Set(['done', 'message_stop', 'response.completed']);

export function isTerminal(data, eventName) {
  return data === TERMINAL_DATA || TERMINAL_EVENTS.has(eventName);
}

/** A short text for any thrown value: its class, status and message, and its cause's. */
export function describe(err) {
  if (err === null || err === undefined) return String(err);
  const name = err?.constructor?.name ?? typeof err;
  const message = err?.message ?? String(err);
  const cause = err?.cause ? `; cause: ${err.cause?.code ?? ''} ${err.cause?.message ?? err.cause}`.trimEnd() : '';
  return `${name}: ${message}${cause}`.slice(0, 2000);
}

/**
 * One stream as its adapter sees it. `chunk()` returns false once the consumer stops
 * reading (`cancel_after` reached, a `cancel`, a reset): the adapter then closes the
 * connection (break out of its loop, abort, close) and reports nothing more.
 */
class Stream {
  constructor(cmd, streams) {
    this.cmd = cmd;
    this.id = cmd.stream;
    this.chunks = 0;
    this.ended = false; // done or error sent, or the consumer stopped
    this.controller = new AbortController(); // aborted when the consumer stops
    this.signal = this.controller.signal;
    this._streams = streams;
    this._stops = [];
  }

  _send(event) {
    if (!this.ended) emit({ ...event, stream: this.id });
  }

  chunk(data, { id, event } = {}) {
    if (this.ended) return false;
    const message = { type: 'chunk', data: String(data) };
    if (id) message.id = id;
    if (event) message.event = event;
    this._send(message);
    this.chunks += 1;
    const limit = this.cmd.cancel_after;
    if (limit !== null && limit !== undefined && this.chunks >= limit) {
      this.stop(); // the consumer breaks out of its loop
      return false;
    }
    return true;
  }

  state(state, extra = {}) {
    this._send({ type: 'state', state, ...extra });
  }

  log(message) {
    this._send({ type: 'log', message: String(message) });
  }

  done() {
    this._send({ type: 'done' });
    this._finish();
  }

  error(kind, detail, status) {
    const message = { type: 'error', kind, detail: String(detail ?? '') };
    if (Number.isInteger(status)) message.status = status;
    this._send(message);
    this._finish();
  }

  /** Run `fn` when the consumer stops reading (cancel, cancel_after, reset, shutdown). */
  onStop(fn) {
    if (this.signal.aborted) fn();
    else this._stops.push(fn);
  }

  stop() {
    this._finish();
    if (!this.signal.aborted) this.controller.abort();
    for (const fn of this._stops.splice(0)) {
      try {
        fn();
      } catch {
        // closing an already closed stream
      }
    }
  }

  _finish() {
    this.ended = true;
    if (this._streams.get(this.id) === this) this._streams.delete(this.id);
  }
}

/**
 * Serve the protocol on stdin/stdout.
 *
 * @param {object} spec
 * @param {string} spec.name, spec.version, spec.profile
 * @param {string[]} spec.capabilities
 * @param {string} [spec.format] the wire format it speaks (exec hello's "format")
 * @param {string} [spec.reports] what its chunks carry: "events", "json" or "text"
 * @param {(stream: Stream, client: (make: () => any) => any) => (void|Promise<void>)} spec.open
 *   Starts one stream; `client(make)` returns the instance for the stream's `client`
 *   name (made on first use, forgotten on reset).
 */
export function serve({ name, version, profile, capabilities, format, reports, open }) {
  const streams = new Map();
  let clients = new Map();
  let stopping = false;
  const lag = new LagProbe();

  const stopAll = () => {
    for (const s of [...streams.values()]) s.stop();
    streams.clear();
  };

  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    stopAll();
    setTimeout(() => process.exit(0), 50); // let the aborts reach the sockets
  };

  const startStream = (cmd) => {
    const stream = new Stream(cmd, streams);
    streams.set(stream.id, stream);
    const key = typeof cmd.client === 'string' ? cmd.client : 'default';
    const client = (make) => {
      if (!clients.has(key)) clients.set(key, make());
      return clients.get(key);
    };
    Promise.resolve()
      .then(() => open(stream, client))
      .catch((err) => stream.error('other', `adapter error: ${describe(err)}`));
  };

  const dispatch = (cmd) => {
    switch (cmd?.cmd) {
      case 'hello':
        emit({
          type: 'hello', protocol: 1, api: 2, name, version, profile, capabilities, lag_probe: true,
          ...(format ? { format } : {}),
          ...(reports ? { reports } : {}),
        });
        break;
      case 'configure': // never sent: no adapter here is configurable
        emit({ type: 'configured' });
        break;
      case 'reset':
        stopAll();
        clients = new Map();
        freshConnections();
        emit({ type: 'reset' });
        break;
      case 'stream':
        startStream(cmd);
        break;
      case 'cancel':
        streams.get(cmd.stream)?.stop();
        break;
      case 'offline':
      case 'online':
        // None of these libraries listens for network events: a Node app has none to give.
        emit({ type: 'log', message: `${cmd.cmd}: the library has no network events; ignored` });
        break;
      case 'lag':
        if (cmd.flush) lag.flush(true);
        else if (cmd.on) lag.start();
        else lag.stop();
        break;
      case 'shutdown':
        lag.stop();
        shutdown();
        break;
      default:
        emit({ type: 'log', message: `ignored the command ${JSON.stringify(cmd?.cmd)}` });
    }
  };

  createInterface({ input: process.stdin, crlfDelay: Infinity })
    .on('line', (line) => {
      if (line.trim() === '') return;
      let cmd;
      try {
        cmd = JSON.parse(line);
      } catch (err) {
        emit({ type: 'log', message: `ignored a line that is not JSON (${err.message})` });
        return;
      }
      dispatch(cmd);
    })
    .on('close', shutdown);
  process.on('SIGTERM', shutdown);
  process.stdout.on('error', () => process.exit(0)); // the kit went away
  process.on('uncaughtException', (err) => emit({ type: 'log', message: `internal error: ${describe(err)}` }));
  process.on('unhandledRejection', (err) => emit({ type: 'log', message: `internal error: ${describe(err)}` }));
}

/** The request body of a stream command as fetch's `body` and its Content-Type. */
export function fetchBody(body) {
  if (body === null || body === undefined) return { body: undefined, contentType: null };
  if ('json' in body) return { body: JSON.stringify(body.json), contentType: 'application/json' };
  if ('multipart' in body) {
    const form = new FormData();
    for (const [k, v] of Object.entries(body.multipart.fields ?? {})) form.append(k, String(v));
    for (const f of body.multipart.files ?? []) {
      const bytes = Buffer.from(f.base64, 'base64');
      form.append(f.name, new Blob([bytes], { type: f.content_type }), f.filename);
    }
    return { body: form, contentType: null }; // fetch writes the boundary
  }
  return { body: undefined, contentType: null };
}

/** The prompt of a stream command's body, for an SDK's messages (a kit request's "prompt"). */
export function promptOf(body) {
  const value = body?.json ?? body?.multipart?.fields;
  if (value && typeof value === 'object') {
    if (typeof value.prompt === 'string') return value.prompt;
    return JSON.stringify(value);
  }
  return 'Hello';
}
