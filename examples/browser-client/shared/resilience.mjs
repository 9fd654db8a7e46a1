// The resilient streaming client: ONE resilience layer for every transport (the retry
// matrix, jittered backoff, the breaker, the stall watchdog, commit and resume, offline and
// online). What carries an attempt is a transport object the shell passes in:
//
//   transport.encodeBody(body)              -> Promise<{bytes, contentType} | null>
//   transport.exchange(call, signal, progress)
//        one request: resolves to a result (below) or throws a network error; it hands each
//        SSE event to call.receive() and reports arrival with call.headersArrived() and
//        call.bytesArrived()
//   transport.networkFailure(err)           -> {kind: 'connect' | 'reset', detail}
//   transport.configure(policy), transport.offline(), transport.shutdown()   (optional)
//
// Node (fetch on undici) and the browser (fetch + ReadableStream, or native EventSource)
// each pass their own. Policy decisions come from the pure modules; this file owns the
// clock and the timers. It uses no Node-only API.

import { makeBreaker } from './breaker.mjs';
import { RetryState, describe } from './policy.mjs';
import { SSEDecoder, headerBytes, isTerminal } from './sse.mjs';

const clock = () => performance.now() / 1000;
const ms = (seconds) => Math.ceil(seconds * 1000); // never early: bounds are checked from below

/** Why an attempt was cut short by us rather than by the network. */
export const CANCELLED = Object.freeze({ kind: 'cancelled' });
export const WENT_OFFLINE = Object.freeze({ kind: 'offline' });

/** A decision's reason -> the protocol's error kind. */
const GIVE_UP_KIND = {
  non_retryable: 'non_retryable_status',
  exhausted: 'gave_up',
  not_idempotent: 'gave_up',
  network_not_retried: 'gave_up',
  content_type: 'other',
};
/** A failure after the commit -> the error the consumer sees. */
const SURFACE_KIND = { stall: 'stalled', truncated: 'truncated', reset: 'truncated', connect: 'truncated' };

export class StreamingClient {
  /**
   * @param {{emit: (event: object) => void, policy: object, transport: object, rng?: () => number}} options
   */
  constructor({ emit, policy, transport, rng = Math.random }) {
    this.emit = emit;
    this.transport = transport;
    this.rng = rng;
    this.calls = new Map();
    this.waiters = new Set();
    this.isOffline = false;
    this.configure(policy);
  }

  configure(policy) {
    this.policy = policy;
    this.breaker = makeBreaker(policy.breaker);
    this.breaker.onChange = () => this.wake('breaker');
    this.transport.configure?.(policy);
  }

  /** Start one stream; `spec` is the protocol's already validated `stream` command. */
  start(spec) {
    const call = new Call(this, spec);
    this.calls.set(spec.id, call);
    call.run().finally(() => {
      if (this.calls.get(spec.id) === call) this.calls.delete(spec.id);
    });
  }

  cancel(id) {
    const call = this.calls.get(id);
    if (call) call.cancel('cancelled by the consumer');
    return call !== undefined;
  }

  /** Forget every stream (silently), the breaker and the attempt counts. */
  reset() {
    for (const call of this.calls.values()) call.abandon();
    this.calls.clear();
    this.breaker.reset();
    this.isOffline = false;
  }

  /** The browser's `offline` event: no attempts from now on, open connections are dropped. */
  offline() {
    this.isOffline = true;
    for (const call of this.calls.values()) call.wentOffline();
    this.transport.offline?.();
  }

  /** The browser's `online` event: the failures were the network's, so start afresh at once. */
  online() {
    this.isOffline = false;
    this.breaker.reset();
    for (const call of this.calls.values()) call.cameOnline();
    this.wake('online');
  }

  shutdown() {
    for (const call of this.calls.values()) call.abandon();
    this.calls.clear();
    this.transport.shutdown?.();
  }

  /** Sleep up to `seconds` (Infinity: forever), ending early on `signal` or a wake on `channels`. */
  wait(seconds, signal, channels) {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve('cancelled');
      const done = (why) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.waiters.delete(waiter);
        resolve(why);
      };
      const onAbort = () => done('cancelled');
      const waiter = { channels, done };
      const timer = Number.isFinite(seconds) ? setTimeout(done, ms(Math.max(0, seconds)), 'timeout') : undefined;
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(waiter);
      return undefined;
    });
  }

  wake(channel) {
    for (const waiter of [...this.waiters]) if (waiter.channels.includes(channel)) waiter.done(channel);
  }
}

/** One `stream` command: the retry loop around attempts, from the request to done or error. */
class Call {
  constructor(client, spec) {
    this.client = client;
    this.spec = spec;
    this.policy = client.policy;
    this.retry = new RetryState(this.policy, client.rng);
    this.lifetime = new AbortController(); // aborted on cancel / reset / shutdown
    this.attemptController = null;
    this.attemptsMade = 0;
    this.delivered = 0;
    this.lastEventId = spec.lastEventId ?? ''; // the caller's resume point, if any
    // The request the next attempt sends, as the last followed redirect left it (a 303 turns
    // a POST into a GET without its body); a transport that sees the redirects moves it.
    this.url = spec.url;
    this.method = spec.method;
    this.sendsBody = true;
    this.lastDeliveredId = null;
    this.ended = false;
    this.silent = false;
    this.offlineShown = false;
  }

  get id() {
    return this.spec.id;
  }

  /** Ids were seen, the policy resumes, and repeating the request is harmless. */
  get resumable() {
    return this.policy.resume && this.spec.idempotent && this.lastEventId !== '';
  }

  async run() {
    try {
      this.body = await this.client.transport.encodeBody(this.spec.body);
      await this.loop();
    } catch (err) {
      this.fail('other', `${err?.name ?? 'Error'}: ${err?.message ?? err}`);
    }
  }

  async loop() {
    const { client } = this;
    while (!this.ended) {
      if (client.isOffline) {
        this.showOffline();
        await client.wait(Infinity, this.lifetime.signal, ['online']);
        continue;
      }
      const ticket = client.breaker.admit(clock());
      if (!ticket.admit) {
        await this.breakerOpen(ticket.until);
        continue;
      }
      this.attemptsMade += 1;
      this.retry.onAttempt();
      this.state('connecting', this.attemptsMade > 1 ? { detail: `attempt ${this.attemptsMade}` } : {});
      const result = await this.attempt(ticket.probe);
      await this.settle(result, ticket.probe);
    }
  }

  /** A new stream fails fast on an open circuit; one already retrying waits for it. */
  async breakerOpen(until) {
    const now = clock();
    const delay = until === null ? undefined : Math.max(0, until - now);
    const detail = until === null ? 'a half-open probe is in flight' : 'circuit open';
    this.state('breaker_open', delay === undefined ? { detail } : { delay, detail });
    if (this.attemptsMade === 0) {
      this.fail('circuit_open', delay === undefined ? detail : `${detail} for ${delay.toFixed(3)} s`);
      return;
    }
    await this.client.wait(delay ?? Infinity, this.lifetime.signal, ['breaker', 'online']);
  }

  /** Book the attempt's outcome with the breaker and decide what comes next. */
  async settle(result, probe) {
    const { breaker } = this.client;
    const beforeFirstChunk = !result.gotData;
    if (this.ended || result.kind === 'cancelled') {
      if (beforeFirstChunk) breaker.probeAbandoned(clock(), probe);
      return;
    }
    if (result.kind === 'done') {
      if (beforeFirstChunk) breaker.recordSuccess(clock(), probe);
      this.state('done');
      this.finish({ type: 'done' });
      return;
    }
    if (result.kind === 'offline') {
      if (beforeFirstChunk) breaker.probeAbandoned(clock(), probe);
      if (this.retry.committed && !this.resumable) this.fail('offline', 'the network went away mid-stream');
      else if (!this.spec.idempotent) this.fail('offline', 'the network went away; the request is not idempotent');
      return; // otherwise the loop waits for `online`
    }
    // Only failures before an attempt's first chunk say something about the backend.
    if (beforeFirstChunk) breaker.recordFailure(clock(), probe);
    const decision = this.retry.decide(result, {
      nowEpochMs: Date.now(),
      resumable: this.resumable,
      idempotent: this.spec.idempotent,
      requestSent: result.kind !== 'connect',
    });
    if (decision.action === 'retry') {
      this.state('retrying', { delay: decision.delay, detail: decision.reason });
      await this.client.wait(decision.delay, this.lifetime.signal, ['online']);
    } else if (decision.action === 'surface') {
      this.fail(SURFACE_KIND[result.kind] ?? 'other', `after the first chunk: ${describe(result)}`);
    } else {
      const detail = `${decision.reason.replaceAll('_', ' ')}: ${describe(result)}`;
      this.fail(GIVE_UP_KIND[decision.reason] ?? 'other', detail, result.status);
    }
  }

  /**
   * One HTTP request and its SSE body. Resolves (never rejects) to `{kind: 'done'}`,
   * `{kind: 'cancelled'|'offline'}`, or a failure `{kind, status?, header?, detail?}`;
   * `gotData` says whether a chunk was delivered first.
   */
  async attempt(probe) {
    const policy = this.policy;
    const controller = new AbortController();
    this.attemptController = controller;
    const progress = {
      probe, // this attempt is the breaker's half-open probe
      gotData: false,
      lastActivity: clock(),
      stalledShown: false,
      deadline: undefined, // the exact stall deadline, armed when the next check would be late
      replaying: this.lastDeliveredId !== null, // a resume: skip what the consumer already has
    };
    const watch = setInterval(() => this.checkIdle(controller, progress), ms(policy.stall_check_interval));
    const firstChunk =
      policy.first_chunk_timeout === null
        ? undefined
        : setTimeout(() => {
            if (!progress.gotData) controller.abort({ kind: 'timeout_first_chunk', detail: 'no chunk in time' });
          }, ms(policy.first_chunk_timeout));
    try {
      const result = await this.client.transport.exchange(this, controller.signal, progress);
      return { ...result, gotData: progress.gotData };
    } catch (err) {
      const reason = controller.signal.aborted ? controller.signal.reason : this.client.transport.networkFailure(err);
      return { ...reason, gotData: progress.gotData };
    } finally {
      clearInterval(watch);
      clearTimeout(progress.deadline);
      clearTimeout(firstChunk);
      controller.abort(CANCELLED); // releases the connection if anything is left of it
      this.attemptController = null;
    }
  }

  /**
   * The stall watchdog: surface "stalled" early, abandon the connection after the timeout.
   * It runs every check interval; when the timeout falls before the next check, a one-shot
   * timer checks at the deadline itself, so a loaded event loop's late tick comes out of
   * the interval's slack rather than past it.
   */
  checkIdle(controller, progress) {
    clearTimeout(progress.deadline);
    progress.deadline = undefined;
    const idle = clock() - progress.lastActivity;
    const what = this.policy.idle_rule === 'data' ? 'data' : 'byte';
    // Surfaced before it is acted on, even when a late check finds it dead at once.
    if (idle >= this.policy.stall_check_interval && !progress.stalledShown) {
      progress.stalledShown = true;
      this.state('stalled', { detail: `no ${what} for ${idle.toFixed(3)} s` });
    }
    if (idle > this.policy.stall_timeout) {
      controller.abort({ kind: 'stall', detail: `no ${what} for ${idle.toFixed(3)} s` });
    } else if (idle + this.policy.stall_check_interval > this.policy.stall_timeout) {
      progress.deadline = setTimeout(() => this.checkIdle(controller, progress), ms(this.policy.stall_timeout - idle) + 1);
    }
  }

  /** The response head arrived: the headers are the first bytes of the stall watch. */
  headersArrived(progress) {
    progress.lastActivity = clock();
  }

  /** Bytes arrived (any bytes: comments and partial lines too). */
  bytesArrived(progress) {
    if (this.policy.idle_rule === 'bytes') this.touch(progress);
  }

  touch(progress) {
    progress.lastActivity = clock();
    progress.stalledShown = false;
  }

  /**
   * The request headers of every attempt: EventSource's (Accept, and the cache mode
   * "no-store" as Fetch sends it, unless the transport has the cache mode add them), the
   * caller's, the body's type, and Last-Event-ID whenever there is one: the caller's on the
   * first request, the stream's later (a stream that cannot resume never reconnects once
   * ids have arrived), UTF-8 encoded as EventSource sends it.
   */
  requestHeaders({ cacheHeaders = true } = {}) {
    const sse = cacheHeaders
      ? { accept: 'text/event-stream', 'cache-control': 'no-cache', pragma: 'no-cache' }
      : { accept: 'text/event-stream' };
    const headers = { ...sse, ...this.spec.headers };
    if (this.body && this.sendsBody) {
      const overridden = Object.keys(this.spec.headers).some((k) => k.toLowerCase() === 'content-type');
      if (!overridden || this.body.contentType.startsWith('multipart/')) headers['content-type'] = this.body.contentType;
    }
    if (this.lastEventId !== '') headers['last-event-id'] = headerBytes(this.lastEventId);
    return headers;
  }

  /** Read an SSE body (a ReadableStream's reader) until the terminal event, its end or an error. */
  async readBody(reader, progress) {
    const decoder = new SSEDecoder(this.lastEventId, { comments: this.spec.comments === true });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        decoder.close(); // an unterminated last event is dropped, as the spec says
        return { kind: 'truncated', detail: 'the body ended without the terminal event' };
      }
      this.bytesArrived(progress);
      for (const event of decoder.feed(value)) {
        if ('comment' in event) {
          this.receiveComment(event.comment, progress);
          continue;
        }
        this.lastEventId = decoder.lastEventId;
        const outcome = this.receive(event, progress);
        if (outcome !== null) {
          if (outcome.kind === 'done') await reader.cancel().catch(() => {});
          return outcome;
        }
      }
      this.lastEventId = decoder.lastEventId; // id-only events move it too
    }
  }

  /** A comment line, for a consumer that asked (`comments`); never a chunk, never the commit. */
  receiveComment(text, progress) {
    if (!progress.replaying) this.emitEvent({ type: 'comment', text });
  }

  /**
   * One parsed SSE event (`{type, data, id, hasId}`): the terminal event ends the attempt
   * (`{kind: 'done'}`), a consumer that stopped ends it (CANCELLED), otherwise null.
   */
  receive(event, progress) {
    if (isTerminal(event)) return { kind: 'done' };
    if (this.isReplay(event, progress)) return null;
    if (this.policy.idle_rule === 'data') this.touch(progress);
    if (this.consumerStopped()) return CANCELLED;
    this.deliver(event, progress);
    if (this.consumerStopped()) return CANCELLED;
    return null;
  }

  /**
   * After a resume, a server that replays from the start must not duplicate chunks: events up to
   * the last delivered (numeric) id are skipped, and so are id-less events among them.
   */
  isReplay(event, progress) {
    if (!progress.replaying) return false;
    const last = this.lastDeliveredId;
    if (event.hasId && /^\d+$/.test(event.id) && /^\d+$/.test(last)) {
      progress.replaying = BigInt(event.id) <= BigInt(last);
    } else if (event.hasId) {
      progress.replaying = false; // ids we cannot order: trust the server's resume
    }
    return progress.replaying;
  }

  deliver(event, progress) {
    if (!progress.gotData) {
      progress.gotData = true;
      this.client.breaker.recordSuccess(clock(), progress.probe);
      if (!this.retry.committed) this.state('committed');
      this.retry.onChunk();
    }
    const chunk = { type: 'chunk', stream: this.id, data: event.data };
    if (event.id !== '') chunk.id = event.id;
    if (event.type !== 'message') chunk.event = event.type;
    this.emitEvent(chunk);
    this.delivered += 1;
    if (event.hasId) this.lastDeliveredId = event.id;
  }

  /** `cancel_after`: the consumer breaks out of its loop after the N-th chunk. */
  consumerStopped() {
    const limit = this.spec.cancelAfter;
    if (limit === null || this.delivered < limit) return false;
    this.cancel(`the consumer stopped after ${this.delivered} chunk(s)`);
    return true;
  }

  cancel(why) {
    if (this.ended) return;
    this.emitEvent({ type: 'log', message: why });
    this.ended = true;
    this.stop();
  }

  /** reset / shutdown: stop without another word. */
  abandon() {
    this.silent = true;
    this.ended = true;
    this.stop();
  }

  stop() {
    this.attemptController?.abort(CANCELLED);
    this.lifetime.abort(CANCELLED);
  }

  wentOffline() {
    if (this.ended) return;
    this.showOffline();
    this.attemptController?.abort(WENT_OFFLINE);
  }

  cameOnline() {
    this.offlineShown = false;
    this.retry.reset();
  }

  showOffline() {
    if (this.offlineShown) return;
    this.offlineShown = true;
    this.state('offline');
  }

  state(state, extra = {}) {
    this.emitEvent({ type: 'state', stream: this.id, state, ...extra });
  }

  fail(kind, detail, status) {
    if (this.ended) return;
    this.state('failed', { detail });
    const error = { type: 'error', stream: this.id, kind, detail };
    if (status !== undefined && status !== null) error.status = status;
    this.finish(error);
  }

  finish(event) {
    this.emitEvent(event);
    this.ended = true;
    this.lifetime.abort(CANCELLED);
  }

  emitEvent(event) {
    if (this.silent || this.ended) return;
    this.client.emit({ ...event, stream: this.id });
  }
}
