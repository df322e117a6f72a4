// Tiny DOM helpers: every server string goes in as text (never as HTML).

/** h("div", {class: "x", dataset: {testid: "turn"}, onclick}, child, "text", [more]) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "style" && typeof value === "object") Object.assign(el.style, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function ms(value) {
  const v = Number(value) || 0;
  if (v >= 1000) return `${(v / 1000).toFixed(2)} s`;
  if (v >= 100) return `${v.toFixed(0)} ms`;
  if (v >= 10) return `${v.toFixed(1)} ms`;
  return `${v.toFixed(2)} ms`;
}

export function num(value, digits = 3) {
  return value === null || value === undefined || Number.isNaN(Number(value)) ? "–" : Number(value).toFixed(digits);
}

let counter = 0;
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

// A passage's section as a source line shows it (bara/text/locator.py): "§7.4.1" for a numbered section,
// "p. 4 §2.1 Title" as it is for a PDF page (the reader puts the page first), "" when there is none.
export function section(value) {
  const text = (value || "").trim();
  if (!text) return "";
  return text.startsWith("p. ") ? text : `\u00a7${text}`;
}

// The heading beside a section, or "" when the section already ends with it (bara/text/locator.py): a PDF
// hit reads "p. 4 §2.1 Title", not "p. 4 §2.1 Title Title".
export function headingBeside(sectionValue, title) {
  const where = section(sectionValue);
  const heading = (title || "").trim();
  if (!heading || !where.endsWith(heading)) return heading;
  const before = where.slice(0, where.length - heading.length);
  return before === "" || [" ", "\u00a7", ">"].includes(before.slice(-1)) ? "" : heading;
}
