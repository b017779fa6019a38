// dom.js: small DOM builders, formatters and shared bits of UI.
//
// Data from the API only ever enters the page through textContent (text children) and
// setAttribute: never through innerHTML or any other HTML parser.

const SVG_NS = "http://www.w3.org/2000/svg";

export const LIVE = ["pending", "planning", "running", "awaiting_approval", "awaiting_input", "aggregating"];
export const TERMINAL = ["succeeded", "failed", "cancelled"];
export const STATUSES = [...LIVE, ...TERMINAL];
export const isTerminal = (status) => TERMINAL.includes(status);

/** Append children: strings become text nodes, nodes are appended, null/false skipped. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value == null || value === false) continue;
    if (name.startsWith("on")) {
      // event handlers are functions only: a string here would be an inline script
      if (typeof value !== "function") throw new TypeError(`handler ${name} must be a function`);
      el.addEventListener(name.slice(2), value);
    } else if (name === "hidden") {
      el.hidden = true;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  return append(el, children);
}

/** An HTML element: h("a", {href: "#/jobs"}, "Jobs"). */
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);

/** An SVG element, same calling convention as h(). */
export const svg = (tag, attrs, ...children) =>
  build(document.createElementNS(SVG_NS, tag), attrs, children);

/** A hash link to a job; the id is encoded so it can never leave the #/jobs/ route. */
export const jobHref = (id) => `#/jobs/${encodeURIComponent(id)}`;
export const jobLink = (id) => h("a", { href: jobHref(id), class: "mono" }, id);

/** A hash link to one item of a view ("#/sessions/<id>"), its id encoded as a job's is. */
export const itemHref = (view, id) => `#/${view}/${encodeURIComponent(id)}`;
export const itemLink = (view, id, text = id) => h("a", { href: itemHref(view, id), class: "mono" }, text);

/** A labelled form field: label above the control. */
export function field(id, label, control, hint) {
  return h("div", { class: "field" }, h("label", { for: id }, label), control,
    hint ? h("p", { class: "hint" }, hint) : null);
}

/** A section with an h2 that labels it. */
export function section(id, title, ...content) {
  return h("section", { id, class: "panel", "aria-labelledby": `${id}-title` },
    h("h2", { id: `${id}-title` }, title), ...content);
}

/** The problem box every view shows for API errors: "code: detail". */
export function problemBox(problem) {
  const code = problem?.code ?? "error";
  const detail = problem?.detail ?? problem?.message ?? String(problem);
  return h("div", { class: "problem", role: "alert", "data-testid": "problem" },
    h("strong", { class: "problem-code" }, code), ": ", detail);
}

/**
 * Status text with a colour chip (drawn by CSS before the text, from data-status): the
 * text is always there, colour is only a hint. Its text content is exactly the status.
 */
export const statusBadge = (status, attrs = {}) =>
  h("span", { ...attrs, class: "status", "data-status": status }, status);

/** Change a badge made by statusBadge() in place. */
export function setBadge(badge, status) {
  if (badge.getAttribute("data-status") === status) return; // no news for live regions
  badge.setAttribute("data-status", status);
  badge.textContent = status;
}

/** A table header row; `numeric` names the columns aligned right. */
export function thead(columns, numeric = []) {
  return h("thead", {}, h("tr", {}, columns.map((c) =>
    h("th", { scope: "col", class: numeric.includes(c) ? "num" : null }, c))));
}

export const option = (value, label, selected = false) =>
  h("option", { value, selected }, label);

// ---------------------------------------------------------------------------- formatting

export const now = () => Date.now() / 1000;

/** "850 ms", "1.2 s", "45 s", "3 min 4 s", "2 h 5 min", "3 d 4 h"; "—" when unknown. */
export function fmtDuration(seconds) {
  if (seconds == null || !Number.isFinite(seconds) || seconds < 0) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  const secs = Math.round(seconds % 60);
  if (minutes < 60) return secs ? `${minutes} min ${secs} s` : `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  return hours % 24 ? `${Math.floor(hours / 24)} d ${hours % 24} h` : `${Math.floor(hours / 24)} d`;
}

/** How long ago, coarse: "12 s", "3 min", "5 h", "2 d". */
export function fmtAge(seconds) {
  if (!Number.isFinite(seconds)) return "—";
  const s = Math.max(0, seconds);
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}

/** "$0.0012" below a dollar, "$12.35" above. */
export function fmtCost(usd) {
  if (usd == null) return "—"; // not known until the job has finished
  const v = Number(usd);
  if (!Number.isFinite(v)) return "—";
  return v !== 0 && Math.abs(v) >= 1 ? `$${v.toFixed(2)}` : `$${v.toFixed(4)}`;
}

const intFormat = new Intl.NumberFormat("en-US");
export const fmtInt = (n) => (Number.isFinite(Number(n)) ? intFormat.format(Number(n)) : "—");

const known = (x) => x != null && Number.isFinite(Number(x));
/** A 0-1 score: "0.833"; "—" when unknown. */
export const fmtScore = (x) => (known(x) ? Number(x).toFixed(3) : "—");
/** A change of score, signed: "+0.250", "-0.100", "0.000". */
export const fmtSigned = (x) => (known(x) ? `${Number(x) > 0 ? "+" : ""}${Number(x).toFixed(3)}` : "—");
/** A share as a percentage: 0.8333 → "83%"; "—" when unknown. */
export const fmtPct = (share, digits = 0) => (known(share) ? `${(Number(share) * 100).toFixed(digits)}%` : "—");

const pad = (n, w = 2) => String(n).padStart(w, "0");

/** Local wall-clock time of a unix timestamp: "14:03:05.123". */
export function fmtClock(unix) {
  if (!Number.isFinite(unix)) return "—";
  const d = new Date(unix * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** Local date and time: "2024-05-01 14:03:05". */
export function fmtDateTime(unix) {
  if (!Number.isFinite(unix)) return "—";
  const d = new Date(unix * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A <time> element for a unix timestamp, with a machine-readable datetime. */
export function timeEl(unix, text) {
  const iso = Number.isFinite(unix) ? new Date(unix * 1000).toISOString() : null;
  return h("time", { datetime: iso }, text ?? fmtDateTime(unix));
}

/** Pretty JSON for <pre> blocks; strings that hold JSON are pretty-printed too. */
export function prettyJson(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value ?? null, null, 2);
}

/** A short, readable text for any JSON value (lists joined, objects by name or JSON). */
export function plain(value) {
  if (value == null) return "";
  if (Array.isArray(value)) return value.map(plain).join(", ");
  if (typeof value === "object") return value.name != null ? String(value.name) : JSON.stringify(value);
  return String(value);
}

export const truncate = (text, max) => {
  const s = String(text ?? "");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
};

/**
 * Coalesce bursts: the first call schedules fn in `ms`, later calls until then join it.
 * Unlike a debounce, a steady stream of calls cannot postpone fn forever.
 */
export function coalesce(fn, ms) {
  let timer = null;
  const request = () => {
    timer ??= setTimeout(() => {
      timer = null;
      fn();
    }, ms);
  };
  request.cancel = () => {
    clearTimeout(timer);
    timer = null;
  };
  return request;
}

/** Wait `ms`, or less if `signal` aborts. */
export const sleep = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => {
    clearTimeout(timer);
    resolve();
  }, { once: true });
});
