// Reading the Prometheus text format of GET /metrics: samples by name,
// rates from counters, and quantiles from histogram buckets.

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

export type Samples = Map<string, Sample[]>;

const lineRE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
const labelRE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parse(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) {
      continue;
    }
    const m = lineRE.exec(line);
    if (!m) {
      continue;
    }
    const labels: Record<string, string> = {};
    for (const lm of (m[3] ?? "").matchAll(labelRE)) {
      labels[lm[1] ?? ""] = (lm[2] ?? "").replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    const name = m[1] ?? "";
    const list = out.get(name) ?? [];
    list.push({ labels, value: Number(m[4]) });
    out.set(name, list);
  }
  return out;
}

// total sums a metric over its label sets; undefined when absent.
export function total(s: Samples, name: string): number | undefined {
  const list = s.get(name);
  return list ? list.reduce((a, x) => a + x.value, 0) : undefined;
}

// Buckets are a histogram's cumulative counts by upper bound, summed over
// its label sets, ascending (the last is +Inf).
export type Buckets = [number, number][];

export function buckets(s: Samples, name: string): Buckets | undefined {
  const list = s.get(name + "_bucket");
  if (!list) {
    return undefined;
  }
  const by = new Map<number, number>();
  for (const x of list) {
    const le = x.labels.le === "+Inf" ? Infinity : Number(x.labels.le);
    by.set(le, (by.get(le) ?? 0) + x.value);
  }
  return [...by.entries()].sort((a, b) => a[0] - b[0]);
}

// delta is what a histogram gained between two readings.
export function delta(now: Buckets, before: Buckets | undefined): Buckets {
  if (!before) {
    return now;
  }
  const prev = new Map(before);
  return now.map(([le, c]) => [le, Math.max(0, c - (prev.get(le) ?? 0))]);
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear within the bucket holding it; the highest finite bound
// when it falls in +Inf. undefined without observations.
export function quantile(q: number, b: Buckets): number | undefined {
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
