// The console's entry point: sign-in, the session bar and the hash router
// that renders one page at a time into <main>.
import { ApiError, forgetKey, saveKey, setUnauthenticatedHandler, signedIn } from "./api.js";
import { byId, clear, field, h } from "./dom.js";
import { cachedSchema, forgetSchema, loadSchema } from "./schema.js";
import { renderChanges } from "./changes.js";
import { renderHealth } from "./health.js";
import { renderRecord } from "./record.js";
import { renderRecords } from "./records.js";
import { renderTypes } from "./types.js";
let leave = null;
function renderSignIn(main, message) {
    const input = h("input", { id: "key-input", type: "password", autocomplete: "off", spellcheck: "false" });
    const err = h("p", { id: "key-error", class: "error", role: "alert", hidden: !message }, message ?? "");
    const form = h("form", { class: "signin", "aria-labelledby": "signin-title" }, h("h1", { id: "signin-title" }, "Sign in"), h("p", {}, "Enter an API key. It is kept in this tab only (session storage) and sent to this server alone. ", "Leave it empty for a server that runs without keys."), field("API key", input), h("button", { id: "key-submit", type: "submit" }, "Sign in"), err);
    form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        void signIn(input.value.trim(), err);
    });
    clear(main);
    main.append(form);
    input.focus();
}
async function signIn(key, err) {
    err.hidden = true;
    try {
        await loadSchema({ key });
    }
    catch (e) {
        err.textContent = e instanceof ApiError && e.code === "UNAUTHENTICATED"
            ? "The server refused this key: " + e.message
            : "Sign-in failed: " + (e instanceof Error ? e.message : String(e));
        err.hidden = false;
        return;
    }
    saveKey(key);
    if (!location.hash || location.hash === "#/" || location.hash === "#/signin") {
        location.hash = "#/types";
    }
    else {
        void route();
    }
}
function signOut(message) {
    forgetKey();
    forgetSchema();
    leave?.abort();
    renderSession();
    renderSignIn(byId("main"), message);
}
function renderSession() {
    const box = byId("session");
    clear(box);
    if (!signedIn()) {
        return;
    }
    const role = cachedSchema()?.keyRole;
    box.append(h("span", { id: "key-role" }, role ? "Key role: " + role : "No keys on this server"), h("button", { id: "signout", type: "button", onclick: () => signOut() }, "Sign out"));
}
function markNav(path) {
    for (const a of document.querySelectorAll("nav a")) {
        const here = path.startsWith(a.getAttribute("href")?.slice(1) ?? "\u0000") ||
            (a.getAttribute("href") === "#/types" && (path.startsWith("/records/") || path.startsWith("/record/") || path.startsWith("/new/")));
        if (here) {
            a.setAttribute("aria-current", "page");
        }
        else {
            a.removeAttribute("aria-current");
        }
    }
}
// route renders the page of the address; moved says the user went there
// (a link, back or forward), so focus goes to the new page's heading and
// a screen reader announces it.
export async function route(moved = false) {
    leave?.abort();
    const ctl = new AbortController();
    leave = ctl;
    const main = byId("main");
    if (!signedIn()) {
        renderSession();
        renderSignIn(main);
        return;
    }
    if (!cachedSchema()) {
        try {
            await loadSchema({ signal: ctl.signal });
        }
        catch (e) {
            if (!ctl.signal.aborted) {
                signOut(e instanceof Error ? e.message : String(e));
            }
            return;
        }
    }
    renderSession();
    const path = decodeHash(location.hash);
    markNav(path);
    const page = { main, signal: ctl.signal };
    clear(main);
    const parts = path.split("/");
    try {
        if (path === "/types" || path === "/" || path === "") {
            await renderTypes(page);
        }
        else if (parts[1] === "records" && parts.length === 3) {
            await renderRecords(page, parts[2] ?? "");
        }
        else if (parts[1] === "record" && parts.length >= 4) {
            await renderRecord(page, parts[2] ?? "", parts.slice(3).join("/"));
        }
        else if (parts[1] === "new" && parts.length === 3) {
            await renderRecord(page, parts[2] ?? "", null);
        }
        else if (path === "/changes") {
            renderChanges(page);
        }
        else if (path === "/health") {
            renderHealth(page);
        }
        else {
            main.append(h("h1", {}, "Not found"), h("p", {}, "No page here. ", h("a", { href: "#/types" }, "See the types.")));
        }
    }
    catch (e) {
        if (!ctl.signal.aborted) {
            main.append(h("p", { class: "error", role: "alert" }, "Could not load the page: " + (e instanceof Error ? e.message : String(e))));
        }
    }
    const heading = main.querySelector("h1");
    if (moved && heading && !ctl.signal.aborted && !main.contains(document.activeElement)) {
        heading.tabIndex = -1;
        heading.focus();
    }
}
// decodeHash returns the route of a hash: "#/record/T/%5B1%5D" is
// "/record/T/%5B1%5D" (the key stays encoded: it may hold a slash).
function decodeHash(hash) {
    return hash.replace(/^#/, "");
}
setUnauthenticatedHandler((err) => signOut("The server no longer accepts this key: " + err.message));
window.addEventListener("hashchange", () => void route(true));
void route();
