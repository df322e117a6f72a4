// bara web timeline: sign-in, conversations, streamed chat with a timeline under every turn.
import { api, ApiError, auth, listOf, streamTurn } from "./api.js";
import { clear, h, ms } from "./dom.js";
import { initCompare, openCompare } from "./compare.js";
import { initPanels, refreshMemory } from "./panels.js";
import { renderTimeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const state = { conversationId: null, busy: false, user: "" };

// ------------------------------------------------------------------ sign-in
async function signIn(key) {
  auth.key = key;
  const status = $("signin-status");
  status.textContent = "Signing in…";
  try {
    const memory = await api("/api/memory");
    state.user = memory?.user || "";
  } catch (err) {
    auth.key = "";
    status.textContent = err.status === 401 ? "That key was not accepted: check it or create a new one with `bara keys create`."
      : `Sign-in failed: ${err.message}`;
    status.className = "signin-status error";
    $("api-key").focus();
    return;
  }
  status.textContent = "";
  status.className = "signin-status";
  $("api-key").value = "";
  $("signin").hidden = true;
  $("signed-in").hidden = false;
  $("user-name").textContent = state.user || "you";
  $("welcome").hidden = true;
  $("app").hidden = false;
  await loadConversations();
  refreshMemory();
  $("message-input").focus();
}

function signOut() {
  auth.key = "";
  state.conversationId = null;
  clear($("turns"));
  clear($("conversations"));
  $("app").hidden = true;
  $("welcome").hidden = false;
  $("signed-in").hidden = true;
  $("signin").hidden = false;
  $("api-key").focus();
}

// ------------------------------------------------------------ conversations
function when(seconds) {
  const d = new Date(seconds * 1000);
  return d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

async function loadConversations() {
  let conversations = [];
  try {
    conversations = listOf(await api("/api/conversations"), "conversations");
  } catch (err) {
    setStatus(`Could not list conversations: ${err.message}`, true);
  }
  const list = clear($("conversations"));
  if (!conversations.length) list.append(h("li", { class: "muted empty" }, "No conversations yet."));
  for (const c of conversations) {
    const current = c.id === state.conversationId;
    const turns = c.turn_count ?? c.turns ?? 0;
    const title = h("span", { class: "conv-title", dir: "auto" }, titles.get(c.id) || c.title || `Conversation ${c.id.slice(0, 6)}`);
    list.append(h("li", {},
      h("button", { type: "button", class: `conv${current ? " current" : ""}`, "aria-current": current ? "true" : null,
                    onclick: () => openConversation(c.id) },
        title,
        h("span", { class: "conv-meta" }, `${turns} turn${turns === 1 ? "" : "s"}${c.updated_at ? ` · ${when(c.updated_at)}` : ""}`))));
    if (!titles.has(c.id) && turns) nameConversation(c.id, title);
  }
}

/** A conversation's title is its first message (fetched once per conversation and kept). */
const titles = new Map();
async function nameConversation(id, el) {
  titles.set(id, "");
  try {
    const first = listOf(await api(`/api/conversations/${encodeURIComponent(id)}/turns`), "turns")[0];
    const text = (first?.user || first?.message || "").trim();
    if (!text) return;
    const short = text.length > 42 ? `${text.slice(0, 40)}…` : text;
    titles.set(id, short);
    el.textContent = short;
  } catch { titles.delete(id); }
}

async function openConversation(id) {
  state.conversationId = id;
  const turnsEl = clear($("turns"));
  $("chat-heading").textContent = titles.get(id) || `Conversation ${id.slice(0, 6)}`;
  try {
    const data = await api(`/api/conversations/${encodeURIComponent(id)}/turns`);
    const turns = listOf(data, "turns");
    turns.forEach((t, i) => {
      const el = turnElement(t.user ?? t.message ?? "", t.mode || t.trace?.mode);
      turnsEl.append(el);
      fillTurn(el, t.assistant ?? t.answer ?? "", t.trace, { open: i === turns.length - 1 });
    });
    $("chat-meta").textContent = `${turns.length} turn${turns.length === 1 ? "" : "s"}`;
    const first = (turns[0]?.user || "").trim();
    if (first) $("chat-heading").textContent = first.length > 60 ? `${first.slice(0, 58)}…` : first;
  } catch (err) {
    setStatus(`Could not open the conversation: ${err.message}`, true);
  }
  await loadConversations();
  turnsEl.lastElementChild?.scrollIntoView({ block: "end" });
}

function newConversation() {
  state.conversationId = null;
  clear($("turns"));
  $("chat-heading").textContent = "New conversation";
  $("chat-meta").textContent = "";
  loadConversations();
  $("message-input").focus();
}

// -------------------------------------------------------------------- turns
function turnElement(message, mode) {
  return h("li", { class: "turn", dataset: { testid: "turn" } },
    h("div", { class: "msg msg-user" }, h("span", { class: "who" }, "You"), h("p", { dir: "auto" }, message)),
    h("div", { class: "msg msg-bot", "aria-busy": "true" },
      h("span", { class: "who" }, "bara", mode ? h("span", { class: `tag tag-${mode}` }, mode) : null),
      h("p", { class: "answer", dir: "auto" }, h("span", { class: "typing" }, "thinking…"))));
}

function summaryText(t) {
  const hits = (t.hits || []).length + (t.memory_hits || []).length;
  const what = t.retrieved ? `${hits} hit${hits === 1 ? "" : "s"}` : "retrieval skipped";
  return `Timeline · ${t.route || t.mode || ""} · ${what} · ${ms(t.latency_ms?.total || 0)}`;
}

function fillTurn(el, answer, trace, { open = true } = {}) {
  const bot = el.querySelector(".msg-bot");
  bot.removeAttribute("aria-busy");
  const answerEl = bot.querySelector(".answer");
  clear(answerEl).append(answer || trace?.answer || "");
  const message = el.querySelector(".msg-user p").textContent;
  if (!trace) {
    el.append(h("p", { class: "muted small" }, "No trace stored for this turn."));
    return;
  }
  const mode = trace.mode || "gated";
  const tag = bot.querySelector(".tag");
  if (!tag) bot.querySelector(".who").append(h("span", { class: `tag tag-${mode}` }, mode));
  if (trace.degraded || (trace.errors || []).length) bot.classList.add("msg-degraded");
  const details = h("details", { class: "tl-details", open: open || null },
    h("summary", {}, summaryText(trace)), renderTimeline(trace, trace.message || message));
  const actions = h("div", { class: "turn-actions" },
    h("button", { type: "button", class: "btn btn-small", dataset: { testid: "open-compare" },
                  onclick: () => openCompare(message, trace) },
      "Compare gated vs always"));
  el.append(actions, details);
}

function setStatus(text, error = false) {
  const el = $("chat-status");
  el.textContent = text;
  el.className = `chat-status${error ? " error" : ""}`;
}

async function traceFor(result) {
  if (result.trace) return result.trace;
  if (result.traceId) {
    try { return await api(`/api/traces/${encodeURIComponent(result.traceId)}`); } catch { /* fall through */ }
  }
  if (!result.conversationId) return null;
  const data = await api(`/api/conversations/${encodeURIComponent(result.conversationId)}/turns`);
  const turns = listOf(data, "turns");
  return turns.length ? turns[turns.length - 1].trace : null;
}

async function send(message, mode) {
  const turnsEl = $("turns");
  const el = turnElement(message, mode);
  turnsEl.querySelectorAll("details.tl-details[open]").forEach((d) => { d.open = false; });
  turnsEl.append(el);
  el.scrollIntoView({ block: "end" });
  const answerEl = el.querySelector(".answer");
  let result;
  try {
    result = await streamTurn({
      message, mode, conversationId: state.conversationId,
      onDelta: (_, full) => { clear(answerEl).append(full); },
    });
  } catch (err) {
    if (!(err instanceof ApiError) || ![404, 405, 501].includes(err.status)) throw err;
    // No streaming endpoint on this server: the native API answers in one piece.
    const body = { message, mode };
    if (state.conversationId) body.conversation_id = state.conversationId;
    const out = await api("/api/turns", { method: "POST", body });
    result = { answer: out.answer, conversationId: out.conversation_id, trace: out.trace };
  }
  const trace = await traceFor(result);
  state.conversationId = result.conversationId || trace?.conversation_id || state.conversationId;
  fillTurn(el, result.answer, trace);
  if ($("turns").children.length === 1) $("chat-heading").textContent = message.length > 60 ? `${message.slice(0, 58)}…` : message;
  $("chat-meta").textContent = `${turnsEl.children.length} turn${turnsEl.children.length === 1 ? "" : "s"}`;
  el.scrollIntoView({ block: "start" });
}

async function onSubmit(event) {
  event.preventDefault();
  const input = $("message-input");
  const message = input.value.trim();
  if (!message || state.busy) return;
  state.busy = true;
  $("send").disabled = true;
  setStatus("Answering…");
  input.value = "";
  try {
    await send(message, $("mode").value);
    setStatus("");
  } catch (err) {
    const last = $("turns").lastElementChild;
    if (last) {
      const bot = last.querySelector(".msg-bot");
      bot.removeAttribute("aria-busy");
      bot.classList.add("msg-error");
      clear(bot.querySelector(".answer")).append(`Not answered: ${err.message}`);
    }
    if (err.status === 401) setStatus("Your key is no longer accepted: sign in again.", true);
    else setStatus(`The turn failed: ${err.message}. Your message is back in the box: “${excerpt(message)}”.`, true);
    input.value = message;
  } finally {
    state.busy = false;
    $("send").disabled = false;
    input.focus();
    loadConversations();
    refreshMemory();
  }
}

// -------------------------------------------------------------------- wiring
function init() {
  $("signin").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("api-key").value.trim();
    if (!key) {
      $("signin-status").textContent = "Type your API key first.";
      $("signin-status").className = "signin-status error";
      $("api-key").focus();
      return;
    }
    signIn(key);
  });
  $("signout").addEventListener("click", signOut);
  $("new-conversation").addEventListener("click", newConversation);
  $("composer").addEventListener("submit", onSubmit);
  $("message-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  initPanels();
  initCompare();
  if (auth.key) signIn(auth.key);
  else $("api-key").focus();
}

init();

/** The start of a long text, so an error line never carries a whole message (it stays in the box). */
function excerpt(text, max = 80) {
  return text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text;
}
