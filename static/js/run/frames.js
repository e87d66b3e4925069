// @ts-check
// Redraws that depend on the whole pool (restyles, the scatter's front, the
// verdict bars) run at most once per animation frame, however many events
// arrive in it (a reconnect replays hundreds at once). Pure: the page passes
// requestAnimationFrame, Node's tests a frame queue of their own.
/**
 * @param {(callback: () => void) => unknown} requestFrame
 * @returns {(draw: () => void) => void}
 */
export function frameBatcher(requestFrame) {
  /** @type {Set<() => void>} */
  const pending = new Set();
  // Ask for `draw` at the next frame; asked again before then, it still runs once,
  // in the order first asked.
  return function later(draw) {
    if (!pending.size) requestFrame(() => { const draws = [...pending]; pending.clear(); draws.forEach((d) => d()); });
    pending.add(draw);
  };
}
