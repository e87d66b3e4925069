// @ts-check
// Copy buttons: <button class="copy" data-copy="ID"> copies the value (a
// textarea) or the text (a <pre>) of the element with that id.

/** @param {string} text */
export async function copyText(text) {
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

/** @param {ParentNode} [scope] */
export function wireCopyButtons(scope = document) {
  for (const button of /** @type {NodeListOf<HTMLButtonElement>} */ (scope.querySelectorAll("button.copy[data-copy]"))) {
    const label = button.textContent;
    button.addEventListener("click", async () => {
      // A textarea (its value) or a <pre> (no value: its text).
      const source = /** @type {HTMLElement & {value?: string}} */ (document.getElementById(/** @type {string} */ (button.dataset.copy)));
      try {
        await copyText(source.value ?? source.textContent);
        button.textContent = "Copied";
      } catch {
        button.textContent = "Copy failed";
      }
      setTimeout(() => { button.textContent = label; }, 1500);
    });
  }
}
