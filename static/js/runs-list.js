// The runs list, kept current by polling a small JSON endpoint every 2 s.
//
// Why polling here (and only here): the list spans every run a user can see,
// including runs launched from other tabs, the API or the CLI. A push channel
// would need one more group that every event publisher fans out to per viewer;
// the run page, where events arrive many times a second, uses the websocket.
// The list changes at most a few times a second and one query answers it.
const POLL_MS = 2000;
const table = document.getElementById("runs-table");
const body = table.querySelector("tbody");
const form = document.getElementById("runs-filter");

const fmt = (x) => (x === null || x === undefined ? "–" : Number(x).toFixed(3));
const when = (iso) => (iso ? iso.slice(0, 16).replace("T", " ") : "–");

function cell(...children) {
  const td = document.createElement("td");
  td.append(...children);
  return td;
}

function span(text, cls) {
  const el = document.createElement("span");
  el.textContent = text;
  if (cls) el.className = cls;
  return el;
}

function row(r) {
  const tr = document.createElement("tr");
  tr.dataset.runId = r.id;
  const link = document.createElement("a");
  link.href = `${r.id}/`;
  link.textContent = r.name;
  const best = cell(span(fmt(r.best_score)));
  best.className = "num";
  if (r.delta !== null && r.delta !== undefined) {
    best.append(" ", span(`(${r.delta >= 0 ? "+" : ""}${fmt(r.delta)})`, r.delta >= 0 ? "delta-up" : "delta-down"));
  }
  const bar = document.createElement("div");
  bar.className = "bar";
  const fill = document.createElement("span");
  fill.style.width = `${r.budget_pct}%`;
  bar.append(fill);
  const model = cell(span(r.model.label));
  if (r.model.is_simulator) model.append(" ", span("simulator", "badge-sim"));
  tr.append(
    cell(link),
    cell(span(r.status, `status status-${r.status}`), " ", span(r.phase || "", "muted")),
    best,
    cell(bar, span(`${r.budget_used} / ${r.budget_total}`, "muted")),
    model,
    cell(r.task_set || "–"),
    cell(r.owner),
    cell(when(r.started_at)),
    cell(when(r.finished_at)),
  );
  return tr;
}

async function refresh() {
  const query = new URLSearchParams(new FormData(form));
  try {
    const response = await fetch(`${table.dataset.jsonUrl}?${query}`, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const { runs } = await response.json();
    if (runs.length) body.replaceChildren(...runs.map(row));
  } finally {
    setTimeout(refresh, document.hidden ? POLL_MS * 5 : POLL_MS);
  }
}

refresh();
