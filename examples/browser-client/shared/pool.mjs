// Independent client instances by the protocol's `client` key: streams with
// different keys behave like separate users (own breaker, own attempt counts).
// `makeClient({emit, policy})` builds one instance (a StreamingClient with its transport).

export class ClientPool {
  constructor({ emit, policy, makeClient }) {
    this.emit = emit;
    this.policy = policy;
    this.makeClient = makeClient;
    this.clients = new Map();
    this.isOffline = false;
  }

  client(key) {
    let client = this.clients.get(key);
    if (!client) {
      client = this.makeClient({ emit: this.emit, policy: this.policy });
      if (this.isOffline) client.offline();
      this.clients.set(key, client);
    }
    return client;
  }

  /** True when any instance has an open stream with this id. */
  has(id) {
    for (const client of this.clients.values()) if (client.calls.has(id)) return true;
    return false;
  }

  configure(policy) {
    this.policy = policy;
    for (const client of this.clients.values()) client.configure(policy);
  }

  start(spec) {
    this.client(spec.client).start(spec);
  }

  cancel(id) {
    for (const client of this.clients.values()) if (client.cancel(id)) return true;
    return false;
  }

  reset() {
    for (const client of this.clients.values()) client.shutdown();
    this.clients.clear();
    this.isOffline = false;
  }

  offline() {
    this.isOffline = true;
    for (const client of this.clients.values()) client.offline();
  }

  online() {
    this.isOffline = false;
    for (const client of this.clients.values()) client.online();
  }

  shutdown() {
    for (const client of this.clients.values()) client.shutdown();
    this.clients.clear();
  }
}
