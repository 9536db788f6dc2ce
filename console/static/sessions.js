// The sessions page: ListSnapshots page by page (cwd prefix filtered by the
// server; the id prefix, for now, within each page), each row linking to
// the session page.

import { call } from "./api.js";
import { el, clear, time, has, errorText } from "./dom.js";

const PAGE_SIZE = 50;

// The filters and paging survive a visit to a session and back.
const state = { idPrefix: "", cwdPrefix: "", sort: "id", tokens: [""], page: 0 };

export function sessionsPage(root, app) {
  const ctl = new AbortController();
  const form = el("form", "filters");
  form.id = "session-filters";
  const idIn = input("filter-id", "id prefix", state.idPrefix);
  const cwdIn = input("filter-cwd", "cwd prefix", state.cwdPrefix);
  const sort = el("select");
  sort.id = "sort";
  for (const [v, label] of [["id", "by id"], ["last", "by last append"]]) {
    const o = el("option", "", label);
    o.value = v;
    sort.append(o);
  }
  sort.value = state.sort;
  const apply = el("button", "", "Filter");
  apply.type = "submit";
  form.append(idIn.label, idIn.input, cwdIn.label, cwdIn.input, sort, apply);
  const status = el("p", "status");
  const table = el("table", "sessions");
  table.id = "sessions";
  const pager = el("nav", "pager");
  root.append(el("h1", "", "Sessions"), form, status, table, pager);

  const load = async () => {
    clear(status);
    let resp;
    try {
      resp = await call("SessionPersistence", "ListSnapshots",
        { pageSize: PAGE_SIZE, pageToken: state.tokens[state.page], cwdPrefix: state.cwdPrefix }, ctl.signal);
    } catch (err) {
      if (ctl.signal.aborted) return;
      app.failed(err);
      status.textContent = "Cannot list sessions: " + errorText(err);
      status.classList.add("error");
      app.rendered("sessions");
      return;
    }
    let rows = (resp.snapshots || []).filter((s) => String((s.header || {}).id).startsWith(state.idPrefix));
    const hasLast = rows.some((s) => has(s, "lastAppendUnixMs"));
    sort.disabled = !hasLast;
    if (state.sort === "last" && hasLast) {
      rows = rows.slice().sort((a, b) => Number(b.lastAppendUnixMs || 0) - Number(a.lastAppendUnixMs || 0));
    }
    drawTable(table, rows);
    if (resp.nextPageToken) state.tokens[state.page + 1] = resp.nextPageToken;
    drawPager(pager, Boolean(resp.nextPageToken), load);
    status.textContent = rows.length ? "" : "No sessions on this page match.";
    app.rendered("sessions");
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    state.idPrefix = idIn.input.value;
    state.cwdPrefix = cwdIn.input.value;
    state.sort = sort.value;
    state.tokens = [""];
    state.page = 0;
    load();
  });
  load();
  return () => ctl.abort();
}

function input(id, label, value) {
  const l = el("label", "", label);
  l.htmlFor = id;
  const i = el("input");
  i.id = id;
  i.value = value;
  i.spellcheck = false;
  return { label: l, input: i };
}

function drawTable(table, rows) {
  clear(table);
  const head = el("tr");
  for (const h of ["session", "cwd", "events", "last activity", "revision", "lease", "created"]) head.append(el("th", "", h));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const s of rows) {
    const h = s.header || {};
    const tr = el("tr");
    tr.dataset.id = h.id;
    const link = el("a", "", has(s, "title") && s.title ? s.title : h.id);
    link.href = "#/session/" + encodeURIComponent(h.id);
    const first = el("td");
    first.append(link);
    if (has(s, "title") && s.title) first.append(el("div", "muted", h.id));
    tr.append(first,
      el("td", "cwd", h.cwd || ""),
      el("td", "num", has(s, "nextSeq") ? String(s.nextSeq) : "—"),
      el("td", "", has(s, "lastAppendUnixMs") ? time(s.lastAppendUnixMs) : "—"),
      el("td", "rev", s.revision || ""),
      el("td", "", has(s, "leaseHeld") ? (s.leaseHeld ? "held" : "—") : "—"),
      el("td", "", time(h.createdAt)));
    table.tBodies[0].append(tr);
  }
}

function drawPager(pager, more, load) {
  clear(pager);
  const prev = el("button", "", "← previous");
  prev.type = "button";
  prev.disabled = state.page === 0;
  prev.addEventListener("click", () => { state.page--; load(); });
  const next = el("button", "", "next →");
  next.type = "button";
  next.disabled = !more;
  next.addEventListener("click", () => { state.page++; load(); });
  pager.append(prev, el("span", "range", "page " + (state.page + 1)), next);
}
