// @ts-check
// The candidate page's "Edit and add to run" dialog: a textarea per component,
// prefilled with the candidate's text; submitting posts the edited components to
// POST /api/runs/{id}/candidates (session + CSRF). Accepted (202): the run takes it
// at its next iteration boundary, and the run page shows it arrive. Refused (409):
// the reason, and a Fork button that opens the launch form with this text.
// Every server text reaches the page through textContent.

const section = /** @type {HTMLElement} */ (document.getElementById("inject"));
const dialog = /** @type {HTMLDialogElement} */ (document.getElementById("inject-dialog"));
const form = /** @type {HTMLFormElement} */ (document.getElementById("inject-form"));
const result = /** @type {HTMLElement} */ (form.querySelector('[data-field="inject-result"]'));
const fork = /** @type {HTMLAnchorElement} */ (form.querySelector('[data-action="inject-fork"]'));
const submit = /** @type {HTMLButtonElement} */ (form.querySelector('[data-action="inject"]'));
const csrf = /** @type {HTMLInputElement} */ (form.querySelector("[name=csrfmiddlewaretoken]")).value;

/** @param {string} text @param {boolean} problem */
function say(text, problem) {
  result.textContent = text;
  result.hidden = false;
  result.classList.toggle("error", problem);
}

/** @returns {Record<string, string>} */
function components() {
  /** @type {Record<string, string>} */
  const texts = {};
  for (const area of /** @type {NodeListOf<HTMLTextAreaElement>} */ (form.querySelectorAll("textarea[data-component]"))) {
    texts[/** @type {string} */ (area.dataset.component)] = area.value;
  }
  return texts;
}

async function inject() {
  submit.disabled = true;
  fork.hidden = true;
  try {
    const response = await fetch(/** @type {string} */ (section.dataset.apiUrl), {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
      body: JSON.stringify({ components: components(), edited_from: Number(section.dataset.editedFrom) }),
    });
    const body = await response.json().catch(() => ({}));
    if (response.status === 202) {
      say(`Added: it waits for the run's next iteration boundary (${body.metric_calls} metric calls). The run page shows it arrive.`, false);
      const link = document.createElement("a");
      link.href = /** @type {string} */ (section.dataset.runUrl);
      link.textContent = " Go to the run.";
      result.append(link);
      return;
    }
    const problems = (body.problems || []).map((/** @type {{field: string, message: string}} */ p) => `${p.field}: ${p.message}`);
    say(problems.length ? problems.join("; ") : `Refused: ${body.detail || response.statusText}`, true);
    if (body.injection?.fork_url) {
      fork.href = body.injection.fork_url;
      fork.hidden = false;
    }
  } catch (error) {
    say(`Could not reach the server: ${error}`, true);
  } finally {
    submit.disabled = false;
  }
}

/** @type {HTMLElement} */ (section.querySelector('[data-action="open-inject"]')).addEventListener("click", () => dialog.showModal());
/** @type {HTMLElement} */ (form.querySelector('[data-action="close-inject"]')).addEventListener("click", () => dialog.close());
form.addEventListener("submit", (event) => { event.preventDefault(); inject(); });
