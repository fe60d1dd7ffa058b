// The message browser: a partition from an offset or a timestamp, a page at a time, each record's
// key, value (text, pretty JSON or hex), headers and timestamp; a live tail over the push stream.
// Values are shown through textContent only: a record is whatever its producer sent.
import { api, events } from "./api.js";
import { field, fmtTime, h, mount, toast } from "./dom.js";

const PAGE = 20;

function bytesOf(b64) {
  if (b64 === null || b64 === undefined) return null;
  const raw = atob(b64);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

export function render(bytes, format) {
  if (bytes === null) return "(null)";
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  if (format === "hex") return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
  if (format === "json" || format === "auto") {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { if (format === "json") return `(not JSON) ${text}`; }
  }
  return text;
}

function recordRow(r, format) {
  const headers = (r.headers || []).map((hd) => `${hd.name}: ${render(hd.bytes, format === "hex" ? "hex" : "text")}`).join("\n");
  return h("tr", { "data-offset": String(r.offset) },
    h("td", { class: "num" }, String(r.offset)), h("td", {}, fmtTime(r.timestamp)),
    h("td", {}, h("pre", { class: "key" }, render(r.key, format === "hex" ? "hex" : "text"))),
    h("td", {}, h("pre", { class: "value" }, render(r.value, format))),
    h("td", {}, h("pre", {}, headers)));
}

function fromFetch(r) {
  return { offset: r.offset, timestamp: r.timestamp, key: bytesOf(r.key_b64), value: bytesOf(r.value_b64),
    headers: (r.headers || []).map((hd) => ({ name: hd.name, bytes: bytesOf(hd.value_b64) })) };
}

function fromStream(r) {
  const enc = new TextEncoder();
  const text = (v) => (v === null || v === undefined ? null : enc.encode(v));
  return { offset: r.offset, timestamp: r.timestamp, key: text(r.key), value: text(r.value),
    headers: (r.headers || []).map((hd) => ({ name: hd.name, bytes: text(hd.value) })) };
}

export async function browserView(main, [name, partitionText]) {
  const base = `/v1/topics/${encodeURIComponent(name)}`;
  const partition = Number(partitionText);
  const topic = await api("GET", base);
  const info = () => topic.partitions.find((p) => p.partition === partition) || { earliest_offset: 0, latest_offset: 0 };
  let offset = Math.max(info().earliest_offset, info().latest_offset - PAGE);
  let records = [];
  let nextOffset = offset;
  let tail = null;

  const partitionSelect = h("select", { name: "partition", onchange: () => { location.hash = `#/browse/${encodeURIComponent(name)}/${partitionSelect.value}`; } },
    topic.partitions.map((p) => h("option", { value: String(p.partition), selected: p.partition === partition }, `partition ${p.partition}`)));
  const offsetInput = h("input", { name: "offset", type: "number", min: 0, value: String(offset) });
  const timeInput = h("input", { name: "timestamp", type: "datetime-local" });
  const format = h("select", { name: "format", onchange: () => draw() },
    ["auto", "text", "json", "hex"].map((f) => h("option", { value: f }, f)));
  const status = h("span", { class: "muted", id: "browse-status" });
  const body = h("tbody", { id: "records" });
  const tailButton = h("button", { type: "button", class: "secondary", id: "tail", onclick: () => (tail ? stopTail() : startTail()) }, "Live tail");

  const draw = () => {
    body.replaceChildren(...records.map((r) => recordRow(r, format.value)));
    status.textContent = tail ? `live: ${records.length} records shown` :
      records.length ? `offsets ${records[0].offset}–${records[records.length - 1].offset} · high watermark ${info().latest_offset}` : "no records here";
  };
  const load = async (from) => {
    try {
      const page = await api("GET", `${base}/partitions/${partition}/records?offset=${from}&max_records=${PAGE}&encoding=base64`);
      offset = from;
      records = page.records.map(fromFetch);
      nextOffset = page.next_offset;
      offsetInput.value = String(from);
      draw();
    } catch (err) { status.textContent = err.message; records = []; body.replaceChildren(); }
  };
  const startTail = async () => {
    const abort = new AbortController();
    tail = abort;
    tailButton.textContent = "Stop tail";
    records = [];
    draw();
    try {
      for await (const message of events(`${base}/partitions/${partition}/stream?keepalive_ms=2000`, abort.signal)) {
        if (message.event === "error") { toast(JSON.parse(message.data).detail || "stream error"); break; }
        if (message.event !== "record") continue;
        records.push(fromStream(JSON.parse(message.data)));
        if (records.length > 200) records.shift();
        draw();
      }
    } catch (err) { if (err.name !== "AbortError") toast(err.message); }
    if (tail === abort) stopTail();
  };
  const stopTail = () => {
    if (tail) tail.abort();
    tail = null;
    tailButton.textContent = "Live tail";
    draw();
  };

  const go = h("form", { id: "browse", onsubmit: async (e) => {
    e.preventDefault();
    if (tail) stopTail();
    if (timeInput.value) {
      const at = new Date(timeInput.value).getTime();
      const found = await api("GET", `${base}/partitions/${partition}/offsets?at=${at}`).catch((err) => { toast(err.message); return null; });
      if (found) await load(found.offset);
    } else {
      await load(Number(offsetInput.value) || 0);
    }
  } }, field("Partition", partitionSelect), field("From offset", offsetInput), field("or from time (your time zone)", timeInput),
  field("Show values as", format), h("button", { type: "submit" }, "Go"));

  mount(main, h("h1", {}, `Messages of ${name}`),
    h("p", {}, h("a", { href: `#/topics/${encodeURIComponent(name)}` }, `← ${name}`)),
    go,
    h("div", { class: "bar" },
      h("button", { type: "button", class: "secondary", id: "older", onclick: () => load(Math.max(info().earliest_offset, offset - PAGE)) }, "← Older"),
      h("button", { type: "button", class: "secondary", id: "newer", onclick: () => load(nextOffset) }, "Newer →"),
      tailButton, status),
    h("table", {}, h("thead", {}, h("tr", {}, ["Offset", "Timestamp (UTC)", "Key", "Value", "Headers"].map((t) => h("th", {}, t)))), body));
  await load(offset);
  return () => stopTail();
}
