// The session page: the header, a window of at most PAGE events read with
// ReadFrom (a stream cancelled once the window is full, so a session of any
// size costs one window), paging by seq, and a live tail with Watch.

import { call, stream, download } from "./api.js";
import { el, clear, time, errorText } from "./dom.js";
import { Renderer } from "./render.js";

const PAGE = 200;
// A seq past any log's end: ReadFrom from it answers only its first
// message, which carries the header, revision and next seq.
const END = "9007199254740991";
const RETRY_MS = 2000;

export function sessionPage(root, id, app) {
  const s = { id, root, app, header: null, title: "", revision: "", nextSeq: 0, start: 0, events: [], live: true };
  const ctl = new AbortController();
  s.signal = ctl.signal;

  const title = el("h1", "session-id", id);
  const meta = el("dl", "meta");
  const actions = el("div", "actions");
  const status = el("p", "status");
  status.setAttribute("role", "status");
  const pager = el("nav", "pager");
  const list = el("div", "events");
  list.id = "events";
  const newer = el("p", "muted");
  s.ui = { meta, status, pager, list, newer, actions };
  root.append(el("a", "back", "← sessions"), title, meta, actions, status, pager, list, newer);
  root.querySelector(".back").href = "#/sessions";

  // A hidden tab lets its live tail go (see tail); shown again, it resumes.
  s.visibility = () => {
    if (document.visibilityState === "hidden") {
      if (s.tailCtl) s.tailCtl.abort();
    } else if (s.resume) {
      s.resume();
    }
  };
  document.addEventListener("visibilitychange", s.visibility);

  load(s).then(() => app.rendered("session"), (err) => fail(s, err));
  return () => {
    document.removeEventListener("visibilitychange", s.visibility);
    ctl.abort();
  };
}

async function load(s) {
  await stream("SessionPersistence", "ReadFrom", { sessionId: s.id, fromSeq: END }, (m) => {
    s.header = m.header || {};
    s.revision = m.revision || "";
    s.nextSeq = Number(m.nextSeq || 0);
    return false;
  }, s.signal);
  // The title is kept in the session's listing entry, not in its header;
  // without it the page still shows the session.
  try {
    const listed = await call("SessionPersistence", "ListSnapshots", { idPrefix: s.id, pageSize: 1 }, s.signal);
    const own = (listed.snapshots || [])[0];
    if (own && own.header && own.header.id === s.id) s.title = own.title || "";
  } catch (err) {
    if (s.signal.aborted) throw err;
  }
  renderMeta(s);
  renderActions(s);
  await show(s, Math.max(0, s.nextSeq - PAGE));
  tail(s);
}

// show reads and renders the window of events from start.
async function show(s, start) {
  const events = [];
  if (start < s.nextSeq) {
    let first = true;
    await stream("SessionPersistence", "ReadFrom", { sessionId: s.id, fromSeq: String(start) }, (m) => {
      // Only the first message carries the next seq: the log may have
      // grown since the last look, and the tail must start after it.
      if (first) {
        first = false;
        s.nextSeq = Number(m.nextSeq || s.nextSeq);
        s.revision = m.revision || s.revision;
      }
      for (const e of m.events || []) {
        if (events.length < PAGE) events.push(e);
      }
      return events.length < PAGE;
    }, s.signal);
  }
  s.start = start;
  s.events = events;
  s.live = start + events.length >= s.nextSeq;
  renderMeta(s);
  draw(s);
}

function draw(s) {
  const { list } = s.ui;
  clear(list);
  s.renderer = new Renderer(list);
  for (const e of s.events) s.renderer.add(e);
  renderPager(s);
}

function renderPager(s) {
  const { pager, newer } = s.ui;
  clear(pager);
  const end = s.start + s.events.length;
  const go = (label, to, enabled) => {
    const b = el("button", "", label);
    b.type = "button";
    b.disabled = !enabled;
    b.addEventListener("click", () => show(s, to).catch((err) => fail(s, err)));
    return b;
  };
  pager.append(
    go("⇤ first", 0, s.start > 0),
    go("← older", Math.max(0, s.start - PAGE), s.start > 0),
    el("span", "range", s.events.length ? "events " + s.start + "–" + (end - 1) + " of " + s.nextSeq : "no events"),
    go("newer →", end, end < s.nextSeq),
    go("latest ⇥", Math.max(0, s.nextSeq - PAGE), end < s.nextSeq),
  );
  newer.textContent = s.live ? "live: new events appear below" : (s.nextSeq - end) + " newer events";
}

function renderMeta(s) {
  const { meta } = s.ui;
  clear(meta);
  const h = s.header;
  const row = (k, v) => {
    if (v === undefined || v === null || v === "") return;
    meta.append(el("dt", "", k), el("dd", "", v));
  };
  row("title", s.title);
  row("cwd", h.cwd);
  row("created", time(h.createdAt));
  row("events", String(s.nextSeq));
  row("revision", s.revision);
  row("parent", h.parentSession);
  row("origin", h.origin);
  row("agent preset", h.agentPreset);
}

function renderActions(s) {
  const { actions, status } = s.ui;
  clear(actions);
  const button = (label, fn) => {
    const b = el("button", "", label);
    b.type = "button";
    b.addEventListener("click", fn);
    actions.append(b);
    return b;
  };
  const dl = (suffix) => () => download(s.id, suffix).catch((err) => { status.textContent = errorText(err); });
  button("Download session.jsonl", dl("session.jsonl"));
  button("Download .zstd", dl("session.jsonl.zstd"));
  if (!s.app.admin) return;
  // Delete asks once more in the page (a dialog would block the page and its
  // live tail), and is conditional on the revision the question named: an
  // event the tail brings in meanwhile makes the server refuse it.
  let asked = "";
  const del = button("Delete…", () => {
    asked = s.revision;
    del.hidden = true;
    confirm.hidden = false;
    status.textContent = "Delete " + s.id + " at revision " + asked + "? This cannot be undone.";
  });
  del.classList.add("danger");
  const confirm = button("Confirm delete", async () => {
    confirm.disabled = true;
    try {
      await call("SessionPersistence", "Delete", { sessionId: s.id, expectedRevision: asked });
      status.textContent = "Deleted.";
      s.deleted = true;
    } catch (err) {
      const again = err.reason === "REVISION_MISMATCH" ? " The session changed since you asked; look again." : "";
      status.textContent = "Not deleted: " + errorText(err) + again;
      del.hidden = false;
    }
    confirm.hidden = true;
    confirm.disabled = false;
  });
  confirm.classList.add("danger");
  confirm.hidden = true;
}

// tail follows the session with Watch from the next seq, reopening the
// stream after a failure from the seq after the last event it delivered.
// While the tab is hidden it holds no stream: a browser allows six
// connections to a host over HTTP/1.1, and a Watch holds one for as long
// as it runs, so tabs left open on sessions would stall every call of the
// tab in use. Shown again, the tab resumes from where it stopped.
async function tail(s) {
  while (!s.signal.aborted && !s.deleted) {
    if (document.visibilityState === "hidden") {
      const paused = "Live tail paused while this tab is hidden.";
      s.ui.status.textContent = paused;
      await new Promise((r) => {
        s.resume = r;
        s.signal.addEventListener("abort", r, { once: true });
      });
      s.resume = null;
      if (s.ui.status.textContent === paused) s.ui.status.textContent = "";
      continue;
    }
    s.tailCtl = new AbortController();
    const stop = () => s.tailCtl.abort();
    s.signal.addEventListener("abort", stop, { once: true });
    try {
      await stream("SessionPersistence", "Watch", { sessionId: s.id, fromSeq: String(s.nextSeq) }, (m) => {
        if (m.revision) s.revision = m.revision;
        const evs = m.events || [];
        if (evs.length) append(s, evs);
        return true;
      }, s.tailCtl.signal);
    } catch (err) {
      if (s.signal.aborted) return;
      if (s.tailCtl.signal.aborted) continue; // the tab was hidden
      if (err.reason === "NOT_FOUND" || err.code === "not_found") {
        s.ui.status.textContent = "This session was deleted.";
        return;
      }
      if (err.code === "unauthenticated" || err.code === "permission_denied") {
        fail(s, err);
        return;
      }
      s.ui.status.textContent = "Live tail interrupted (" + errorText(err) + "); retrying.";
    } finally {
      s.signal.removeEventListener("abort", stop);
    }
    await new Promise((r) => setTimeout(r, RETRY_MS));
  }
}

// append takes a batch from the tail. It goes by each event's seq, so an
// event a page read already showed or counted is not taken twice.
function append(s, evs) {
  for (const e of evs) {
    let seq = -1;
    try { seq = Number(JSON.parse(e).seq); } catch (_) { seq = -1; }
    if (!Number.isSafeInteger(seq)) continue;
    s.nextSeq = Math.max(s.nextSeq, seq + 1);
    const title = titleOf(e);
    if (title !== undefined && title !== s.title) {
      s.title = title;
      renderMeta(s);
    }
    if (s.live && seq === s.start + s.events.length) {
      s.events.push(e);
      s.renderer.add(e);
    }
  }
  // Keep the DOM bounded while a session grows under the page: past two
  // windows, redraw the newest one.
  if (s.live && s.events.length > 2 * PAGE) {
    const drop = s.events.length - PAGE;
    s.events = s.events.slice(drop);
    s.start += drop;
    draw(s);
  }
  renderMeta(s);
  renderPager(s);
}

function fail(s, err) {
  if (s.signal.aborted) return;
  s.app.failed(err);
  s.ui.status.textContent = "Cannot read " + s.id + ": " + errorText(err);
  s.ui.status.classList.add("error");
  s.app.rendered("session");
}

// titleOf is the title a session/title event sets (undefined for any other
// event), cut as the server cuts it: to 256 UTF-8 bytes, whole characters.
function titleOf(text) {
  if (!text.includes('"session/title"')) return undefined;
  let ev;
  try { ev = JSON.parse(text); } catch (_) { return undefined; }
  if (!ev || ev.type !== "session/title" || !ev.data || typeof ev.data.title !== "string") return undefined;
  const bytes = new TextEncoder().encode(ev.data.title);
  if (bytes.length <= 256) return ev.data.title;
  let n = 256;
  while (n > 0 && (bytes[n] & 0xc0) === 0x80) n--;
  return new TextDecoder().decode(bytes.subarray(0, n));
}
