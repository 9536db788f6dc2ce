// The console's entry point: login, the hash router (#/cluster,
// #/sessions?<filters>, #/session/<id>) and what the pages share.

import { call, loggedIn, setToken, clearToken } from "./api.js";
import { el, clear, errorText } from "./dom.js";
import { clusterPage } from "./cluster.js";
import { sessionsPage } from "./sessions.js";
import { sessionPage } from "./session.js";

const $ = (id) => document.getElementById(id);

// app is what pages may use: whether the token is an admin's, how to report
// a failed call, and a mark when a page has drawn its first data.
const app = {
  admin: false,
  failed(err) {
    if (err && err.code === "unauthenticated") logout("The token was refused: " + errorText(err));
  },
  rendered(page) {
    document.body.dataset.rendered = page;
    if (performance.getEntriesByName("rendered:" + page).length === 0) performance.mark("rendered:" + page);
  },
};

let leave = null; // stops the current page's polling and streams

function route() {
  if (leave) leave();
  leave = null;
  const page = $("page");
  clear(page);
  delete document.body.dataset.rendered;
  if (!loggedIn()) {
    showLogin(true);
    return;
  }
  showLogin(false);
  const hash = location.hash || "#/sessions";
  let name = "sessions";
  if (hash === "#/cluster") {
    name = "cluster";
    leave = clusterPage(page, app);
  } else if (hash.startsWith("#/session/")) {
    name = "session";
    let id;
    try {
      id = decodeURIComponent(hash.slice("#/session/".length));
    } catch (_) {
      page.append(el("p", "error", "Not a session link."));
      return;
    }
    leave = sessionPage(page, id, app);
  } else {
    // #/sessions?id=…&cwd=…&order=… carries the list's filters.
    const q = "#/sessions?";
    leave = sessionsPage(page, app, hash.startsWith(q) ? hash.slice(q.length) : null);
  }
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("current", a.dataset.page === name);
}

function showLogin(on) {
  $("login").hidden = !on;
  $("nav").hidden = on;
  $("logout").hidden = on;
  if (on) $("token").focus();
}

function logout(message) {
  clearToken();
  app.admin = false;
  $("who").textContent = "";
  $("login-error").textContent = message || "";
  route();
}

// whoami learns whether the token may use the Cluster service (admin):
// the console then offers the admin actions; the server decides anyway.
async function whoami() {
  try {
    await call("Cluster", "Status", {});
    app.admin = true;
  } catch (err) {
    app.admin = false;
    if (err.code === "unauthenticated") throw err;
  }
  $("who").textContent = app.admin ? "admin" : "";
}

async function login(token) {
  setToken(token);
  try {
    await whoami();
  } catch (err) {
    logout("The token was refused: " + errorText(err));
    return;
  }
  $("login-error").textContent = "";
  $("token").value = "";
  route();
}

function start() {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    login($("token").value.trim());
  });
  $("logout").addEventListener("click", () => logout(""));
  window.addEventListener("hashchange", route);
  // A page left for another (or kept in the back-forward cache) must not
  // hold its live tail open: browsers allow six connections to a host over
  // HTTP/1.1, and tails held by hidden pages would starve the calls of the
  // page shown. A page restored from that cache draws itself again.
  window.addEventListener("pagehide", () => {
    if (leave) leave();
    leave = null;
  });
  window.addEventListener("pageshow", (e) => {
    if (e.persisted) route();
  });
  if (loggedIn()) {
    whoami().then(route, (err) => logout("The token was refused: " + errorText(err)));
  } else {
    route();
  }
}

start();
