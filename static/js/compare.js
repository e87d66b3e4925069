// @ts-check
// Compare pages: copy a prompt component, keep filter state in the URL, draw the
// runs' score curves. All text reaches the DOM through the server's autoescaped
// templates or textContent/value, never innerHTML.
import { plot } from "./charts.js";
import { wireCopyButtons } from "./clipboard.js";

wireCopyButtons();

// Filters are GET forms, so their state lives in the URL (shareable, survives
// reload). Submit on change and leave empty fields out of the URL.
for (const form of /** @type {NodeListOf<HTMLFormElement>} */ (document.querySelectorAll("form[data-autosubmit]"))) {
  form.addEventListener("change", (event) => {
    if (/** @type {Element} */ (event.target).matches("select")) form.requestSubmit();
  });
  form.addEventListener("submit", () => {
    for (const field of /** @type {NodeListOf<HTMLInputElement | HTMLSelectElement>} */ (form.querySelectorAll("[name]"))) {
      if (field.value === "") field.disabled = true;
    }
  });
}

const chart = document.getElementById("score-curves");
if (chart && window.Plotly) {
  const figure = JSON.parse(/** @type {HTMLElement} */ (document.getElementById(/** @type {string} */ (chart.dataset.figure))).textContent);
  plot(chart, figure.data, figure.layout);
}
