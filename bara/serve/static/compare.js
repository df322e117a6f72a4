// Side by side: one message answered by gated and by always-retrieve, each with timeline, cost and hits.
//
// The turn as it was answered keeps its own trace; the other mode answers the same message as a
// baseline turn, without the conversation's history (so it never adds turns to the user's own
// conversation). Always-retrieve searches the message itself, so its hits do not depend on history.
import { api } from "./api.js";
import { clear, h, ms, section } from "./dom.js";
import { cost, renderTimeline } from "./timeline.js";

// The other answer is a baseline turn: the server answers it in a conversation of its own and deletes
// that conversation once answered, so comparing never adds a conversation to the sidebar.
async function answerIn(mode, message) {
  const out = await api("/api/turns", { method: "POST", body: { message, mode, baseline: true } });
  return out.trace;
}

function ratio(a, b) {
  if (!b) return a ? "∞" : "–";
  return `${(a / b).toFixed(2)}×`;
}

function costTable(gated, always) {
  const g = cost(gated);
  const a = cost(always);
  const rows = [
    ["Total latency", ms(g.total), ms(a.total), ratio(g.total, a.total)],
    ["Embedding", ms(g.embed), ms(a.embed), ratio(g.embed, a.embed)],
    ["Searches run", String(g.searches), String(a.searches), ratio(g.searches, a.searches)],
    ["Hits", String(g.hits), String(a.hits), ratio(g.hits, a.hits)],
    ["Tokens added", String(g.context), String(a.context), ratio(g.context, a.context)],
    ["Prompt tokens", String(g.prompt), String(a.prompt), ratio(g.prompt, a.prompt)],
  ];
  return h("table", { class: "cost" },
    h("caption", {}, "Cost of this message"),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Measure"), h("th", { scope: "col" }, "gated"),
      h("th", { scope: "col" }, "always"), h("th", { scope: "col" }, "gated ÷ always"))),
    h("tbody", {}, rows.map(([name, ...cells]) => h("tr", {}, h("th", { scope: "row" }, name),
      cells.map((c) => h("td", {}, c))))));
}

function label(hit) {
  const source = (hit.source || "").replace(/\.txt$/, "");
  return hit.section ? `${source} ${section(hit.section)}` : source;
}

/** Which knowledge-base chunks each mode put in front of the model, and what gated decided differently. */
function differences(gated, always) {
  const g = new Map((gated.hits || []).map((x) => [x.id, x]));
  const a = new Map((always.hits || []).map((x) => [x.id, x]));
  const both = [...g.keys()].filter((id) => a.has(id));
  const onlyG = [...g.values()].filter((x) => !a.has(x.id));
  const onlyA = [...a.values()].filter((x) => !g.has(x.id));
  const items = [
    h("li", {}, h("strong", {}, `${both.length} chunk${both.length === 1 ? "" : "s"}`), " retrieved by both"),
    h("li", {}, h("strong", {}, `${onlyG.length} only by gated`), onlyG.length ? `: ${onlyG.map(label).join(", ")}` : ""),
    h("li", {}, h("strong", {}, `${onlyA.length} only by always`), onlyA.length ? `: ${onlyA.map(label).join(", ")}` : ""),
  ];
  if (!gated.retrieved) items.push(h("li", {}, "Gated skipped retrieval: ", (gated.reasons || []).filter((r) => /^(route|behavior):/.test(r)).join(", ")));
  if (gated.rewritten) items.push(h("li", {}, "Gated searched a rewritten query; always searched the message as typed."));
  if ((gated.memory_hits || []).length) items.push(h("li", {}, `Gated also used ${gated.memory_hits.length} memory item${gated.memory_hits.length === 1 ? "" : "s"} (notes, Q&A).`));
  if ((gated.dropped_hits || []).length || gated.dropped_by_floor) {
    items.push(h("li", {}, `Gated's floor (${Number(gated.kb_floor ?? 0).toFixed(2)}) dropped ${gated.dropped_by_floor || gated.dropped_hits.length}; always has no floor.`));
  }
  return h("section", { class: "differences", "aria-labelledby": "diff-title" },
    h("h3", { id: "diff-title" }, "What differs"), h("ul", {}, items));
}

function column(mode, trace, message, note) {
  return h("section", { class: `compare-col compare-${mode}`, dataset: { testid: `compare-${mode}` },
                        "aria-label": `${mode} answer` },
    h("h3", {}, mode === "gated" ? "Gated (bara)" : "Always retrieve (baseline)"),
    h("p", { class: "muted small" }, note),
    h("div", { class: "msg msg-bot" }, h("p", { class: "answer" }, trace.answer || "")),
    renderTimeline(trace, message, { label: `${mode} timeline` }));
}

export async function openCompare(message, trace) {
  const dialog = document.getElementById("compare-dialog");
  const body = clear(document.getElementById("compare-body"));
  body.append(h("p", { class: "compare-message" }, h("span", { class: "q-label" }, "Message"), h("q", {}, message)),
    h("p", { role: "status", class: "muted" }, "Answering the same message in the other mode…"));
  if (!dialog.open) dialog.showModal();
  document.getElementById("compare-close").focus();
  const own = trace.mode === "always" ? "always" : "gated";
  const other = own === "gated" ? "always" : "gated";
  let otherTrace;
  try {
    otherTrace = await answerIn(other, message);
  } catch (err) {
    clear(body).append(h("p", { class: "error", role: "alert" }, `The ${other} answer failed: ${err.message}`));
    return;
  }
  const gated = own === "gated" ? trace : otherTrace;
  const always = own === "always" ? trace : otherTrace;
  const notes = {
    [own]: "As answered in your conversation.",
    [other]: other === "always" ? "Answered now as a baseline turn (it searches the message itself; no gates)."
      : "Answered now as a baseline turn (without your conversation's history).",
  };
  clear(body).append(
    h("p", { class: "compare-message" }, h("span", { class: "q-label" }, "Message"), h("q", {}, message)),
    h("div", { class: "compare-top" }, costTable(gated, always), differences(gated, always)),
    h("div", { class: "compare-cols" },
      column("gated", gated, message, notes.gated), column("always", always, message, notes.always)));
}

export function initCompare() {
  const dialog = document.getElementById("compare-dialog");
  document.getElementById("compare-close").addEventListener("click", () => dialog.close());
}
