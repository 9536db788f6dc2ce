// The sessions page: ListSnapshots page by page, filtered by id and cwd
// prefix and ordered (by id, or by last append, newest first) by the server,
// paging with its tokens. Each row links to the session page.

import { call } from "./api.js";
import { el, clear, time, has, errorText } from "./dom.js";

const PAGE_SIZE = 50;
const ORDERS = { id: "LIST_ORDER_ID", last: "LIST_ORDER_LAST_APPEND" };

// The filters live in the URL hash (#/sessions?id=…&cwd=…&order=last), so a
// reload or a shared link keeps them; the tokens of the pages seen so far
// survive a visit to a session and back. A token belongs to its filters and
// order (the server refuses one from the other order), so changing either
// starts from the first page.
let state = { idPrefix: "", cwdPrefix: "", order: "id", tokens: [""], page: 0 };

// filtersOf reads the filters from the query part of a #/sessions hash.
// URLSearchParams never throws on malformed escapes, and an unknown order
// is the default one.
function filtersOf(query) {
  const q = new URLSearchParams(query);
  const order = q.get("order");
  return { idPrefix: q.get("id") || "", cwdPrefix: q.get("cwd") || "", order: order === "last" ? "last" : "id" };
}

// hashOf is the hash that carries the filters f.
function hashOf(f) {
  const q = new URLSearchParams();
  if (f.idPrefix) q.set("id", f.idPrefix);
  if (f.cwdPrefix) q.set("cwd", f.cwdPrefix);
  if (f.order !== "id") q.set("order", f.order);
  const s = q.toString();
  return "#/sessions" + (s ? "?" + s : "");
}

function sameFilters(a, b) {
  return a.idPrefix === b.idPrefix && a.cwdPrefix === b.cwdPrefix && a.order === b.order;
}

// sessionsPage draws the page for the query of the hash, or, for a bare
// #/sessions (the nav link, the session page's back link), for the filters
// last used.
export function sessionsPage(root, app, query) {
  if (query !== null) {
    const f = filtersOf(query);
    if (!sameFilters(f, state)) state = { ...f, tokens: [""], page: 0 };
  } else if (location.hash !== hashOf(state)) {
    history.replaceState(null, "", hashOf(state));
  }
  const ctl = new AbortController();
  const form = el("form", "filters");
  form.id = "session-filters";
  const idIn = input("filter-id", "id prefix", state.idPrefix);
  const cwdIn = input("filter-cwd", "cwd prefix", state.cwdPrefix);
  const order = el("select");
  order.id = "order";
  order.setAttribute("aria-label", "order");
  for (const [v, label] of [["id", "by id"], ["last", "by last append"]]) {
    const o = el("option", "", label);
    o.value = v;
    order.append(o);
  }
  order.value = state.order;
  const apply = el("button", "", "Filter");
  apply.type = "submit";
  form.append(idIn.label, idIn.input, cwdIn.label, cwdIn.input, order, apply);
  const status = el("p", "status");
  const table = el("table", "sessions");
  table.id = "sessions";
  const pager = el("nav", "pager");
  root.append(el("h1", "", "Sessions"), form, status, table, pager);

  const load = async () => {
    clear(status);
    status.classList.remove("error");
    let resp;
    try {
      resp = await call("SessionPersistence", "ListSnapshots", {
        pageSize: PAGE_SIZE, pageToken: state.tokens[state.page], idPrefix: state.idPrefix,
        cwdPrefix: state.cwdPrefix, order: ORDERS[state.order],
      }, ctl.signal);
    } catch (err) {
      if (ctl.signal.aborted) return;
      app.failed(err);
      status.textContent = "Cannot list sessions: " + errorText(err);
      status.classList.add("error");
      app.rendered("sessions");
      return;
    }
    const rows = resp.snapshots || [];
    drawTable(table, rows);
    state.tokens.length = state.page + 1;
    if (resp.nextPageToken) state.tokens.push(resp.nextPageToken);
    drawPager(pager, Boolean(resp.nextPageToken), load);
    // A token's prefixes filter each page after the server reads it, so a
    // page can be empty with more after it.
    if (!rows.length) status.textContent = resp.nextPageToken ? "No sessions you may see on this page." : "No sessions match.";
    app.rendered("sessions");
  };
  const submit = () => {
    const f = { idPrefix: idIn.input.value, cwdPrefix: cwdIn.input.value, order: order.value };
    state = { ...f, tokens: [""], page: 0 };
    // A new hash redraws the page through the router (and is a step the
    // back button can undo); the same filters again just reload the first
    // page.
    if (location.hash !== hashOf(f)) location.hash = hashOf(f);
    else load();
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    submit();
  });
  order.addEventListener("change", submit);
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
  for (const h of ["session", "title", "cwd", "events", "last activity", "revision", "lease", "created"]) head.append(el("th", "", h));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const s of rows) {
    const h = s.header || {};
    const tr = el("tr");
    tr.dataset.id = h.id;
    const link = el("a", "", h.id);
    link.href = "#/session/" + encodeURIComponent(h.id);
    const first = el("td");
    first.append(link);
    // JSON leaves out zero values: no nextSeq is no events, no leaseHeld
    // is no lease.
    const lease = el("td");
    if (s.leaseHeld === true) lease.append(el("span", "badge lease", "held"));
    tr.append(first,
      el("td", "title", s.title || ""),
      el("td", "cwd", h.cwd || ""),
      el("td", "num", String(Number(s.nextSeq || 0))),
      el("td", "", has(s, "lastAppendUnixMs") ? time(s.lastAppendUnixMs) : "—"),
      el("td", "rev", s.revision || ""),
      lease,
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
  next.id = "next-page";
  next.disabled = !more;
  next.addEventListener("click", () => { state.page++; load(); });
  pager.append(prev, el("span", "range", "page " + (state.page + 1)), next);
}
