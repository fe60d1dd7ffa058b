// Building DOM without HTML strings: every text goes in through textContent (a record's value is
// attacker-controlled; nothing from the API is ever parsed as markup).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "value") el.value = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function table(headers, rows, numeric = []) {
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map((t, i) => h("th", { class: numeric.includes(i) ? "num" : null }, t)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c, i) => h("td", { class: numeric.includes(i) ? "num" : null }, c))))));
}

export function pill(text, ok) {
  return h("span", { class: ok === undefined ? "pill" : ok ? "pill ok" : "pill bad" }, text);
}

export function field(label, input) {
  return h("label", {}, label, input);
}

let toastTimer = null;
export function toast(text) {
  const el = document.getElementById("toast");
  el.textContent = text;
  el.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.classList.remove("show"), 3000);
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// A user's storage as GET /v1/users/{name} gives it: the bytes stored and the limit (0: none).
export function fmtStorage(storage) {
  if (!storage) return "–";
  return `${fmtBytes(storage.used_bytes)} of ${storage.limit_bytes ? fmtBytes(storage.limit_bytes) : "no limit"}`;
}

export function fmtTime(ms) {
  return ms === null || ms === undefined ? "–" : new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}
