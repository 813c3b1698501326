// Reading the Prometheus text format of GET /metrics: samples by name,
// rates from counters, and quantiles from histogram buckets.
const lineRE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
const labelRE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
export function parse(text) {
    const out = new Map();
    for (const line of text.split("\n")) {
        if (line === "" || line.startsWith("#")) {
            continue;
        }
        const m = lineRE.exec(line);
        if (!m) {
            continue;
        }
        const labels = {};
        for (const lm of (m[3] ?? "").matchAll(labelRE)) {
            labels[lm[1] ?? ""] = (lm[2] ?? "").replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
        }
        const name = m[1] ?? "";
        const list = out.get(name) ?? [];
        list.push({ labels, value: Number(m[4]) });
        out.set(name, list);
    }
    return out;
}
// total sums a metric over its label sets; undefined when absent.
export function total(s, name) {
    const list = s.get(name);
    return list ? list.reduce((a, x) => a + x.value, 0) : undefined;
}
export function buckets(s, name) {
    const list = s.get(name + "_bucket");
    if (!list) {
        return undefined;
    }
    const by = new Map();
    for (const x of list) {
        const le = x.labels.le === "+Inf" ? Infinity : Number(x.labels.le);
        by.set(le, (by.get(le) ?? 0) + x.value);
    }
    return [...by.entries()].sort((a, b) => a[0] - b[0]);
}
// delta is what a histogram gained between two readings.
export function delta(now, before) {
    if (!before) {
        return now;
    }
    const prev = new Map(before);
    return now.map(([le, c]) => [le, Math.max(0, c - (prev.get(le) ?? 0))]);
}
// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear within the bucket holding it; the highest finite bound
// when it falls in +Inf. undefined without observations.
export function quantile(q, b) {
    const count = b.length ? (b[b.length - 1]?.[1] ?? 0) : 0;
    if (count === 0) {
        return undefined;
    }
    const rank = q * count;
    let prevLe = 0;
    let prevCount = 0;
    for (const [le, c] of b) {
        if (c >= rank) {
            if (le === Infinity) {
                return prevLe;
            }
            if (c === prevCount) {
                return le;
            }
            return prevLe + (le - prevLe) * ((rank - prevCount) / (c - prevCount));
        }
        prevLe = le;
        prevCount = c;
    }
    return prevLe;
}
