// api.js: the API key, JSON requests and RFC 7807 problems.

const KEY = "raytroupe.key";

/** The API key lives in sessionStorage only: never in a URL, never in the page. */
export const auth = {
  get: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

/** An API error, as the server's problem document says it (code, detail, status). */
export class Problem extends Error {
  constructor({ code = "error", detail = "", title = "", status = 0 } = {}) {
    super(`${code}: ${detail}`);
    this.name = "Problem";
    this.code = String(code);
    this.detail = typeof detail === "string" ? detail : JSON.stringify(detail);
    this.title = title;
    this.status = status;
  }
}

export const isAbort = (error) => error?.name === "AbortError";

let unauthorized = null;

/** Who to tell when a request is refused with 401 (the key was revoked or is wrong). */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

/** The Problem a failed response describes (any JSON body with code/detail, else the status). */
export async function problemOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: fall back on the status line
  }
  if (body && typeof body === "object" && (body.code || body.detail || body.title)) {
    return new Problem({
      code: body.code ?? `http_${response.status}`,
      detail: body.detail ?? body.title,
      title: body.title ?? "",
      status: response.status,
    });
  }
  return new Problem({
    code: `http_${response.status}`,
    detail: response.statusText || "the request failed",
    status: response.status,
  });
}

/** Headers for a request: the bearer key (given, else the stored one) plus `extra`. */
export function headers(extra = {}, key = auth.get()) {
  return key ? { ...extra, Authorization: `Bearer ${key}` } : { ...extra };
}

/**
 * Call the API and return its JSON. Throws a Problem for an error response (and tells the
 * unauthorized handler about a 401 unless `handle401` is false), or an AbortError.
 */
export async function api(path, { method = "GET", body, signal, key, handle401 = true } = {}) {
  const init = { method, signal, cache: "no-store", credentials: "same-origin" };
  init.headers = headers({ Accept: "application/json" }, key ?? auth.get());
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (isAbort(error)) throw error;
    throw new Problem({ code: "network_error", detail: "could not reach the server" });
  }
  if (!response.ok) {
    const problem = await problemOf(response);
    if (response.status === 401 && handle401 && unauthorized) unauthorized(problem);
    throw problem;
  }
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/** "/v1/jobs/<id><rest>" with the id encoded. */
export const jobPath = (id, rest = "") => `/v1/jobs/${encodeURIComponent(id)}${rest}`;
