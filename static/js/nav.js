// @ts-check
// The top bar's menu button: on a narrow screen the navigation collapses behind it.
// A <button>, so Enter and Space work; Escape closes the open menu and gives the
// focus back to the button (WAI-ARIA disclosure pattern).
const toggle = /** @type {HTMLButtonElement | null} */ (document.querySelector(".nav-toggle"));
if (toggle) {
  const nav = /** @type {HTMLElement} */ (document.getElementById(/** @type {string} */ (toggle.getAttribute("aria-controls"))));
  const setOpen = (/** @type {boolean} */ open) => {
    toggle.setAttribute("aria-expanded", String(open));
    nav.classList.toggle("open", open);
  };
  toggle.addEventListener("click", () => setOpen(toggle.getAttribute("aria-expanded") !== "true"));
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || toggle.getAttribute("aria-expanded") !== "true") return;
    const inMenu = nav.contains(document.activeElement);
    setOpen(false);
    if (inMenu) toggle.focus(); // the focused link is hidden now
  });
}
