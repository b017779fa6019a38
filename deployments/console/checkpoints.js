// checkpoints.js: a graph job's checkpoints on its page (#/jobs/<id>), each of the graph's with
// a "Fork from here" button that starts a new job from it and opens that job's page. A job
// that is not a graph's has none: the section stays hidden.

import { api, isAbort, jobPath } from "./api.js";
import { h, jobHref, prettyJson, problemBox, section, thead, timeEl, truncate } from "./dom.js";

const compact = (value) => (typeof value === "string" ? JSON.stringify(truncate(value, 60)) : truncate(JSON.stringify(value), 60));

/** "text: "draft v1"; verdict: "ok"": a state's fields, each cut short. */
export function stateSummary(state) {
  const fields = Object.entries(state ?? {});
  if (!fields.length) return "(empty)";
  return truncate(fields.map(([name, value]) => `${name}: ${compact(value)}`).join("; "), 220);
}

/** What a checkpoint runs next: "two", "write ×3", or where it waits. */
function next(point) {
  const counts = new Map();
  for (const task of point.next ?? []) counts.set(task.node, (counts.get(task.node) ?? 0) + 1);
  const nodes = [...counts].map(([node, n]) => (n > 1 ? `${node} ×${n}` : node)).join(", ");
  const parts = [nodes || (point.interrupt || point.timer ? "" : "nothing: the graph ended here")];
  if (point.interrupt) parts.push(`waits for input ${point.interrupt.when} ${point.interrupt.node}`);
  if (point.timer) parts.push(`sleeps before ${point.timer.node}`);
  return parts.filter(Boolean).join("; ");
}

export class Checkpoints {
  constructor(jobId, signal) {
    Object.assign(this, { jobId, signal, ticket: 0 });
    this.problems = h("div");
    this.body = h("tbody");
    this.caption = h("caption", {}, "Checkpoints");
    this.el = section("job-checkpoints", "Checkpoints",
      h("p", { class: "muted" }, "Where the graph stood after each superstep. A fork is a new job of the same task "
        + "and team that starts from a checkpoint of the graph with work left (a subgraph's are not forked)."),
      this.problems,
      h("div", { class: "table-scroll" }, h("table", { id: "checkpoints", class: "data" }, this.caption,
        thead(["Superstep", "Subgraph", "Next", "Last output", "State", "Saved", "Fork"], ["Superstep"]), this.body)));
    this.el.hidden = true;
  }

  /** Fetch the checkpoints and show them (none: the section stays hidden). */
  async load() {
    const ticket = ++this.ticket; // only the newest answer is drawn
    let points;
    try {
      points = await api(jobPath(this.jobId, "/checkpoints"), { signal: this.signal });
    } catch (error) {
      if (isAbort(error) || this.signal.aborted || ticket !== this.ticket) return;
      this.problems.replaceChildren(problemBox(error));
      this.el.hidden = false;
      return;
    }
    if (ticket !== this.ticket || this.signal.aborted) return;
    points = points ?? [];
    this.el.dataset.count = String(points.length); // set once loaded: tests wait for it
    this.el.hidden = points.length === 0;
    this.caption.textContent = `Checkpoints (${points.length}), by subgraph then superstep`;
    this.body.replaceChildren(...points.map((point) => this.row(point)));
  }

  row(point) {
    const cell = (value, cls) => h("td", { class: cls ?? null }, value ?? "—");
    const root = !point.namespace;
    // from the graph's last checkpoint a fork would have nothing to run
    const more = point.next?.length || point.interrupt || point.timer;
    let fork = "—";
    if (root && more) {
      fork = h("button", { type: "button", class: "btn", "data-step": point.step,
        "aria-label": `Fork from here: superstep ${point.step}` }, "Fork from here");
      fork.addEventListener("click", () => this.fork(point.step, fork));
    }
    return h("tr", { "data-step": point.step, "data-namespace": point.namespace ?? "" },
      h("th", { scope: "row", class: "num" }, String(point.step)),
      cell(root ? "—" : h("code", {}, point.namespace)),
      cell(next(point)),
      cell(point.last ? h("span", { class: "cell-text" }, truncate(point.last, 160)) : null),
      cell(h("div", {}, h("span", { class: "cell-text" }, stateSummary(point.state)),
        h("details", {}, h("summary", {}, "State (JSON)"), h("pre", { class: "json" }, prettyJson(point.state))))),
      cell(timeEl(point.at)),
      cell(fork));
  }

  async fork(step, button) {
    button.disabled = true;
    this.problems.replaceChildren();
    try {
      const forked = await api(jobPath(this.jobId, "/fork"), { method: "POST", body: { step }, signal: this.signal });
      location.hash = jobHref(forked.job_id); // the new job's page
    } catch (error) {
      if (isAbort(error) || this.signal.aborted) return;
      this.problems.replaceChildren(problemBox(error));
      button.disabled = false;
    }
  }
}
