// views.js: the read-only views: #/catalog, #/usage, #/guardrails and #/dead-letters, and the
// helpers other views' modules share (load, cell, table).

import { api, isAbort, Problem } from "./api.js";
import {
  fmtCost, fmtDateTime, fmtInt, fmtPct, h, jobLink, plain, problemBox, section, thead, timeEl,
} from "./dom.js";

/** Fetch for a view; on failure show the problem in `slot` and return null. */
export async function load(path, slot, signal) {
  try {
    return await api(path, { signal });
  } catch (error) {
    if (!isAbort(error) && !signal.aborted) slot.replaceChildren(problemBox(error));
    return null;
  }
}

export const cell = (value, numeric = false) => h("td", { class: numeric ? "num" : null }, value ?? "—");
export const table = (id, caption, columns, numeric, rows) => h("div", { class: "table-scroll" },
  h("table", { id, class: "data" }, h("caption", {}, caption), thead(columns, numeric), h("tbody", {}, rows)));
/** The one row of an empty table, across its `columns`. */
export const emptyRow = (columns, text) => h("tr", {}, h("td", { colspan: columns, class: "muted" }, text));
/** A slot that says "Loading…" until its data comes. */
export const loadingSlot = () => h("div", { class: "muted" }, "Loading…");

// ---------------------------------------------------------------------------- catalog

export async function renderCatalog(root, { signal }) {
  root.append(h("h1", {}, "Catalog"),
    h("p", { class: "muted" }, "The teams, skills and agents jobs can be given to."));
  const teamsSlot = h("div", { class: "muted" }, "Loading…");
  const skillsSlot = h("div", { class: "muted" }, "Loading…");
  const agentsSlot = h("div", { class: "muted" }, "Loading…");
  root.append(section("catalog-teams", "Teams", teamsSlot),
    section("catalog-skills", "Skills", skillsSlot),
    section("catalog-agents", "Agents", agentsSlot));

  const [teams, skills, agents] = await Promise.all([
    load("/v1/teams", teamsSlot, signal), load("/v1/skills", skillsSlot, signal), load("/v1/agents", agentsSlot, signal)]);
  if (signal.aborted) return;

  if (teams) {
    const specs = Object.entries(teams).sort(([a], [b]) => a.localeCompare(b));
    teamsSlot.className = "teams";
    teamsSlot.replaceChildren(...(specs.length ? specs.map(([name, spec]) => teamCard(name, spec))
      : [h("p", { class: "muted" }, "No team is registered.")]));
  }
  if (skills) {
    skillsSlot.className = "";
    skillsSlot.replaceChildren(table("skills", "Registered skills, at their newest version", ["Skill", "Version", "Mode", "Source", "Description", "Updated"], [],
      skills.map((s) => h("tr", { "data-skill": s.name },
        h("th", { scope: "row" }, s.name),
        cell(s.versions?.length > 1 ? `${s.version} (of ${s.versions.length})` : s.version),
        cell(s.execution_mode), cell(s.source), cell(s.description),
        cell(Number.isFinite(s.updated_at) ? timeEl(s.updated_at) : s.updated_at)))));
  }
  if (agents) {
    agentsSlot.className = "";
    agentsSlot.replaceChildren(table("agents", "Agents and the requests they are working on",
      ["Agent", "Team", "Role", "Model", "Tools", "In flight"], ["In flight"],
      agents.map((a) => h("tr", { "data-agent": a.name, "data-in-flight": a.in_flight },
        h("th", { scope: "row" }, a.name), cell(a.team), cell(a.role), cell(plain(a.model)),
        cell(plain(a.tools) || "—"), cell(fmtInt(a.in_flight ?? 0), true)))));
  }
}

function teamCard(name, spec) {
  const agents = spec?.agents ?? [];
  const id = `team-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  return h("article", { class: "team", "data-team": name, "aria-labelledby": id },
    h("h3", { id }, name),
    spec?.description ? h("p", {}, spec.description) : null,
    agents.length ? h("table", { class: "data compact" },
      h("caption", { class: "visually-hidden" }, `Agents of team ${name}`),
      thead(["Agent", "Role", "Model", "Tools"]),
      h("tbody", {}, agents.map((a) => h("tr", {},
        h("th", { scope: "row" }, a.name ?? "—"), cell(a.role), cell(plain(a.model)), cell(plain(a.tools) || "—")))))
      : h("p", { class: "muted" }, "No agents."));
}

// ---------------------------------------------------------------------------- usage

export async function renderUsage(root, { signal, me }) {
  root.append(h("h1", {}, "Usage"),
    h("p", { class: "muted" }, me?.admin ? "Spend limits and model calls per day, every tenant."
      : `Spend limits and model calls per day, tenant ${me?.tenant}.`));
  const windowsSlot = loadingSlot();
  const slot = loadingSlot();
  root.append(section("spend-windows-section", "Spend windows", windowsSlot),
    h("section", { class: "panel", "aria-label": "Daily usage" }, slot));
  const [windows, usage] = await Promise.all([
    load("/v1/spend-windows", windowsSlot, signal), load("/v1/usage/daily", slot, signal)]);
  if (signal.aborted) return;
  if (windows) {
    windowsSlot.className = "";
    windowsSlot.replaceChildren(spendWindows(windows, me));
  }
  if (!usage) return;
  const rows = [...usage].sort((a, b) => String(b.day).localeCompare(String(a.day))
    || String(a.tenant).localeCompare(String(b.tenant)) || String(a.model).localeCompare(String(b.model)));
  const total = { calls: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 };
  for (const r of rows) for (const k of Object.keys(total)) total[k] += Number(r[k]) || 0;
  const numeric = ["Calls", "Prompt tokens", "Completion tokens", "Cost"];
  slot.className = "";
  slot.replaceChildren(h("div", { class: "table-scroll" }, h("table", { id: "usage", class: "data" },
    h("caption", {}, "Usage by tenant, day and model, newest day first"),
    thead(["Tenant", "Day", "Model", ...numeric], numeric),
    h("tbody", {}, rows.length ? rows.map((r) => h("tr", {},
      cell(r.tenant), cell(r.day), cell(r.model), cell(fmtInt(r.calls), true), cell(fmtInt(r.prompt_tokens), true),
      cell(fmtInt(r.completion_tokens), true), cell(fmtCost(r.cost_usd), true)))
      : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No usage recorded yet."))),
    h("tfoot", {}, h("tr", { class: "total" },
      h("th", { scope: "row", colspan: 3 }, "Total"), cell(fmtInt(total.calls), true),
      cell(fmtInt(total.prompt_tokens), true), cell(fmtInt(total.completion_tokens), true),
      cell(fmtCost(total.cost_usd), true))))));
}

/** Each spend limit's current window: whom it limits, what was spent against what it allows. */
function spendWindows(windows, me) {
  const rows = [...windows].sort((a, b) => String(a.tenant).localeCompare(String(b.tenant))
    || String(a.limit).localeCompare(String(b.limit)) || String(a.user ?? "").localeCompare(String(b.user ?? "")));
  return table("spend-windows", "The operator's spend limits and what their current window has spent",
    ["Limit", "Limits", "Window", "Period", "Tokens spent", "USD spent", "Alerts at", "Past the limit"], [],
    rows.length ? rows.map((w) => h("tr", { "data-limit": w.limit, "data-tenant": w.tenant, "data-user": w.user ?? "" },
      h("th", { scope: "row" }, w.limit),
      cell([`tenant ${w.tenant}`, w.agent ? `agent ${w.agent}` : null, w.user ? `user ${w.user}` : null]
        .filter(Boolean).join(" · ")),
      cell(w.window === "rolling" ? `last ${w.hours} h` : w.window === "lifetime" ? "lifetime" : `${w.window} (UTC)`),
      cell(h("code", {}, w.period)),
      cell(spent(w.tokens, w.tokens_limit, w.alert_at, fmtInt, "tokens")),
      cell(spent(w.usd, w.usd_limit, w.alert_at, fmtCost, "usd")),
      cell(w.alert_at?.length ? w.alert_at.map((x) => fmtPct(x)).join(", ") : "none"),
      cell(w.hard ? "refused (hard)" : "alerts only (soft)")))
      : emptyRow(8, me?.admin ? "No spend limit is set." : "No spend limit applies to this tenant."));
}

/** "1,234 of 10,000 (12%)" with a meter, or "1,234 (not limited)". */
function spent(amount, limit, alerts, format, measure) {
  if (limit == null) return h("span", { class: "spend", "data-measure": measure }, `${format(amount)} (not limited)`);
  const share = limit > 0 ? amount / limit : amount > 0 ? Infinity : 0;
  const percent = Number.isFinite(share) ? `${fmtInt(Math.round(share * 100))}%` : "over";
  const over = amount > limit;
  // the meter's regions: good below the first alert, worse past it, worst at the limit (its
  // value stops at max: `high` sits just under the limit so that a full meter is the worst)
  const max = Math.max(limit, 1e-9);
  const high = max * 0.999999;
  const low = Math.min((alerts?.length ? Math.min(...alerts) : 1) * max, high * 0.999999);
  return h("span", { class: "spend", "data-measure": measure, "data-over": over ? "true" : null },
    h("meter", { min: "0", max: String(max), value: String(Math.min(amount, max)), low: String(low),
      high: String(high), optimum: "0", "aria-hidden": "true" }),
    ` ${format(amount)} of ${format(limit)} (${percent})`,
    over ? h("span", { class: "badge badge-failed" }, "over") : null);
}

// ---------------------------------------------------------------------------- guardrails

export async function renderGuardrails(root, { signal, me }) {
  root.append(h("h1", {}, "Guardrails"),
    h("p", { class: "muted" }, me?.admin
      ? "What guardrails blocked or redacted, every tenant, newest first; and the guardrails set."
      : `What guardrails blocked or redacted in the jobs of tenant ${me?.tenant}, newest first.`));
  const decisionsSlot = h("div", { class: "muted" }, "Loading…");
  root.append(section("guardrail-decisions", "Decisions", decisionsSlot));
  const setSlot = me?.admin ? h("div", { class: "muted" }, "Loading…") : null;
  if (setSlot) root.append(section("guardrails-set", "Guardrails set", setSlot));
  const [decisions, set] = await Promise.all([
    load("/v1/guardrail-decisions?limit=200", decisionsSlot, signal),
    setSlot ? load("/v1/guardrails", setSlot, signal) : null]);
  if (signal.aborted) return;
  if (decisions) {
    decisionsSlot.className = "";
    // the reason says what matched by kind and count, never the text: it is shown as text
    decisionsSlot.replaceChildren(table("decisions", `Decisions (${decisions.length})`,
      ["Time", "Tenant", "Job", "Guardrail", "Rule", "Stage", "Action", "Reason"], [],
      decisions.length ? decisions.map((r) => h("tr", { "data-action": r.decision.action, "data-stage": r.decision.stage },
        cell(timeEl(r.at, fmtDateTime(r.at))), cell(r.tenant),
        cell(r.job_id ? jobLink(r.job_id) : "refused input"),
        cell(`${r.decision.guardrail} v${r.decision.version}`), cell(h("code", {}, r.decision.rule)),
        cell(r.decision.tool ? `${r.decision.stage} (${r.decision.tool})` : r.decision.stage),
        cell(h("span", { class: r.decision.action === "blocked" ? "badge badge-failed" : "badge" }, r.decision.action)),
        cell(r.decision.reason)))
        : h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No guardrail has decided anything yet."))));
  }
  if (set && setSlot) {
    setSlot.className = "";
    setSlot.replaceChildren(table("guardrails", `Guardrails set (${set.length})`,
      ["Guardrail", "Version", "Stages", "Action", "Rules", "Binds", "Enabled"], [],
      set.length ? set.map((g) => h("tr", { "data-guardrail": g.name },
        h("th", { scope: "row" }, g.name), cell(String(g.version)), cell(g.spec.stages.join(", ")),
        cell(g.spec.action), cell(g.spec.rules.map((rule) => rule.kind).join(", ")),
        cell(binds(g.spec.applies_to)), cell(g.spec.enabled ? "yes" : "no")))
        : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No guardrail is set."))));
  }
}

function binds(to) {
  const parts = [`tenants ${to.tenants.join(", ")}`];
  for (const [name, values] of [["teams", to.teams], ["skills", to.skills], ["keys", to.keys]]) {
    if (values.length) parts.push(`${name} ${values.join(", ")}`);
  }
  return parts.join("; ");
}

// ---------------------------------------------------------------------------- dead letters

export async function renderDeadLetters(root, { signal, me }) {
  root.append(h("h1", {}, "Dead letters"));
  if (!me?.admin) { // the API refuses too; saying so here saves a request that must fail
    root.append(problemBox(new Problem({ code: "forbidden", detail: "dead letters are for admins only" })));
    return;
  }
  root.append(h("p", { class: "muted" }, "Messages the router could not deliver, newest first."));
  const slot = h("div", { class: "muted" }, "Loading…");
  root.append(h("section", { class: "panel", "aria-label": "Dead letters" }, slot));
  const letters = await load("/v1/dead-letters?limit=100", slot, signal);
  if (!letters || signal.aborted) return;
  letters.sort((a, b) => (b.at ?? 0) - (a.at ?? 0));
  slot.className = "";
  slot.replaceChildren(table("dead-letters", `Dead letters (${letters.length})`,
    ["Time", "Reason", "Detail", "Job", "Sender → recipient", "Tenant"], [],
    letters.length ? letters.map((d) => h("tr", { "data-message-id": d.message_id },
      cell(timeEl(d.at, fmtDateTime(d.at))), cell(h("code", {}, d.reason)), cell(d.detail),
      cell(d.job_id ? jobLink(d.job_id) : "—"),
      cell(`${d.sender ?? "?"} → ${d.recipient ?? "?"}`), cell(d.tenant)))
      : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No dead letters."))));
}
