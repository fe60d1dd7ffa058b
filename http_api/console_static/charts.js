// Small live charts: a series of the last POINTS samples drawn as an SVG line, no library.
import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const POINTS = 60;
const W = 260;
const H = 60;

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

export class LiveChart {
  constructor(title, unit) {
    this.samples = [];
    this.unit = unit;
    this.value = h("span", { class: "value" }, "–");
    this.line = svg("polyline", { fill: "none", stroke: "#2458d6", "stroke-width": 2, points: "" });
    const box = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
    box.appendChild(svg("line", { x1: 0, y1: H - 1, x2: W, y2: H - 1, stroke: "#d8dde3" }));
    box.appendChild(this.line);
    this.el = h("div", { class: "chart" }, h("div", { class: "title" }, title), this.value, " ", h("span", { class: "muted" }, unit), box);
  }

  push(v) {
    this.samples.push(v);
    if (this.samples.length > POINTS) this.samples.shift();
    this.value.textContent = Number.isFinite(v) ? (Math.abs(v) >= 100 ? Math.round(v).toLocaleString() : v.toFixed(1)) : "–";
    const max = Math.max(1, ...this.samples.filter(Number.isFinite));
    const step = W / (POINTS - 1);
    const offset = POINTS - this.samples.length;
    this.line.setAttribute("points", this.samples
      .map((s, i) => `${((offset + i) * step).toFixed(1)},${(H - 2 - (Number.isFinite(s) ? s : 0) / max * (H - 6)).toFixed(1)}`)
      .join(" "));
  }
}

// Rate of a counter sampled now and then: records per second between the last two samples.
export class Rate {
  constructor() { this.last = null; }
  next(total) {
    const now = performance.now();
    const prev = this.last;
    this.last = { total, now };
    if (!prev || now <= prev.now) return NaN;
    return Math.max(0, (total - prev.total) / ((now - prev.now) / 1000));
  }
}
