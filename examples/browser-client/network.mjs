// What the browser tells us for free (seed article, "Network-Aware"): the window's
// `offline` and `online` events, and `navigator.onLine`. Network down: wait. Network up:
// reset the counters and reconnect at once.
//
// A NetworkWatch passes them to a client pool (`pool.offline()`, `pool.online()`). It
// takes the event target and the navigator as arguments, so it runs in Node's tests too.

export class NetworkWatch {
  /**
   * @param {{offline(): void, online(): void}} pool
   * @param {EventTarget} target the window
   * @param {{onLine: boolean}} navigator
   */
  constructor(pool, target, navigator) {
    this.pool = pool;
    this.target = target;
    this.navigator = navigator;
    this.isOffline = false;
    this.onOffline = () => this.wentOffline();
    this.onOnline = () => this.cameOnline();
  }

  start() {
    this.target.addEventListener('offline', this.onOffline);
    this.target.addEventListener('online', this.onOnline);
    this.check();
    return this;
  }

  stop() {
    this.target.removeEventListener('offline', this.onOffline);
    this.target.removeEventListener('online', this.onOnline);
  }

  /**
   * Read `navigator.onLine` now: a page that loads offline hears no event, and a request
   * can fail before the `offline` event is dispatched. True when the network is down.
   */
  check() {
    if (this.navigator.onLine === false) this.wentOffline();
    return this.isOffline;
  }

  /** The pool forgot everything (a reset): tell it again what the network is doing. */
  resync() {
    this.isOffline = false;
    this.check();
  }

  wentOffline() {
    if (this.isOffline) return;
    this.isOffline = true;
    this.pool.offline();
  }

  cameOnline() {
    this.isOffline = false;
    this.pool.online();
  }
}
