// @ts-check
// Forms with data-confirm="question" ask before they submit (instead of an inline
// onsubmit handler, which the Content Security Policy forbids).
document.addEventListener("submit", (event) => {
  const question = /** @type {HTMLFormElement} */ (event.target).dataset?.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
