(() => {
  let batch = null;
  const flush = () => { const sent = batch; batch = null; window.__streamcheckEmit(sent); };
  const copy = (m) => { try { return structuredClone(m); } catch (e) { return m; } };
  Object.defineProperty(window, "streamcheckEmit", {
    value: (message) => {
      if (batch === null) { batch = []; queueMicrotask(flush); }
      batch.push([copy(message), performance.now()]);
    },
    writable: false, configurable: false,
  });
  // The lag probe: a timer that measures its own lateness, as the kit's LagProbe does
  // on its loops. Rows are (due, woke) page times, flat; batches go through the binding.
  let probe = null;
  const network = [];  // [kind, page time] of every online/offline event, in order
  for (const kind of ["online", "offline"])
    window.addEventListener(kind, () => network.push([kind, performance.now()]), true);
  const seenAfter = (kind, since) => {
    const hit = network.find(([k, at]) => k === kind && at >= since);
    return hit === undefined ? null : hit[1];
  };
  const note = (p, entries) => {
    for (const e of entries)
      if (!e.name.startsWith(location.origin)) p.net.push(e.name, e.fetchStart, e.responseEnd);
  };
  const take = (p) => {
    if (p.seen !== null) note(p, p.seen.takeRecords());
    const rows = p.rows, net = p.net, got = p.got;
    p.rows = []; p.net = []; p.got = [];
    return [p.token, rows, net, got];
  };
  const send = (p) => {
    if (p.rows.length || p.net.length || p.got.length) window.__streamcheckEmit([], take(p));
  };
  // When each fetch's response reached the page's code, flat [url, call, resolved]: the
  // renderer can run a response's continuation well after Resource Timing's responseEnd
  // while its timers run on time (CI: 54 ms for a 503, the page's probe quiet), so the
  // hop back is also measured to here (_browser_network). The page gets fetch's own
  // Promise; only a side branch of it is noted, and only while a case plays.
  const fetchOf = window.fetch;
  if (typeof fetchOf === "function") {
    const urlOf = (input) => {
      try {
        const raw = input instanceof Request ? input.url : String(input);
        return new URL(raw, location.href).href;
      } catch (e) { return null; }
    };
    window.fetch = function fetch(input, init) {
      const promise = fetchOf.call(this === undefined ? window : this, input, init);
      const p = probe, url = p === null ? null : urlOf(input), called = performance.now();
      const resolved = () => { if (probe === p) p.got.push(url, called, performance.now()); };
      if (url !== null && !url.startsWith(location.origin)) promise.then(resolved, () => {});
      return promise;
    };
  }
  // The network hop (_browser_network): each finished request's Resource Timing entry,
  // flat [url, fetchStart, responseEnd]; the page's own files are not the server's.
  const watch = (p) => {
    if (typeof PerformanceObserver !== "function") return null;
    const seen = new PerformanceObserver((list) => note(p, list.getEntries()));
    try { seen.observe({type: "resource"}); } catch (e) { return null; }
    return seen;
  };
  Object.defineProperty(window, "__streamcheckLag", {
    value: Object.freeze({
      start: (token, interval, every) => {
        if (probe !== null) return;
        const p = probe = {token, rows: [], net: [], got: [], timer: 0, flusher: 0, seen: null};
        p.seen = watch(p);
        let due = performance.now() + interval;
        const tick = () => {
          if (probe !== p) return;
          const woke = performance.now();
          p.rows.push(due, woke);
          due = woke + interval;
          p.timer = setTimeout(tick, interval);
        };
        p.timer = setTimeout(tick, interval);
        p.flusher = setInterval(() => send(p), every);
      },
      take: () => (probe === null ? null : take(probe)),
      seen: (kind, since, timeout) => new Promise((resolve) => {
        const until = performance.now() + timeout;
        const look = () => {
          const at = seenAfter(kind, since);
          if (at !== null || performance.now() >= until) resolve(at);
          else setTimeout(look, 1);
        };
        look();
      }),
      stop: () => {
        const p = probe;
        probe = null;
        if (p === null) return null;
        clearTimeout(p.timer); clearInterval(p.flusher);
        const last = take(p);
        if (p.seen !== null) p.seen.disconnect();
        return last;
      },
    }),
    writable: false, configurable: false,
  });
})();
