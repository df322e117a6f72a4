// The offline API reference at /docs: renders /openapi.json as text (never as HTML).
import { h, append } from "./dom.js";

const schemaName = (s) => (s && s.$ref ? s.$ref.split("/").pop() : s && s.type ? s.type : "");

function operation(path, method, op) {
  const params = (op.parameters || []).map((p) =>
    h("li", {}, h("code", {}, p.name), ` (${p.in}${p.required ? ", required" : ""}) `,
      schemaName(p.schema), p.description ? ` — ${p.description}` : ""));
  const body = op.requestBody && Object.entries(op.requestBody.content || {}).map(([type, c]) =>
    h("li", {}, h("code", {}, type), " ", schemaName(c.schema)));
  const codes = Object.entries(op.responses || {}).map(([code, r]) => `${code} ${r.description || ""}`.trim());
  return h("section", { class: "op", dataset: { testid: "api-operation" } },
    h("h3", {}, h("span", { class: "method" }, method.toUpperCase()), path),
    op.summary ? h("p", {}, op.summary) : null,
    op.description ? h("p", { class: "muted" }, op.description) : null,
    params.length ? [h("strong", {}, "Parameters"), h("ul", {}, params)] : null,
    body && body.length ? [h("strong", {}, "Body"), h("ul", {}, body)] : null,
    h("p", { class: "muted" }, "Responses: ", codes.join(" · ")));
}

async function main() {
  const ops = document.getElementById("ops");
  const status = document.getElementById("status");
  try {
    const res = await fetch("/openapi.json");
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const spec = await res.json();
    for (const [path, methods] of Object.entries(spec.paths || {})) {
      for (const [method, op] of Object.entries(methods)) append(ops, [operation(path, method, op)]);
    }
    const schemas = spec.components && spec.components.schemas ? spec.components.schemas : {};
    append(ops, [h("h2", {}, "Schemas"), Object.entries(schemas).map(([name, s]) =>
      h("details", {}, h("summary", {}, name), h("pre", {}, JSON.stringify(s, null, 2))))]);
    status.textContent = `${spec.info.title} ${spec.info.version}: ${Object.keys(spec.paths || {}).length} paths.`;
  } catch (err) {
    status.textContent = `Could not load /openapi.json (${err.message}): is bara serve running?`;
  }
}

main();
