// The changes page: a live tail of Watch (POST /v1/watch, read as a
// newline-delimited JSON stream) for chosen types and a filter. Pause
// aborts the request and keeps the last position delivered; resume
// watches again from just after it, so no change is lost or repeated.
import { ApiError, lines, request } from "./api.js";
import { field, h } from "./dom.js";
import { cachedSchema, keyOf } from "./schema.js";
// At most this many changes stay listed; older ones are dropped.
const keep = 500;
export function renderChanges(page) {
    const s = cachedSchema() ?? {};
    const { main } = page;
    const types = h("select", { id: "watch-types", multiple: true, size: Math.min(6, Math.max(2, (s.types ?? []).length)) });
    for (const t of s.types ?? []) {
        types.append(h("option", { value: t.name, selected: true }, t.name));
    }
    const filter = h("input", { id: "watch-filter", type: "text", autocomplete: "off", spellcheck: "false" });
    const start = h("button", { id: "watch-start", type: "submit" }, "Start");
    const pause = h("button", { id: "watch-pause", type: "button", disabled: true }, "Pause");
    const resume = h("button", { id: "watch-resume", type: "button", disabled: true }, "Resume");
    const status = h("p", { id: "watch-status", role: "status", "aria-live": "polite" }, "stopped");
    const list = h("ol", { id: "changes", reversed: true, "aria-label": "Changes, newest first" });
    const form = h("form", { class: "toolbar" }, field("Types", types, "Ctrl or Shift to choose several"), field("Filter", filter), h("div", { class: "actions" }, start, pause, resume));
    main.append(h("h1", {}, "Changes"), h("p", {}, "A live tail of the changes the server commits, newest first."), form, status, list);
    let ctl = null;
    let last = null;
    let running = null;
    page.signal.addEventListener("abort", () => ctl?.abort());
    const setState = (text, live) => {
        status.textContent = text;
        status.classList.toggle("error", !["live", "paused", "stopped", "starting…"].includes(text));
        pause.disabled = !live;
        resume.disabled = live || !running;
    };
    const watch = (from) => {
        if (!running) {
            return;
        }
        ctl?.abort();
        const mine = new AbortController();
        ctl = mine;
        page.signal.addEventListener("abort", () => mine.abort());
        const body = {
            types: running.types,
            filter: running.filter,
            // A position without an index stands for its whole commit.
            start: from ? { after: from } : { now: true },
        };
        setState("starting…", true);
        void (async () => {
            try {
                const resp = await request("POST", "/v1/watch", body, { signal: mine.signal });
                setState("live", true);
                await lines(resp, (r) => {
                    for (const c of r.changes ?? []) {
                        list.prepend(changeItem(s, c));
                        last = c.position ?? last;
                    }
                    while (list.children.length > keep) {
                        list.lastElementChild?.remove();
                    }
                    if (r.progress) {
                        last = r.progress;
                    }
                });
                if (ctl === mine) {
                    setState("stopped", false);
                }
            }
            catch (e) {
                if (mine.signal.aborted) {
                    return;
                }
                setState(e instanceof ApiError ? e.code + ": " + e.message : String(e), false);
            }
        })();
    };
    form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        const chosen = Array.from(types.selectedOptions, (o) => o.value);
        if (!chosen.length) {
            setState("choose at least one type", false);
            return;
        }
        running = { types: chosen, filter: filter.value.trim() };
        list.replaceChildren();
        last = null;
        watch(null);
    });
    pause.addEventListener("click", () => {
        ctl?.abort();
        ctl = null;
        setState("paused", false);
        resume.focus();
    });
    resume.addEventListener("click", () => {
        watch(last);
        pause.focus();
    });
}
function changeItem(s, c) {
    const op = (c.op ?? "CHANGE_OP_UNSPECIFIED").replace(/^CHANGE_OP_/, "");
    const type = c.type ?? "";
    const key = JSON.stringify(keyOf(s, type, c.key ?? c.record ?? {}));
    const when = c.position ? "position " + (c.position.commit ?? "0") + "." + (c.position.index ?? 0) : "";
    return h("li", { "data-op": op, "data-type": type, "data-key": key }, h("span", { class: "op op-" + op.toLowerCase() }, op + (c.expired ? " (expired)" : "")), " ", type, " ", h("code", {}, key), " ", h("span", { class: "muted" }, when), h("pre", { class: "json" }, JSON.stringify(c, null, 2)));
}
