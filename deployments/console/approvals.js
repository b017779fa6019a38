// approvals.js: approve/reject cards for held tool calls, the resume form for graphs that
// wait for input, and the #/approvals view that lists both for the whole tenant.

import { Problem, api, isAbort, jobPath } from "./api.js";
import { h, jobLink, prettyJson, problemBox, section, sleep } from "./dom.js";

const POLL_MS = 5000;

/**
 * A card for one held tool call: agent, tool, its exact arguments, a reason and
 * Approve/Reject. onDecided(approval, approved) runs once the server took the decision.
 */
export function approvalCard(jobId, approval, { onDecided, showJob = false } = {}) {
  const reason = h("input", { type: "text", "aria-label": "Reason", placeholder: "Reason (optional)", autocomplete: "off" });
  const approve = h("button", { type: "button", class: "btn btn-primary", "data-action": "approve" }, "Approve");
  const reject = h("button", { type: "button", class: "btn btn-danger", "data-action": "reject" }, "Reject");
  const problems = h("div");
  const card = h("div", { class: "approval", "data-approval-id": approval.approval_id, "data-job-id": jobId },
    h("p", { class: "approval-head" },
      h("strong", {}, approval.agent ?? "An agent"), " asks to call ", h("code", {}, approval.tool ?? "a tool"),
      approval.task_id ? h("span", { class: "muted" }, ` · subtask ${approval.task_id}`) : null,
      showJob ? h("span", { class: "muted" }, " · job ", jobLink(jobId)) : null),
    h("p", { class: "label" }, "Arguments"),
    h("pre", { class: "json" }, prettyJson(approval.arguments ?? {})),
    h("div", { class: "approval-actions" }, reason, approve, reject),
    problems);

  async function decide(approved) {
    approve.disabled = true;
    reject.disabled = true;
    problems.replaceChildren();
    try {
      const verb = approved ? "approve" : "reject";
      await api(jobPath(jobId, `/approvals/${encodeURIComponent(approval.approval_id)}/${verb}`), {
        method: "POST", body: { reason: reason.value.trim() },
      });
      card.remove();
      onDecided?.(approval, approved);
    } catch (error) {
      problems.replaceChildren(problemBox(error));
      approve.disabled = false;
      reject.disabled = false;
    }
  }
  approve.addEventListener("click", () => decide(true));
  reject.addEventListener("click", () => decide(false));
  return card;
}

/**
 * The form that answers a graph's interrupt: shows where it waits and its state, takes a
 * JSON value. `suffix` keeps ids unique when several forms share a page.
 */
export function resumeForm(jobId, interrupt, state, { onResumed, suffix = "", showJob = false } = {}) {
  const valueId = `resume-value${suffix}`;
  const value = h("textarea", { id: valueId, rows: "4", spellcheck: "false", class: "mono", placeholder: "e.g. {\"approved\": true}" });
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Resume");
  const problems = h("div");
  const form = h("form", { id: `resume${suffix}`, class: "resume", "data-job-id": jobId, "data-interrupt": interrupt?.id },
    h("p", {}, "The graph waits at node ", h("code", {}, interrupt?.node ?? "?"),
      ` (${interrupt?.when ?? "?"})`, interrupt?.namespace ? ` in ${interrupt.namespace}` : "",
      showJob ? h("span", { class: "muted" }, " · job ", jobLink(jobId)) : null),
    state !== undefined && state !== null
      ? h("div", {}, h("p", { class: "muted" }, "Current state"), h("pre", { class: "json" }, prettyJson(state)))
      : null,
    h("div", { class: "field" }, h("label", { for: valueId }, "Value (JSON)"), value),
    button, problems);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let parsed;
    try {
      parsed = JSON.parse(value.value);
    } catch (error) {
      problems.replaceChildren(problemBox(new Problem({ code: "invalid_json", detail: `the value is not JSON: ${error.message}` })));
      value.focus();
      return;
    }
    button.disabled = true;
    problems.replaceChildren();
    try {
      await api(jobPath(jobId, "/resume"), { method: "POST", body: { value: parsed, interrupt: interrupt?.id } });
      form.replaceChildren(h("p", { role: "status" }, `Resumed at ${interrupt?.node ?? "the node"}.`));
      onResumed?.(interrupt);
    } catch (error) {
      problems.replaceChildren(problemBox(error));
      button.disabled = false;
    }
  });
  return form;
}

/**
 * Make `container` hold one child per item, by key: children whose key is gone are
 * removed, new ones appended; existing ones are kept (with what was typed in them).
 */
export function syncChildren(container, items, keyOf, make) {
  const existing = new Map([...container.children].filter((c) => c.dataset.key).map((c) => [c.dataset.key, c]));
  const wanted = new Set();
  for (const item of items) {
    const key = keyOf(item);
    wanted.add(key);
    if (!existing.has(key)) {
      const child = make(item);
      child.dataset.key = key;
      container.append(child);
    }
  }
  for (const [key, child] of existing) if (!wanted.has(key)) child.remove();
}

/** #/approvals: every held tool call and every waiting graph of the tenant. */
export async function renderApprovals(root, { signal }) {
  root.append(h("h1", {}, "Approvals"),
    h("p", { class: "muted" }, "Tool calls that wait for a person, and graphs that wait for input, across your tenant's jobs."));
  const status = h("p", { class: "visually-hidden", role: "status" });
  const problems = h("div");
  const calls = h("div", { id: "pending-approvals", class: "cards" });
  const inputs = h("div", { id: "pending-inputs", class: "cards" });
  const noCalls = h("p", { class: "muted", hidden: true }, "No tool call is waiting for a decision.");
  const noInputs = h("p", { class: "muted", hidden: true }, "No graph is waiting for input.");
  root.append(status, problems,
    section("approvals-calls", "Tool calls waiting for approval", noCalls, calls),
    section("approvals-inputs", "Graphs waiting for input", noInputs, inputs));

  let formCount = 0;
  const refresh = async () => {
    const [approvals, interrupts] = await Promise.all([
      api("/v1/approvals", { signal }), api("/v1/interrupts", { signal })]);
    syncChildren(calls, approvals ?? [], (a) => `${a.job_id}\n${a.approval_id}`, (a) =>
      approvalCard(a.job_id, a, {
        showJob: true,
        onDecided: (_, approved) => {
          status.textContent = `${a.tool} ${approved ? "approved" : "rejected"} for job ${a.job_id}.`;
          noCalls.hidden = calls.children.length > 0;
        },
      }));
    syncChildren(inputs, interrupts ?? [], (w) => `${w.job_id}\n${w.interrupt?.id}`, (w) =>
      h("div", { class: "approval" }, resumeForm(w.job_id, w.interrupt, w.state, { suffix: `-${++formCount}`, showJob: true })));
    noCalls.hidden = calls.children.length > 0;
    noInputs.hidden = inputs.children.length > 0;
  };

  // poll, one request at a time, until the view is left
  while (!signal.aborted) {
    try {
      await refresh();
      problems.replaceChildren();
    } catch (error) {
      if (isAbort(error) || signal.aborted) return;
      problems.replaceChildren(problemBox(error));
    }
    await sleep(POLL_MS, signal);
  }
}
