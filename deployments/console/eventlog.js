// eventlog.js: ol#events, one line per job event. Streamed model tokens (llm_delta) are
// gathered per agent into one growing "streaming from <agent>" line.

import { fmtClock, h, plain, truncate } from "./dom.js";

const STREAM_TAIL = 240; // characters of streamed text shown on an agent's line

export class EventLog {
  constructor() {
    this.el = h("ol", { id: "events", class: "events" });
    this.box = h("div", { class: "events-scroll", tabindex: "0", role: "group", "aria-label": "Job events" }, this.el);
    this.streams = new Map(); // agent → {li, text, count, tail}
  }

  add(event) {
    // keep following the newest event if the reader was already at the bottom
    const box = this.box;
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 24;
    if (event.type === "llm_delta") this.#delta(event);
    else this.el.append(line(event, summarize(event)));
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  #delta(event) {
    const agent = String(event.data?.agent ?? "an agent");
    let stream = this.streams.get(agent);
    if (!stream) {
      const count = h("span", { class: "ev-count" });
      const tail = h("span", { class: "ev-stream" });
      const li = line(event, h("span", {}, `streaming from ${agent} `, count, " ", tail));
      stream = { li, text: "", count, tail, n: 0 };
      this.streams.set(agent, stream);
      this.el.append(li);
    }
    stream.n += 1;
    stream.text = (stream.text + deltaText(event.data?.deltas)).slice(-STREAM_TAIL * 4);
    stream.count.textContent = `(${stream.n} update${stream.n === 1 ? "" : "s"})`;
    const shown = stream.text.replace(/\s+/g, " ").trim();
    stream.tail.textContent = shown.length > STREAM_TAIL ? `…${shown.slice(-STREAM_TAIL)}` : shown;
    stream.li.querySelector("time").textContent = fmtClock(event.at);
  }
}

function line(event, summary) {
  return h("li", { "data-type": event.type, "data-seq": event.seq },
    h("time", {}, fmtClock(event.at)),
    h("span", { class: "ev-type" }, event.type),
    h("span", { class: "ev-subtask mono" }, event.subtask_id ?? ""),
    h("span", { class: "ev-summary" }, summary));
}

/** The text of streamed deltas: text pieces, and tool calls as "[tool …]". */
function deltaText(deltas) {
  if (typeof deltas === "string") return deltas;
  if (!Array.isArray(deltas)) return "";
  return deltas.map((d) => {
    if (typeof d === "string") return d;
    if (d?.text) return d.text;
    if (d?.tool_name) return ` [${d.tool_name}] `;
    return d?.arguments ?? d?.content ?? "";
  }).join("");
}

/** A short line about an event. */
export function summarize(event) {
  const d = event.data ?? {};
  switch (event.type) {
    case "job_submitted": {
      const fork = d.forked_from?.job_id ? ` (forked from ${d.forked_from.job_id} at superstep ${d.forked_from.step})` : "";
      return `${d.skill ? `skill ${d.skill}` : `team ${d.team ?? "?"}`}: ${truncate(d.task, 120)}${fork}`;
    }
    case "job_routed":
      return d.target ? `routed to ${plain(d.target)}` : generic(d);
    case "plan_ready": {
      const n = Array.isArray(d.subtasks) ? d.subtasks.length : 0;
      return `${n} subtask${n === 1 ? "" : "s"} planned`;
    }
    case "subtask_started":
      return [d.role, d.attempt != null ? `attempt ${d.attempt}` : null].filter(Boolean).join(", ");
    case "subtask_finished":
      return [d.status, d.agent ? `by ${d.agent}` : null, d.attempt != null ? `attempt ${d.attempt}` : null]
        .filter(Boolean).join(", ");
    case "approval_requested":
      return `${d.agent ?? "an agent"} asks to call ${d.tool ?? "a tool"}`;
    case "approval_decided":
      return `${d.tool ?? "tool call"} ${d.approved ? "approved" : "rejected"}${d.reason ? `: ${d.reason}` : ""}`;
    case "graph_interrupted":
      return `waiting for input at ${d.interrupt?.node ?? "?"} (${d.interrupt?.when ?? "?"})`;
    case "graph_resumed":
      return `resumed at ${d.node ?? "?"}${d.when ? ` (${d.when})` : ""}`;
    case "job_failed":
      return `${d.code ?? "failed"}: ${truncate(plain(d.error), 200)}`;
    default:
      return generic(d);
  }
}

/** "key=value" for the simple fields of an event's data. */
function generic(data) {
  const parts = Object.entries(data)
    .filter(([, v]) => v == null || typeof v !== "object")
    .map(([k, v]) => `${k}=${v}`);
  return truncate(parts.join(" "), 200);
}
