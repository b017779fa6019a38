// job.js: the #/jobs/<id> view. Status and facts, approvals, graph input, the plan DAG,
// the answer, a graph's checkpoints (and forks), the trace waterfall and the event log; kept
// live by the job's event stream.

import { api, isAbort, jobPath } from "./api.js";
import { approvalCard, resumeForm, syncChildren } from "./approvals.js";
import { Checkpoints } from "./checkpoints.js";
import { Dag } from "./dag.js";
import {
  coalesce, fmtCost, fmtDuration, fmtInt, h, isTerminal, jobLink, now, prettyJson, problemBox, section,
  setBadge, statusBadge, timeEl,
} from "./dom.js";
import { EventLog } from "./eventlog.js";
import { followEvents } from "./sse.js";
import { Waterfall } from "./waterfall.js";

// events after which the job's status may have changed (it is fetched again, coalesced)
const STATUS_EVENTS = new Set(["job_routed", "plan_ready", "subtask_started", "job_aggregating",
  "approval_requested", "approval_decided", "graph_interrupted", "graph_resumed", "quality_checked"]);

export async function renderJob(root, { signal }, { id }) {
  root.append(h("h1", {}, "Job ", h("span", { class: "mono" }, id)));
  const loading = h("p", { class: "muted" }, "Loading the job…");
  root.append(loading);
  let view;
  try {
    view = await api(jobPath(id), { signal });
  } catch (error) {
    if (isAbort(error) || signal.aborted) return;
    loading.replaceWith(problemBox(error)); // unknown, or another tenant's: nothing else
    return;
  }
  loading.remove();
  new JobPage(root, id, view, signal).start();
}

class JobPage {
  constructor(root, id, view, signal) {
    Object.assign(this, { root, id, signal, status: view.status, result: null, summary: null });
    this.pendingResult = view.result ?? null; // a finished job's result, shown by start()
    this.finalized = false; // true once the finished job's result is shown
    this.planFromResult = false; // the DAG shows the result's subtasks: events leave it be
    this.lastSeq = 0;
    this.interrupt = null;
    this.dag = new Dag();
    this.waterfall = new Waterfall();
    this.log = new EventLog();
    this.checkpoints = new Checkpoints(id, signal);
    this.refreshCheckpointsSoon = coalesce(() => this.checkpoints.load(), 1000);
    this.refreshStatusSoon = coalesce(() => this.refreshStatus(), 400);
    this.refreshTraceSoon = coalesce(() => this.loadTrace(), 1500);
    this.refreshApprovalsSoon = coalesce(() => this.loadApprovals(), 300);
    this.traceRequest = 0;
    signal.addEventListener("abort", () => {
      for (const d of [this.refreshStatusSoon, this.refreshTraceSoon, this.refreshApprovalsSoon,
        this.refreshCheckpointsSoon]) d.cancel();
      clearInterval(this.ticker);
    });
    this.build(view);
  }

  build(view) {
    this.badge = statusBadge(view.status, { "data-testid": "job-status" });
    this.cancel = h("button", { id: "cancel-job", type: "button", class: "btn btn-danger" }, "Cancel job");
    this.cancel.addEventListener("click", () => this.cancelJob());
    this.cancelNote = h("div", { class: "cancel-note" });
    const dd = (testid) => h("dd", { "data-testid": testid }, "—");
    this.meta = {
      targetLabel: h("dt", {}, "Team"), target: dd("job-target"), by: dd("job-submitted-by"),
      submitted: dd("job-submitted"), duration: dd("job-duration"), cost: dd("job-cost"), tokens: dd("job-tokens"),
    };
    const m = this.meta;
    this.task = h("p", { class: "job-task" });
    this.forkedFrom = h("p", { class: "forked-from", "data-testid": "job-forked-from", hidden: true });
    this.root.append(h("div", { class: "panel job-head" },
      h("div", { class: "job-head-top" },
        h("p", { class: "job-status-line", "aria-live": "polite" }, "Status ", this.badge),
        this.cancel),
      this.cancelNote,
      h("dl", { class: "meta" },
        h("div", {}, m.targetLabel, m.target), h("div", {}, h("dt", {}, "Submitted by"), m.by),
        h("div", {}, h("dt", {}, "Submitted"), m.submitted), h("div", {}, h("dt", {}, "Duration"), m.duration),
        h("div", {}, h("dt", {}, "Cost"), m.cost), h("div", {}, h("dt", {}, "Tokens"), m.tokens)),
      this.forkedFrom,
      this.task));

    this.approvals = h("div", { id: "approvals", class: "cards" });
    this.noApprovals = h("p", { class: "muted" }, "No tool call is waiting for a decision.");
    this.approvalNote = h("p", { class: "visually-hidden", role: "status" });
    this.approvalProblems = h("div");
    this.approvalsSection = section("job-approvals", "Approvals",
      this.approvalNote, this.approvalProblems, this.noApprovals, this.approvals);
    this.inputSlot = h("div");
    this.inputSection = section("job-input", "Graph input", this.inputSlot);
    this.inputSection.hidden = true;
    this.answer = h("div", { id: "answer" }, h("p", { class: "muted" }, "The answer appears here when the job finishes."));
    this.traceProblems = h("div");
    this.eventProblems = h("div");
    this.root.append(this.approvalsSection, this.inputSection,
      section("job-plan", "Plan", this.dag.el),
      section("job-answer", "Answer", this.answer),
      this.checkpoints.el,
      section("job-trace", "Trace", this.traceProblems,
        h("div", { class: "trace-grid" }, this.waterfall.el, this.waterfall.detailBox)),
      section("job-events", "Events", this.eventProblems, this.log.box));
  }

  start() {
    if (this.pendingResult) this.showResult(this.pendingResult);
    this.setStatus(this.status);
    this.loadSummary();
    this.loadTrace();
    this.checkpoints.load();
    if (!isTerminal(this.status)) {
      this.loadApprovals();
      this.ticker = setInterval(() => this.showDuration(), 1000);
    }
    this.follow();
  }

  setStatus(status) {
    this.status = status;
    setBadge(this.badge, status);
    const done = isTerminal(status);
    this.cancel.hidden = done;
    if (done) {
      clearInterval(this.ticker);
      this.approvalsSection.hidden = this.approvals.children.length === 0;
      this.inputSection.hidden = true;
    } else if (status === "awaiting_input" && !this.interrupt) {
      this.loadInterrupt();
    }
    this.showDuration();
  }

  // ------------------------------------------------------------------ events
  follow() {
    this.eventProblems.replaceChildren();
    followEvents(this.id, {
      after: this.lastSeq, signal: this.signal,
      onEvent: (event) => this.onEvent(event),
      onProblem: (problem) => this.eventProblems.replaceChildren(problemBox(problem)),
    }).then(() => {
      if (this.signal.aborted || isTerminal(this.status)) return;
      const again = h("button", { type: "button", class: "btn" }, "Reconnect");
      again.addEventListener("click", () => this.follow());
      this.eventProblems.append(again); // the stream gave up before the job ended
    });
  }

  onEvent(event) {
    this.lastSeq = Math.max(this.lastSeq, Number(event.seq) || 0);
    this.log.add(event);
    const data = event.data ?? {};
    const live = !isTerminal(this.status);
    switch (event.type) {
      case "job_submitted":
        this.showForkedFrom(data.forked_from);
        break;
      case "plan_ready":
        if (!this.planFromResult) this.dag.draw(data.subtasks);
        break;
      case "subtask_started":
        if (!this.planFromResult) this.dag.update(event.subtask_id, { status: "running", attempt: data.attempt });
        break;
      case "subtask_finished":
        if (!this.planFromResult) this.dag.update(event.subtask_id, { status: data.status, agent: data.agent, attempt: data.attempt });
        if (live) this.refreshTraceSoon();
        break;
      case "approval_requested":
      case "approval_decided":
        if (live) this.refreshApprovalsSoon();
        break;
      case "graph_interrupted":
        if (live) this.showInterrupt(data.interrupt, data.state);
        if (live) this.refreshCheckpointsSoon();
        break;
      case "graph_resumed":
        if (live && (!this.interrupt || this.interrupt.id === data.interrupt)) this.hideInterrupt();
        if (live) this.refreshCheckpointsSoon();
        break;
      case "job_succeeded":
      case "job_failed":
      case "job_cancelled":
        this.finish(event.type.slice("job_".length));
        return;
      default:
        break;
    }
    if (live && STATUS_EVENTS.has(event.type)) this.refreshStatusSoon();
  }

  async refreshStatus() {
    if (this.finalized || this.signal.aborted) return;
    try {
      const view = await api(jobPath(this.id), { signal: this.signal });
      if (this.finalized) return;
      if (view.result && isTerminal(view.status)) this.finish(view.status, view);
      else this.setStatus(view.status);
    } catch (error) {
      if (!isAbort(error)) this.eventProblems.replaceChildren(problemBox(error));
    }
  }

  /** The job ended: show its result, final facts and trace; stop offering actions. */
  async finish(status, view = null) {
    if (this.finalized) return; // a finished job's events being replayed
    this.finalized = true;
    this.refreshStatusSoon.cancel();
    this.refreshApprovalsSoon.cancel();
    this.refreshTraceSoon.cancel();
    this.approvals.replaceChildren();
    this.noApprovals.hidden = false;
    this.hideInterrupt();
    this.setStatus(status);
    try {
      const final = view ?? await api(jobPath(this.id), { signal: this.signal });
      if (final.status) this.setStatus(final.status);
      if (final.result) this.showResult(final.result);
    } catch (error) {
      if (!isAbort(error)) this.answer.replaceChildren(problemBox(error));
    }
    this.loadSummary();
    this.loadTrace();
    this.refreshCheckpointsSoon.cancel();
    this.checkpoints.load();
  }

  /** A fork says where it comes from in its first event: "Forked from <job> at superstep N". */
  showForkedFrom(fork) {
    if (!fork?.job_id) return;
    const edited = fork.state && Object.keys(fork.state).length ? ", its state edited" : "";
    this.forkedFrom.replaceChildren("Forked from ", jobLink(fork.job_id), ` at superstep ${fork.step}${edited}.`);
    this.forkedFrom.hidden = false;
  }

  // ------------------------------------------------------------------ facts and answer
  async loadSummary() {
    try {
      this.summary = await api(jobPath(this.id, "/summary"), { signal: this.signal });
    } catch {
      return; // the facts stay "—"; the rest of the page does not depend on them
    }
    this.showFacts();
  }

  showFacts() {
    const s = this.summary ?? {};
    const r = this.result ?? {};
    const m = this.meta;
    m.targetLabel.textContent = s.skill ? "Skill" : "Team";
    m.target.textContent = s.skill ?? s.team ?? r.team ?? "—";
    m.by.textContent = s.submitted_by ?? "—";
    const submitted = s.submitted_at ?? r.timings?.submitted_at;
    m.submitted.replaceChildren(submitted ? timeEl(submitted) : "—");
    const cost = s.cost_usd ?? r.usage?.cost_usd;
    m.cost.textContent = cost != null ? fmtCost(cost) : "—";
    const tokens = s.tokens ?? (r.usage ? (r.usage.prompt_tokens ?? 0) + (r.usage.completion_tokens ?? 0) : null);
    m.tokens.textContent = tokens != null ? fmtInt(tokens) : "—";
    this.task.textContent = r.task ?? s.task ?? "";
    this.showDuration();
  }

  showDuration() {
    const submitted = this.summary?.submitted_at ?? this.result?.timings?.submitted_at;
    const finished = this.summary?.finished_at ?? this.result?.timings?.finished_at;
    if (!submitted) return;
    this.meta.duration.textContent = finished ? fmtDuration(finished - submitted)
      : isTerminal(this.status) ? "—" : `${fmtDuration(now() - submitted)} so far`;
  }

  showResult(result) {
    this.result = result;
    this.finalized = true;
    this.planFromResult = (result.subtasks ?? []).length > 0;
    this.dag.sync(result.subtasks ?? []);
    const parts = [];
    if (result.error) {
      parts.push(h("div", { class: "job-error", "data-testid": "job-error" },
        h("strong", {}, result.error.code ?? "error"), ": ", result.error.message ?? "",
        result.error.detail && Object.keys(result.error.detail).length
          ? h("details", {}, h("summary", {}, "Error detail"), h("pre", { class: "json" }, prettyJson(result.error.detail)))
          : null));
    }
    if (result.answer) parts.push(h("pre", { class: "answer-text" }, result.answer));
    else if (!result.error) parts.push(h("p", { class: "muted" }, "The job gave no answer."));
    const u = result.usage;
    if (u) {
      parts.push(h("p", { class: "muted" }, `${fmtInt(u.calls)} model calls · ${fmtInt(u.prompt_tokens)} prompt and `
        + `${fmtInt(u.completion_tokens)} completion tokens · ${fmtCost(u.cost_usd)}`));
    }
    const phases = ["provision", "plan", "dispatch", "aggregate"].filter((k) => result.timings?.[`${k}_s`] != null)
      .map((k) => `${k} ${fmtDuration(result.timings[`${k}_s`])}`);
    if (phases.length) parts.push(h("p", { class: "muted" }, phases.join(" · ")));
    if (result.output) {
      parts.push(h("details", {}, h("summary", {}, "Output envelope (JSON)"),
        h("pre", { class: "json" }, prettyJson(result.output))));
    }
    this.answer.replaceChildren(...parts);
    this.showFacts();
  }

  // ------------------------------------------------------------------ trace
  async loadTrace() {
    const ticket = ++this.traceRequest; // only the newest answer is drawn
    try {
      const trace = await api(jobPath(this.id, "/trace"), { signal: this.signal });
      if (ticket !== this.traceRequest) return;
      this.waterfall.render(trace?.spans ?? []);
      this.traceProblems.replaceChildren();
    } catch (error) {
      if (!isAbort(error) && ticket === this.traceRequest) this.traceProblems.replaceChildren(problemBox(error));
    }
  }

  // ------------------------------------------------------------------ actions
  async loadApprovals() {
    if (this.finalized) return;
    try {
      const query = new URLSearchParams({ job_id: this.id });
      const pending = await api(`/v1/approvals?${query}`, { signal: this.signal });
      if (this.finalized) return;
      syncChildren(this.approvals, pending ?? [], (a) => a.approval_id, (a) => approvalCard(this.id, a, {
        onDecided: (_, approved) => {
          this.approvalNote.textContent = `${a.tool} ${approved ? "approved" : "rejected"}.`;
          this.noApprovals.hidden = this.approvals.children.length > 0;
          this.refreshStatusSoon();
        },
      }));
      this.noApprovals.hidden = this.approvals.children.length > 0;
      this.approvalProblems.replaceChildren();
    } catch (error) {
      if (!isAbort(error)) this.approvalProblems.replaceChildren(problemBox(error));
    }
  }

  async loadInterrupt() {
    try {
      const waiting = await api("/v1/interrupts", { signal: this.signal });
      const mine = (waiting ?? []).find((w) => w.job_id === this.id);
      if (mine && !this.interrupt && !isTerminal(this.status)) this.showInterrupt(mine.interrupt, mine.state);
    } catch (error) {
      if (!isAbort(error)) this.inputSlot.replaceChildren(problemBox(error));
    }
  }

  showInterrupt(interrupt, state) {
    if (!interrupt) return;
    // the same interrupt again: keep the form (and what was typed) unless state is new
    if (this.interrupt?.id === interrupt.id && (state == null || this.interruptState != null)) return;
    this.interrupt = interrupt;
    this.interruptState = state;
    this.inputSlot.replaceChildren(resumeForm(this.id, interrupt, state, {
      onResumed: () => this.refreshStatusSoon(),
    }));
    this.inputSection.hidden = false;
  }

  hideInterrupt() {
    this.interrupt = null;
    this.interruptState = null;
    this.inputSlot.replaceChildren();
    this.inputSection.hidden = true;
  }

  async cancelJob() {
    this.cancel.disabled = true;
    this.cancelNote.replaceChildren();
    try {
      const answer = await api(jobPath(this.id, "/cancel"), { method: "POST", signal: this.signal });
      this.cancelNote.replaceChildren(h("p", { role: "status" }, `Cancellation requested (status: ${answer?.status ?? "unknown"}).`));
      if (answer?.status && !isTerminal(answer.status)) this.setStatus(answer.status);
      else if (answer?.status) this.finish(answer.status);
    } catch (error) {
      if (isAbort(error)) return;
      this.cancelNote.replaceChildren(problemBox(error));
      this.refreshStatusSoon();
    } finally {
      this.cancel.disabled = false;
    }
  }
}
