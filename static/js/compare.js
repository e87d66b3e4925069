// Compare pages: copy a prompt component, keep filter state in the URL, draw the
// runs' score curves. All text reaches the DOM through the server's autoescaped
// templates or textContent/value, never innerHTML.
import { plot } from "./charts.js";

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain-http installations have no async clipboard API.
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("copy refused");
}

for (const button of document.querySelectorAll("button.copy[data-copy]")) {
  button.addEventListener("click", async () => {
    const source = document.getElementById(button.dataset.copy);
    try {
      await copyText(source.value);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
}

// Filters are GET forms, so their state lives in the URL (shareable, survives
// reload). Submit on change and leave empty fields out of the URL.
for (const form of document.querySelectorAll("form[data-autosubmit]")) {
  form.addEventListener("change", (event) => {
    if (event.target.matches("select")) form.requestSubmit();
  });
  form.addEventListener("submit", () => {
    for (const field of form.querySelectorAll("[name]")) {
      if (field.value === "") field.disabled = true;
    }
  });
}

const chart = document.getElementById("score-curves");
if (chart && window.Plotly) {
  const figure = JSON.parse(document.getElementById(chart.dataset.figure).textContent);
  plot(chart, figure.data, figure.layout);
}
