// The console's only way to the server: the public REST API on the page's
// own origin, with the user's key in the Authorization header. The key
// lives in the tab's session storage; it never goes into a URL or a log.
const keyItem = "protobase.key";
// signedIn reports whether a key (possibly empty, for a server without
// keys) was accepted in this tab.
export function signedIn() {
    return sessionStorage.getItem(keyItem) !== null;
}
export function saveKey(key) {
    sessionStorage.setItem(keyItem, key);
}
export function forgetKey() {
    sessionStorage.removeItem(keyItem);
}
const codeNames = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"];
// ApiError is a refused call: the google.rpc.Status the server answered.
export class ApiError extends Error {
    code;
    httpStatus;
    details;
    constructor(message, code, httpStatus, details) {
        super(message);
        this.code = code;
        this.httpStatus = httpStatus;
        this.details = details;
    }
    // violation returns the BadRequest field violation naming field, if any.
    violation(field) {
        for (const d of this.details) {
            for (const v of d.fieldViolations ?? []) {
                if (v.field === field) {
                    return v;
                }
            }
        }
        return undefined;
    }
}
export function statusError(st, httpStatus) {
    const code = codeNames[st.code ?? 2] ?? "UNKNOWN";
    return new ApiError(st.message || "HTTP " + httpStatus, code, httpStatus, st.details ?? []);
}
function errorFrom(httpStatus, text) {
    let st = {};
    try {
        const v = JSON.parse(text.split("\n")[0] ?? "");
        if (v && typeof v === "object") {
            st = ("error" in v ? v.error : v);
        }
    }
    catch {
        st = { message: text.trim() || "HTTP " + httpStatus };
    }
    if (st.code === undefined) {
        st.code = httpStatus === 401 ? 16 : httpStatus === 403 ? 7 : httpStatus === 404 ? 5 : 2;
    }
    return statusError(st, httpStatus);
}
// onUnauthenticated is called when the server refuses the key (revoked,
// or the server restarted with other keys).
let onUnauthenticated = () => { };
export function setUnauthenticatedHandler(f) {
    onUnauthenticated = f;
}
function headers(key, contentType) {
    const hd = new Headers();
    if (key) {
        hd.set("Authorization", "Bearer " + key);
    }
    if (contentType) {
        hd.set("Content-Type", contentType);
    }
    return hd;
}
// request sends one request and returns the response once it is known to
// be a success; a failure throws ApiError.
export async function request(method, path, body, opts = {}) {
    const key = opts.key ?? sessionStorage.getItem(keyItem);
    const resp = await fetch(path, {
        method,
        headers: headers(key, body === undefined ? undefined : "application/json"),
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
        referrerPolicy: "no-referrer",
        signal: opts.signal,
    });
    if (!resp.ok) {
        const err = errorFrom(resp.status, await resp.text());
        if (resp.status === 401 && opts.key === undefined) {
            onUnauthenticated(err);
        }
        throw err;
    }
    return resp;
}
// call is a unary call: JSON in, JSON out.
export async function call(method, path, body, opts = {}) {
    const resp = await request(method, path, body, opts);
    const text = await resp.text();
    // A write stream answers a line; an error after the headers is a line
    // holding {"error": status}.
    const line = text.trim().split("\n").pop() ?? "";
    const v = (line ? JSON.parse(line) : {});
    if (v && typeof v === "object" && "error" in v && v.error) {
        throw statusError(v.error, resp.status);
    }
    return v;
}
// lines reads a newline-delimited JSON stream, calling each for every
// {"result": ...} line; an {"error": ...} line throws ApiError. It returns
// when the server ends the stream.
export async function lines(resp, each) {
    if (!resp.body) {
        return;
    }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
        const { done, value } = await reader.read();
        if (done) {
            break;
        }
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (line) {
                handleLine(line, resp.status, each);
            }
        }
    }
    if (buf.trim()) {
        handleLine(buf.trim(), resp.status, each);
    }
}
function handleLine(line, httpStatus, each) {
    const v = JSON.parse(line);
    if (v.error) {
        throw statusError(v.error, httpStatus);
    }
    if (v.result !== undefined) {
        each(v.result);
    }
}
