// Renders session events (docs/events.md) as a conversation. Event text is
// data: it is only ever put into the page with textContent.

import { el, lazyDetails, time } from "./dom.js";

// Texts longer than this, or with more lines, start collapsed.
const LONG_CHARS = 1500;
const LONG_LINES = 20;
const SUMMARY_CHARS = 240;

const CLOSER_CODES = new Set(["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]);
const PACKED = new Set(["text-chunks", "reasoning-chunks", "tool-call-chunks"]);
const CLOSER_LABEL = "interrupted — repaired on load";

// Renderer turns events into rows of one list. It pairs a tool/call with
// its tool/result (side by side) and folds runs of stream chunks into one
// row, within what it has rendered.
export class Renderer {
  constructor(list) {
    this.list = list;
    this.calls = new Map(); // callId -> the result cell of its tool/call row
    this.chunks = null;     // the chunk group the last row was, if any
    this.closerSeq = -1;    // the seq of the last crash closer rendered
  }

  // add renders one event: raw is its JSON text as the server sent it.
  add(raw) {
    let ev;
    try {
      ev = JSON.parse(raw);
    } catch (_) {
      ev = { type: "(not JSON)", data: null };
    }
    if (!ev || typeof ev !== "object") ev = { type: "(not an object)", data: ev };
    const type = String(ev.type);
    if (type === "assistant/chunk" || PACKED.has(type)) {
      this.addChunk(ev, raw, type);
      return;
    }
    this.chunks = null;
    if (type === "tool/result" && this.pairResult(ev, raw)) return;
    this.list.append(this.row(ev, raw, type));
  }

  row(ev, raw, type) {
    const data = ev.data && typeof ev.data === "object" ? ev.data : {};
    const r = el("article", "ev");
    r.dataset.seq = String(ev.seq);
    r.dataset.type = type;
    const head = el("div", "ev-head");
    head.append(el("span", "seq", "#" + ev.seq), el("span", "type", type), el("time", "when", time(ev.time)));
    r.append(head);
    const body = el("div", "ev-body");
    r.append(body);
    switch (type) {
      case "turn/start":
        r.classList.add("turn-start");
        head.append(el("span", "label", "Turn " + data.turn));
        break;
      case "turn/end": {
        const kind = data.reason && data.reason.kind;
        r.classList.add("turn-end");
        head.append(el("span", "label", "Turn " + data.turn + " ended: " + kind));
        if (kind === "interrupted") this.markCloser(r, head, ev); // only crash repair writes it
        if (data.reason && data.reason.error) body.append(textBlock(String(data.reason.error.message || ""), "error"));
        break;
      }
      case "step/start":
      case "step/end":
        r.classList.add("step");
        head.append(el("span", "label", (type === "step/start" ? "Step " : "End of step ") + data.step));
        // Repair writes the step/end right after the results it closed
        // (docs/events.md#crash-repair). One with no closer before it looks
        // like any other step/end, so it is left unmarked.
        if (type === "step/end" && this.closerSeq === ev.seq - 1) this.markCloser(r, head, ev);
        break;
      case "user/message":
        r.classList.add("msg", "msg-user");
        head.append(el("span", "label", sourceLabel(data.source, "user")));
        appendContent(body, data.content);
        break;
      case "assistant/message": {
        const m = data.message || data; // legacy: content and provenance on data
        r.classList.add("msg", "msg-assistant");
        head.append(el("span", "label", sourceLabel(m.source || m.provenance, "assistant")));
        if (data.interrupted) head.append(el("span", "badge", "interrupted"));
        appendContent(body, m.content);
        if (data.usage) body.append(el("div", "usage", usageText(data.usage)));
        break;
      }
      case "tool/call":
        this.toolCall(r, head, body, data);
        break;
      case "tool/result":
        r.classList.add("tool", "tool-orphan");
        head.append(el("span", "label", "result of " + (resultCallId(ev) || "an earlier call")));
        this.fillResult(body, ev, r, head);
        break;
      case "plan/mode":
        r.classList.add("plan-mode", data.active === true ? "plan-on" : "plan-off");
        head.append(el("span", "label", data.active === true ? "Plan mode on" : "Plan mode off"));
        break;
      case "command/run":
        r.classList.add("command");
        head.append(el("span", "label", "/" + data.name + (data.args || "")));
        break;
      case "command/done":
        r.classList.add("command");
        head.append(el("span", "label", "command " + data.kind));
        if (data.text) body.append(textBlock(String(data.text)));
        break;
      case "approval/asked":
      case "approval/decided":
        r.classList.add("approval");
        head.append(el("span", "label", type === "approval/asked" ? "Approval asked" : "Approval decided"));
        body.append(textBlock(pretty(ev.data), "json"));
        break;
      case "agent/inbox/spliced": {
        const ins = Array.isArray(data.inserted) ? data.inserted : [];
        r.classList.add("note");
        head.append(el("span", "label", "inbox (" + data.target + "): " + ins.length + " in" +
          (data.removedCount ? ", " + data.removedCount + " out" : "")));
        for (const m of ins) appendContent(body, m && m.content);
        break;
      }
      case "request/header": {
        const h = data.header || {};
        const c = h.config || {};
        r.classList.add("note");
        head.append(el("span", "label", "request: " + c.provider + "/" + c.model + " (" + data.reason + ")"));
        if (h.system) body.append(collapsed("system prompt", String(h.system)));
        break;
      }
      case "session/title":
        r.classList.add("note");
        head.append(el("span", "label", "title: " + (data.title !== undefined ? data.title : pretty(ev.data))));
        break;
      default:
        r.classList.add("note");
        if (ev.data !== undefined && ev.data !== null) body.append(textBlock(pretty(ev.data), "json"));
    }
    r.append(rawView(raw));
    return r;
  }

  toolCall(r, head, body, data) {
    r.classList.add("tool");
    head.append(el("span", "label", "tool " + data.name));
    const pair = el("div", "pair");
    const call = el("div", "call");
    call.append(el("div", "cell-title", "arguments"));
    const args = parseJSON(data.arguments);
    if (data.name === "exit_plan_mode" && args && typeof args.plan === "string") {
      call.append(el("div", "plan-title", "Plan"), textBlock(args.plan, "plan"));
    } else {
      call.append(textBlock(args !== undefined ? pretty(args) : String(data.arguments), "json"));
    }
    const result = el("div", "result pending");
    result.append(el("div", "cell-title", "result"), el("div", "muted", "no result yet"));
    pair.append(call, result);
    body.append(pair);
    if (data.callId) this.calls.set(String(data.callId), result);
  }

  // pairResult puts a tool/result beside its call when the call is rendered.
  pairResult(ev, raw) {
    const cell = this.calls.get(resultCallId(ev));
    if (!cell) return false;
    this.calls.delete(resultCallId(ev));
    cell.classList.remove("pending");
    while (cell.childNodes.length > 1) cell.lastChild.remove();
    const head = el("div", "ev-head");
    head.append(el("span", "seq", "#" + ev.seq), el("span", "type", "tool/result"), el("time", "when", time(ev.time)));
    cell.append(head);
    cell.dataset.seq = String(ev.seq);
    this.fillResult(cell, ev, cell, head);
    cell.append(rawView(raw));
    return true;
  }

  // markCloser marks row (of event ev) as a crash closer.
  markCloser(row, head, ev) {
    row.classList.add("closer");
    head.append(el("span", "badge closer-badge", CLOSER_LABEL));
    this.closerSeq = ev.seq;
  }

  fillResult(body, ev, marked, head) {
    const data = ev.data && typeof ev.data === "object" ? ev.data : {};
    const m = data.message || {};
    const block = (Array.isArray(m.content) ? m.content : []).find((b) => b && b.type === "tool-result") || {};
    const err = data.error || {};
    if (block.isError === true || data.error) marked.classList.add("is-error");
    if (CLOSER_CODES.has(err.code) || String(m.id || "").startsWith("interrupted-tool-result-")) this.markCloser(marked, head, ev);
    if (err.name) body.append(el("div", "error", err.name + (err.code ? " (" + err.code + ")" : "")));
    // Legacy results carry content on data itself.
    appendContent(body, Array.isArray(block.content) ? block.content : data.content);
  }

  addChunk(ev, raw, type) {
    if (!this.chunks) {
      const r = el("article", "ev chunks");
      r.dataset.seq = String(PACKED.has(type) ? ev.seq0 : ev.seq);
      r.dataset.type = "assistant/chunk";
      const label = el("span", "label");
      const head = el("div", "ev-head");
      head.append(el("span", "seq", "#" + r.dataset.seq), el("span", "type", "assistant/chunk"), label);
      r.append(head);
      const group = { row: r, label, raws: [], count: 0, text: "" };
      // The chunks' rows are built only when the group is opened.
      r.append(lazyDetails("raw", "stream", (b) => {
        b.append(textBlock(group.text, "stream"));
        b.append(el("pre", "raw-text", group.raws.join("\n")));
      }));
      this.chunks = group;
      this.list.append(r);
    }
    const g = this.chunks;
    g.raws.push(raw);
    const data = ev.data || {};
    if (PACKED.has(type)) {
      // A packed row (docs/events.md "Packed chunk rows") stands for one
      // chunk per member: expand it into its texts.
      const texts = Array.isArray(data.texts) ? data.texts : Array.isArray(data.args) ? data.args : [];
      g.count += texts.length;
      g.text += texts.join("");
    } else {
      g.count++;
      const c = data.chunk || {};
      if (typeof c.text === "string") g.text += c.text;
      if (typeof c.argumentsDelta === "string") g.text += c.argumentsDelta;
    }
    g.label.textContent = g.count + " stream chunks";
  }
}



function resultCallId(ev) {
  const d = ev.data || {};
  const m = d.message || {};
  if (m.source && m.source.callId) return String(m.source.callId);
  return d.callId ? String(d.callId) : "";
}

function sourceLabel(src, fallback) {
  if (!src || typeof src !== "object") return fallback;
  switch (src.kind) {
    case "user": return "user";
    case "plugin": return "plugin " + src.plugin;
    case "model": return "assistant · " + src.provider + "/" + src.model;
    case "tool": return "tool " + src.callId;
    default: return fallback + " (" + src.kind + ")";
  }
}

function usageText(u) {
  return "tokens in " + u.inputTokens + ", out " + u.outputTokens +
    (u.reasoningTokens ? ", reasoning " + u.reasoningTokens : "") +
    (u.cacheReadTokens ? ", cache read " + u.cacheReadTokens : "");
}

// appendContent renders message blocks (docs/events.md "Messages").
function appendContent(body, content) {
  if (typeof content === "string") {
    body.append(textBlock(content));
    return;
  }
  for (const b of Array.isArray(content) ? content : []) {
    if (!b || typeof b !== "object") continue;
    switch (b.type) {
      case "text":
        body.append(textBlock(String(b.text)));
        break;
      case "reasoning":
        body.append(collapsed("reasoning", String(b.text)));
        break;
      case "tool-call": {
        const d = el("div", "block-call");
        d.append(el("span", "cell-title", "calls " + b.name + " (" + b.id + ")"));
        const args = parseJSON(b.arguments);
        if (b.name === "exit_plan_mode" && args && typeof args.plan === "string") {
          d.append(el("div", "plan-title", "Plan"), textBlock(args.plan, "plan"));
        } else {
          d.append(textBlock(args !== undefined ? pretty(args) : String(b.arguments), "json"));
        }
        body.append(d);
        break;
      }
      case "tool-result":
        appendContent(body, b.content);
        break;
      case "image":
        body.append(el("div", "muted", "[image]"));
        break;
      default:
        body.append(textBlock(pretty(b), "json"));
    }
  }
}

// textBlock shows text as text; a long one starts collapsed behind its
// beginning and is put into the page only when opened.
function textBlock(text, cls) {
  const long = text.length > LONG_CHARS || countLines(text, LONG_LINES) > LONG_LINES;
  if (!long) return el("div", "text " + (cls || ""), text);
  return collapsed(text.slice(0, SUMMARY_CHARS) + "… (" + text.length + " characters)", text, cls);
}

function collapsed(summary, text, cls) {
  return lazyDetails("long " + (cls || ""), summary, (b) => b.append(el("div", "text " + (cls || ""), text)));
}

function countLines(s, max) {
  let n = 1;
  for (let i = s.indexOf("\n"); i >= 0 && n <= max; i = s.indexOf("\n", i + 1)) n++;
  return n;
}

function rawView(raw) {
  return lazyDetails("raw", "raw", (b) => b.append(el("pre", "raw-text", raw)));
}

function parseJSON(s) {
  if (typeof s !== "string") return undefined;
  try { return JSON.parse(s); } catch (_) { return undefined; }
}

function pretty(v) {
  try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
}
