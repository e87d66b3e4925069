// @ts-check
// How pages write numbers and untrusted text (pure: no DOM, imported by Node's
// tests too). money.js writes money and token counts.

// Plotly renders hover text, tick labels and titles as HTML-ish markup (<b>,
// <a href>, <br> …): escape every untrusted string before it goes there. With
// no "<" left there is no tag, so quotes need no escaping (and Plotly would
// show "&quot;" literally: it decodes only a few named entities).
/** @param {unknown} value */
export function esc(value) {
  return String(value ?? "").replace(/[&<>]/g, (c) => /** @type {Record<string, string>} */ ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
}

/** @param {unknown} value */
export const escLines = (value) => esc(value).replace(/\n/g, "<br>");

// A score (or any number) with `digits` decimals; "–" when there is none.
/** @param {number | null | undefined} x */
export const fmt = (x, digits = 3) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(digits));

// At most n characters, an ellipsis marking the cut.
/** @param {string} text @param {number} n */
export const clip = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

// "1h 2m", "3m 4s", "5s".
/** @param {number} seconds */
export function duration(seconds) {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s % 60}s`;
}
