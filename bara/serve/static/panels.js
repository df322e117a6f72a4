// The memory inspector (profile facts, notes by kind, Q&A, episodic memory, with forget) and the search playground.
import { api } from "./api.js";
import { clear, h, headingBeside, num, section } from "./dom.js";

const $ = (id) => document.getElementById(id);

// ------------------------------------------------------------------ memory
function announce(panel, text, error = false) {
  const el = panel.querySelector(".panel-status");
  if (el) {
    el.textContent = text;
    el.className = `panel-status${error ? " error" : ""}`;
  }
}

async function forget(path, what) {
  const panel = $("panel-memory");
  try {
    await api(path, { method: "DELETE" });
    await refreshMemory();
    announce(panel, `Forgot ${what}.`);
  } catch (err) {
    announce(panel, `Could not forget ${what}: ${err.message}`, true);
  }
}

function profileSection(profile) {
  const entries = Object.entries(profile || {});
  const body = entries.length
    ? h("ul", { class: "mem-list" }, entries.map(([key, value]) => h("li", { class: "mem-item", dataset: { testid: "profile-fact" } },
        h("span", { class: "mem-key" }, key.replace(/_/g, " ")),
        h("span", { class: "mem-value" }, String(value)),
        h("button", { type: "button", class: "btn btn-small btn-danger", "aria-label": `Forget ${key}`,
                      dataset: { testid: "forget-fact" },
                      onclick: () => forget(`/api/memory/profile/${encodeURIComponent(key)}`, `your ${key.replace(/_/g, " ")}`) },
          "Forget"))))
    : h("p", { class: "muted empty", dataset: { testid: "profile-empty" } }, "No profile facts.");
  return h("section", { class: "mem-section", dataset: { testid: "memory-profile" } },
    h("h3", {}, `Profile facts (${entries.length})`), body);
}

function notesSection(notes) {
  const byKind = {};
  for (const n of notes || []) (byKind[n.kind || "note"] ||= []).push(n);
  const kinds = Object.keys(byKind).sort();
  const body = kinds.length
    ? kinds.map((kind) => h("div", { class: "mem-group" }, h("h4", {}, `${kind} (${byKind[kind].length})`),
        h("ul", { class: "mem-list" }, byKind[kind].map((n) => h("li", { class: "mem-note" }, n.text || "")))))
    : h("p", { class: "muted empty" }, "No notes.");
  return h("section", { class: "mem-section", dataset: { testid: "memory-notes" } },
    h("h3", {}, `Notes (${(notes || []).length})`), body);
}

function qaSection(qa) {
  const body = (qa || []).length
    ? h("ul", { class: "mem-list" }, qa.map((item) => h("li", { class: "mem-qa" },
        h("details", {}, h("summary", {}, item.question || ""), h("p", { class: "small" }, item.answer || "")))))
    : h("p", { class: "muted empty" }, "No remembered answers.");
  return h("section", { class: "mem-section", dataset: { testid: "memory-qa" } },
    h("h3", {}, `Q&A history (${(qa || []).length})`), body);
}

const plural = (n, thing) => `${n} ${thing}${n === 1 ? "" : "s"}`;

// What the user said in earlier conversations, per conversation (latest turns; the rest counted).
function episodicSection(episodic) {
  const convs = (episodic && episodic.conversations) || [];
  const leftOut = (episodic && episodic.conversations_left_out) || 0;
  const items = convs.map((c) => {
    const dates = [...new Set([c.first_date, c.last_date].filter(Boolean))].join(" – ");
    const more = c.names_left_out ? ` (+${c.names_left_out} more)` : "";
    return h("li", { class: "mem-qa", dataset: { testid: "episodic-conversation" } }, h("details", {},
      h("summary", {}, `${plural(c.sessions, "session")}, ${plural(c.turns, "turn")}${dates ? `, ${dates}` : ""}`),
      h("p", { class: "muted small" }, `Conversation ${c.conversation_id}`),
      (c.names || []).length ? h("p", { class: "small" }, `Names: ${c.names.join(", ")}${more}`) : null,
      c.remembered_left_out ? h("p", { class: "muted small" }, `${plural(c.remembered_left_out, "earlier turn")} not shown`) : null,
      h("ul", { class: "mem-list" }, (c.remembered || []).map((t) => h("li", { class: "mem-note", dataset: { testid: "episodic-turn" } }, t.text || "")))));
  });
  const body = items.length
    ? [h("ul", { class: "mem-list" }, items),
       leftOut ? h("p", { class: "muted small" }, `${plural(leftOut, "older conversation")} not shown`) : null]
    : h("p", { class: "muted empty", dataset: { testid: "episodic-empty" } }, "Nothing remembered from earlier conversations.");
  return h("section", { class: "mem-section", dataset: { testid: "memory-episodic" } },
    h("h3", {}, `What you said (${plural((episodic && episodic.turns) || 0, "turn")})`), body);
}

export async function refreshMemory() {
  const panel = $("panel-memory");
  let memory;
  try {
    memory = await api("/api/memory");
  } catch (err) {
    clear(panel).append(h("p", { class: "error" }, `Memory unavailable: ${err.message}`));
    return;
  }
  const total = Object.keys(memory.profile || {}).length + (memory.notes || []).length + (memory.qa || []).length
    + ((memory.episodic && memory.episodic.turns) || 0);
  clear(panel).append(
    h("div", { class: "panel-head" }, h("h2", {}, "Memory"),
      h("button", { type: "button", class: "btn btn-small btn-danger", disabled: total ? null : true,
                    onclick: () => forget("/api/memory", "everything you taught bara") }, "Forget all")),
    h("p", { class: "muted small" }, `What bara remembers about ${memory.user || "you"}. Only you can see it.`),
    profileSection(memory.profile), notesSection(memory.notes), qaSection(memory.qa), episodicSection(memory.episodic),
    h("p", { class: "panel-status", role: "status", "aria-live": "polite" }));
}

// ------------------------------------------------------------------ search
function arm(rank, score) {
  if (rank === null || rank === undefined) return h("span", { class: "muted" }, "—");
  return [h("strong", {}, `#${rank}`), score === null || score === undefined ? "" : h("span", { class: "muted" }, ` ${num(score, 3)}`)];
}

// Where a hit comes from: the file, and its section when the chunker found one (no "§–" placeholder).
function where(hit) {
  const source = (hit.source || "").replace(/\.txt$/, "");
  return hit.section ? `${source} ${section(hit.section)}` : source;
}

// The passage itself, so hits with the same file and title can be told apart: its first words.
export const SNIPPET_CHARS = 220;
export function snippet(text) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  return flat.length > SNIPPET_CHARS ? `${flat.slice(0, SNIPPET_CHARS).replace(/\s+\S*$/, "")}…` : flat;
}

async function runSearch(event) {
  event.preventDefault();
  const q = $("search-input").value.trim();
  const k = Math.max(1, Math.min(50, Number($("search-k").value) || 8));
  const out = clear($("search-results"));
  if (!q) {
    out.append(h("p", { class: "error" }, "Type a query first."));
    $("search-input").focus();
    return;
  }
  out.append(h("p", { class: "muted" }, "Searching…"));
  let data;
  try {
    data = await api(`/api/search?q=${encodeURIComponent(q)}&k=${k}`);
  } catch (err) {
    clear(out).append(h("p", { class: "error" }, `Search failed: ${err.message}`));
    return;
  }
  const hits = data.hits || [];
  const rows = hits.map((hit, i) => h("tr", { dataset: { testid: "search-hit" } },
    h("td", {}, String(i + 1)),
    h("th", { scope: "row" }, h("span", { class: "hit-src" }, where(hit)),
      headingBeside(hit.section, hit.title) ? h("span", { class: "hit-title" }, headingBeside(hit.section, hit.title)) : null,
      h("span", { class: "hit-snippet", dir: "auto", dataset: { testid: "search-snippet" } }, snippet(hit.text))),
    h("td", { dataset: { label: "lexical" } }, arm(hit.lexical_rank ?? hit.lexical?.rank, hit.lexical_score ?? hit.lexical?.score)),
    h("td", { dataset: { label: "dense" } }, arm(hit.dense_rank ?? hit.dense?.rank, hit.dense_score ?? hit.dense?.score)),
    h("td", { dataset: { label: "fused" } }, num(hit.fused ?? hit.score, 4)),
    h("td", { dataset: { label: "cosine" } }, num(hit.similarity, 3))));
  clear(out).append(
    h("p", { class: "muted small" }, `${hits.length} hit${hits.length === 1 ? "" : "s"} · ${data.status || ""}`
      + ((data.reasons || []).length ? ` · ${data.reasons.join(", ")}` : "")),
    h("table", { class: "search-table" },
      h("caption", { class: "visually-hidden" }, `Hybrid search results for ${q}`),
      h("thead", {}, h("tr", {}, ["#", "Chunk", "Lexical rank", "Dense rank", "Fused (RRF)", "Cosine"].map((c) =>
        h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)));
}

// ------------------------------------------------------------------ tabs
function selectTab(tab) {
  for (const t of document.querySelectorAll('[role="tab"]')) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  tab.focus();
}

export function initPanels() {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (e) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (step) selectTab(tabs[(i + step + tabs.length) % tabs.length]);
    });
  });
  $("search-form").addEventListener("submit", runSearch);
}
