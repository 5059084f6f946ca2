// Charts drawn as SVG, by hand: no library, nothing from another origin, no inline style
// (colours come from console.css classes, so the strict CSP holds). Each chart is an image
// with a title and a description a screen reader says, and the same numbers as a table
// under "Show as table".

import { h, table } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
let lastId = 0;

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** A round top for an axis: 1, 2 or 5 times a power of ten. */
function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= value);
}

/**
 * Stacked bars over time.
 * `points`: [{label, values: [n per series]}]; `series`: [{name}]; `format`: n => text;
 * `whole`: the values are counts (the axis names no fractions).
 * Series i is drawn with the class `series-i`.
 */
export function barChart({ title, points, series, format = String, summary, whole = false }) {
  const id = `chart-${++lastId}`;
  const width = 720, height = 220, left = 92, bottom = 28, top = 12;
  const plotW = width - left - 8, plotH = height - top - bottom;
  const totals = points.map((p) => p.values.reduce((a, b) => a + b, 0));
  const max = niceMax(Math.max(0, ...totals));
  const slot = plotW / Math.max(1, points.length);
  const barW = Math.max(2, Math.min(40, slot * 0.7));
  const y = (v) => top + plotH - (v / max) * plotH;
  const every = Math.ceil(points.length / 8);
  const svg = s(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${id}-t ${id}-d`, class: "chart" },
    s("title", { id: `${id}-t` }, title),
    s("desc", { id: `${id}-d` }, summary),
    [0, 0.5, 1].map((f) =>
      s("g", { class: "grid" },
        s("line", { x1: left, x2: width - 8, y1: y(max * f), y2: y(max * f) }),
        // A count's axis names whole numbers only.
        whole && !Number.isInteger(max * f) ? null : s("text", { x: left - 6, y: y(max * f) + 4, "text-anchor": "end" }, format(max * f))),
    ),
    points.map((p, i) => {
      let base = 0;
      const x = left + i * slot + (slot - barW) / 2;
      return s("g", {},
        p.values.map((v, k) => {
          if (!v) return null;
          const bar = s("rect", { x, y: y(base + v), width: barW, height: Math.max(1, y(base) - y(base + v)), class: `series-${k}` },
            s("title", {}, `${p.label}: ${series[k].name} ${format(v)}`));
          base += v;
          return bar;
        }),
        i % every === 0 ? s("text", { x: x + barW / 2, y: height - 8, "text-anchor": "middle", class: "axis" }, p.label) : null);
    }),
  );
  return figure(id, title, svg, series, table(title, [
    ["When", (p) => p.label],
    ...series.map((serie, k) => [serie.name, (p) => format(p.values[k])]),
  ], points));
}

/**
 * One horizontal bar per row, stacked: `rows`: [{label, values}], same `series` as above.
 * `cumulative`: each series is read up to its segment's end (percentiles: p50, then p95
 * beyond it, then p99), so tooltips and the table say that sum.
 */
export function rowChart({ title, rows, series, format = String, summary, cumulative = false }) {
  const id = `chart-${++lastId}`;
  const width = 720, rowH = 26, left = 180, top = 6;
  const height = top + rows.length * rowH + 6;
  const max = niceMax(Math.max(0, ...rows.map((r) => r.values.reduce((a, b) => a + b, 0))));
  const x = (v) => (v / max) * (width - left - 80);
  const svg = s(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${id}-t ${id}-d`, class: "chart" },
    s("title", { id: `${id}-t` }, title),
    s("desc", { id: `${id}-d` }, summary),
    rows.map((r, i) => {
      let base = 0;
      const yy = top + i * rowH;
      const total = r.values.reduce((a, b) => a + b, 0);
      return s("g", {},
        s("text", { x: left - 8, y: yy + 17, "text-anchor": "end", class: "axis" }, r.label),
        r.values.map((v, k) => {
          if (!v) return null;
          const shown = cumulative ? base + v : v;
          const bar = s("rect", { x: left + x(base), y: yy + 4, width: Math.max(1, x(v)), height: rowH - 8, class: `series-${k}` },
            s("title", {}, `${r.label}: ${series[k].name} ${format(shown)}`));
          base += v;
          return bar;
        }),
        s("text", { x: left + x(total) + 6, y: yy + 17, class: "axis" }, format(total)));
    }),
  );
  const upTo = (r, k) => r.values.slice(0, k + 1).reduce((a, b) => a + b, 0);
  return figure(id, title, svg, series, table(title, [
    ["", (r) => r.label],
    ...series.map((serie, k) => [serie.name, (r) => format(cumulative ? upTo(r, k) : r.values[k])]),
  ], rows));
}

function figure(id, title, svg, series, asTable) {
  return h(
    "figure",
    { class: "figure", id },
    h("figcaption", {}, title),
    svg,
    series.length > 1
      ? h("ul", { class: "legend", "aria-hidden": "true" },
        series.map((serie, k) => h("li", {}, h("span", { class: `swatch series-${k}` }), serie.name)))
      : null,
    h("details", {}, h("summary", {}, "Show as table"), asTable),
  );
}
