// The record view: one record as JSON with its version. A key that may
// write saves it as a conditional update on the version shown (two people
// editing one record cannot overwrite each other: the second save is
// ABORTED) and deletes it as a conditional remove; a new record is
// inserted.
import { ApiError, call } from "./api.js";
import { field, h, setStatus } from "./dom.js";
import { cachedSchema, findType, keyOf, loadSchema, mayWrite, template } from "./schema.js";
import { showError } from "./types.js";
// flash is an outcome to show on the next record view (an insert moves to
// the new record's own view).
let flash = "";
export async function renderRecord(page, typeName, encodedKey) {
    const s = cachedSchema() ?? await loadSchema({ signal: page.signal });
    const { main } = page;
    const t = findType(s, typeName);
    if (!t) {
        main.append(h("h1", {}, "No type " + typeName), h("p", {}, h("a", { href: "#/types" }, "See the types.")));
        return;
    }
    const status = h("p", { id: "record-status", role: "status", "aria-live": "polite" });
    const json = h("textarea", { id: "record-json", rows: 20, spellcheck: "false", readonly: !mayWrite(s) });
    const version = h("span", { id: "record-version" });
    const back = h("a", { href: "#/records/" + typeName }, "All records of " + typeName);
    let key = null;
    if (encodedKey !== null) {
        try {
            key = JSON.parse(decodeURIComponent(encodedKey));
        }
        catch {
            main.append(h("h1", {}, "Bad record address"), h("p", {}, back));
            return;
        }
    }
    main.append(h("h1", {}, key ? typeName + " " + JSON.stringify(key) : "New " + typeName), h("p", {}, back), h("p", {}, "Version ", version), field("Record (JSON)", json), h("div", { class: "actions", id: "record-actions" }), status);
    const actions = main.querySelector("#record-actions");
    if (!key) {
        json.value = JSON.stringify(template(s, typeName), null, 2);
        version.textContent = "new";
        if (mayWrite(s)) {
            actions?.append(h("button", { id: "record-save", type: "button", onclick: () => void insert(s, typeName, json, status) }, "Insert"));
        }
        return;
    }
    let shown = "0";
    const load = async () => {
        const resp = await call("POST", "/v1/records:get", { type: typeName, keys: [(t.primaryKey ?? []).length === 1 ? key?.[0] : key], versions: true }, { signal: page.signal });
        const rec = resp.records?.[0];
        if (!rec) {
            json.value = "";
            version.textContent = "none";
            setStatus(status, "No record with this key (it may have been deleted).", "NOT_FOUND");
            return false;
        }
        json.value = JSON.stringify(rec, null, 2);
        shown = resp.versions?.[0] ?? "0";
        version.textContent = shown;
        return true;
    };
    if (!await load()) {
        return;
    }
    if (flash) {
        setStatus(status, flash);
        flash = "";
    }
    if (!mayWrite(s)) {
        return;
    }
    const save = h("button", { id: "record-save", type: "button" }, "Save");
    const del = h("button", { id: "record-delete", type: "button", class: "danger" }, "Delete");
    save.addEventListener("click", () => {
        const rec = parse(json.value, status);
        if (!rec) {
            return;
        }
        setStatus(status, "Saving…");
        void write("update", rec, shown).then(async () => {
            await load();
            setStatus(status, "Record saved: version " + shown + ".");
        }, (e) => showWriteError(status, e));
    });
    del.addEventListener("click", () => {
        const rec = parse(json.value, status);
        if (!rec) {
            return;
        }
        setStatus(status, "Deleting…");
        void write("remove", rec, shown).then(() => {
            save.disabled = del.disabled = true;
            json.readOnly = true;
            version.textContent = "none";
            setStatus(status, "Record deleted.");
        }, (e) => showWriteError(status, e));
    });
    actions?.append(save, del);
}
function parse(text, status) {
    try {
        const v = JSON.parse(text);
        if (v && typeof v === "object" && !Array.isArray(v)) {
            return v;
        }
        setStatus(status, "The record must be a JSON object.", "INVALID_ARGUMENT");
    }
    catch (e) {
        setStatus(status, "Not valid JSON: " + (e instanceof Error ? e.message : String(e)), "INVALID_ARGUMENT");
    }
    return null;
}
// write sends one record as a batch whose condition is that the stored
// record still has the version shown.
async function write(op, rec, version) {
    await call("POST", "/v1/records:" + op, { records: [rec], conditions: [{ record: 0, version }] });
}
async function insert(s, typeName, json, status) {
    const rec = parse(json.value, status);
    if (!rec) {
        return;
    }
    try {
        await call("POST", "/v1/records:insert", { records: [rec] });
    }
    catch (e) {
        showWriteError(status, e);
        return;
    }
    flash = "Record saved (inserted).";
    location.hash = "#/record/" + typeName + "/" + encodeURIComponent(JSON.stringify(keyOf(s, typeName, rec)));
}
function showWriteError(status, e) {
    if (e instanceof ApiError && e.code === "ABORTED") {
        setStatus(status, "Refused: the record changed since it was shown (" + e.message + "). Reload it to see the new version.", e.code);
        return;
    }
    showError(status, e);
}
