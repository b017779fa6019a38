// sse.js: a job's Server-Sent Events, read with fetch so the request carries the API key
// (EventSource cannot send headers), parsed by hand, reconnected with ?after=<last seq>.

import { Problem, headers, isAbort, jobPath, problemOf } from "./api.js";
import { sleep } from "./dom.js";

const TERMINAL_EVENTS = new Set(["job_succeeded", "job_failed", "job_cancelled"]);
const MAX_TRIES = 5; // reconnections in a row without a new event
const backoff = (tries) => Math.min(8000, 500 * 2 ** (tries - 1)); // 0.5, 1, 2, 4, 8 s

/**
 * An incremental parser for the text/event-stream format. Text may arrive split anywhere
 * (inside a line, between "\r" and "\n"); feed() returns the events it completed.
 */
export class SSEParser {
  #buffer = "";
  #data = [];
  #type = "";
  #id = null;
  #afterCR = false; // the last chunk ended with "\r": a "\n" starting the next is its pair

  feed(text) {
    const events = [];
    if (this.#afterCR && text.startsWith("\n")) text = text.slice(1);
    this.#afterCR = false;
    const buffer = this.#buffer + text;
    const newline = /\r\n|\r|\n/g;
    let start = 0;
    let match;
    while ((match = newline.exec(buffer)) !== null) {
      this.#line(buffer.slice(start, match.index), events);
      start = newline.lastIndex;
    }
    this.#afterCR = start === buffer.length && buffer.endsWith("\r");
    this.#buffer = buffer.slice(start);
    return events;
  }

  #line(line, events) {
    if (line === "") { // a blank line dispatches the event gathered so far
      if (this.#data.length) events.push({ type: this.#type || "message", data: this.#data.join("\n"), id: this.#id });
      this.#data = [];
      this.#type = "";
      return;
    }
    if (line.startsWith(":")) return; // a comment, e.g. the ": waiting" keep-alive
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") this.#data.push(value);
    else if (name === "event") this.#type = value;
    else if (name === "id" && !value.includes("\0")) this.#id = value;
  }
}

/**
 * Follow a job's events until its terminal event or until `signal` aborts.
 * onEvent(jobEvent) gets each JobEvent once, in order; onProblem(problem) hears of in-band
 * errors and of giving up. Resolves to the last seq seen.
 */
export async function followEvents(jobId, { after = 0, signal, onEvent, onProblem }) {
  let last = after;
  let tries = 0;
  while (!signal.aborted) {
    let finished = false;
    try {
      finished = await readStream();
    } catch (error) {
      if (isAbort(error) || signal.aborted) return last;
      if (error instanceof Problem && error.status && error.status < 500) {
        onProblem(error); // 4xx (no such job, no access): reconnecting will not help
        return last;
      }
    }
    if (finished || signal.aborted) return last;
    tries += 1;
    if (tries > MAX_TRIES) {
      onProblem(new Problem({ code: "stream_lost", detail: `lost the job's event stream after ${MAX_TRIES} tries` }));
      return last;
    }
    await sleep(backoff(tries), signal);
  }
  return last;

  // One connection: true once the terminal event came, false if the stream just ended.
  async function readStream() {
    const response = await fetch(jobPath(jobId, `/events?after=${last}`), {
      headers: headers({ Accept: "text/event-stream" }),
      cache: "no-store",
      signal,
    });
    if (!response.ok) throw await problemOf(response);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SSEParser();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        for (const message of parser.feed(decoder.decode(value, { stream: true }))) {
          if (message.type === "error") { // in-band: the server stops this stream after it
            onProblem(inBandProblem(message.data));
            continue;
          }
          let event;
          try {
            event = JSON.parse(message.data);
          } catch {
            continue; // not a JobEvent: skip it rather than stop following the job
          }
          const seq = Number(event.seq ?? message.id);
          if (Number.isFinite(seq)) {
            if (seq <= last) continue; // already seen before a reconnection
            last = seq;
          }
          tries = 0; // progress: the retry budget is for failures in a row
          onEvent(event);
          if (TERMINAL_EVENTS.has(event.type)) return true;
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }
}

function inBandProblem(data) {
  try {
    const body = JSON.parse(data);
    return new Problem({ code: body.code ?? "stream_error", detail: body.detail ?? "" });
  } catch {
    return new Problem({ code: "stream_error", detail: String(data) });
  }
}
