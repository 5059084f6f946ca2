// The API as the console uses it: the key lives in this tab's session storage (gone when
// the tab closes, never in a URL or a cookie) and goes out as the x-api-key header.

const KEY = "agent-host.key";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  signIn: (key) => sessionStorage.setItem(KEY, key),
  signOut: () => sessionStorage.removeItem(KEY),
};

/** A refusal from the API, in its envelope: `status`, `code`, `message`. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Listeners told when the key stops working (revoked, or never valid). */
const signedOut = new Set();
export const onSignedOut = (listener) => signedOut.add(listener);

/**
 * Calls the API. `body` is sent as JSON unless `type` names another content type (then it
 * goes as is: a manifest's text, a component's bytes). Answers `data` of the envelope,
 * or the whole body for endpoints without one (`raw`: the response itself, to stream);
 * throws ApiError otherwise.
 */
export async function call(method, path, { body, type, key = session.key(), raw = false, accept, signal } = {}) {
  const headers = { "x-api-key": key ?? "" };
  if (accept) headers.accept = accept;
  let payload;
  if (body !== undefined) {
    headers["content-type"] = type ?? "application/json";
    payload = type ? body : JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, { method, headers, body: payload, cache: "no-store", signal });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network_error", "The server could not be reached");
  }
  if (raw && response.ok) return response;
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: reported below with the status.
  }
  if (!response.ok) {
    const code = json?.error?.code ?? "http_" + response.status;
    const message = json?.error?.message ?? (text || response.statusText);
    if (response.status === 401 && key === session.key()) signedOut.forEach((l) => l(message));
    throw new ApiError(response.status, code, message);
  }
  return json && "data" in json ? json.data : json;
}

export const get = (path, options) => call("GET", path, options);
export const post = (path, body, options) => call("POST", path, { ...options, body });
export const put = (path, body) => call("PUT", path, { body });
export const patch = (path, body) => call("PATCH", path, { body });
export const del = (path) => call("DELETE", path);

/** The path part of an absolute address on this server (a job's statusUrl). */
export function localPath(url) {
  const parsed = new URL(url, location.href);
  return parsed.pathname + parsed.search;
}

export const enc = encodeURIComponent;
