// A run's event stream: /ws/runs/<id>/?after=<seq>.
//
// The server replays every event after `after` from the database and then
// streams, so reconnecting with the last seq applied loses nothing. This side
// drops anything it has already applied (seq <= last), reconnects by itself
// with exponential backoff (0.5 s doubling to 15 s, with jitter) and reports
// "live" / "reconnecting" through onState. If a seq ever arrives beyond the
// next one, it reconnects from the last applied seq instead of applying out
// of order.
//
// A handshake the server refuses (logged out, or the run is no longer shared
// with you) reaches the browser as code 1006, exactly like a network drop; when
// a socket closes without ever opening, asking for the page again tells the
// two apart, and a refusal shows "access denied" instead of retrying forever.
//
// Debug hook (browser tests, console): window.__frontierSocket.close() breaks
// the connection as a network drop would; .pause() keeps it down until
// .resume().

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 15000;
const DENIED = new Set([4401, 4403]);

/** True when the server now refuses this page to us (login redirect, 403 or 404). */
export async function accessRefused() {
  try {
    const response = await fetch(location.href, { method: "HEAD", redirect: "manual", credentials: "same-origin" });
    return response.type === "opaqueredirect" || response.status === 403 || response.status === 404;
  } catch {
    return false; // the server is unreachable: keep trying
  }
}

export class LiveSocket {
  constructor({ path, after, onEvent, onState }) {
    this.path = path;
    this.lastSeq = after;
    this.onEvent = onEvent;
    this.onState = onState;
    this.attempts = 0;
    this.paused = false;
    this.ws = null;
    this.timer = null;
    window.__frontierSocket = {
      close: () => this.ws && this.ws.close(),
      pause: () => { this.paused = true; clearTimeout(this.timer); if (this.ws) this.ws.close(); },
      resume: () => { this.paused = false; this.connect(); },
      state: () => ({ lastSeq: this.lastSeq, open: !!this.ws && this.ws.readyState === WebSocket.OPEN }),
    };
  }

  connect() {
    if (this.paused) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}${this.path}?after=${this.lastSeq}`);
    this.ws = ws;
    let opened = false;
    ws.onopen = () => { opened = true; this.attempts = 0; this.onState("live"); };
    ws.onmessage = (message) => this.receive(ws, JSON.parse(message.data));
    ws.onclose = async (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (DENIED.has(event.code) || (!opened && !this.paused && (await accessRefused()))) {
        this.onState("denied");
        return;
      }
      this.onState(this.paused ? "paused" : "reconnecting");
      this.scheduleReconnect();
    };
  }

  receive(ws, event) {
    if (event.seq <= this.lastSeq) return;
    if (event.seq !== this.lastSeq + 1) { ws.close(); return; }
    this.lastSeq = event.seq;
    try {
      this.onEvent(event);
    } catch (error) {
      console.error("could not apply event", event.seq, event.type, error);
    }
  }

  scheduleReconnect() {
    if (this.paused) return;
    const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.attempts);
    this.attempts += 1;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay * (0.75 + Math.random() * 0.25));
  }
}
