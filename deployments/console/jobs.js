// jobs.js: the #/jobs view. A submit form, filters and a table of up to 1,000 jobs that is
// built once and then patched in place: polling changes cells, filtering toggles `hidden`.

import { api, isAbort } from "./api.js";
import {
  LIVE, STATUSES, fmtAge, fmtCost, fmtDateTime, fmtDuration, field, h, isTerminal, jobHref,
  now, option, problemBox, setBadge, statusBadge, thead,
} from "./dom.js";

const POLL_MS = 2000;
const AGE_REFRESH_MS = 30000;
const SUMMARIES = "/v1/jobs/summaries?limit=1000";

export async function renderJobs(root, { signal }) {
  root.append(h("h1", {}, "Jobs"));
  const form = submitForm(signal);
  root.append(form);

  const search = h("input", { id: "job-search", type: "search", autocomplete: "off", spellcheck: "false",
    placeholder: "id, task, team, skill or user" });
  const statusFilter = h("select", { id: "job-status" }, option("", "All"), option("live", "Live"),
    STATUSES.map((s) => option(s, s)));
  const count = h("p", { class: "count", "data-testid": "jobs-count", "aria-live": "polite" }, "Loading jobs…");
  const problems = h("div");
  const caption = h("caption", {}, "Jobs of your tenant, newest first");
  const tbody = h("tbody");
  const table = h("table", { id: "jobs", class: "data jobs" }, caption,
    thead(["Job", "Status", "Team or skill", "Submitted by", "Age", "Duration", "Cost"], ["Duration", "Cost"]),
    tbody);
  const empty = h("p", { class: "empty muted", hidden: true });
  root.append(
    h("section", { class: "panel", "aria-labelledby": "jobs-list-title" },
      h("h2", { id: "jobs-list-title", class: "visually-hidden" }, "Job list"),
      h("div", { class: "filters" },
        field("job-search", "Search jobs", search),
        field("job-status", "Status", statusFilter),
        count),
      problems,
      h("div", { class: "table-scroll" }, table),
      empty));

  const rows = new Map(); // job id → {tr, job, haystack, cells}
  const unlisted = new Set(); // live ids the summaries do not list (older than the newest 1,000)
  let query = "";

  function matches(entry) {
    const wanted = statusFilter.value;
    const status = entry.job.status;
    if (wanted === "live" ? !LIVE.includes(status) : wanted && status !== wanted) return false;
    return !query || entry.haystack.includes(query);
  }

  function applyFilter() {
    query = search.value.trim().toLowerCase();
    let shown = 0;
    for (const entry of rows.values()) {
      const visible = matches(entry);
      if (entry.tr.hidden === visible) entry.tr.hidden = !visible;
      if (visible) shown += 1;
    }
    const total = rows.size;
    const noun = total === 1 ? "job" : "jobs";
    const text = query || statusFilter.value ? `${shown} of ${total} ${noun}` : `${total} ${noun}`;
    if (count.textContent !== text) count.textContent = text; // a live region: speak only of changes
    empty.hidden = shown > 0;
    empty.textContent = total ? "No job matches these filters." : "No jobs yet.";
  }
  search.addEventListener("input", applyFilter);
  statusFilter.addEventListener("change", applyFilter);

  // ---------------------------------------------------------------- first render
  let listing;
  try {
    listing = await api(SUMMARIES, { signal });
  } catch (error) {
    if (isAbort(error) || signal.aborted) return;
    count.textContent = "";
    problems.replaceChildren(problemBox(error));
    return;
  }
  if (signal.aborted) return;
  performance.mark("jobs-data");
  const fragment = document.createDocumentFragment();
  const at = now();
  for (const job of listing.jobs ?? []) {
    if (rows.has(job.id)) continue;
    const entry = makeRow(job, at);
    rows.set(job.id, entry);
    fragment.append(entry.tr);
  }
  tbody.append(fragment);
  noteMore(caption, listing.more);
  applyFilter();
  document.body.dataset.jobsReady = "1";
  performance.mark("jobs-rendered");
  performance.measure("jobs-render", "jobs-data", "jobs-rendered");

  // ---------------------------------------------------------------- live updates
  let timer = null;
  let agesAt = Date.now();
  signal.addEventListener("abort", () => clearTimeout(timer));

  // One poll at a time: the next is scheduled only once this one is done.
  async function poll() {
    if (signal.aborted) return;
    try {
      if (!document.hidden) {
        const statuses = await api("/v1/jobs", { signal });
        let refetch = false;
        for (const [id, status] of Object.entries(statuses ?? {})) {
          const entry = rows.get(id);
          if (!entry) {
            refetch ||= !unlisted.has(id);
          } else if (entry.job.status !== status) {
            patchRow(entry, { ...entry.job, status });
            refetch ||= isTerminal(status); // its cost and duration are final now
          }
        }
        if (refetch) await refreshSummaries(statuses);
        else applyFilter();
        if (Date.now() - agesAt > AGE_REFRESH_MS) refreshAges();
        problems.replaceChildren();
      }
    } catch (error) {
      if (isAbort(error) || signal.aborted) return;
      problems.replaceChildren(problemBox(error));
    }
    timer = setTimeout(poll, POLL_MS);
  }

  async function refreshSummaries(statuses) {
    const fresh = await api(SUMMARIES, { signal });
    const added = document.createDocumentFragment();
    const at = now();
    for (const job of fresh.jobs ?? []) {
      const entry = rows.get(job.id);
      if (entry) {
        patchRow(entry, job);
      } else {
        const created = makeRow(job, at);
        rows.set(job.id, created);
        added.append(created.tr); // newest first, like the list: they all go on top
      }
    }
    tbody.prepend(added);
    for (const id of Object.keys(statuses)) if (!rows.has(id)) unlisted.add(id);
    noteMore(caption, fresh.more);
    applyFilter();
  }

  function refreshAges() {
    agesAt = Date.now();
    const at = now();
    for (const entry of rows.values()) {
      entry.cells.age.textContent = fmtAge(at - entry.job.submitted_at);
    }
  }

  timer = setTimeout(poll, POLL_MS);
}

function noteMore(caption, more) {
  caption.textContent = more
    ? "Jobs of your tenant, newest first (only the newest 1,000 are listed)"
    : "Jobs of your tenant, newest first";
}

const targetOf = (job) => (job.skill ? `skill ${job.skill}` : job.team ?? "");
const durationOf = (job) => (job.finished_at ? job.finished_at - job.submitted_at : null);

function makeRow(job, at) {
  const status = statusBadge(job.status);
  const age = h("time", {}, fmtAge(at - job.submitted_at));
  const duration = h("td", { "data-col": "duration", class: "num" }, fmtDuration(durationOf(job)));
  const cost = h("td", { "data-col": "cost", class: "num" }, fmtCost(job.cost_usd));
  const target = h("td", { "data-col": "target" }, targetOf(job));
  const tr = h("tr", { "data-job-id": job.id, "data-status": job.status },
    h("td", { "data-col": "job", class: "job-cell" },
      h("a", { href: jobHref(job.id), class: "mono" }, job.id),
      h("span", { class: "task" }, job.task ?? "")),
    h("td", { "data-col": "status" }, status),
    target,
    h("td", { "data-col": "submitted-by" }, job.submitted_by ?? "—"),
    h("td", { "data-col": "age" }, age),
    duration,
    cost);
  age.setAttribute("datetime", new Date(job.submitted_at * 1000).toISOString());
  age.title = fmtDateTime(job.submitted_at);
  const entry = { tr, job, haystack: "", cells: { status, age, duration, cost, target } };
  entry.haystack = haystackOf(job);
  return entry;
}

/** What the search box looks through, lower-cased once per job. */
function haystackOf(job) {
  return [job.id, job.task, job.team, job.skill, job.submitted_by]
    .filter(Boolean).join("\n").toLowerCase();
}

/** Update a row's cells from a newer summary, touching only what changed. */
function patchRow(entry, job) {
  const old = entry.job;
  entry.job = job;
  if (old.status !== job.status) {
    entry.tr.dataset.status = job.status;
    setBadge(entry.cells.status, job.status);
  }
  if (old.finished_at !== job.finished_at) entry.cells.duration.textContent = fmtDuration(durationOf(job));
  if (old.cost_usd !== job.cost_usd) entry.cells.cost.textContent = fmtCost(job.cost_usd);
  if (old.task !== job.task || old.team !== job.team || old.skill !== job.skill
      || old.submitted_by !== job.submitted_by) {
    entry.haystack = haystackOf(job);
  }
}

// ---------------------------------------------------------------------------- submit form

function submitForm(signal) {
  const target = h("select", { id: "submit-target" }, option("", "Loading teams and skills…"));
  const task = h("textarea", { id: "submit-task", rows: "3", spellcheck: "true" });
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Submit");
  const problems = h("div");
  const form = h("form", { id: "submit-job", class: "panel submit", "aria-labelledby": "submit-title" },
    h("h2", { id: "submit-title" }, "Submit a job"),
    h("div", { class: "submit-grid" },
      field("submit-target", "Team or skill", target),
      field("submit-task", "Task", task),
      h("div", { class: "submit-actions" }, button)),
    problems);

  Promise.all([api("/v1/teams", { signal }), api("/v1/skills", { signal })]).then(([teams, skills]) => {
    const teamNames = Object.keys(teams ?? {}).sort();
    target.replaceChildren(option("", "Choose a team or skill"),
      teamNames.length ? h("optgroup", { label: "Teams" }, teamNames.map((n) => option(`team:${n}`, n))) : null,
      skills?.length ? h("optgroup", { label: "Skills" },
        skills.map((s) => option(`skill:${s.name}`, s.name))) : null);
  }).catch((error) => {
    if (isAbort(error) || signal.aborted) return;
    target.replaceChildren(option("", "Teams and skills unavailable"));
    problems.replaceChildren(problemBox(error));
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const [kind, ...rest] = target.value.split(":");
    const name = rest.join(":");
    const text = task.value.trim();
    const invalid = !name ? ["submit-target", "choose a team or skill"] : !text ? ["submit-task", "describe the task"] : null;
    if (invalid) {
      problems.replaceChildren(problemBox({ code: "invalid_input", detail: invalid[1] }));
      document.getElementById(invalid[0]).focus();
      return;
    }
    button.disabled = true;
    problems.replaceChildren();
    try {
      const accepted = await api("/v1/jobs", {
        method: "POST", body: { [kind === "skill" ? "skill" : "team"]: name, task: text }, signal,
      });
      location.hash = jobHref(accepted.id);
    } catch (error) {
      if (isAbort(error) || signal.aborted) return;
      problems.replaceChildren(problemBox(error));
      button.disabled = false;
    }
  });
  return form;
}
