// The web app's streaming client: the seed article's two transports over one resilience
// layer, wired to the browser's own network events. An application builds one with
// createClient() and starts streams on its pool; the kit's protocol glue (streamcheck.mjs)
// does exactly that.

import { ClientPool } from './shared/pool.mjs';
import { DEFAULT_POLICY, normalizePolicy } from './shared/policy.mjs';
import { StreamingClient } from './shared/resilience.mjs';
import { NetworkWatch } from './network.mjs';
import { eventSourceTransport, fetchTransport } from './transports.mjs';

export const NAME = 'streamcheck-browser-client';
export const VERSION = '0.1.0';

/** A pool that tells a fresh start what the network is doing. */
class BrowserPool extends ClientPool {
  reset() {
    super.reset();
    this.network?.resync();
  }
}

/**
 * @param {{emit: (event: object) => void, get?: 'fetch' | 'eventsource',
 *          networkEvents?: boolean, window?: Window, policy?: object}} options
 *   `get`: the transport of GET streams (README.md: fetch unless asked otherwise);
 *   `networkEvents`: listen to the window's offline/online events and navigator.onLine.
 * @returns {ClientPool} start(spec), cancel(id), configure(policy), reset(), shutdown()
 */
export function createClient({ emit, get = 'fetch', networkEvents = true, window: win = globalThis, policy }) {
  const pool = new BrowserPool({
    emit,
    policy: normalizePolicy(policy ?? DEFAULT_POLICY).policy,
    makeClient: (options) => new StreamingClient({ ...options, transport: transportFor(pool.network) }),
  });
  const transportFor = (network) => {
    const viaFetch = fetchTransport(network);
    return get === 'eventsource' ? eventSourceTransport(viaFetch) : viaFetch;
  };
  pool.network = networkEvents ? new NetworkWatch(pool, win, win.navigator).start() : null;
  return pool;
}
