// evolution.js: #/evals (eval runs, one run's cases, two runs compared) and #/experiments
// (A/B experiments on skills' live traffic: arms, samples and the decision; admins only).

import { api, isAbort, Problem } from "./api.js";
import {
  field, fmtCost, fmtDuration, fmtInt, fmtPct, fmtScore, fmtSigned, h, itemLink, jobLink, option,
  problemBox, section, statusBadge, timeEl, truncate,
} from "./dom.js";
import { cell, emptyRow, load, loadingSlot, table } from "./views.js";

const RUN_WAIT_S = 15; // a running run is asked again with ?wait=: the answer comes when it ends
const runPath = (id, wait = 0) => `/v1/evals/${encodeURIComponent(id)}${wait ? `?wait=${wait}` : ""}`;
const meta = (pairs) => h("dl", { class: "meta" }, pairs.filter(Boolean).map(([label, value, testid]) =>
  h("div", {}, h("dt", {}, label), h("dd", { "data-testid": testid ?? null }, value ?? "—"))));

// ---------------------------------------------------------------------------- evals

export async function renderEvals(root, { signal, me }, { id } = {}) {
  root.append(h("h1", {}, "Evals"),
    h("p", { class: "muted" }, `${me?.admin ? "Eval runs of every tenant" : `Eval runs of tenant ${me?.tenant}`}: `
      + "suites run as jobs against a skill or team, scored case by case."));
  const runSlot = id ? loadingSlot() : null;
  const runsSlot = loadingSlot();
  const compareSlot = loadingSlot();
  if (runSlot) root.append(section("eval-run", `Run ${id}`, runSlot));
  root.append(section("eval-runs", "Runs", runsSlot), section("eval-compare", "Compare two runs", compareSlot));

  const [runs, run] = await Promise.all([
    load("/v1/evals", runsSlot, signal), runSlot ? load(runPath(id), runSlot, signal) : null]);
  if (signal.aborted) return;
  if (runs) {
    const newest = [...runs].sort((a, b) => (b.started_at ?? 0) - (a.started_at ?? 0));
    runsSlot.className = "";
    runsSlot.replaceChildren(runsTable(newest, id));
    compareSlot.className = "";
    compareSlot.replaceChildren(newest.length ? compareForm(newest, signal)
      : h("p", { class: "muted" }, "No run to compare yet."));
  } else {
    compareSlot.replaceChildren();
  }
  if (run) await followRun(runSlot, run, signal);
}

function runsTable(runs, selected) {
  const numeric = ["Cases", "Score", "95% CI", "Pass rate", "Cost", "Latency p50"];
  return table("eval-runs-table", `Eval runs (${runs.length}), newest first`,
    ["Run", "Suite", "Target", "Status", ...numeric, "Started"], numeric,
    runs.length ? runs.map((r) => h("tr", { "data-run-id": r.id, "aria-current": r.id === selected ? "true" : null },
      h("th", { scope: "row" }, itemLink("evals", r.id)), cell(r.suite), cell(r.target),
      cell(statusBadge(r.status)), cell(fmtInt(r.total), true), cell(fmtScore(r.score), true),
      cell(`${fmtScore(r.ci_low)} – ${fmtScore(r.ci_high)}`, true), cell(fmtPct(r.pass_rate), true),
      cell(fmtCost(r.cost_usd), true), cell(fmtDuration(r.latency_p50_s), true), cell(timeEl(r.started_at))))
      : emptyRow(11, "No eval run yet: start one with POST /v1/evals or `troupe eval`."));
}

/** Show a run; while it runs, ask again (a long poll: ?wait=) and show it anew. */
async function followRun(slot, run, signal) {
  slot.className = "";
  slot.replaceChildren(...runView(run));
  while (run.status === "running" && !signal.aborted) {
    try {
      run = await api(runPath(run.id, RUN_WAIT_S), { signal });
    } catch (error) {
      if (!isAbort(error) && !signal.aborted) slot.append(problemBox(error));
      return;
    }
    if (!signal.aborted) slot.replaceChildren(...runView(run));
  }
}

function runView(run) {
  const done = run.cases?.length ?? 0;
  const numeric = ["Score", "Tokens", "Cost", "Latency"];
  return [
    meta([["Suite", run.suite], ["Target", run.target], ["Status", statusBadge(run.status, { "data-testid": "eval-status" })],
      ["Score", fmtScore(run.score), "eval-score"], ["95% CI", `${fmtScore(run.ci_low)} – ${fmtScore(run.ci_high)}`],
      ["Pass rate", fmtPct(run.pass_rate)], ["Cases", `${fmtInt(done)} of ${fmtInt(run.total)}`],
      ["Cost", fmtCost(run.cost_usd)], ["Latency p50", fmtDuration(run.latency_p50_s)],
      ["Started", timeEl(run.started_at)], run.finished_at ? ["Finished", timeEl(run.finished_at)] : null]),
    run.stopped_because ? h("p", { class: "job-error" }, `Stopped: ${run.stopped_because}`) : null,
    table("eval-cases", `Cases (${done} of ${run.total})`,
      ["Case", "Status", "Score", "Expectations", "Answer or error", "Job", ...numeric.slice(1)], numeric,
      done ? run.cases.map((c) => h("tr", { "data-case-id": c.case_id, "data-status": c.status },
        h("th", { scope: "row" }, c.case_id), cell(statusBadge(c.status)), cell(fmtScore(c.score), true),
        cell(expectations(c.expectations)),
        cell(h("span", { class: "cell-text" }, c.error ? `${c.code ?? "error"}: ${c.error}` : truncate(c.answer, 300))),
        cell(c.job_id ? jobLink(c.job_id) : null), cell(fmtInt(c.tokens), true), cell(fmtCost(c.cost_usd), true),
        cell(fmtDuration(c.latency_s), true)))
        : emptyRow(9, run.status === "running" ? "No case has finished yet." : "No case was run.")),
  ].filter(Boolean); // replaceChildren() would write a null as "null"
}

function expectations(list) {
  if (!list?.length) return null;
  return h("ul", { class: "plain-list" }, list.map((e) => h("li", {},
    `${e.kind} ${fmtScore(e.score)} ${e.passed ? "passed" : "failed"}`, e.detail ? `: ${truncate(e.detail, 160)}` : "")));
}

function compareForm(runs, signal) {
  const label = (r) => `${r.id} · ${r.suite} · ${r.target} · ${fmtScore(r.score)}`;
  const base = h("select", { id: "compare-base" }, runs.map((r) => option(r.id, label(r))));
  const other = h("select", { id: "compare-other" }, runs.map((r) => option(r.id, label(r))));
  base.value = runs[Math.min(1, runs.length - 1)].id; // the one before the newest
  other.value = runs[0].id;
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Compare");
  const result = h("div", { id: "eval-comparison", "aria-live": "polite" });
  const form = h("form", { id: "compare-evals", class: "inline-form" },
    field("compare-base", "Base run", base), field("compare-other", "Other run", other),
    h("div", { class: "submit-actions" }, button));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    result.replaceChildren(h("p", { class: "muted" }, "Comparing…"));
    try {
      const query = new URLSearchParams({ base: base.value, other: other.value });
      const compared = await api(`/v1/evals/compare?${query}`, { signal });
      result.replaceChildren(...comparison(compared));
    } catch (error) {
      if (isAbort(error) || signal.aborted) return;
      result.replaceChildren(problemBox(error));
    } finally {
      button.disabled = false;
    }
  });
  return h("div", {}, h("p", { class: "muted" }, "Two runs of one suite, case by case, with a paired "
    + "sign-flip permutation test."), form, result);
}

function comparison(c) {
  return [
    meta([["Base", c.base], ["Other", c.other], ["Cases compared", fmtInt(c.cases)],
      ["Mean change", fmtSigned(c.mean_diff), "compare-mean"],
      ["Better / worse / same", `${fmtInt(c.better)} / ${fmtInt(c.worse)} / ${fmtInt(c.same)}`, "compare-counts"],
      ["p-value", Number(c.p_value).toFixed(4)], ["Significant (p < 0.05)", c.significant ? "yes" : "no"]]),
    table("eval-diffs", `Cases whose score changed (${c.diffs?.length ?? 0})`,
      ["Case", "Base score", "Other score", "Change"], ["Base score", "Other score", "Change"],
      c.diffs?.length ? c.diffs.map(([caseId, was, now]) => h("tr", { "data-case-id": caseId },
        h("th", { scope: "row" }, caseId), cell(fmtScore(was), true), cell(fmtScore(now), true),
        cell(fmtSigned(now - was), true)))
        : emptyRow(4, "No case's score changed.")),
  ];
}

// ---------------------------------------------------------------------------- experiments

export async function renderExperiments(root, { signal, me }, { id } = {}) {
  root.append(h("h1", {}, "Experiments"));
  if (!me?.admin) { // the API refuses too; saying so here saves a request that must fail
    root.append(problemBox(new Problem({ code: "forbidden", detail: "experiments are for admins only" })));
    return;
  }
  root.append(h("p", { class: "muted" }, "A/B experiments on skills' live traffic, every tenant's: each arm's "
    + "jobs, the sample measured so far and the test's decision at the horizon."));
  const oneSlot = id ? loadingSlot() : null;
  const listSlot = loadingSlot();
  if (oneSlot) root.append(section("experiment", `Experiment ${id}`, oneSlot));
  root.append(section("experiments-list", "Experiments", listSlot));
  const [list, one] = await Promise.all([load("/v1/experiments", listSlot, signal),
    oneSlot ? load(`/v1/experiments/${encodeURIComponent(id)}`, oneSlot, signal) : null]);
  if (signal.aborted) return;
  if (list) {
    const newest = [...list].sort((a, b) => (b.started_at ?? 0) - (a.started_at ?? 0));
    listSlot.className = "";
    listSlot.replaceChildren(table("experiments", `Experiments (${newest.length}), newest first`,
      ["Experiment", "Skill", "Status", "Metric", "Arms", "Horizon", "Started", "Decision"], ["Horizon"],
      newest.length ? newest.map((x) => h("tr", { "data-experiment": x.spec.name, "data-status": x.status },
        h("th", { scope: "row" }, itemLink("experiments", x.spec.name)), cell(x.spec.skill),
        cell(statusBadge(x.status)), cell(x.spec.metric), cell(arms(x.spec.arms)),
        cell(`${fmtInt(x.samples_per_arm)} per arm`, true), cell(timeEl(x.started_at)), cell(verdict(x))))
        : emptyRow(8, "No experiment yet.")));
  }
  if (one) {
    oneSlot.className = "";
    oneSlot.replaceChildren(...experimentView(one));
  }
}

const arms = (list) => list.map((a, k) => (k === 0 ? `${a.version} (control)` : a.version)).join(", ");
const verdict = (x) => (x.decision ? (x.decision.winner ? `version ${x.decision.winner} wins` : "no winner")
  : x.status === "stopped" ? "stopped early" : "not yet");

function experimentView(x) {
  const s = x.spec;
  const horizon = x.samples_per_arm;
  const numeric = ["Weight", "Jobs", "Finished", "Success", "Quality", "Judge", "Feedback", "Cost per job",
    "Latency p50", "Sample", "Mean"];
  const parts = [
    meta([["Skill", s.skill], ["Status", statusBadge(x.status, { "data-testid": "experiment-status" })],
      ["Metric", s.metric], ["Horizon", `${fmtInt(horizon)} measured jobs per arm`],
      ["Alpha", String(s.alpha)], ["Power", String(s.power)], ["Minimum effect", String(s.min_effect)],
      ["Started", timeEl(x.started_at)], x.ended_at ? ["Ended", timeEl(x.ended_at)] : null,
      ["Auto-promote", s.auto_promote ? "yes" : "no"], x.stopped_by ? ["Stopped by", x.stopped_by] : null]),
    table("experiment-arms", "Arms: their jobs so far, and the sample the test is run on",
      ["Arm", ...numeric], numeric,
      x.arms.map((a, k) => h("tr", { "data-version": a.version },
        h("th", { scope: "row" }, k === 0 ? `${a.version} (control)` : a.version),
        cell(String(a.weight), true), cell(fmtInt(a.assigned), true), cell(fmtInt(a.finished), true),
        cell(fmtPct(a.success_rate), true), cell(fmtScore(a.quality), true), cell(fmtScore(a.judge), true),
        cell(a.feedback == null ? "—" : `${fmtScore(a.feedback)} (${fmtInt(a.feedback_count)})`, true),
        cell(fmtCost(a.cost_usd), true), cell(fmtDuration(a.latency_p50_s), true),
        cell(h("span", { class: "sample" },
          h("meter", { min: "0", max: String(horizon), value: String(Math.min(a.sample, horizon)), "aria-hidden": "true" }),
          ` ${fmtInt(a.sample)} / ${fmtInt(horizon)}`), true),
        cell(fmtScore(a.mean), true)))),
    h("h3", {}, "Decision"),
  ];
  const d = x.decision;
  if (!d) {
    parts.push(h("p", { class: "muted", "data-testid": "experiment-decision" }, x.status === "stopped"
      ? `Stopped${x.stopped_by ? ` by ${x.stopped_by}` : ""} before the horizon: no decision.`
      : `Not decided yet: the test is run once, when every arm has ${fmtInt(horizon)} measured jobs.`));
    return parts;
  }
  parts.push(h("p", { "data-testid": "experiment-decision" },
      h("strong", {}, d.winner ? `Version ${d.winner} wins. ` : "No winner. "), d.reason),
    table("experiment-comparisons", "Each challenger against the control",
      ["Challenger", "Difference", "p-value", "Significant", "Cost ratio"], ["Difference", "p-value", "Cost ratio"],
      d.comparisons.map((c) => h("tr", { "data-version": c.version },
        h("th", { scope: "row" }, c.version), cell(fmtSigned(c.diff), true), cell(Number(c.p_value).toFixed(4), true),
        cell(c.significant ? "yes" : "no"), cell(c.cost_ratio == null ? "—" : `${Number(c.cost_ratio).toFixed(2)}×`, true)))),
    h("p", { class: "muted" }, x.promoted ? `Version ${d.winner} was made current.`
      : d.guard ? `Not promoted: ${d.guard}` : "Nothing was promoted."));
  return parts;
}
