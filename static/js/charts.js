// @ts-check
// The one Plotly configuration and visual style of every chart in Frontier.
//
// - No data leaves the machine: no Plotly logo (a link to plotly.com) and no
//   "edit in Chart Studio" / "send to cloud" buttons, on any chart.
// - One style: white plot area, our font and colours, light grid; a layout built
//   on the server (plotly.py's default template is a grey plot area) is restyled
//   the same way.
// - Score axes are [0, 1] (markers at 0 or 1 drawn whole: cliponaxis false).
// - Keyboards: the toolbar's buttons are out of the tab order (a chart is skipped
//   with the page's skip links, not walked button by button).
// - A click on a point selects its candidate, so two clicks on two points must
//   stay two clicks: Plotly takes any two clicks within doubleClickDelay (500 ms)
//   for a double-click and resets the axes first, moving the second point away
//   from the pointer. Double-click does nothing; the toolbar's "Reset axes" resets.

export const PLOT_CONFIG = Object.freeze({
  displaylogo: false,
  showSendToCloud: false,
  showEditInChartStudio: false,
  showLink: false,
  modeBarButtonsToRemove: ["sendDataToCloud", "editInChartStudio", "lasso2d", "select2d"],
  responsive: true,
  doubleClick: false,
});

export const COLORS = Object.freeze({
  best: "#f08c00", front: "#3b5bdb", other: "#adb5bd", selected: "#e03131",
  merge: "#9c36b5", rejected: "rgba(224,49,49,0.45)", edge: "#adb5bd",
  series: ["#3b5bdb", "#f08c00", "#2f9e44", "#9c36b5", "#e03131", "#1098ad"],
});

const FONT = { family: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif', size: 12, color: "#1d2330" };
const AXIS_STYLE = { gridcolor: "#e3e6ec", zerolinecolor: "#ced4da", linecolor: "#ced4da", automargin: true };

// A score axis: fixed to [0, 1], never autoscaled to −0.5 around a single point.
/** @param {string} title @param {PlotlyObject} [extra] @returns {PlotlyObject} */
export function scoreAxis(title, extra = {}) {
  return { ...AXIS_STYLE, title: { text: title }, range: [0, 1], autorange: false, fixedrange: false, ...extra };
}

// The shared style merged under a chart's own layout (the chart's keys win;
// axes are merged key by key so a chart keeps our grid colours).
/** @param {PlotlyObject} [layout] @returns {PlotlyObject} */
export function styledLayout(layout = {}) {
  const { template, ...own } = layout; // plotly.py's default template paints the plot area grey
  /** @type {PlotlyObject} */
  const out = { font: FONT, paper_bgcolor: "#ffffff", plot_bgcolor: "#ffffff", colorway: COLORS.series, ...own };
  for (const key of Object.keys(out)) if (/^[xy]axis\d*$/.test(key)) out[key] = { ...AXIS_STYLE, ...out[key] };
  if (!out.xaxis) out.xaxis = { ...AXIS_STYLE };
  if (!out.yaxis) out.yaxis = { ...AXIS_STYLE };
  return out;
}

// Plotly redraws its toolbar on every relayout: keep its buttons out of the tab order each time.
/** @param {HTMLElement} el */
function untabToolbar(el) {
  for (const node of el.querySelectorAll(".modebar a, .modebar button")) node.setAttribute("tabindex", "-1");
}

/** @param {PlotlyHTMLElement} el */
function watchToolbar(el) {
  if (el.dataset.toolbarWatched) return;
  el.dataset.toolbarWatched = "1";
  el.on?.("plotly_afterplot", () => untabToolbar(el));
}

// newPlot / react with the shared config and style. `react` keeps listeners.
/**
 * @param {HTMLElement} el
 * @param {PlotlyObject[]} data
 * @param {PlotlyObject} [layout]
 * @param {{react?: boolean}} [options]
 * @returns {Promise<HTMLElement>}
 */
export function plot(el, data, layout, { react = false } = {}) {
  const done = (react ? window.Plotly.react : window.Plotly.newPlot)(el, data, styledLayout(layout), PLOT_CONFIG);
  // Drawn: Plotly gave the element its `on`.
  return Promise.resolve(done).then(() => { untabToolbar(el); watchToolbar(/** @type {PlotlyHTMLElement} */ (el)); return el; });
}
