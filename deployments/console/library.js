// library.js: #/sessions (the tenant's conversations and one session's turns) and #/knowledge
// (the tenant's knowledge bases, a base's documents, and a search of its passages).

import { api, isAbort } from "./api.js";
import { field, fmtInt, h, itemLink, jobLink, problemBox, section, statusBadge, timeEl, truncate } from "./dom.js";
import { cell, emptyRow, load, loadingSlot, table } from "./views.js";

const meta = (pairs) => h("dl", { class: "meta" }, pairs.filter(Boolean).map(([label, value]) =>
  h("div", {}, h("dt", {}, label), h("dd", {}, value ?? "—"))));
const text = (value, max) => h("span", { class: "cell-text" }, truncate(value, max));

// ---------------------------------------------------------------------------- sessions

export async function renderSessions(root, { signal, me }, { id } = {}) {
  root.append(h("h1", {}, "Sessions"),
    h("p", { class: "muted" }, `Conversations of tenant ${me?.tenant}: each job of a session is shown the turns before it.`));
  const oneSlot = id ? loadingSlot() : null;
  const listSlot = loadingSlot();
  if (oneSlot) root.append(section("session", `Session ${id}`, oneSlot));
  root.append(section("sessions-list", "Sessions", listSlot));
  const [list, one] = await Promise.all([load("/v1/sessions?limit=1000", listSlot, signal),
    oneSlot ? load(`/v1/sessions/${encodeURIComponent(id)}`, oneSlot, signal) : null]);
  if (signal.aborted) return;
  if (list) {
    listSlot.className = "";
    listSlot.replaceChildren(table("sessions", `Sessions (${list.length}), the most recently used first`,
      ["Session", "Title", "End user", "Created", "Last used", "History tokens"], ["History tokens"],
      list.length ? list.map((s) => h("tr", { "data-session-id": s.id, "aria-current": s.id === id ? "true" : null },
        h("th", { scope: "row" }, itemLink("sessions", s.id)), cell(s.title || "—"), cell(s.user),
        cell(timeEl(s.created_at)), cell(timeEl(s.updated_at)), cell(fmtInt(s.history_tokens), true)))
        : emptyRow(6, "No session yet: a job joins one with session_id.")));
  }
  if (one) {
    oneSlot.className = "";
    oneSlot.replaceChildren(...sessionView(one));
  }
}

function sessionView(s) {
  const turns = s.turns ?? [];
  return [
    meta([["Title", s.title || "—"], s.user ? ["End user", s.user] : null, ["Created", timeEl(s.created_at)],
      ["Last used", timeEl(s.updated_at)], ["Turns", fmtInt(turns.length)],
      ["History shown to a job", `${fmtInt(s.history_tokens)} tokens at most`]]),
    s.summary ? h("div", { class: "summary" },
      h("p", { class: "label" }, `Turns 1 to ${s.summarized_through} are shown to its jobs as this summary:`),
      h("pre", { class: "wrap", "data-testid": "session-summary" }, s.summary)) : null,
    table("session-turns", `Turns (${turns.length}), oldest first`,
      ["Turn", "Task", "Status", "Answer", "Job", "Submitted"], ["Turn"],
      turns.length ? turns.map((t) => h("tr", { "data-seq": t.seq, "data-job-id": t.job_id, "data-status": t.status },
        h("th", { scope: "row", class: "num" }, String(t.seq)), cell(text(t.task, 600)), cell(statusBadge(t.status)),
        cell(t.answer != null ? text(t.answer, 800) : null), cell(jobLink(t.job_id)), cell(timeEl(t.at))))
        : emptyRow(6, "No job has joined this session yet.")),
  ].filter(Boolean); // replaceChildren() would write a null as "null"
}

// ---------------------------------------------------------------------------- knowledge

export async function renderKnowledge(root, { signal, me }, { id } = {}) {
  root.append(h("h1", {}, "Knowledge"),
    h("p", { class: "muted" }, `Knowledge bases of tenant ${me?.tenant}: documents cut into passages that agents `
      + "are shown and cite."));
  const docsSlot = id ? loadingSlot() : null;
  const listSlot = loadingSlot();
  if (docsSlot) root.append(section("kb-documents-section", `Knowledge base ${id}`, docsSlot), searchSection(id, signal));
  root.append(section("knowledge-list", "Knowledge bases", listSlot));
  const path = `/v1/knowledge/${encodeURIComponent(id ?? "")}/documents`;
  const [list, docs] = await Promise.all([load("/v1/knowledge", listSlot, signal),
    docsSlot ? load(path, docsSlot, signal) : null]);
  if (signal.aborted) return;
  if (list) {
    const sorted = [...list].sort((a, b) => String(a.name).localeCompare(String(b.name)));
    listSlot.className = "";
    listSlot.replaceChildren(table("knowledge-bases", `Knowledge bases (${sorted.length})`,
      ["Knowledge base", "Passages", "Created"], ["Passages"],
      sorted.length ? sorted.map((kb) => h("tr", { "data-kb": kb.name, "aria-current": kb.name === id ? "true" : null },
        h("th", { scope: "row" }, itemLink("knowledge", kb.name)), cell(fmtInt(kb.chunks), true), cell(timeEl(kb.created_at))))
        : emptyRow(3, "No knowledge base yet: ingest documents with POST /v1/knowledge/{kb}/documents.")));
  }
  if (docs) {
    const sorted = [...docs].sort((a, b) => String(a.source).localeCompare(String(b.source)));
    docsSlot.className = "";
    docsSlot.replaceChildren(table("kb-documents", `Documents (${sorted.length})`,
      ["Source", "Type", "Passages", "Ingested", "SHA-256"], ["Passages"],
      sorted.length ? sorted.map((d) => h("tr", { "data-source": d.source },
        h("th", { scope: "row" }, text(d.source, 200)), cell(d.media_type), cell(fmtInt(d.chunks), true),
        cell(timeEl(d.ingested_at)), cell(h("code", { title: d.hash }, String(d.hash ?? "").slice(0, 12)))))
        : emptyRow(5, "No document.")));
  }
}

function searchSection(kb, signal) {
  const query = h("input", { id: "kb-query", type: "search", autocomplete: "off", spellcheck: "false",
    placeholder: "what to look for" });
  const k = h("input", { id: "kb-k", type: "number", min: "1", max: "50", step: "1", value: "5" });
  const button = h("button", { type: "submit", class: "btn btn-primary" }, "Search");
  const result = h("div", { id: "kb-results", "aria-live": "polite" });
  const form = h("form", { id: "kb-search", class: "inline-form" },
    field("kb-query", "Query", query), field("kb-k", "Passages", k), h("div", { class: "submit-actions" }, button));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const wanted = query.value.trim();
    const many = Number(k.value);
    const invalid = !wanted ? ["kb-query", "enter what to look for"]
      : !Number.isInteger(many) || many < 1 || many > 50 ? ["kb-k", "passages: a whole number from 1 to 50"] : null;
    if (invalid) {
      result.replaceChildren(problemBox({ code: "invalid_input", detail: invalid[1] }));
      document.getElementById(invalid[0]).focus();
      return;
    }
    button.disabled = true;
    result.replaceChildren(h("p", { class: "muted" }, "Searching…"));
    try {
      const found = await api(`/v1/knowledge/${encodeURIComponent(kb)}/search`,
        { method: "POST", body: { query: wanted, k: many }, signal });
      const passages = found?.passages ?? [];
      result.replaceChildren(table("kb-passages", `Passages closest to “${truncate(wanted, 80)}” (${passages.length}), best first`,
        ["Score", "Source", "Place", "Passage"], ["Score"],
        passages.length ? passages.map((p) => h("tr", { "data-source": p.source, "data-position": p.position },
          cell(Number(p.score).toFixed(3), true), cell(text(p.source, 200)),
          cell([p.section, `#${p.position}`].filter(Boolean).join(" ")), cell(text(p.text, 700))))
          : emptyRow(4, "Nothing found.")));
    } catch (error) {
      if (isAbort(error) || signal.aborted) return;
      result.replaceChildren(problemBox(error));
    } finally {
      button.disabled = false;
    }
  });
  return section("kb-search-section", "Search its passages", form, result);
}
