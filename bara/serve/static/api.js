// The page talks only to bara serve's own API; the key lives in this tab's session storage.

const KEY = "bara.apiKey";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const auth = {
  get key() { return sessionStorage.getItem(KEY) || ""; },
  set key(value) {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
  },
};

function headers(extra = {}) {
  return { Authorization: `Bearer ${auth.key}`, Accept: "application/json", ...extra };
}

async function failure(res) {
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    const detail = body?.error?.message ?? body?.error ?? body?.detail ?? body?.message;
    if (detail) message = typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch { /* not JSON */ }
  return new ApiError(res.status, message);
}

export async function api(path, { method = "GET", body, headers: extra } = {}) {
  const init = { method, headers: headers(extra) };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const res = await fetch(path, init);
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

/** A list out of whatever envelope an endpoint uses ({conversations: [...]}, {items: [...]}, [...]). */
export function listOf(payload, ...names) {
  if (Array.isArray(payload)) return payload;
  for (const name of [...names, "items", "data", "results"]) {
    if (Array.isArray(payload?.[name])) return payload[name];
  }
  return [];
}

/**
 * One turn through the OpenAI-compatible streaming endpoint.
 * onDelta(text) is called for every content chunk; resolves to {answer, conversationId, trace}
 * (trace and conversationId may be null when the stream does not carry them).
 */
export async function streamTurn({ message, mode, conversationId, onDelta, signal }) {
  const extra = { "Content-Type": "application/json", Accept: "text/event-stream" };
  if (conversationId) extra["X-Bara-Conversation"] = conversationId;
  const res = await fetch("/v1/chat/completions", {
    method: "POST",
    headers: headers(extra),
    signal,
    body: JSON.stringify({ model: `bara-${mode}`, stream: true, messages: [{ role: "user", content: message }] }),
  });
  if (!res.ok) throw await failure(res);
  const out = { answer: "", conversationId: res.headers.get("X-Bara-Conversation") || conversationId || null,
                trace: null, traceId: res.headers.get("X-Bara-Trace-Id") || null };
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const handle = (line) => {
    if (!line.startsWith("data:")) return false;
    const data = line.slice(5).trim();
    if (data === "[DONE]") return true;
    let chunk;
    try { chunk = JSON.parse(data); } catch { return false; }
    if (chunk.error) throw new ApiError(502, chunk.error.message || String(chunk.error));
    const delta = chunk.choices?.[0]?.delta?.content;
    if (delta) {
      out.answer += delta;
      onDelta?.(delta, out.answer);
    }
    if (chunk.bara) {
      out.conversationId = chunk.bara.conversation_id || out.conversationId;
      out.trace = chunk.bara.trace || out.trace;
    }
    return false;
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop();
    for (const line of lines) if (handle(line)) return out;
  }
  if (buffer) handle(buffer);
  return out;
}
