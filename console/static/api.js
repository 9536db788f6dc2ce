// The Connect protocol over fetch (docs/api.md "HTTP/JSON (Connect)"):
// unary JSON calls, server streams as envelopes, and the HTTP downloads.
// Every call carries the tab's token; the server decides what it may see.

const TOKEN_KEY = "sessionstore.token";
const SERVICE = "/sessionstore.v1.";

export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }
export function loggedIn() { return token() !== null; }

// ApiError is a Connect error: code (snake case), message and the
// sessionstore reason from details[].debug.reason, when there is one.
export class ApiError extends Error {
  constructor(code, message, reason, status) {
    super(message || code);
    this.code = code;
    this.reason = reason || "";
    this.status = status || 0;
  }
}

function headers(contentType) {
  const h = { "Connect-Protocol-Version": "1" };
  if (contentType) h["Content-Type"] = contentType;
  const t = token();
  if (t) h["Authorization"] = "Bearer " + t;
  return h;
}

function errorOf(body, status) {
  const e = body && typeof body === "object" ? body : {};
  let reason = "";
  for (const d of Array.isArray(e.details) ? e.details : []) {
    if (d && d.debug && typeof d.debug.reason === "string") reason = d.debug.reason;
  }
  return new ApiError(e.code || "unknown", e.message || ("HTTP " + status), reason, status);
}

// call makes a unary call, e.g. call("Cluster", "Status", {}).
export async function call(service, method, req, signal) {
  const resp = await fetch(SERVICE + service + "/" + method, {
    method: "POST", headers: headers("application/json"), body: JSON.stringify(req || {}), signal,
  });
  let body = null;
  try { body = await resp.json(); } catch (_) { body = null; }
  if (!resp.ok) throw errorOf(body, resp.status);
  return body;
}

// stream opens a server stream and calls onMessage with each message, in
// order; it resolves when the stream ends cleanly and rejects with an
// ApiError for an end-stream error, or a broken stream. onMessage may
// return false to stop reading (the call is then aborted).
export async function stream(service, method, req, onMessage, signal) {
  const ctl = new AbortController();
  const stop = () => ctl.abort();
  if (signal) {
    if (signal.aborted) stop();
    signal.addEventListener("abort", stop, { once: true });
  }
  try {
    const payload = new TextEncoder().encode(JSON.stringify(req || {}));
    const body = new Uint8Array(5 + payload.length);
    new DataView(body.buffer).setUint32(1, payload.length);
    body.set(payload, 5);
    const resp = await fetch(SERVICE + service + "/" + method, {
      method: "POST", headers: headers("application/connect+json"), body, signal: ctl.signal,
    });
    if (!resp.ok) {
      let b = null;
      try { b = await resp.json(); } catch (_) { b = null; }
      throw errorOf(b, resp.status);
    }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = new Uint8Array(0);
    for (;;) {
      // Take every whole envelope in buf.
      while (buf.length >= 5) {
        const flags = buf[0];
        const len = new DataView(buf.buffer, buf.byteOffset, 5).getUint32(1);
        if (buf.length < 5 + len) break;
        const msg = JSON.parse(dec.decode(buf.subarray(5, 5 + len)));
        buf = buf.subarray(5 + len);
        if (flags & 0x02) {
          if (msg && msg.error) throw errorOf(msg.error, 200);
          return;
        }
        if (onMessage(msg) === false) { stop(); return; }
      }
      const { done, value } = await reader.read();
      if (done) throw new ApiError("unavailable", "the stream broke off before its end", "", 0);
      const next = new Uint8Array(buf.length + value.length);
      next.set(buf, 0);
      next.set(value, buf.length);
      buf = next;
    }
  } finally {
    if (signal) signal.removeEventListener("abort", stop);
  }
}

// download fetches a session file with the token and hands it to the
// browser as a file (a plain link could not carry the Authorization header).
export async function download(id, suffix) {
  const resp = await fetch("/v1/sessions/" + encodeURIComponent(id) + "/" + suffix, { headers: headers() });
  if (!resp.ok) throw new ApiError("http_" + resp.status, (await resp.text()).trim(), "", resp.status);
  const url = URL.createObjectURL(await resp.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = id.replace(/[^A-Za-z0-9._-]/g, "_") + "." + suffix;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
