// The globals static/js's modules use that no module declares, for the type
// check only (tsconfig.json; never served). Plotly is the classic script
// static/vendor/plotly-frontier.min.js (the partial bundle static/vendor/plotly-build
// makes), loaded before the page's modules: only the calls static/js makes are
// typed, traces and layouts are the plain objects the charts build.

export {};

declare global {
  /** A trace, a layout, a config or an update: plain objects whose keys Plotly defines. */
  type PlotlyObject = Record<string, any>;

  /** A point of a `plotly_click` event. */
  interface PlotlyClickPoint {
    curveNumber: number;
    /** A scatter point's index in its trace; a heatmap cell's [row, column]. */
    pointNumber: number | number[];
    /** What the trace's `customdata` holds for the point: the run page's charts put candidate indices there. */
    customdata: number;
  }

  interface PlotlyClickEvent {
    points: PlotlyClickPoint[];
    /** The DOM event of the click (its modifier keys). */
    event?: MouseEvent;
  }

  /** A chart's element: Plotly gives it `on` (its event emitter) when it first draws there. */
  interface PlotlyHTMLElement extends HTMLElement {
    on(event: "plotly_click", handler: (event: PlotlyClickEvent) => void): void;
    on(event: "plotly_afterplot", handler: () => void): void;
  }

  interface PlotlyStatic {
    newPlot(el: HTMLElement, data: PlotlyObject[], layout?: PlotlyObject, config?: PlotlyObject): Promise<PlotlyHTMLElement>;
    react(el: HTMLElement, data: PlotlyObject[], layout?: PlotlyObject, config?: PlotlyObject): Promise<PlotlyHTMLElement>;
    /** `update`: attribute → one value per trace of `traces`. */
    restyle(el: HTMLElement, update: Record<string, unknown[]>, traces?: number[]): Promise<PlotlyHTMLElement>;
    relayout(el: HTMLElement, update: PlotlyObject): Promise<PlotlyHTMLElement>;
    /** `update`: attribute → the points to append, one array per trace of `traces`. */
    extendTraces(el: HTMLElement, update: Record<string, unknown[][]>, traces: number[]): Promise<PlotlyHTMLElement>;
  }

  /** Only on the pages that load static/vendor/plotly-frontier.min.js. */
  var Plotly: PlotlyStatic;

  // Debug hooks the pages set, for the browser tests and the console.
  /** The run page's socket (live-socket.js LiveSocket). */
  var __frontierSocket: { close(): void; pause(): void; resume(): void; state(): { lastSeq: number; open: boolean } };
  /** The runs list's socket (runs-list.js). */
  var __frontierRunsSocket: { close(): void };
  /** What the run page applied, and how fast (run-page.js). */
  var __frontierRun: {
    lastSeq: number;
    applied: number;
    slowestApplyMs: Record<string, number>;
    candidates(): number;
    bootMs: Record<string, number>;
  };
}
