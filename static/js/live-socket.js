// @ts-check
// Websockets that stay up by themselves.
//
// ReconnectingSocket: reconnects with exponential backoff (0.5 s doubling to
// 15 s, with jitter) and reports "live" / "reconnecting" / "paused" / "denied"
// through onState. A handshake the server refuses (logged out, or the run is
// no longer shared with you) reaches the browser as code 1006, exactly like a
// network drop; when a socket closes without ever opening, asking for the page
// again tells the two apart, and a refusal shows "denied" instead of retrying
// forever. The runs list uses it as it is.
//
// LiveSocket: a run's event stream, /ws/runs/<id>/?after=<seq>. The server
// replays every event after `after` from the database and then streams, so
// reconnecting with the last seq applied loses nothing. This side drops
// anything it has already applied (seq <= last); if a seq ever arrives beyond
// the next one, it reconnects from the last applied seq instead of applying
// out of order.
//
// Debug hook (browser tests, console): window.__frontierSocket.close() breaks
// the run's connection as a network drop would; .pause() keeps it down until
// .resume().

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 15000;
const DENIED = new Set([4401, 4403]);

/**
 * @typedef {"live" | "reconnecting" | "paused" | "denied"} SocketState
 * @typedef {import("./run/state.js").RunEvent} RunEvent
 */

/** True when the server now refuses this page to us (login redirect, 403 or 404).
 *  HEAD: every page answers it like GET (Django's require_safe), without the body. */
async function accessRefused() {
  try {
    const response = await fetch(location.href, { method: "HEAD", redirect: "manual", credentials: "same-origin" });
    return response.type === "opaqueredirect" || response.status === 403 || response.status === 404;
  } catch {
    return false; // the server is unreachable: keep trying
  }
}

export class ReconnectingSocket {
  /**
   * url: () => path (read at every connect); onMessage gets the parsed JSON.
   * @param {object} options
   * @param {() => string} options.url
   * @param {() => void} [options.onOpen]
   * @param {(message: any) => void} options.onMessage
   * @param {(state: SocketState) => void} options.onState
   */
  constructor({ url, onOpen = () => {}, onMessage, onState }) {
    this.url = url;
    this.onOpen = onOpen;
    this.onMessage = onMessage;
    this.onState = onState;
    this.attempts = 0;
    this.paused = false;
    /** @type {WebSocket | null} */
    this.ws = null;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
  }

  connect() {
    if (this.paused) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}${this.url()}`);
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.attempts = 0;
      this.onState("live");
      this.onOpen();
    };
    ws.onmessage = (message) => this.onMessage(JSON.parse(message.data));
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

  /** Close the current connection as a network drop would (it reconnects). */
  drop() {
    if (this.ws) this.ws.close();
  }

  pause() {
    this.paused = true;
    clearTimeout(this.timer);
    this.drop();
  }

  resume() {
    this.paused = false;
    this.connect();
  }

  get open() {
    return !!this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  scheduleReconnect() {
    if (this.paused) return;
    const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.attempts);
    this.attempts += 1;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay * (0.75 + Math.random() * 0.25));
  }
}

export class LiveSocket {
  /**
   * @param {object} options
   * @param {string} options.path
   * @param {number} options.after the last seq the page holds
   * @param {(event: RunEvent) => void} options.onEvent
   * @param {(state: SocketState) => void} options.onState
   */
  constructor({ path, after, onEvent, onState }) {
    this.lastSeq = after;
    this.onEvent = onEvent;
    this.socket = new ReconnectingSocket({
      url: () => `${path}?after=${this.lastSeq}`,
      onMessage: (/** @type {RunEvent} */ event) => this.receive(event),
      onState,
    });
    globalThis.__frontierSocket = { // window's, in a browser
      close: () => this.socket.drop(),
      pause: () => this.socket.pause(),
      resume: () => this.socket.resume(),
      state: () => ({ lastSeq: this.lastSeq, open: this.socket.open }),
    };
  }

  connect() {
    this.socket.connect();
  }

  /** @param {RunEvent} event */
  receive(event) {
    if (event.seq <= this.lastSeq) return;
    if (event.seq !== this.lastSeq + 1) {
      this.socket.drop(); // reconnect from the last applied seq: the server replays the gap
      return;
    }
    this.lastSeq = event.seq;
    try {
      this.onEvent(event);
    } catch (error) {
      console.error("could not apply event", event.seq, event.type, error);
    }
  }
}
