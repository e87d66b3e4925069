// The top bar's menu button: on a narrow screen the navigation collapses behind it.
const toggle = document.querySelector(".nav-toggle");
if (toggle) {
  const nav = document.getElementById(toggle.getAttribute("aria-controls"));
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    nav.classList.toggle("open", open);
  });
}
