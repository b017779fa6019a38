// dag.js: the plan as a layered graph (SVG) plus the same data as an accessible table.
//
// Layout is O(V + E) plus sorting: a node's layer is the longest path to it from a root
// (Kahn's topological order); layers are rows, top to bottom, so every subtask sits below
// the ones it depends on. A layer wider than MAX_COLS wraps onto more rows. Each layer is
// ordered by the mean x of its nodes' parents (one barycentre pass) to cut edge crossings.
// Nodes are placed with absolute coordinates (no transform), so getBBox() tells where.

import { h, plain, prettyJson, statusBadge, setBadge, svg, truncate } from "./dom.js";

const W = 180; // node box
const H = 62;
const GAP_X = 20; // between nodes of a row
const GAP_Y = 44; // between layers
const GAP_WRAP = 14; // between the rows of a wrapped layer
const PAD = 12;
const MAX_COLS = 16;

// a text cue for each status, so that colour is never the only one
const MARK = {
  pending: "○", running: "…", succeeded: "✓", failed: "✗", skipped: "⊘",
};
const markOf = (status) => MARK[status] ?? "•";

/**
 * Where each subtask goes: {x, y, parents, width, height} (x, y: top left of its box).
 * Rows are centred on the part of the graph a `viewWidth` wide box shows first, so that
 * the top of a plan wider than the screen is in view.
 */
export function layout(subtasks, viewWidth = Infinity) {
  const n = subtasks.length;
  const index = new Map(subtasks.map((s, i) => [s.id, i]));
  const parents = subtasks.map((s, i) => [...new Set(s.depends_on ?? [])]
    .map((d) => index.get(d)).filter((p) => p !== undefined && p !== i));
  const children = subtasks.map(() => []);
  const indegree = new Array(n).fill(0);
  parents.forEach((ps, i) => ps.forEach((p) => { children[p].push(i); indegree[i] += 1; }));

  const layerOf = new Array(n).fill(0);
  const queue = [];
  for (let i = 0; i < n; i += 1) if (indegree[i] === 0) queue.push(i);
  for (let head = 0; head < queue.length; head += 1) {
    const u = queue[head];
    for (const v of children[u]) {
      layerOf[v] = Math.max(layerOf[v], layerOf[u] + 1);
      if (--indegree[v] === 0) queue.push(v);
    }
  }
  if (queue.length < n) { // a cycle (a bad plan): put what it holds after everything else
    const last = queue.reduce((m, i) => Math.max(m, layerOf[i]), -1) + 1;
    for (let i = 0; i < n; i += 1) if (indegree[i] > 0) layerOf[i] = last;
  }
  const layers = [];
  for (let i = 0; i < n; i += 1) (layers[layerOf[i]] ??= []).push(i);

  const colsOf = (members) => Math.ceil(members.length / Math.ceil(members.length / MAX_COLS));
  const widest = Math.max(1, ...layers.filter(Boolean).map(colsOf));
  const shown = Math.max(1, Math.min(widest, Math.floor((viewWidth - 2 * PAD + GAP_X) / (W + GAP_X))));
  const x = new Array(n);
  const y = new Array(n);
  let top = PAD;
  for (const members of layers) {
    if (!members) continue;
    // parents sit in earlier layers, so where they are is known: order by their mean x
    const key = new Map(members.map((v) => [v, parents[v].length
      ? parents[v].reduce((sum, p) => sum + x[p], 0) / parents[v].length : -1]));
    members.sort((a, b) => key.get(a) - key.get(b) || a - b);
    const cols = colsOf(members);
    const rows = Math.ceil(members.length / cols);
    members.forEach((v, k) => {
      const row = Math.floor(k / cols);
      const inRow = Math.min(cols, members.length - row * cols); // the last may be shorter
      x[v] = PAD + (Math.max(0, (shown - inRow) / 2) + (k % cols)) * (W + GAP_X);
      y[v] = top + row * (H + GAP_WRAP);
    });
    top += rows * H + (rows - 1) * GAP_WRAP + GAP_Y;
  }
  return { x, y, parents, width: PAD * 2 + widest * W + (widest - 1) * GAP_X, height: top - GAP_Y + PAD };
}

/** The plan view: svg#dag and table#subtasks, updated in place as events come. */
export class Dag {
  constructor() {
    this.graph = h("div", { class: "dag-scroll", tabindex: "0", role: "group", "aria-label": "Plan graph" },
      h("p", { class: "muted" }, "Waiting for the plan…"));
    this.tbody = h("tbody");
    this.table = h("table", { id: "subtasks", class: "data subtasks" },
      h("caption", {}, "Subtasks of the plan (the same data as the graph)"),
      h("thead", {}, h("tr", {}, ["Subtask", "Role", "Status", "Agent", "Attempt", "Depends on", "Instructions"]
        .map((c) => h("th", { scope: "col" }, c)))),
      this.tbody);
    this.resolutions = h("div", { class: "resolutions" });
    this.legend = legend();
    this.el = h("div", { class: "dag" }, this.graph, this.legend, this.table, this.resolutions);
    this.table.hidden = true; // shown with a plan
    this.legend.hidden = true;
    this.nodes = new Map(); // subtask id → {g, mark, meta, title, row, state}
  }

  /** Draw a whole plan (from plan_ready, or a finished job's subtasks). */
  draw(subtasks) {
    const list = (subtasks ?? []).filter((s) => s && s.id != null)
      .map((s) => ({ ...s, id: String(s.id) }));
    // a new plan for the same job (a replan) keeps what is known of subtasks it still has
    const known = new Map([...this.nodes].map(([id, node]) => [id, node.state]));
    this.nodes.clear();
    if (!list.length) {
      this.#show(svg("svg", { id: "dag", role: "img", "aria-label": "Plan: 0 subtasks", width: 260, height: 36 },
        svg("text", { x: PAD, y: 24, class: "dag-empty" }, "This job has no plan of subtasks.")), 0);
      this.tbody.replaceChildren();
      return;
    }
    const { x, y, parents, width, height } = layout(list, this.graph.clientWidth || Infinity);
    // dense plans: faint edges without arrowheads (flow is always top to bottom)
    const dense = parents.reduce((sum, ps) => sum + ps.length, 0) > 60;
    const edges = svg("g", { class: "edges" });
    list.forEach((_, v) => parents[v].forEach((p) => {
      const x1 = x[p] + W / 2; const y1 = y[p] + H;
      const x2 = x[v] + W / 2; const y2 = y[v] - (dense ? 0 : 6);
      const bend = Math.max(GAP_Y / 2, (y2 - y1) / 3);
      edges.append(svg("path", {
        class: "edge", d: `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2}`,
        "marker-end": dense ? null : "url(#dag-arrow)", "data-from": list[p].id, "data-to": list[v].id,
      }));
    }));
    const nodes = svg("g", { class: "nodes" });
    const rowsFragment = document.createDocumentFragment();
    list.forEach((s, v) => {
      const node = this.#node(s, x[v], y[v], known.get(s.id));
      nodes.append(node.g);
      rowsFragment.append(node.row);
    });

    const graph = svg("svg", {
      id: "dag", role: "img", "aria-label": `Plan: ${list.length} subtask${list.length === 1 ? "" : "s"}`,
      class: dense ? "dense" : null, width, height, viewBox: `0 0 ${width} ${height}`,
    }, svg("defs", {}, svg("marker", {
      id: "dag-arrow", viewBox: "0 0 10 10", refX: "1", refY: "5", markerWidth: "7", markerHeight: "7",
      orient: "auto-start-reverse",
    }, svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))), edges, nodes);
    this.tbody.replaceChildren(rowsFragment);
    this.#show(graph, list.length);
  }

  #show(graph, count) {
    this.graph.replaceChildren(graph);
    this.table.hidden = count === 0;
    this.legend.hidden = count === 0;
    graph.setAttribute("data-ready", "1");
    performance.mark("dag-rendered");
  }

  /** Change one subtask in place: its status, agent, attempt (what is given). */
  update(id, { status, agent, attempt } = {}) {
    const node = this.nodes.get(String(id));
    if (!node) return;
    const state = node.state;
    if (status) state.status = status;
    if (agent) state.agent = agent;
    if (attempt != null) state.attempt = attempt;
    node.g.setAttribute("data-status", state.status);
    node.row.dataset.status = state.status;
    node.mark.textContent = markOf(state.status);
    node.meta.textContent = truncate(metaText(state), 26);
    node.title.textContent = titleText(state);
    setBadge(node.cells.status, state.status);
    node.cells.agent.textContent = state.agent || "—";
    node.cells.attempt.textContent = state.attempt ?? "—";
  }

  /** Take a finished job's subtasks: in place when they are the drawn plan, else redraw. */
  sync(subtasks) {
    const ids = (subtasks ?? []).map((s) => String(s.id));
    if (!ids.length && this.nodes.size) return; // keep the plan the events drew
    const same = ids.length > 0 && ids.length === this.nodes.size && ids.every((id) => this.nodes.has(id));
    if (!same) this.draw(subtasks);
    else for (const s of subtasks) this.update(s.id, s);
    this.showResolutions(subtasks);
  }

  /** Conflict resolutions (redundant agents that disagreed), listed under their subtask. */
  showResolutions(subtasks) {
    const resolved = (subtasks ?? []).filter((s) => s.resolution);
    this.resolutions.replaceChildren(...(resolved.length
      ? [h("h3", {}, "Conflict resolutions"), ...resolved.map(resolutionView)] : []));
  }

  #node(s, x, y, known) {
    const state = {
      id: s.id, role: s.role ?? "", status: s.status ?? known?.status ?? "pending",
      agent: s.agent ?? known?.agent ?? null, attempt: s.attempt ?? known?.attempt ?? null,
      redundancy: s.redundancy ?? null,
    };
    const title = svg("title", {}, titleText(state));
    const mark = svg("tspan", { class: "node-mark" }, markOf(state.status));
    const meta = svg("text", { x: x + 10, y: y + 52, class: "node-meta" }, truncate(metaText(state), 26));
    const g = svg("g", { class: "node", "data-subtask": s.id, "data-status": state.status }, title,
      svg("rect", { x, y, width: W, height: H, rx: 6, class: "node-box" }),
      svg("text", { x: x + 10, y: y + 19, class: "node-id" }, mark, " ", truncate(s.id, 20)),
      svg("text", { x: x + 10, y: y + 36, class: "node-role" }, truncate(state.role, 26)),
      meta);
    const cells = {
      status: statusBadge(state.status),
      agent: h("td", {}, state.agent || "—"),
      attempt: h("td", { class: "num" }, state.attempt ?? "—"),
    };
    const row = h("tr", { "data-subtask": s.id, "data-status": state.status },
      h("th", { scope: "row", class: "mono" }, s.id),
      h("td", {}, state.role),
      h("td", {}, cells.status),
      cells.agent,
      cells.attempt,
      h("td", { class: "mono" }, (s.depends_on ?? []).join(", ") || "—"),
      h("td", {}, h("span", { class: "clamp" }, s.instructions ?? "")));
    const node = { g, mark, meta, title, row, cells, state };
    this.nodes.set(s.id, node);
    return node;
  }
}

function metaText(state) {
  const parts = [];
  if (state.agent) parts.push(state.agent);
  if (state.attempt != null) parts.push(`attempt ${state.attempt}`);
  return parts.length ? parts.join(" · ") : state.status;
}

function titleText(state) {
  const extra = state.redundancy > 1 ? `, ${state.redundancy} agents` : "";
  return `${state.id} (${state.role}${extra}): ${state.status}${state.agent ? `, by ${state.agent}` : ""}`
    + `${state.attempt != null ? `, attempt ${state.attempt}` : ""}`;
}

function legend() {
  return h("ul", { class: "legend", "aria-label": "Legend" }, Object.keys(MARK).map((status) =>
    h("li", { "data-status": status }, h("span", { class: "legend-mark", "aria-hidden": "true" }, markOf(status)), status)));
}

function resolutionView(s) {
  const r = s.resolution;
  const candidates = r.candidates ?? [];
  const votes = Object.entries(r.votes ?? {});
  return h("article", { class: "resolution", "data-subtask": s.id },
    h("h4", {}, `Subtask ${s.id} · ${r.strategy ?? "resolution"}`),
    h("p", {}, "Chose ", h("strong", {}, r.chosen_agent ?? "—"), r.rationale ? `: ${r.rationale}` : ""),
    candidates.length ? h("table", { class: "data compact" },
      h("caption", {}, `Candidates for ${s.id}`),
      h("thead", {}, h("tr", {}, ["Agent", "Valid", "Confidence", "Problems", "Output"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, candidates.map((c) => h("tr", { "data-chosen": c.agent === r.chosen_agent ? "true" : null },
        h("th", { scope: "row" }, c.agent ?? "—", c.agent === r.chosen_agent ? " (chosen)" : ""),
        h("td", {}, c.valid === false ? "✗ no" : c.valid === true ? "✓ yes" : "—"),
        h("td", { class: "num" }, c.confidence ?? "—"),
        h("td", {}, plain(c.problems) || "—"),
        h("td", {}, h("pre", { class: "wrap small" }, typeof c.output === "string" ? c.output : prettyJson(c.output))))))) : null,
    votes.length ? h("div", {}, h("p", { class: "muted" }, "Votes"),
      h("ul", { class: "votes" }, votes.map(([answer, n]) =>
        h("li", {}, h("span", { class: "vote-count" }, `${n} vote${n === 1 ? "" : "s"}`), " ", truncate(answer, 200))))) : null);
}
