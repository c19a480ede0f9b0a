// @ts-check
/**
 * Server-sent events, read from a stream of text chunks (pure: chunks in, events out).
 * Lines end in \n, \r\n or \r; a blank line dispatches; `:` lines are comments (keep-alives);
 * several `data:` lines join with \n, as the standard says. `id` is the last event id seen (it
 * stays until a later `id:` changes it): where a stream that drops resumes (Last-Event-ID).
 */

/** @typedef {{event: string, data: string}} ServerEvent */

export class EventReader {
  constructor() {
    this.buffer = "";
    this.event = "";
    /** @type {string[]} */
    this.data = [];
    this.id = "";
  }

  /** @param {string} chunk @returns {ServerEvent[]} */
  push(chunk) {
    this.buffer += chunk;
    /** @type {ServerEvent[]} */
    const out = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      // A lone \r at the end may be the first half of \r\n: wait for the next chunk.
      if (end < 0 || (end === this.buffer.length - 1 && this.buffer[end] === "\r")) break;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith("\r\n", end) ? 2 : 1));
      if (line === "") {
        if (this.data.length) out.push({ event: this.event || "message", data: this.data.join("\n") });
        this.event = "";
        this.data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.event = value;
      else if (field === "data") this.data.push(value);
      else if (field === "id" && !value.includes("\0")) this.id = value;
    }
    return out;
  }
}
