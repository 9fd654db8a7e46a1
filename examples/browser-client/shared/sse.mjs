// An incremental text/event-stream parser following the WHATWG HTML rules (§9.2.6).
// Pure: it never reads a clock, and any split of the same bytes yields the same events.

const LINE_END = /[\r\n]/g;

/**
 * One dispatched event. `id` is the last event id in force when it was dispatched (as
 * EventSource's lastEventId); `hasId` says whether the event's own block set it.
 */
export function makeEvent(type, data, id, retry, hasId) {
  return { type, data, id, retry, hasId };
}

export class SSEDecoder {
  /**
   * @param {string} lastEventId the id carried over from an earlier connection
   * @param {{comments?: boolean}} options `comments`: also return each comment line, in
   *   stream order among the events, as `{comment: text}` (the text after the colon, one
   *   leading space removed)
   */
  constructor(lastEventId = '', { comments = false } = {}) {
    this.comments = comments;
    // The default TextDecoder strips one leading BOM and replaces invalid bytes, as the spec asks;
    // {stream: true} keeps a multi-byte character cut between chunks for the next call.
    this.text = new TextDecoder('utf-8');
    this.pending = ''; // an incomplete line
    this.skipLF = false; // the last chunk ended in CR: a leading LF in the next one ends nothing
    this.data = '';
    this.type = '';
    this.idBuffer = lastEventId;
    this.blockHasId = false;
    this.lastEventId = lastEventId;
    this.retry = null; // reconnection time in ms, from the last valid `retry:` field
    this.bytesSeen = 0;
    this.commentsSeen = 0;
  }

  /** Feed raw bytes; returns the events they complete. */
  feed(bytes) {
    this.bytesSeen += bytes.byteLength;
    return this.#lines(this.text.decode(bytes, { stream: true }));
  }

  /** End of stream: an event without its blank line is discarded, so nothing is returned. */
  close() {
    this.#lines(this.text.decode());
    this.pending = '';
    this.data = '';
    this.type = '';
    this.blockHasId = false;
    return [];
  }

  #lines(text) {
    if (text === '') return [];
    if (this.skipLF && text[0] === '\n') text = text.slice(1);
    this.skipLF = false;
    const buf = this.pending + text;
    const events = [];
    let start = 0;
    LINE_END.lastIndex = 0;
    for (let m = LINE_END.exec(buf); m !== null; m = LINE_END.exec(buf)) {
      const end = m.index;
      let next = end + 1;
      if (buf[end] === '\r') {
        if (next === buf.length) this.skipLF = true;
        else if (buf[next] === '\n') next += 1;
      }
      this.#line(buf.slice(start, end), events);
      start = next;
      LINE_END.lastIndex = next;
    }
    this.pending = buf.slice(start);
    return events;
  }

  #line(line, events) {
    if (line === '') return this.#dispatch(events);
    if (line[0] === ':') {
      this.commentsSeen += 1;
      if (this.comments) events.push({ comment: line[1] === ' ' ? line.slice(2) : line.slice(1) });
      return undefined;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') this.data += `${value}\n`;
    else if (field === 'event') this.type = value;
    else if (field === 'id') {
      if (!value.includes('\0')) {
        this.idBuffer = value;
        this.blockHasId = true;
      }
    } else if (field === 'retry') {
      if (/^[0-9]+$/.test(value)) this.retry = Number.parseInt(value, 10);
    }
    return undefined; // unknown fields are ignored
  }

  #dispatch(events) {
    this.lastEventId = this.idBuffer;
    const hasId = this.blockHasId;
    this.blockHasId = false;
    if (this.data === '') {
      this.type = '';
      return undefined;
    }
    const data = this.data.slice(0, -1);
    events.push(makeEvent(this.type || 'message', data, this.lastEventId, this.retry, hasId));
    this.data = '';
    this.type = '';
    return undefined;
  }
}

/** The seed library's default end-of-answer test (OpenAI, named, Anthropic and Responses formats). */
export const TERMINAL_EVENTS = new Set(['done', 'message_stop', 'response.completed']);

export function isTerminal(event) {
  return event.data === '[DONE]' || TERMINAL_EVENTS.has(event.type);
}

/**
 * A header value that goes on the wire as the UTF-8 bytes of `text` (WHATWG HTML §9.2.4:
 * Last-Event-ID is the last event ID string, UTF-8 encoded). fetch takes header values as
 * byte strings, one character per byte: 'é' as such would be the single byte 0xE9.
 */
export function headerBytes(text) {
  let out = '';
  for (const byte of new TextEncoder().encode(text)) out += String.fromCharCode(byte);
  return out;
}
