// waterfall.js: a job's trace as a waterfall. One row per span, in parent-tree order
// (children by start time), bars placed on the root span's time range; a row shows its
// span's details in dl#span-detail when clicked or activated with Enter or Space.

import { fmtCost, fmtDuration, fmtInt, h, prettyJson } from "./dom.js";

const TICKS = [0, 0.25, 0.5, 0.75, 1];

export class Waterfall {
  constructor() {
    this.el = h("div", { id: "waterfall", class: "waterfall" }, h("p", { class: "muted" }, "Loading the trace…"));
    this.detail = h("dl", { id: "span-detail", class: "span-detail", "aria-live": "polite" });
    this.detailBox = h("div", { class: "span-detail-box" },
      h("h3", { id: "span-detail-title" }, "Span details"),
      h("p", { class: "muted", id: "span-detail-hint" }, "Choose a span to see its details."),
      this.detail);
    this.spans = new Map();
    this.selected = null;
  }

  /** Draw the spans (all of them, every time: a trace has at most a few thousand). */
  render(spans) {
    const list = (spans ?? []).filter((s) => s && s.span_id != null);
    this.spans = new Map(list.map((s) => [s.span_id, s]));
    if (!list.length) {
      this.el.replaceChildren(h("p", { class: "muted" }, "No spans yet."));
      return;
    }
    const focused = document.activeElement?.closest?.(".span-row")?.dataset.spanId;
    const root = list.find((s) => s.kind === "job") ?? list[0];
    const start = Math.min(root.start, ...list.map((s) => s.start));
    const end = Math.max(root.end ?? root.start, ...list.map((s) => s.end ?? s.start));
    const range = Math.max(end - start, 1e-3);

    const rows = document.createDocumentFragment();
    rows.append(axis(range));
    for (const [span, depth] of treeOrder(list, this.spans)) {
      rows.append(this.#row(span, depth, start, range));
    }
    this.el.replaceChildren(rows);
    this.el.setAttribute("data-ready", "1");
    if (this.selected && this.spans.has(this.selected)) this.select(this.selected, false);
    if (focused) this.el.querySelector(`[data-span-id="${CSS.escape(focused)}"]`)?.focus();
  }

  #row(span, depth, start, range) {
    const duration = (span.end ?? span.start) - span.start;
    const failed = span.attributes?.ok === false || Boolean(span.attributes?.error_code);
    const bar = h("span", { class: "span-bar" });
    bar.style.left = `${((span.start - start) / range) * 100}%`;
    bar.style.width = `${Math.max(0, (duration / range) * 100)}%`;
    const label = h("span", { class: "span-label" },
      h("span", { class: "span-kind" }, span.kind ?? "span"),
      h("span", { class: "span-name" }, failed ? `✗ ${span.name ?? ""}` : span.name ?? ""),
      h("span", { class: "span-dur" }, fmtDuration(duration)));
    label.style.paddingLeft = `${0.5 + depth * 1.1}rem`;
    const row = h("div", {
      class: "span-row", role: "button", tabindex: "0", "aria-pressed": "false",
      "data-span-kind": span.kind ?? "", "data-span-id": span.span_id, "data-failed": failed ? "true" : null,
    }, label, h("span", { class: "span-track" }, bar));
    row.addEventListener("click", () => this.select(span.span_id));
    row.addEventListener("keydown", (event) => this.#key(event, row, span.span_id));
    return row;
  }

  #key(event, row, id) {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault(); // Space would scroll the page
      this.select(id);
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const next = event.key === "ArrowDown" ? row.nextElementSibling : row.previousElementSibling;
      if (next?.classList.contains("span-row")) next.focus();
    }
  }

  /** Show one span's details. */
  select(id, announce = true) {
    const span = this.spans.get(id);
    if (!span) return;
    this.selected = id;
    for (const row of this.el.querySelectorAll(".span-row[aria-pressed=true]")) row.setAttribute("aria-pressed", "false");
    this.el.querySelector(`[data-span-id="${CSS.escape(id)}"]`)?.setAttribute("aria-pressed", "true");
    this.detailBox.querySelector("#span-detail-hint").hidden = true;
    if (announce || this.detail.dataset.spanId !== id) this.detail.replaceChildren(...detailItems(span));
    this.detail.dataset.spanId = id;
  }
}

/** [span, depth] pairs, depth first, children by start (spans whose parent is absent are roots). */
function treeOrder(list, byId) {
  const children = new Map();
  const roots = [];
  for (const span of list) {
    const parent = span.parent_id;
    if (parent != null && parent !== span.span_id && byId.has(parent)) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(span);
    } else {
      roots.push(span);
    }
  }
  const byStart = (a, b) => a.start - b.start;
  const out = [];
  const seen = new Set();
  const stack = roots.sort(byStart).reverse().map((s) => [s, 0]);
  while (stack.length) {
    const [span, depth] = stack.pop();
    if (seen.has(span.span_id)) continue; // a malformed trace must not loop
    seen.add(span.span_id);
    out.push([span, depth]);
    const kids = (children.get(span.span_id) ?? []).sort(byStart);
    for (let i = kids.length - 1; i >= 0; i -= 1) stack.push([kids[i], depth + 1]);
  }
  return out;
}

function axis(range) {
  return h("div", { class: "span-axis", "aria-hidden": "true" },
    h("span", { class: "span-label" }, "Span"),
    h("span", { class: "span-track" }, TICKS.map((t) => {
      const tick = h("span", { class: "tick" }, fmtDuration(t * range));
      tick.style.left = `${t * 100}%`;
      return tick;
    })));
}

// ------------------------------------------------------------------------------ details

const TOOL_KEYS = ["tool", "ok", "error_code", "duration_s", "arguments", "result"];
const MODEL_KEYS = ["model_alias", "model", "provider", "deployment", "prompt_tokens", "completion_tokens",
  "latency_s", "cost_usd", "finish_reason"];
const RESOLUTION_KEYS = ["strategy", "chosen_agent", "resolved", "rationale", "candidates"];

function detailItems(span) {
  const a = span.attributes ?? {};
  const items = [
    ["Name", span.name], ["Kind", span.kind], ["Duration", fmtDuration((span.end ?? span.start) - span.start)],
  ];
  let known = [];
  if (span.kind === "model_call") {
    known = MODEL_KEYS;
    items.push(["Model", a.model_alias && a.model && a.model_alias !== a.model
      ? `${a.model_alias} (${a.model})` : a.model ?? a.model_alias],
    ["Provider", [a.provider, a.deployment].filter(Boolean).join(" · ")],
    ["Tokens in", fmtInt(a.prompt_tokens)], ["Tokens out", fmtInt(a.completion_tokens)],
    ["Latency", fmtDuration(a.latency_s)], ["Cost", fmtCost(a.cost_usd)], ["Finish reason", a.finish_reason]);
  } else if (span.kind === "tool_call") {
    known = TOOL_KEYS;
    items.push(["Tool", a.tool], ["OK", a.ok === false ? "✗ no" : a.ok === true ? "✓ yes" : a.ok],
      ["Error code", a.error_code], ["Duration of the call", a.duration_s != null ? fmtDuration(a.duration_s) : null],
      ["Arguments", pre(prettyJson(a.arguments ?? ""))], ["Result", pre(String(a.result ?? ""))]);
  } else if (span.kind === "resolution") {
    known = RESOLUTION_KEYS;
    items.push(["Strategy", a.strategy], ["Chosen agent", a.chosen_agent],
      ["Resolved", a.resolved === false ? "no" : a.resolved === true ? "yes" : a.resolved],
      ["Rationale", a.rationale], ["Candidates", a.candidates]);
  }
  for (const [key, value] of Object.entries(a)) {
    if (known.includes(key)) continue;
    items.push([key, typeof value === "object" && value !== null ? pre(prettyJson(value)) : value]);
  }
  items.push(["Span id", span.span_id]);
  return items.filter(([, v]) => v != null && v !== "")
    .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v instanceof Node ? v : String(v))]);
}

const pre = (text) => h("pre", { class: "wrap" }, text);
