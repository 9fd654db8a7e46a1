// Circuit breakers shared by every stream of the client, as small state machines.
// Pure: `now` (seconds, any monotonic origin) is passed to every call.
//
//   CLOSED --(threshold consecutive failures | failure ratio over the window)--> OPEN
//   OPEN --(cooldown elapsed, first admit)--> HALF_OPEN with exactly one probe in flight
//   HALF_OPEN --probe succeeds--> CLOSED      HALF_OPEN --probe fails--> OPEN
//   HALF_OPEN --probe abandoned--> HALF_OPEN with no probe (the next admit becomes the probe)

export const CLOSED = 'closed';
export const OPEN = 'open';
export const HALF_OPEN = 'half_open';

class BaseBreaker {
  constructor(config) {
    this.config = config;
    this.onChange = () => {}; // the shell wakes streams waiting for the breaker
    this.reset();
  }

  reset() {
    this.phase = CLOSED;
    this.openUntil = 0;
    this.probing = false;
    this.clearCounts();
  }

  state(now) {
    return this.phase === OPEN && now >= this.openUntil ? HALF_OPEN : this.phase;
  }

  /** @returns {{admit: true, probe: boolean} | {admit: false, until: number|null}} until=null: a probe is in flight */
  admit(now) {
    if (this.phase === CLOSED) return { admit: true, probe: false };
    if (this.phase === OPEN && now < this.openUntil) return { admit: false, until: this.openUntil };
    this.phase = HALF_OPEN;
    if (this.probing) return { admit: false, until: null };
    this.probing = true;
    return { admit: true, probe: true };
  }

  recordSuccess(now, probe) {
    if (this.phase !== CLOSED && !probe) return; // a straggler admitted before the trip
    const changed = this.phase !== CLOSED;
    this.phase = CLOSED;
    this.probing = false;
    if (changed) this.clearCounts();
    this.countSuccess(now);
    if (changed) this.onChange();
  }

  recordFailure(now, probe) {
    if (this.phase === CLOSED) {
      if (this.countFailure(now)) this.trip(now);
    } else if (probe) {
      this.trip(now);
    }
  }

  probeAbandoned(now, probe) {
    if (!probe || this.phase === CLOSED) return;
    this.probing = false;
    this.onChange();
  }

  trip(now) {
    this.phase = OPEN;
    this.openUntil = now + this.config.cooldown;
    this.probing = false;
    this.onChange();
  }
}

/** The seed article's breaker: `threshold` failures in a row open it for `cooldown` seconds. */
export class ConsecutiveBreaker extends BaseBreaker {
  clearCounts() {
    this.failures = 0;
  }
  countSuccess() {
    this.failures = 0;
  }
  countFailure() {
    this.failures += 1;
    return this.failures >= this.config.threshold;
  }
}

/** The seed library's breaker: a failure ratio over a sliding window, once enough calls were seen. */
export class RatioBreaker extends BaseBreaker {
  clearCounts() {
    this.outcomes = []; // [time, ok]
  }
  countSuccess(now) {
    this.#push(now, true);
  }
  countFailure(now) {
    this.#push(now, false);
    const failed = this.outcomes.filter(([, ok]) => !ok).length;
    const calls = this.outcomes.length;
    return calls >= this.config.min_throughput && failed / calls >= this.config.ratio;
  }
  #push(now, ok) {
    this.outcomes.push([now, ok]);
    const oldest = now - this.config.window;
    while (this.outcomes.length > 0 && this.outcomes[0][0] < oldest) this.outcomes.shift();
  }
}

export class NoBreaker extends BaseBreaker {
  clearCounts() {}
  countSuccess() {}
  countFailure() {
    return false;
  }
}

export function makeBreaker(config) {
  if (config.kind === 'ratio') return new RatioBreaker(config);
  if (config.kind === 'none') return new NoBreaker(config);
  return new ConsecutiveBreaker(config);
}
