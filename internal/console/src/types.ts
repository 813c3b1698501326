// The types page: every record type the key may see with its fields,
// primary key, indexes and record count; the schema's .proto source, and
// a schema change planned (dry run) before it is applied.

import { ApiError, call } from "./api.js";
import { append, clear, field, h, setStatus } from "./dom.js";
import type { Page } from "./main.js";
import { buildProgress, fieldType, loadSchema, mayChangeSchema, message, stateName } from "./schema.js";
import type { IndexInfo, RecordType, Schema } from "./schema.js";

export async function renderTypes(page: Page): Promise<void> {
  const s = await loadSchema({ signal: page.signal });
  const { main } = page;
  const types = s.types ?? [];
  const body = h("tbody");
  for (const t of types) {
    body.append(typeRow(s, t, page.signal));
  }
  append(main,
    h("h1", {}, "Record types"),
    h("p", {}, "Schema version " + (s.version ?? "0") + (s.keyScope?.length ? " · this key sees " + s.keyScope.join(", ") : "")),
    types.length === 0 ? h("p", { id: "no-types" }, "No record types yet.") : null,
    h("div", { class: "scroll" },
      h("table", { id: "types" },
        h("caption", {}, "Record types, their keys, indexes and record counts"),
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Type"), h("th", { scope: "col" }, "Fields"), h("th", { scope: "col" }, "Primary key"),
          h("th", { scope: "col" }, "Indexes"), h("th", { scope: "col" }, "Records"))),
        body)),
    schemaSection(s));
}

function typeRow(s: Schema, t: RecordType, signal: AbortSignal): HTMLTableRowElement {
  const fields = h("ul", { class: "plain" });
  for (const f of message(s, t.name)?.field ?? []) {
    fields.append(h("li", {}, h("code", {}, f.name), " ", h("span", { class: "muted" }, fieldType(f) + " = " + (f.number ?? ""))));
  }
  const indexes = h("td", { class: "indexes" });
  for (const ix of t.indexes ?? []) {
    indexes.append(indexBadge(ix));
  }
  if (!(t.indexes ?? []).length) {
    indexes.append(h("span", { class: "muted" }, "none"));
  }
  const count = h("td", { class: "count num" }, "…");
  void countRecords(t.name, signal).then((n) => {
    count.textContent = n;
    for (const ix of t.indexes ?? []) {
      const badge = indexes.querySelector<HTMLElement>(`span.index[data-index="${CSS.escape(ix.name)}"] .badge`);
      if (badge && stateName(ix.state) === "BUILDING") {
        badge.textContent = buildProgress(ix, n);
      }
    }
  }, (e: unknown) => { count.textContent = e instanceof ApiError ? e.code : "?"; });
  return h("tr", { "data-type": t.name },
    h("th", { scope: "row" }, h("a", { href: "#/records/" + t.name }, t.name)),
    h("td", { class: "fields" }, fields),
    h("td", { class: "pk" }, (t.primaryKey ?? []).join(", ")),
    indexes,
    count);
}

function indexBadge(ix: IndexInfo): HTMLElement {
  const state = stateName(ix.state);
  let text = ix.name + " (" + (ix.fields ?? []).join(", ") + ")";
  if (ix.unique) {
    text += " unique";
  }
  if (ix.aggregate) {
    text += " aggregate" + (ix.sum?.length ? " sum " + ix.sum.join(", ") : "");
  }
  const progress = state === "BUILDING" ? buildProgress(ix) :
    state === "FAILED" ? "failed: " + (ix.error ?? "") : state.toLowerCase();
  return h("span", { class: "index state-" + state.toLowerCase(), "data-index": ix.name, "data-state": state },
    text, " ", h("span", { class: "badge" }, progress));
}

async function countRecords(typeName: string, signal: AbortSignal): Promise<string> {
  const resp = await call<{ count?: string }>("POST", "/v1/query", { query: { type: typeName, count: true } }, { signal });
  return resp.count ?? "0";
}

interface Plan {
  typesAdded?: string[];
  typesChanged?: { type: string; changes?: string[] }[];
  typesDropped?: { type: string; records?: string }[];
  indexesAdded?: { type: string; index: string; fields?: string[]; buildRequired?: boolean }[];
  indexesDropped?: { type: string; index: string }[];
  filesAdded?: string[];
  filesChanged?: string[];
  filesRemoved?: string[];
}

function schemaSection(s: Schema): HTMLElement {
  const files = Object.keys(s.files ?? {}).sort();
  const source = files.map((f) => "// " + f + "\n" + (s.files?.[f] ?? "")).join("\n");
  const section = h("section", { "aria-labelledby": "schema-title" },
    h("h2", { id: "schema-title" }, "Schema source"),
    h("pre", { id: "schema-source", tabindex: "0", "aria-label": "The schema's .proto files" }, source || "(no files)"));
  const may = mayChangeSchema(s);
  const name = h("input", { id: "schema-file", type: "text", value: files[0] ?? "schema.proto", autocomplete: "off", spellcheck: "false" });
  const edit = h("textarea", { id: "schema-edit", rows: 16, spellcheck: "false" });
  edit.value = s.files?.[files[0] ?? ""] ?? "";
  const planBtn = h("button", { id: "schema-plan", type: "button" }, "Plan (dry run)");
  const applyBtn = h("button", { id: "schema-apply", type: "button", disabled: true, hidden: !may }, "Apply");
  const out = h("pre", { id: "schema-plan-output", "aria-live": "polite", tabindex: "0" });
  const status = h("p", { id: "schema-status", role: "status" });
  let planned: Plan | null = null;
  const invalidate = () => {
    planned = null;
    applyBtn.disabled = true;
  };
  name.addEventListener("input", () => {
    invalidate();
    if (s.files?.[name.value] !== undefined) {
      edit.value = s.files[name.value] ?? "";
    }
  });
  edit.addEventListener("input", invalidate);
  const request = (dryRun: boolean) => ({
    files: { [name.value.trim()]: edit.value },
    mode: "SCHEMA_MODE_ADD",
    dryRun,
    allowDrop: dryRun || !planned ? [] : drops(planned),
  });
  planBtn.addEventListener("click", () => {
    invalidate();
    setStatus(status, "Planning…");
    void call<{ plan?: Plan }>("POST", "/v1/schema:apply", request(true)).then((r) => {
      planned = r.plan ?? {};
      clear(out);
      out.textContent = describePlan(planned);
      applyBtn.disabled = false;
      setStatus(status, "Review the plan, then apply it.");
    }, (e: unknown) => {
      clear(out);
      showError(status, e);
    });
  });
  applyBtn.addEventListener("click", () => {
    if (!planned) {
      return;
    }
    applyBtn.disabled = true;
    void call<{ version?: string; applied?: boolean }>("POST", "/v1/schema:apply", request(false)).then((r) => {
      setStatus(status, r.applied ? "Applied: schema version " + (r.version ?? "") + "." : "Nothing to change.");
      planned = null;
    }, (e: unknown) => showError(status, e));
  });
  section.append(h("div", { class: "schema-edit", hidden: !may },
    h("h2", {}, "Change the schema"),
    h("p", {}, "Edit one file (a new name adds a file). Plan shows what the change would do without doing it; Apply is enabled once a plan was shown, and applies that change."),
    field("File", name),
    field("Source", edit),
    h("div", { class: "actions" }, planBtn, applyBtn),
    status,
    out));
  return section;
}

function drops(p: Plan): string[] {
  return [...(p.typesDropped ?? []).map((d) => d.type), ...(p.indexesDropped ?? []).map((d) => d.type + "." + d.index)];
}

function describePlan(p: Plan): string {
  const lines: string[] = [];
  const list = (title: string, items: string[]) => {
    if (items.length) {
      lines.push(title + ":", ...items.map((i) => "  " + i));
    }
  };
  list("Types added", p.typesAdded ?? []);
  list("Types changed", (p.typesChanged ?? []).map((c) => c.type + ": " + (c.changes ?? []).join("; ")));
  list("Types DROPPED with their records", (p.typesDropped ?? []).map((d) => d.type + " (" + (d.records ?? "0") + " records deleted)"));
  list("Indexes added", (p.indexesAdded ?? []).map((i) => i.type + "." + i.index + " (" + (i.fields ?? []).join(", ") + ")" +
    (i.buildRequired ? ": built in the background" : "")));
  list("Indexes dropped", (p.indexesDropped ?? []).map((i) => i.type + "." + i.index));
  list("Files added", p.filesAdded ?? []);
  list("Files changed", p.filesChanged ?? []);
  list("Files removed", p.filesRemoved ?? []);
  return lines.length ? lines.join("\n") : "No change.";
}

export function showError(el: HTMLElement, e: unknown): void {
  if (e instanceof ApiError) {
    setStatus(el, e.code + ": " + e.message, e.code);
  } else {
    setStatus(el, e instanceof Error ? e.message : String(e), "UNKNOWN");
  }
}
