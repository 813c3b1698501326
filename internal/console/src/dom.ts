// Building DOM nodes without HTML strings: every value shown comes from
// the database, so text is only ever set as text, never parsed as markup.

export type Child = Node | string | number | null | undefined | false;
type AttrValue = string | number | boolean | null | undefined;
export type Attrs = Record<string, AttrValue | ((ev: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === "function") {
      el.addEventListener(k.replace(/^on/, ""), v);
    } else if (k === "value" && "value" in el) {
      (el as unknown as { value: string }).value = String(v ?? "");
    } else if (v === true) {
      el.setAttribute(k, "");
    } else if (v !== false && v !== null && v !== undefined) {
      el.setAttribute(k, String(v));
    }
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) {
      continue;
    }
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

export function clear(el: Node): void {
  while (el.firstChild) {
    el.removeChild(el.firstChild);
  }
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) {
    throw new Error("no element #" + id);
  }
  return el as T;
}

// field is a labelled control: the label names it for assistive
// technology and for the user.
export function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  if (!control.id) {
    throw new Error("a labelled control needs an id");
  }
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hint ? h("span", { class: "hint" }, hint) : null);
}

// setStatus shows an outcome in a status element: text, and for a
// failure the gRPC code name in data-code.
export function setStatus(el: HTMLElement, text: string, code?: string): void {
  el.textContent = text;
  if (code) {
    el.dataset.code = code;
    el.classList.add("error");
  } else {
    delete el.dataset.code;
    el.classList.remove("error");
  }
}
