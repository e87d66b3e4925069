// @ts-check
// The run page's one state and its DOM anchors, shared by the page's modules
// (run-page.js boots them; the template is templates/runs/detail.html).
import { createState } from "./state.js";

export const S = createState();
/**
 * The root's data attributes: the URLs the page asks (the candidate ones with
 * 0 where a candidate's index goes).
 * @typedef {object} RunPageData
 * @property {string} snapshotUrl
 * @property {string} scoresUrl
 * @property {string} wsPath
 * @property {string} candidateUrl
 * @property {string} candidateJsonUrl
 * @property {string} compareUrl
 * @property {string} clientUrl
 */

// The page's modules are loaded by the template that has this root.
export const root = /** @type {HTMLElement & {dataset: RunPageData}} */ (document.getElementById("run-page"));
// The element marked data-field="…": the template has every one the modules
// read, except those they check for (an external run's client).
export const $ = (/** @type {string} */ field) => /** @type {HTMLElement} */ (root.querySelector(`[data-field="${field}"]`));
export const candidateUrl = (/** @type {number} */ index) => root.dataset.candidateUrl.replace(/\/0\/$/, `/${index}/`);

// An element with text set through textContent (never markup) and a class.
/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {string} [text]
 * @param {string} [cls]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}
