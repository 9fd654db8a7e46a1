// The retry policy as pure functions: the retry matrix, jittered backoff, Retry-After and the
// per-call decision. Clock readings and the random source are passed in, never read here.
// Durations are in seconds, as in the exec protocol.

/** The seed article's numbers (EventSource client); `configure` overrides any of them. */
export const DEFAULT_POLICY = Object.freeze({
  name: 'seed-eventsource',
  retry: { never: [400, 401, 403, 404, 422], always: [429, 503], retry_5xx: true, extra: [], retry_network: true },
  backoff: { family: 'seed', base: 0.2, caps: [[1, 2], [6, 3], [11, 5]], jitter: 0.5 },
  breaker: { kind: 'consecutive', threshold: 5, cooldown: 60, ratio: 0.5, min_throughput: 10, window: 30 },
  max_attempts: null,
  retry_after: true,
  retry_after_cap: 60,
  stall_timeout: 90,
  stall_check_interval: 10,
  idle_rule: 'bytes',
  first_chunk_timeout: null,
  connect_timeout: 10,
  resume: true,
});

const FAMILIES = new Set(['seed', 'full', 'equal', 'decorrelated', 'none']);
const BREAKERS = new Set(['consecutive', 'ratio', 'none']);

/**
 * Merge a policy from `configure` over the defaults. Fields of the wrong type are dropped and
 * named in `problems`, so a bad field never takes the client down.
 * @returns {{policy: object, problems: string[]}}
 */
export function normalizePolicy(raw) {
  const problems = [];
  const src = isObject(raw) ? raw : {};
  if (!isObject(raw)) problems.push('policy is not an object; using the defaults');
  const pick = (obj, key, fallback, ok, where) => {
    if (!(key in obj) || obj[key] === undefined) return fallback;
    if (ok(obj[key])) return obj[key];
    problems.push(`${where}${key}: ignored ${JSON.stringify(obj[key])}`);
    return fallback;
  };
  const d = DEFAULT_POLICY;
  const sub = (key) => (isObject(src[key]) ? src[key] : {});
  const r = sub('retry');
  const b = sub('backoff');
  const k = sub('breaker');
  const policy = {
    name: pick(src, 'name', d.name, isString, ''),
    retry: {
      never: pick(r, 'never', d.retry.never, isIntList, 'retry.'),
      always: pick(r, 'always', d.retry.always, isIntList, 'retry.'),
      retry_5xx: pick(r, 'retry_5xx', d.retry.retry_5xx, isBool, 'retry.'),
      extra: pick(r, 'extra', d.retry.extra, isIntList, 'retry.'),
      retry_network: pick(r, 'retry_network', d.retry.retry_network, isBool, 'retry.'),
    },
    backoff: {
      family: pick(b, 'family', d.backoff.family, (v) => FAMILIES.has(v), 'backoff.'),
      base: pick(b, 'base', d.backoff.base, isDuration, 'backoff.'),
      caps: pick(b, 'caps', d.backoff.caps, isCaps, 'backoff.'),
      jitter: pick(b, 'jitter', d.backoff.jitter, isDuration, 'backoff.'),
    },
    breaker: {
      kind: pick(k, 'kind', d.breaker.kind, (v) => BREAKERS.has(v), 'breaker.'),
      threshold: pick(k, 'threshold', d.breaker.threshold, isPositiveInt, 'breaker.'),
      cooldown: pick(k, 'cooldown', d.breaker.cooldown, isDuration, 'breaker.'),
      ratio: pick(k, 'ratio', d.breaker.ratio, isDuration, 'breaker.'),
      min_throughput: pick(k, 'min_throughput', d.breaker.min_throughput, isPositiveInt, 'breaker.'),
      window: pick(k, 'window', d.breaker.window, isDuration, 'breaker.'),
    },
    max_attempts: pick(src, 'max_attempts', d.max_attempts, (v) => v === null || isPositiveInt(v), ''),
    retry_after: pick(src, 'retry_after', d.retry_after, isBool, ''),
    retry_after_cap: pick(src, 'retry_after_cap', d.retry_after_cap, isDuration, ''),
    stall_timeout: pick(src, 'stall_timeout', d.stall_timeout, isDuration, ''),
    stall_check_interval: pick(src, 'stall_check_interval', d.stall_check_interval, isPositive, ''),
    idle_rule: pick(src, 'idle_rule', d.idle_rule, (v) => v === 'bytes' || v === 'data', ''),
    first_chunk_timeout: pick(src, 'first_chunk_timeout', d.first_chunk_timeout, isOptionalPositive, ''),
    connect_timeout: pick(src, 'connect_timeout', d.connect_timeout, isOptionalPositive, ''),
    resume: pick(src, 'resume', d.resume, isBool, ''),
  };
  return { policy, problems };
}

/** The seed article's matrix; `status === null` is a failure with no response at all. */
export function isRetryable(retry, status) {
  if (status === null || status === undefined) return retry.retry_network;
  if (retry.never.includes(status)) return false;
  if (retry.always.includes(status) || retry.extra.includes(status)) return true;
  return retry.retry_5xx && status >= 500 && status <= 599;
}

/** The cap in force for retry number `attempt` (1-based): the last pair starting at or before it. */
export function capFor(backoff, attempt) {
  let cap = backoff.caps[0][1];
  for (const [first, value] of backoff.caps) if (attempt >= first) cap = value;
  return cap;
}

export function exponential(backoff, attempt) {
  return Math.min(backoff.base * 2 ** (attempt - 1), capFor(backoff, attempt));
}

/**
 * The delay before retry number `attempt` (1-based).
 * @param {() => number} rng uniform in [0, 1)
 * @param {number|null} previous the previous delay (decorrelated jitter only)
 */
export function backoffDelay(backoff, attempt, rng, previous = null) {
  const exp = exponential(backoff, attempt);
  switch (backoff.family) {
    case 'seed': // the article: 0..jitter (50 %) extra on top of the capped exponential
      return exp + rng() * exp * backoff.jitter;
    case 'full':
      return rng() * exp;
    case 'equal':
      return exp / 2 + (rng() * exp) / 2;
    case 'decorrelated': {
      const prev = previous ?? backoff.base;
      const high = Math.max(backoff.base, prev * 3);
      return Math.min(capFor(backoff, attempt), backoff.base + rng() * (high - backoff.base));
    }
    default:
      return exp;
  }
}

const PLAIN_NUMBER = /^\s*\d+(\.\d+)?\s*$/;

/**
 * The server's wait hint in seconds, or null: `retry-after-ms` first, then `Retry-After` as
 * seconds, then as an HTTP date (past dates mean 0). Garbage and negatives are null.
 * @param {(name: string) => string|null} header a case-insensitive header lookup
 */
export function parseRetryAfter(header, nowEpochMs, cap) {
  const ms = header('retry-after-ms');
  if (ms !== null && PLAIN_NUMBER.test(ms)) return Math.min(Number(ms) / 1000, cap);
  const value = header('retry-after');
  if (value === null) return null;
  if (PLAIN_NUMBER.test(value)) return Math.min(Number(value), cap);
  if (!/[A-Za-z]/.test(value)) return null; // "-5" would otherwise parse as a year
  const date = Date.parse(value);
  if (Number.isNaN(date)) return null;
  return Math.min(Math.max(0, (date - nowEpochMs) / 1000), cap);
}

/**
 * What one logical stream does after each failure. A failure is
 * `{kind, status?, header?}` with kind one of status, connect, reset, timeout_first_chunk,
 * stall, truncated, content_type.
 */
export class RetryState {
  constructor(policy, rng) {
    this.policy = policy;
    this.rng = rng;
    this.attempts = 0; // attempts since the last reset or progress
    this.retries = 0; // the backoff exponent's attempt number
    this.previousDelay = null;
    this.committed = false;
  }

  onAttempt() {
    this.attempts += 1;
  }

  /** The first chunk of an attempt reached the consumer: committed, and progress resets the count. */
  onChunk() {
    this.committed = true;
    this.attempts = 1;
    this.retries = 0;
    this.previousDelay = null;
  }

  /** online: the failures were the network's, not the backend's. */
  reset() {
    this.attempts = 0;
    this.retries = 0;
    this.previousDelay = null;
  }

  /**
   * @returns {{action: 'retry', delay: number, resume: boolean, reason: string}
   *          | {action: 'give_up', reason: string} | {action: 'surface', reason: string}}
   */
  decide(failure, { nowEpochMs, resumable, idempotent, requestSent }) {
    const p = this.policy;
    const status = failure.kind === 'status' ? failure.status : null;
    if (failure.kind === 'content_type') return { action: 'give_up', reason: 'content_type' };
    // After the commit the consumer has part of the answer: only a resume may follow.
    if (this.committed && !resumable) return { action: 'surface', reason: 'committed' };
    if (!isRetryable(p.retry, status)) {
      return { action: 'give_up', reason: status === null ? 'network_not_retried' : 'non_retryable' };
    }
    if (!idempotent && requestSent) return { action: 'give_up', reason: 'not_idempotent' };
    if (p.max_attempts !== null && this.attempts >= p.max_attempts) {
      return { action: 'give_up', reason: 'exhausted' };
    }
    this.retries += 1;
    const hinted =
      p.retry_after && failure.header ? parseRetryAfter(failure.header, nowEpochMs, p.retry_after_cap) : null;
    const delay = hinted ?? backoffDelay(p.backoff, this.retries, this.rng, this.previousDelay);
    this.previousDelay = delay;
    return { action: 'retry', delay, resume: this.committed, reason: describe(failure) };
  }
}

export function describe(failure) {
  // The server's message is what lets the user act (sign in again, fix the input).
  if (failure.kind === 'status') return `HTTP ${failure.status}${failure.detail ? `: ${failure.detail}` : ''}`;
  return failure.detail ? `${failure.kind}: ${failure.detail}` : failure.kind;
}

function isObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
function isString(v) {
  return typeof v === 'string';
}
function isBool(v) {
  return typeof v === 'boolean';
}
function isDuration(v) {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}
function isPositive(v) {
  return isDuration(v) && v > 0;
}
function isOptionalPositive(v) {
  return v === null || isPositive(v);
}
function isPositiveInt(v) {
  return Number.isInteger(v) && v > 0;
}
function isIntList(v) {
  return Array.isArray(v) && v.every(Number.isInteger);
}
function isCaps(v) {
  return (
    Array.isArray(v) &&
    v.length > 0 &&
    v.every((pair) => Array.isArray(pair) && pair.length === 2 && Number.isInteger(pair[0]) && isDuration(pair[1]))
  );
}
