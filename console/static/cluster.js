// The cluster page: this node's Status and the Members table, polled every
// 2 s. Each member's applied index, last contact, free disk, disk verdict and
// command version are what it gossips about itself (docs/api.md, Members):
// absent while unknown, shown as "—".

import { call } from "./api.js";
import { el, clear, time, bytes, has, errorText } from "./dom.js";

const POLL_MS = 2000;

export function clusterPage(root, app) {
  const ctl = new AbortController();
  const summary = el("dl", "meta");
  summary.id = "cluster-summary";
  const table = el("table", "members");
  table.id = "members";
  const status = el("p", "status");
  const alarm = el("p", "status alarm");
  alarm.id = "disk-alarm";
  alarm.setAttribute("role", "alert");
  const updated = el("p", "muted");
  root.append(el("h1", "", "Cluster"), summary, status, alarm, table, updated);
  let timer = 0;

  const poll = async () => {
    try {
      const [st, mem] = await Promise.all([
        call("Cluster", "Status", {}, ctl.signal),
        call("Cluster", "Members", {}, ctl.signal),
      ]);
      status.textContent = "";
      status.classList.remove("error");
      drawSummary(summary, st);
      drawMembers(table, st, mem.members || []);
      drawAlarm(alarm, mem.members || []);
      updated.textContent = "updated " + time(Date.now());
    } catch (err) {
      if (ctl.signal.aborted) return;
      app.failed(err);
      status.classList.add("error");
      status.textContent = err.code === "permission_denied"
        ? "This token has no admin permission, which the cluster page needs."
        : "Cannot read the cluster: " + errorText(err);
      if (err.code === "permission_denied" || err.code === "unauthenticated") {
        app.rendered("cluster");
        return; // no point polling
      }
    }
    app.rendered("cluster");
    timer = setTimeout(poll, POLL_MS);
  };
  poll();
  return () => { ctl.abort(); clearTimeout(timer); };
}

function drawSummary(dl, st) {
  clear(dl);
  const row = (k, v) => dl.append(el("dt", "", k), el("dd", "", v === undefined || v === "" ? "—" : String(v)));
  row("cluster id", st.clusterId);
  row("leader", st.leaderId ? st.leaderId + (st.leaderAddress ? " (" + st.leaderAddress + ")" : "") : "none");
  row("serving node", st.nodeId + " · " + st.state);
  row("term", st.term);
  row("commit index", st.commitIndex);
  row("applied index", st.appliedIndex);
}

// role names a member as operators do: leader, follower or non-voter.
function role(m, st) {
  if (m.nodeId === st.leaderId) return "leader";
  return m.suffrage === "Nonvoter" ? "non-voter" : "follower";
}

function drawMembers(table, st, members) {
  clear(table);
  const cols = ["node", "role", "health", "applied", "lag", "last contact", "disk free", "command version", "API address", "Raft address"];
  const head = el("tr");
  for (const c of cols) head.append(el("th", "", c));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  // Lag is behind the leader's applied index, or, while that is unknown,
  // behind the serving node's commit index. Gossip makes a peer's figure
  // about a second old, so a lag of a few entries under load is normal.
  const leader = members.find((m) => m.nodeId === st.leaderId);
  const applied = (m) => has(m, "appliedIndex") ? Number(m.appliedIndex) : undefined;
  const top = leader && applied(leader) !== undefined ? applied(leader) : Number(st.commitIndex);
  for (const m of members) {
    const tr = el("tr", "member");
    tr.dataset.node = m.nodeId;
    const r = role(m, st);
    tr.dataset.role = r;
    const a = applied(m);
    if (a !== undefined) tr.dataset.applied = String(a);
    const disk = has(m, "diskFreeBytes") ? bytes(m.diskFreeBytes) : "—";
    const diskCell = el("td", "", disk);
    if (m.diskLow === true) {
      tr.classList.add("disk-low");
      diskCell.classList.add("alarm");
      diskCell.append(el("span", "badge alarm", "low disk"));
    }
    tr.append(
      el("td", "", m.nodeId),
      el("td", "role role-" + r, r),
      el("td", "health health-" + m.health, m.health),
      el("td", "num", a === undefined ? "—" : String(a)),
      el("td", "num", a === undefined || !Number.isFinite(top) ? "—" : String(Math.max(0, top - a))),
      el("td", "", r !== "leader" && has(m, "lastContactMs") ? ago(Number(m.lastContactMs)) : "—"),
      diskCell,
      el("td", "", has(m, "commandVersion") ? String(m.commandVersion) : "—"),
      el("td", "", m.apiAddress || "—"),
      el("td", "", m.raftAddress || ""),
    );
    table.tBodies[0].append(tr);
  }
}

// drawAlarm names the members whose disk is low, above the table: it is the
// one state on this page that stops writes.
function drawAlarm(p, members) {
  const low = members.filter((m) => m.diskLow === true).map((m) => m.nodeId);
  p.textContent = low.length
    ? "Low disk on " + low.join(", ") + ". While a voter's disk is below its --min-free-bytes, the leader refuses writes that grow the store."
    : "";
}

// ago formats the time since a member last heard from the leader (peers
// gossip whole seconds).
function ago(ms) {
  if (!Number.isFinite(ms)) return "—";
  return ms < 1000 ? ms + " ms ago" : Math.round(ms / 1000) + " s ago";
}
