// @ts-check
// A re-scoring's page while a worker scores it: poll its status once a second,
// move the progress bar, and reload the page (which shows the results) once done.
const section = /** @type {HTMLElement | null} */ (document.getElementById("scoring"));
const url = section?.dataset.statusUrl;

async function poll() {
  if (!section || !url) return;
  try {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (response.ok) {
      /** @type {{status: string, done: number, total: number}} */
      const state = await response.json();
      const bar = section.querySelector("progress");
      if (bar) {
        bar.max = Math.max(1, state.total);
        bar.value = state.done;
      }
      const text = section.querySelector('[data-field="progress-text"]');
      if (text) text.textContent = `${state.done} / ${state.total} outputs scored · ${state.status}`;
      if (state.status === "done" || state.status === "failed") {
        window.location.reload();
        return;
      }
    }
  } catch {
    // A dropped connection: try again on the next tick.
  }
  window.setTimeout(poll, 1000);
}

if (section && (section.dataset.status === "queued" || section.dataset.status === "running")) {
  window.setTimeout(poll, 500);
}
