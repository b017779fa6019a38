// console.js: entry point. Signs in, draws the header and routes #/... to the views.

import { api, auth, isAbort, onUnauthorized, Problem } from "./api.js";
import { h, problemBox } from "./dom.js";
import { renderJobs } from "./jobs.js";
import { renderJob } from "./job.js";
import { renderApprovals } from "./approvals.js";
import { renderEvals, renderExperiments } from "./evolution.js";
import { renderKnowledge, renderSessions } from "./library.js";
import { renderCatalog, renderDeadLetters, renderGuardrails, renderUsage } from "./views.js";

const NAV = [
  { route: "jobs", label: "Jobs" },
  { route: "approvals", label: "Approvals" },
  { route: "catalog", label: "Catalog" },
  { route: "sessions", label: "Sessions" },
  { route: "knowledge", label: "Knowledge" },
  { route: "evals", label: "Evals" },
  { route: "experiments", label: "Experiments", admin: true },
  { route: "usage", label: "Usage" },
  { route: "guardrails", label: "Guardrails" },
  { route: "dead-letters", label: "Dead letters", admin: true },
];

const VIEWS = {
  jobs: renderJobs,
  job: renderJob,
  approvals: renderApprovals,
  catalog: renderCatalog,
  sessions: renderSessions,
  knowledge: renderKnowledge,
  evals: renderEvals,
  experiments: renderExperiments,
  usage: renderUsage,
  guardrails: renderGuardrails,
  "dead-letters": renderDeadLetters,
};

const $ = (id) => document.getElementById(id);

let me = null; // the signed-in caller: {name, tenant, admin}
let current = null; // the AbortController of the view on screen

// views that also show one of their items: "#/evals/<run id>" is {name: "evals", id}
const ITEM_VIEWS = new Set(["evals", "experiments", "sessions", "knowledge"]);

/**
 * "#/jobs/abc" → {name: "job", id: "abc"}; "#/sessions/s1" → {name: "sessions", id: "s1"};
 * anything unknown is the jobs list.
 */
function parseRoute(hash) {
  const [first, ...rest] = hash.replace(/^#\/?/, "").split("/");
  if (first === "jobs" && rest.length && rest[0]) {
    try {
      return { name: "job", id: decodeURIComponent(rest.join("/")) };
    } catch {
      return { name: "jobs", unknown: true };
    }
  }
  // one segment (an id has no "/": encoded, it is "%2F"), a trailing "/" allowed
  if (ITEM_VIEWS.has(first) && rest[0] && rest.slice(1).every((part) => !part)) {
    try {
      return { name: first, id: decodeURIComponent(rest[0]) };
    } catch {
      return { name: "jobs", unknown: true };
    }
  }
  if (Object.hasOwn(VIEWS, first) && first !== "job" && rest.every((part) => !part)) return { name: first };
  return { name: "jobs", unknown: first !== "jobs" };
}

/** Show the view the hash names; the previous one stops its polls and streams. */
function route() {
  if (!me) return;
  current?.abort();
  current = new AbortController();
  const target = parseRoute(location.hash);
  if (target.unknown) history.replaceState(null, "", "#/jobs");
  const section = target.name === "job" ? "jobs" : target.name;
  for (const link of $("nav-links").querySelectorAll("a")) {
    if (link.dataset.route === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  delete document.body.dataset.jobsReady;
  const root = h("div", { class: `view view-${target.name}` });
  $("view").replaceChildren(root);
  const { signal } = current;
  const failed = (error) => {
    if (isAbort(error) || signal.aborted) return;
    root.append(problemBox(error));
  };
  try {
    // views are async but draw their <h1> before their first await
    VIEWS[target.name](root, { me, signal }, target).catch(failed);
  } catch (error) {
    failed(error);
  }
  // move focus to the new view's heading so keyboard and screen-reader users follow along
  window.scrollTo(0, 0);
  const heading = root.querySelector("h1");
  if (heading) {
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });
  }
}

function showApp() {
  const whoami = $("whoami");
  whoami.replaceChildren(`${me.name} · tenant ${me.tenant}`);
  if (me.admin) whoami.append(" ", h("span", { class: "badge" }, "admin"));
  $("nav-links").replaceChildren(...NAV.filter((item) => !item.admin || me.admin).map((item) =>
    h("li", {}, h("a", { href: `#/${item.route}`, "data-route": item.route }, item.label))));
  $("nav").hidden = false;
  $("who").hidden = false;
  route();
}

/** The sign-in form; focus goes to the key field after a failure or a sign-out only. */
function showLogin(problem, { focus = true } = {}) {
  me = null;
  current?.abort();
  current = null;
  delete document.body.dataset.jobsReady;
  $("nav").hidden = true;
  $("who").hidden = true;
  $("whoami").replaceChildren();
  $("nav-links").replaceChildren();
  const key = h("input", { id: "key", type: "password", autocomplete: "off", spellcheck: "false" });
  const form = h("form", { id: "login", class: "panel login-form" },
    h("div", { class: "field" }, h("label", { for: "key" }, "API key"), key),
    h("button", { type: "submit", class: "btn btn-primary" }, "Sign in"),
    h("div", { id: "login-problem" }, problem ? problemBox(problem) : null));
  form.addEventListener("submit", signIn);
  $("view").replaceChildren(h("section", { class: "login", "aria-labelledby": "login-title" },
    h("h1", { id: "login-title" }, "Sign in"),
    h("p", { class: "muted" }, "Sign in with a raytroupe API key. It is kept for this browser tab only."),
    form));
  if (focus || problem) key.focus();
}

function signOut(problem) {
  auth.clear();
  showLogin(problem);
}

async function signIn(event) {
  event.preventDefault();
  const input = $("key");
  const key = input.value.trim();
  const button = event.currentTarget.querySelector("button[type=submit]");
  if (!key) {
    $("login-problem").replaceChildren(problemBox(new Problem({ code: "invalid_input", detail: "enter an API key" })));
    input.focus();
    return;
  }
  button.disabled = true;
  try {
    me = await api("/v1/me", { key, handle401: false });
    auth.set(key);
    showApp();
  } catch (error) {
    $("login-problem").replaceChildren(problemBox(error));
    input.select();
  } finally {
    button.disabled = false;
  }
}

async function start() {
  onUnauthorized((problem) => signOut(problem)); // a key revoked mid-session
  $("sign-out").addEventListener("click", () => signOut());
  window.addEventListener("hashchange", () => route());
  // the skip link's #content would be read as a route: move focus ourselves instead
  document.querySelector(".skip-link").addEventListener("click", (event) => {
    event.preventDefault();
    const main = $("content");
    main.focus();
    main.scrollIntoView();
  });
  if (!auth.get()) {
    showLogin(null, { focus: false }); // a fresh page: Tab from the top, skip link first
    return;
  }
  try {
    me = await api("/v1/me", { handle401: false });
    showApp();
  } catch (error) {
    if (error.status === 401 || error.status === 403) auth.clear();
    showLogin(error);
  }
}

start();
