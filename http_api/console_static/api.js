// The HTTP API as the logged-in user. The token lives in sessionStorage (this tab only, gone when
// it closes) and travels in the Authorization header: never in a URL.
const KEY = "logbroker.console.token";
const USER = "logbroker.console.user";

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : `HTTP ${status}`);
    this.status = status;
    this.code = problem && problem.code;
  }
}

export function session() {
  const token = sessionStorage.getItem(KEY);
  return token ? { token, user: sessionStorage.getItem(USER) || "" } : null;
}

export async function login(username, password) {
  const response = await fetch("/v1/auth/token", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body);
  sessionStorage.setItem(KEY, body.access_token);
  sessionStorage.setItem(USER, username);
}

export function logout() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(USER);
}

function headers(extra) {
  const s = session();
  return { ...(s ? { Authorization: `Bearer ${s.token}` } : {}), ...extra };
}

export async function api(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (response.status === 401) {
    logout();
    window.dispatchEvent(new Event("logbroker:logged-out"));
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// A probe's JSON answer whatever its status (/readyz answers 503 with why), as the logged-in user:
// an operator is told more than anyone. Null when it cannot be read.
export async function probe(path) {
  try {
    const response = await fetch(path, { headers: headers({}) });
    return await response.json();
  } catch {
    return null;
  }
}

// Server-Sent Events over fetch (EventSource cannot send an Authorization header): yields
// {event, id, data} until the stream ends or `signal` aborts it.
export async function* events(path, signal) {
  const response = await fetch(path, { headers: headers({ Accept: "text/event-stream" }), signal });
  if (!response.ok) {
    const data = await response.json().catch(() => null);
    throw new ApiError(response.status, data);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message = { event: "message", id: null, data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "event") message.event = text;
        else if (name === "id") message.id = text;
        else if (name === "data") message.data += (message.data ? "\n" : "") + text;
      }
      if (message.data) yield message;
    }
  }
}
