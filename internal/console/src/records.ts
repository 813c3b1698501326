// The records page: one type's records, 50 a page with continuation
// tokens (never offsets), filtered with the text filter syntax and ordered
// by the primary key or an index.

import { ApiError, call } from "./api.js";
import { field, h } from "./dom.js";
import type { Page } from "./main.js";
import { cachedSchema, findType, keyOf, loadSchema, mayWrite } from "./schema.js";
import type { Schema } from "./schema.js";

export const pageSize = 50;

interface QueryResponse {
  records?: Record<string, unknown>[];
  nextPageToken?: string;
  versions?: string[];
}

export async function renderRecords(page: Page, typeName: string): Promise<void> {
  const s = cachedSchema() ?? await loadSchema({ signal: page.signal });
  const t = findType(s, typeName);
  const { main } = page;
  if (!t) {
    main.append(h("h1", {}, "No type " + typeName), h("p", {}, "This key sees no record type of that name. ", h("a", { href: "#/types" }, "See the types.")));
    return;
  }
  const filter = h("input", { id: "filter-input", type: "text", autocomplete: "off", spellcheck: "false",
    placeholder: "age >= 30 and name prefix \"An\"", "aria-describedby": "filter-error" });
  const filterErr = h("p", { id: "filter-error", class: "error", role: "alert", hidden: true });
  const order = h("select", { id: "order-select" }, h("option", { value: "" }, "primary key (" + (t.primaryKey ?? []).join(", ") + ")"));
  for (const ix of t.indexes ?? []) {
    if (!ix.aggregate) {
      order.append(h("option", { value: ix.name }, "index " + ix.name + " (" + (ix.fields ?? []).join(", ") + ")"));
    }
  }
  const form = h("form", { class: "toolbar", role: "search" },
    field("Filter", filter), h("button", { id: "filter-apply", type: "submit" }, "Apply"), field("Order by", order));
  const body = h("tbody");
  const prev = h("button", { id: "prev-page", type: "button", disabled: true }, "Previous page");
  const next = h("button", { id: "next-page", type: "button", disabled: true }, "Next page");
  const info = h("span", { id: "page-info", "aria-live": "polite" }, "page 1");
  const newBtn = h("button", { id: "new-record", type: "button", hidden: !mayWrite(s), onclick: () => { location.hash = "#/new/" + typeName; } }, "New record");
  main.append(
    h("h1", {}, typeName),
    h("p", {}, h("a", { href: "#/types" }, "All types"), " · primary key " + (t.primaryKey ?? []).join(", ")),
    form, filterErr,
    h("div", { class: "actions" }, newBtn),
    h("div", { class: "scroll" }, h("table", { id: "records" },
      h("caption", {}, "Records of " + typeName),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Key"), h("th", { scope: "col" }, "Version"), h("th", { scope: "col" }, "Record"))),
      body)),
    h("div", { class: "pager" }, prev, info, next));

  // tokens[i] is the token of page i+1; the first page has none.
  let tokens: string[] = [""];
  let at = 0;
  const load = async () => {
    const req = {
      // An empty index asks for primary-key order: without an order the
      // server may answer in the order of an index the filter uses.
      query: { type: typeName, filter: filter.value.trim(), versions: true, order: { index: order.value } },
      pageSize,
      pageToken: tokens[at] ?? "",
    };
    prev.disabled = next.disabled = true;
    let resp: QueryResponse;
    try {
      resp = await call<QueryResponse>("POST", "/v1/query", req, { signal: page.signal });
    } catch (e) {
      showQueryError(e, filter, filterErr);
      body.replaceChildren();
      return;
    }
    filterErr.hidden = true;
    filter.removeAttribute("aria-invalid");
    body.replaceChildren(...rows(s, typeName, resp));
    if (resp.nextPageToken) {
      tokens[at + 1] = resp.nextPageToken;
    }
    prev.disabled = at === 0;
    next.disabled = !resp.nextPageToken;
    info.textContent = "page " + (at + 1) + ((resp.records ?? []).length === 0 ? " (no records)" : "");
  };
  const restart = () => {
    tokens = [""];
    at = 0;
    void load();
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    restart();
  });
  order.addEventListener("change", restart);
  prev.addEventListener("click", () => {
    if (at > 0) {
      at--;
      void load();
    }
  });
  next.addEventListener("click", () => {
    if (tokens[at + 1]) {
      at++;
      void load();
    }
  });
  await load();
}

function rows(s: Schema, typeName: string, resp: QueryResponse): HTMLTableRowElement[] {
  return (resp.records ?? []).map((rec, i) => {
    const key = JSON.stringify(keyOf(s, typeName, rec));
    const shown = { ...rec };
    delete shown["@type"];
    return h("tr", { "data-key": key },
      h("td", {}, h("a", { class: "open", href: "#/record/" + typeName + "/" + encodeURIComponent(key) }, key)),
      h("td", { class: "num" }, resp.versions?.[i] ?? ""),
      h("td", {}, h("code", { class: "json" }, JSON.stringify(shown))));
  });
}

// showQueryError shows a refused query; a filter that does not parse or
// names an unknown field puts the caret at the column the server names.
function showQueryError(e: unknown, input: HTMLInputElement, out: HTMLElement): void {
  out.hidden = false;
  out.textContent = e instanceof ApiError ? e.message : String(e);
  delete out.dataset.column;
  if (!(e instanceof ApiError)) {
    return;
  }
  out.dataset.code = e.code;
  const where = e.violation("query.filter")?.description ?? e.message;
  const m = /(?:line (\d+), )?column (\d+)/.exec(where);
  if (!m) {
    return;
  }
  const col = Number(m[2]);
  out.dataset.column = String(col);
  input.setAttribute("aria-invalid", "true");
  // Columns count runes (code points) from 1; the input's offsets count
  // UTF-16 units from 0.
  const chars = Array.from(input.value);
  const off = chars.slice(0, Math.max(0, col - 1)).join("").length;
  input.focus();
  input.setSelectionRange(off, off);
}
