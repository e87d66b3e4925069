// The run page's one state and its DOM anchors, shared by the page's modules
// (run-page.js boots them; the template is templates/runs/detail.html).
import { createState } from "./state.js";

export const S = createState();
export const root = document.getElementById("run-page");
export const $ = (field) => root.querySelector(`[data-field="${field}"]`);
export const candidateUrl = (index) => root.dataset.candidateUrl.replace(/\/0\/$/, `/${index}/`);

// An element with text set through textContent (never markup) and a class.
export function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}
