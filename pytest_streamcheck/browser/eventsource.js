// The browser's own EventSource, unwrapped: one `new EventSource(url)` per stream and
// nothing between it and the kit but the page contract (docs/browser.md). Whatever the
// verdicts say is what the browser does; the page adds no retry, timer or breaker.
"use strict";

// The end-of-answer markers of the common LLM formats (the kit's reference client's).
const TERMINAL_DATA = "[DONE]";
const TERMINAL_EVENTS = new Set(["done", "message_stop", "response.completed"]);
// EventSource hands a named event only to listeners of that name: a consumer must
// know the types its API sends. These are the types the kit's streams send (its wire
// formats' events, tests/test_browser_eventsource.py holds them here, and the few the
// SSE cases write by hand, " delta" with its second space included); an event of any
// other type is invisible to this page, as to any EventSource consumer. `error` is
// the EventSource's own: a server's `event: error` reaches onerror (below).
const NAMED_EVENTS = [
  "token", "content_block_delta", "response.output_text.delta",
  "message_start", "content_block_start", "content_block_stop", "message_delta", "ping",
  "response.created", "response.in_progress", "response.output_item.added",
  "response.content_part.done", "response.output_text.done",
  "delta", "usage", "tool_call", " delta", "x:y",
  ...TERMINAL_EVENTS,
];

const streams = new Map(); // the kit's stream id -> its EventSource

function emit(message) {
  window.streamcheckEmit(message);
}

function closeAll() {
  for (const source of streams.values()) source.close();
  streams.clear();
}

function open(cmd) {
  const id = cmd.stream;
  if (cmd.method !== "GET") {
    emit({ type: "error", stream: id, kind: "other", detail: `EventSource cannot send a ${cmd.method}` });
    return;
  }
  const dropped = Object.keys(cmd.headers || {});
  if (dropped.length) emit({ type: "log", stream: id, message: `EventSource sends no headers of its own: ${dropped.join(", ")} dropped` });
  if (cmd.last_event_id !== null && cmd.last_event_id !== undefined) {
    emit({ type: "log", stream: id, message: "EventSource cannot send Last-Event-ID on its first request: opened without it" });
  }
  const source = new EventSource(cmd.url);
  streams.set(id, source);
  let chunks = 0;
  const stop = () => {
    source.close();
    streams.delete(id);
  };
  const onEvent = (e) => {
    if (streams.get(id) !== source) return;
    if (e.data === TERMINAL_DATA || TERMINAL_EVENTS.has(e.type)) {
      stop();
      emit({ type: "done", stream: id });
      return;
    }
    const chunk = { type: "chunk", stream: id, data: e.data, event: e.type };
    if (e.lastEventId) chunk.id = e.lastEventId;
    emit(chunk);
    chunks += 1;
    if (cmd.cancel_after !== null && chunks >= cmd.cancel_after) stop(); // the consumer stops reading
  };
  source.onmessage = onEvent;
  for (const name of NAMED_EVENTS) source.addEventListener(name, onEvent);
  source.onopen = () => emit({ type: "log", stream: id, message: "open" });
  source.onerror = (e) => {
    if (streams.get(id) !== source) return;
    if (e instanceof MessageEvent) return onEvent(e); // the server's own `event: error`
    if (source.readyState === EventSource.CLOSED) {
      // The UA failed the connection: a status other than 200, a Content-Type other
      // than text/event-stream (or a 204). The page cannot see which, nor the status.
      stop();
      emit({
        type: "error", stream: id, kind: "non_retryable_status",
        detail: "EventSource failed the connection (not a 200 text/event-stream; the status is not visible to the page)",
      });
    } else {
      // CONNECTING: a network error; the UA reconnects after its reconnection time.
      emit({ type: "state", stream: id, state: "retrying", detail: "EventSource reconnects" });
    }
  };
  emit({ type: "state", stream: id, state: "connecting" });
}

function command(cmd) {
  switch (cmd.cmd) {
    case "configure":
      emit({ type: "configured" }); // never sent: the page is not configurable
      break;
    case "reset":
      closeAll();
      emit({ type: "reset" });
      break;
    case "stream":
      open(cmd);
      break;
    case "cancel": {
      const source = streams.get(cmd.stream);
      if (source) source.close();
      streams.delete(cmd.stream);
      break;
    }
    case "shutdown":
      closeAll();
      break;
    default:
      emit({ type: "log", message: `ignored the command ${cmd.cmd}` });
  }
}

async function browserVersion() {
  const full = navigator.userAgentData && (await navigator.userAgentData.getHighEntropyValues(["fullVersionList"]));
  const brand = full && full.fullVersionList.find((b) => b.brand === "Chromium");
  if (brand) return brand.version;
  const match = /Chrome\/([\d.]+)/.exec(navigator.userAgent);
  return match ? match[1] : "unknown";
}

browserVersion().then((version) => {
  window.streamcheck = {
    hello: () => ({
      type: "hello", protocol: 1, name: "chromium-eventsource", version,
      capabilities: ["get", "resume", "raw_events"], profile: "html-eventsource",
    }),
    command,
  };
});
