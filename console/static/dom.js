// Small DOM helpers. Everything that comes from the server is set with
// textContent or as an attribute value, never parsed as markup.

// el creates a tag with class names (space-separated, may be empty) and
// optional text.
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

// clear removes every child of e.
export function clear(e) {
  while (e.firstChild) e.firstChild.remove();
}

// lazyDetails is a <details> whose body fill(body) builds only when it is
// first opened, so that collapsed long texts and raw views cost one node
// until somebody looks at them.
export function lazyDetails(cls, summary, fill) {
  const d = el("details", cls);
  d.append(el("summary", "", summary));
  let filled = false;
  d.addEventListener("toggle", () => {
    if (d.open && !filled) {
      filled = true;
      const body = el("div", "details-body");
      fill(body);
      d.append(body);
    }
  });
  return d;
}

// time formats Unix milliseconds (a number or an int64 string) as local
// date and time; "" for none.
export function time(ms) {
  const n = Number(ms);
  if (!ms || !Number.isFinite(n) || n <= 0) return "";
  return new Date(n).toLocaleString(undefined, { hour12: false });
}

// bytes formats a byte count.
export function bytes(n) {
  n = Number(n);
  if (!Number.isFinite(n)) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

// has reports whether an answer carries field (the console shows fields a
// newer server adds as soon as they appear).
export function has(o, field) {
  return o !== null && typeof o === "object" && o[field] !== undefined && o[field] !== null;
}

// errorText is the text shown for a failed call.
export function errorText(err) {
  if (!err) return "";
  const reason = err.reason ? " (" + err.reason + ")" : "";
  return (err.message || String(err)) + reason;
}
