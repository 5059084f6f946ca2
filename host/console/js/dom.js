// Building the page: every element is made with createElement and every text set with
// textContent, so nothing from the API is ever parsed as HTML (the CSP refuses it anyway).

let lastId = 0;
const nextId = (prefix) => `${prefix}-${++lastId}`;

/** h("button", {type: "button", onclick: f}, "Revoke") */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "value" || name === "checked" || name === "htmlFor") {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/**
 * A link that opens `url` in a new tab, only when it is a web address: an address from a
 * plugin's output is never a script, data or file URL. Anything else: no link (null).
 */
export function webLink(url, label) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return null;
  return h("p", {}, h("a", { href: parsed.href, target: "_blank", rel: "noopener noreferrer" }, label));
}

/** Replaces what `el` holds. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A labelled control: the label names the input, the hint describes it. */
export function field(label, input, hint) {
  input.id ||= nextId("f");
  const parts = [h("label", { htmlFor: input.id }, label), input];
  if (hint) {
    const hintId = nextId("hint");
    input.setAttribute("aria-describedby", hintId);
    parts.push(h("small", { id: hintId, class: "hint" }, hint));
  }
  return h("div", { class: "field" }, parts);
}

/**
 * A form whose submit runs `action(form)`: the button is disabled meanwhile, and what
 * it answers (a node or text) or the error it throws is shown under the form.
 */
export function form(attrs, children, action) {
  const status = h("div", { class: "form-status", role: "status", "aria-live": "polite" });
  const el = h("form", { ...attrs, novalidate: false }, children, status);
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    const buttons = el.querySelectorAll("button[type=submit]");
    buttons.forEach((b) => (b.disabled = true));
    fill(status);
    status.classList.remove("error");
    try {
      const shown = await action(el);
      if (shown !== undefined) fill(status, shown);
    } catch (e) {
      status.classList.add("error");
      fill(status, errorText(e));
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  });
  return el;
}

export const errorText = (e) => (e?.code ? `${e.message} (${e.code})` : String(e?.message ?? e));

/** A table with a caption; `columns` are [label, row => cell]. */
export function table(caption, columns, rows, empty = "None yet.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h(
    "table",
    {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map(([label]) => h("th", { scope: "col" }, label)))),
    h(
      "tbody",
      {},
      rows.map((row) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(row) ?? "—")))),
    ),
  );
}

/** Asks before something that cannot be undone; resolves true on confirm. */
export function confirmDialog(title, message, confirmLabel) {
  return new Promise((resolve) => {
    const titleId = nextId("dlg");
    const dialog = h(
      "dialog",
      { "aria-labelledby": titleId },
      h("h2", { id: titleId }, title),
      h("p", {}, message),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", onclick: () => dialog.close("cancel") }, "Cancel"),
        h("button", { type: "button", class: "danger", onclick: () => dialog.close("confirm") }, confirmLabel),
      ),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "confirm");
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** A button that copies `text`, and says so. */
export function copyButton(text, label = "Copy") {
  const button = h("button", { type: "button", class: "copy" }, label);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Select and copy it";
    }
    setTimeout(() => (button.textContent = label), 2000);
  });
  return button;
}

/** An ISO time, shown in the reader's locale, machine-readable in the markup. */
export function time(iso) {
  if (!iso) return null;
  return h("time", { datetime: iso }, new Date(iso).toLocaleString());
}

/** Micro-USDC as USDC text, exactly (integers only: no floating point). */
export function usdcText(micro) {
  const units = BigInt(Math.round(Number(micro ?? 0)));
  const sign = units < 0n ? "-" : "";
  const abs = units < 0n ? -units : units;
  const cents = (abs % 1000000n).toString().padStart(6, "0").replace(/0+$/, "");
  return `${sign}${abs / 1000000n}${cents ? "." + cents : ""} USDC`;
}

/** Micro-USDC as USDC, in a span. */
export function usdc(micro) {
  return h("span", { class: "amount" }, usdcText(micro));
}

/** A short form of a long id or address, with the whole one as its title. */
export function short(text, keep = 8) {
  if (!text) return null;
  if (text.length <= keep * 2 + 1) return h("code", {}, text);
  return h("code", { title: text }, `${text.slice(0, keep)}…${text.slice(-keep)}`);
}

/** A link that leaves the console: opens apart, and tells no one where it came from. */
export function external(href, text) {
  if (!href) return null;
  return h("a", { href, target: "_blank", rel: "noopener noreferrer" }, text);
}

/** A progress bar with its value spoken. */
export function progress(value, label) {
  const pct = Math.max(0, Math.min(100, Number(value ?? 0)));
  return h(
    "span",
    { class: "progress" },
    h("progress", { max: 100, value: pct, "aria-label": label }),
    ` ${pct}%`,
  );
}
