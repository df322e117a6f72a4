// Renders one turn's trace (bara.trace.TurnTrace.to_json()) as a timeline.
import { h, headingBeside, ms, num, section, uid } from "./dom.js";

const STAGE_LABELS = {
  sanitize: "Sanitise", load: "Load", gate: "Gate", embed: "Embed", rewrite: "Rewrite",
  retrieve_kb: "Retrieve · knowledge", retrieve_profile: "Retrieve · profile", retrieve_notes: "Retrieve · notes",
  retrieve_qa: "Retrieve · Q&A", retrieve_history: "Retrieve · history", assemble: "Assemble",
  generate: "Generate", persist: "Persist",
};
const STAGE_ORDER = Object.keys(STAGE_LABELS);
const TIER_LABELS = { kb: "Knowledge base", profile: "Profile", notes: "Notes", qa: "Q&A memory" };
const REASON_KINDS = [
  [/failed|error|degraded|unavailable|mismatch/, "error"],
  [/^(intent|intent_source)[:]/, "intent"], [/^behavior:/, "behavior"], [/^route:/, "route"],
  [/^(kb|qa|notes|profile):/, "tier"], [/^rewrite:/, "rewrite"], [/^(persist|privacy):/, "persist"],
  [/^hook:/, "hook"], [/^(history|overlay|length|answer|gate):/, "other"],
];

export function reasonKind(code) {
  for (const [pattern, kind] of REASON_KINDS) if (pattern.test(code)) return kind;
  return "other";
}

const policyOf = (t) => t.gates?.policy_after_hooks || t.gates?.policy || null;

/** The knowledge-base floor that applied: the trace's own field, else the gate's policy (always mode: 0). */
export function kbFloor(t) {
  if (typeof t.kb_floor === "number") return t.kb_floor;
  return policyOf(t)?.kb_floor ?? 0;
}

function stageStatus(stage, t) {
  const reasons = t.reasons || [];
  const prefix = stage.replace(/^retrieve_/, "");
  if (reasons.some((r) => r.startsWith(`${stage}:failed`) || r.startsWith(`${prefix}:failed`))) return "error";
  if (stage === "retrieve_kb" && reasons.includes("kb:degraded")) return "degraded";
  if (stage === "generate" && reasons.some((r) => r.startsWith("generate:"))) return "degraded";
  if (stage === "persist" && (t.hook_errors || []).some((e) => e.point === "before_persist")) return "error";
  return (t.latency_ms?.[stage] || 0) > 0 ? "ok" : "skipped";
}

function stageBars(t) {
  const lat = t.latency_ms || {};
  const stages = [...STAGE_ORDER.filter((s) => s in lat),
                  ...Object.keys(lat).filter((s) => s !== "total" && !STAGE_ORDER.includes(s))];
  const sum = stages.reduce((a, s) => a + (lat[s] || 0), 0);
  const total = Math.max(lat.total || 0, sum, 1e-6);
  let offset = 0;
  const rows = stages.map((stage) => {
    const value = lat[stage] || 0;
    const status = stageStatus(stage, t);
    const left = (offset / total) * 100;
    const width = (value / total) * 100;
    offset += value;
    const label = STAGE_LABELS[stage] || stage.replace(/_/g, " ");
    const note = status === "skipped" ? "not run" : status === "ok" ? "" : status;
    return h("li", { class: `stage stage-${status}`, dataset: { testid: "stage", stage, status } },
      h("span", { class: "stage-name", title: label }, label),
      h("span", { class: "stage-track", "aria-hidden": "true" },
        status === "skipped" ? null
          : h("span", { class: "stage-bar", style: { left: `${left}%`, width: `max(${width}%, 3px)` } })),
      h("span", { class: "stage-ms" }, status === "skipped" ? "—" : ms(value),
        note ? h("span", { class: `stage-note note-${status}` }, ` ${note}`) : null));
  });
  return h("section", { class: "tl-block tl-stages" },
    h("h4", {}, "Stages ", h("span", { class: "muted" }, `· total ${ms(lat.total || sum)}`)),
    h("ol", { class: "stages", "aria-label": "Stage latencies" }, rows));
}

function chip(label, value, cls = "") {
  return h("span", { class: `chip ${cls}` }, h("span", { class: "chip-label" }, label), " ", h("strong", {}, value));
}

function summary(t) {
  const policy = policyOf(t);
  const retrieval = t.retrieved ? "ran" : "skipped";
  const chips = [
    chip("mode", t.mode || "–", `chip-mode-${t.mode}`),
    chip("intent", t.intent || "–"),
    chip("route", t.route || "–"),
    chip("retrieval", retrieval, t.retrieved ? "chip-ok" : "chip-skip"),
    chip("hits", String((t.hits || []).length + (t.memory_hits || []).length)),
    chip("tokens added", String(t.context_tokens ?? 0)),
    chip("total", ms(t.latency_ms?.total || 0)),
  ];
  if (policy && t.mode !== "always") chips.splice(4, 0, chip("k", String(policy.kb_k ?? "–")));
  return h("div", { class: "tl-summary" }, chips);
}

function gateBlock(t) {
  const policy = policyOf(t);
  const behavior = t.gates?.behavior;
  const rows = [
    ["Intent", `${t.intent || "–"}${t.intent_confidence ? ` (${num(t.intent_confidence, 2)})` : ""}`],
    ["Decided by", t.intent_source || "–"],
    ["Behaviour mode", t.behavior_mode || "–"],
    ["Route", t.route || "–"],
  ];
  if (policy) {
    const tiers = ["kb", "profile", "notes", "qa"].filter((k) => policy[`inject_${k}`]).map((k) => TIER_LABELS[k]);
    rows.push(["Tiers opened", tiers.length ? tiers.join(", ") : "none"]);
    rows.push(["k", `knowledge ${policy.kb_k ?? 0} · notes ${policy.notes_k ?? 0} · Q&A ${policy.qa_k ?? 0}`]);
    rows.push(["Floors", `knowledge ${num(kbFloor(t), 2)} · Q&A ${num(policy.qa_floor, 2)}`]);
    if (behavior?.floor_delta) rows.push(["Floor shift", num(behavior.floor_delta, 2)]);
  } else if (t.mode === "always") {
    rows.push(["Gates", "none (always-retrieve baseline)"]);
    rows.push(["Floors", `knowledge ${num(kbFloor(t), 2)}`]);
  }
  const after = t.gates?.policy_after_hooks;
  if (after) {
    const before = t.gates.policy || {};
    const changed = Object.keys(after).filter((k) => JSON.stringify(after[k]) !== JSON.stringify(before[k]));
    rows.push(["Hook changed", changed.map((k) => `${k}: ${JSON.stringify(before[k])} → ${JSON.stringify(after[k])}`).join("; ") || "policy"]);
  }
  const reasons = (t.reasons || []).map((code) =>
    h("li", { class: `reason reason-${reasonKind(code)}`, dataset: { testid: "reason" } }, code));
  return h("section", { class: "tl-block tl-gate" },
    h("h4", {}, "Gate decision"),
    h("dl", { class: "kv" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h5", {}, `Reason codes (${reasons.length})`),
    h("ul", { class: "reasons", "aria-label": "Reason codes" }, reasons));
}

function queryBlock(t, message) {
  if (!t.retrieved) {
    const why = (t.reasons || []).filter((r) => /^(behavior|route|intent_source):/.test(r));
    return h("div", { class: "tl-skip", role: "note" },
      h("strong", {}, "Retrieval skipped. "),
      `No tier was searched: route ${t.route || "–"}` + (why.length ? ` (${why.join(", ")})` : "") + ".");
  }
  const query = t.retrieval_query || "";
  const own = (message || "").trim();
  if (!query || (!t.rewritten && query.trim() === own)) {
    return h("div", { class: "tl-query" }, h("span", { class: "q-label" }, "Searched for"), h("q", { dir: "auto" }, query || own));
  }
  return h("div", { class: "tl-query tl-rewritten", dataset: { testid: "rewrite" } },
    h("div", {}, h("span", { class: "q-label" }, "Your words"), h("q", { dir: "auto" }, own || "–")),
    h("div", {}, h("span", { class: "q-label" }, "Searched for"), h("q", { dir: "auto", dataset: { testid: "search-query" } }, query)),
    t.rewritten ? h("span", { class: "tag" }, "rewritten") : null);
}

function hitRow(hit, n, { dropped = false, floor = 0 } = {}) {
  const score = Number(hit.score) || 0;
  const where = hit.tier === "kb" || !hit.tier
    ? [h("span", { class: "hit-src" }, (hit.source || "").replace(/\.txt$/, "")),
       hit.section ? h("span", { class: "hit-sec" }, section(hit.section)) : null]
    : [h("span", { class: "hit-src" }, hit.tier === "notes" ? `note · ${hit.section || "note"}` : "earlier answer")];
  const ranks = [];
  if (hit.lexical_rank !== undefined) ranks.push(`lexical #${hit.lexical_rank ?? "–"}`);
  if (hit.dense_rank !== undefined) ranks.push(`dense #${hit.dense_rank ?? "–"}`);
  if (hit.fused) ranks.push(`fused ${num(hit.fused, 4)}`);
  return h("li", { class: `hit${dropped ? " hit-dropped" : ""}`,
                   dataset: { testid: dropped ? "dropped-hit" : "hit", tier: hit.tier || "kb" } },
    h("span", { class: "hit-n" }, String(n)),
    h("span", { class: "hit-body" },
      h("span", { class: "hit-where" }, where, h("span", { class: "hit-title", dir: "auto" }, headingBeside(hit.section, hit.title))),
      ranks.length ? h("span", { class: "hit-ranks" }, ranks.join(" · ")) : null,
      dropped ? h("span", { class: "hit-floor" }, `dropped: cosine ${num(score, 3)} is below the floor ${num(floor, 2)}`) : null),
    h("span", { class: "hit-score", title: "cosine similarity" },
      h("span", { class: "score-track", "aria-hidden": "true" },
        h("span", { class: "score-bar", style: { width: `${Math.max(0, Math.min(1, score)) * 100}%` } })),
      h("span", { class: "score-num" }, num(score, 3))));
}

function hitsBlock(t) {
  const groups = [];
  const byTier = {};
  for (const hit of [...(t.hits || []), ...(t.memory_hits || [])]) (byTier[hit.tier || "kb"] ||= []).push(hit);
  const dropped = t.dropped_hits || t.dropped || [];
  const floor = kbFloor(t);
  for (const tier of ["kb", "profile", "notes", "qa", ...Object.keys(byTier)]) {
    if (groups.some((g) => g.tier === tier)) continue;
    const hits = byTier[tier] || [];
    const drops = tier === "kb" ? dropped : [];
    if (!hits.length && !drops.length && !(tier === "kb" && t.dropped_by_floor)) continue;
    const injected = t.tiers?.[tier];
    const head = `${TIER_LABELS[tier] || tier} · ${hits.length} hit${hits.length === 1 ? "" : "s"}`
      + (injected !== undefined && injected !== hits.length ? ` · ${injected} injected` : "")
      + (tier === "kb" && t.dropped_by_floor ? ` · ${t.dropped_by_floor} dropped by floor ${num(floor, 2)}` : "");
    groups.push({ tier, el: h("div", { class: "hit-group" }, h("h5", {}, head),
      h("ol", { class: "hits" }, hits.map((hit, i) => hitRow(hit, i + 1)),
        drops.map((hit, i) => hitRow(hit, hits.length + i + 1, { dropped: true, floor })))) });
  }
  const body = groups.length ? groups.map((g) => g.el)
    : h("p", { class: "muted" }, t.retrieved ? "The search returned nothing above the floor." : "Nothing was retrieved.");
  return h("section", { class: "tl-block tl-hits" }, h("h4", {}, "Hits"), body);
}

function effectsBlock(t) {
  const items = [];
  const tiers = Object.entries(t.tiers || {}).filter(([, n]) => n).map(([k, n]) => `${TIER_LABELS[k] || k} ${n}`);
  items.push(h("li", {}, h("strong", {}, `${t.context_tokens ?? 0} tokens added`),
    ` to a ${t.prompt_tokens ?? "–"}-token prompt`, tiers.length ? ` (${tiers.join(", ")})` : ""));
  const stored = t.stored || {};
  const facts = Object.entries(stored.profile_facts || {});
  const learned = [
    ...facts.map(([k, v]) => `profile ${k} = ${v}`),
    ...(stored.notes || []).map((n) => `note “${n}”`),
    stored.qa ? "answer remembered (Q&A)" : null,
  ].filter(Boolean);
  if (stored.turn === false) items.push(h("li", { class: "effect-warn" }, `Turn not stored${stored.veto_reason ? `: ${stored.veto_reason}` : ""}`));
  else if (learned.length) items.push(h("li", {}, "Learned: ", learned.join("; ")));
  const hookReasons = (t.reasons || []).filter((r) => r.startsWith("hook:") && !r.endsWith("_failed"));
  for (const r of hookReasons) items.push(h("li", { class: "effect-hook" }, `Hook effect: ${r.slice(5).replace(/_/g, " ")}`));
  for (const e of t.hook_errors || []) {
    items.push(h("li", { class: "effect-error" }, `Hook ${e.hook} failed at ${e.point}: ${e.error}`));
  }
  if (!hookReasons.length && !(t.hook_errors || []).length) items.push(h("li", { class: "muted" }, "No hook changed this turn."));
  if (t.generator) items.push(h("li", { class: "muted" }, `Answer by ${t.generator}`));
  return h("section", { class: "tl-block tl-effects" }, h("h4", {}, "Effects"), h("ul", { class: "effects" }, items));
}

/** The timeline element of one turn. ``message`` is the user's own words (for the query comparison). */
export function renderTimeline(trace, message, { label } = {}) {
  const t = trace || {};
  const failedHooks = (t.hook_errors || []).filter((e) => !(t.reasons || []).includes(`hook:${e.point}_failed`)).length;
  const problems = (t.reasons || []).filter((r) => reasonKind(r) === "error").length + failedHooks;
  const id = uid("tl");
  return h("section", { class: `timeline${problems ? " has-problems" : ""}`, dataset: { testid: "timeline" },
                        "aria-labelledby": id },
    h("h3", { id, class: "tl-title" }, label || `Timeline · turn ${t.turn ?? ""}`,
      problems ? h("span", { class: "tag tag-error" }, `${problems} problem${problems > 1 ? "s" : ""}`) : null),
    summary(t),
    queryBlock(t, message),
    h("div", { class: "tl-grid" }, stageBars(t), gateBlock(t)),
    hitsBlock(t),
    effectsBlock(t));
}

/** Cost figures of a trace for the side-by-side table. */
export function cost(t) {
  const lat = t.latency_ms || {};
  const searches = Object.keys(lat).filter((s) => s.startsWith("retrieve_") && lat[s] > 0).length;
  return {
    total: lat.total || 0, embed: lat.embed || 0, searches,
    hits: (t.hits || []).length + (t.memory_hits || []).length,
    context: t.context_tokens || 0, prompt: t.prompt_tokens || 0,
  };
}
