// The console's only way to the server: the public REST API on the page's
// own origin, with the user's key in the Authorization header. The key
// lives in the tab's session storage; it never goes into a URL or a log.

const keyItem = "protobase.key";

// signedIn reports whether a key (possibly empty, for a server without
// keys) was accepted in this tab.
export function signedIn(): boolean {
  return sessionStorage.getItem(keyItem) !== null;
}

export function saveKey(key: string): void {
  sessionStorage.setItem(keyItem, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(keyItem);
}

const codeNames = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
  "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"];

export interface FieldViolation {
  field?: string;
  description?: string;
}

export interface StatusDetail {
  "@type"?: string;
  fieldViolations?: FieldViolation[];
  [k: string]: unknown;
}

// ApiError is a refused call: the google.rpc.Status the server answered.
export class ApiError extends Error {
  constructor(message: string, readonly code: string, readonly httpStatus: number, readonly details: StatusDetail[]) {
    super(message);
  }

  // violation returns the BadRequest field violation naming field, if any.
  violation(field: string): FieldViolation | undefined {
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

interface StatusJSON {
  code?: number;
  message?: string;
  details?: StatusDetail[];
}

export function statusError(st: StatusJSON, httpStatus: number): ApiError {
  const code = codeNames[st.code ?? 2] ?? "UNKNOWN";
  return new ApiError(st.message || "HTTP " + httpStatus, code, httpStatus, st.details ?? []);
}

function errorFrom(httpStatus: number, text: string): ApiError {
  let st: StatusJSON = {};
  try {
    const v: unknown = JSON.parse(text.split("\n")[0] ?? "");
    if (v && typeof v === "object") {
      st = ("error" in v ? (v as { error: StatusJSON }).error : v) as StatusJSON;
    }
  } catch {
    st = { message: text.trim() || "HTTP " + httpStatus };
  }
  if (st.code === undefined) {
    st.code = httpStatus === 401 ? 16 : httpStatus === 403 ? 7 : httpStatus === 404 ? 5 : 2;
  }
  return statusError(st, httpStatus);
}

// onUnauthenticated is called when the server refuses the key (revoked,
// or the server restarted with other keys).
let onUnauthenticated: (err: ApiError) => void = () => {};

export function setUnauthenticatedHandler(f: (err: ApiError) => void): void {
  onUnauthenticated = f;
}

function headers(key: string | null, contentType?: string): Headers {
  const hd = new Headers();
  if (key) {
    hd.set("Authorization", "Bearer " + key);
  }
  if (contentType) {
    hd.set("Content-Type", contentType);
  }
  return hd;
}

export interface CallOptions {
  signal?: AbortSignal;
  // key overrides the stored key (sign-in tries a key before storing it).
  key?: string;
}

// request sends one request and returns the response once it is known to
// be a success; a failure throws ApiError.
export async function request(method: "GET" | "POST", path: string, body?: unknown, opts: CallOptions = {}): Promise<Response> {
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
export async function call<T>(method: "GET" | "POST", path: string, body?: unknown, opts: CallOptions = {}): Promise<T> {
  const resp = await request(method, path, body, opts);
  const text = await resp.text();
  // A write stream answers a line; an error after the headers is a line
  // holding {"error": status}.
  const line = text.trim().split("\n").pop() ?? "";
  const v = (line ? JSON.parse(line) : {}) as T & { error?: StatusJSON };
  if (v && typeof v === "object" && "error" in v && v.error) {
    throw statusError(v.error, resp.status);
  }
  return v;
}

// lines reads a newline-delimited JSON stream, calling each for every
// {"result": ...} line; an {"error": ...} line throws ApiError. It returns
// when the server ends the stream.
export async function lines<T>(resp: Response, each: (v: T) => void): Promise<void> {
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
    let nl: number;
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

function handleLine<T>(line: string, httpStatus: number, each: (v: T) => void): void {
  const v = JSON.parse(line) as { result?: T; error?: StatusJSON };
  if (v.error) {
    throw statusError(v.error, httpStatus);
  }
  if (v.result !== undefined) {
    each(v.result);
  }
}
