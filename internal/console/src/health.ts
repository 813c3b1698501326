// The health page: write and read rates, latency quantiles and storage
// figures from the server's own metrics (GET /metrics, every 2 s), with
// index builds (from the schema) and backups in progress.

import { ApiError, request } from "./api.js";
import { clear, h } from "./dom.js";
import type { Page } from "./main.js";
import { buckets, delta, parse, quantile, total } from "./metrics.js";
import type { Buckets, Samples } from "./metrics.js";
import { buildProgress, loadSchema, stateName } from "./schema.js";

const everyMs = 2000;

interface Reading {
  at: number;
  samples: Samples;
}

export function renderHealth(page: Page): void {
  const { main } = page;
  const metric = (name: string, label: string) =>
    h("div", { class: "metric" }, h("dt", {}, label), h("dd", { "data-metric": name }, "…"));
  const status = h("p", { id: "health-status", role: "status" }, "Reading the metrics…");
  const builds = h("ul", { id: "builds", class: "plain" });
  const backups = h("p", { id: "backups" }, "…");
  main.append(
    h("h1", {}, "Health"),
    h("p", {}, "From the server's metrics, refreshed every 2 seconds. Rates and latencies cover the last interval."),
    status,
    h("h2", {}, "Load"),
    h("dl", { class: "metrics" },
      metric("write-rate", "Writes (records/s)"),
      metric("read-rate", "Reads (requests/s)"),
      metric("latency-p50", "Write latency p50"),
      metric("latency-p99", "Write latency p99"),
      metric("read-latency-p50", "Get latency p50"),
      metric("read-latency-p99", "Get latency p99")),
    h("h2", {}, "Storage"),
    h("dl", { class: "metrics" },
      metric("storage-bytes", "On disk"),
      metric("table-bytes", "Tables"),
      metric("wal-bytes", "Write-ahead log"),
      metric("memtable-bytes", "Memtables")),
    h("h2", {}, "In progress"),
    h("h3", {}, "Index builds"), builds,
    h("h3", {}, "Backups"), backups);

  let before: Reading | null = null;
  const set = (name: string, text: string) => {
    const el = main.querySelector<HTMLElement>(`[data-metric="${name}"]`);
    if (el) {
      el.textContent = text;
    }
  };
  const tick = async () => {
    try {
      const resp = await request("GET", "/metrics", undefined, { signal: page.signal });
      const now: Reading = { at: performance.now(), samples: parse(await resp.text()) };
      show(set, now, before);
      backups.textContent = backupsText(now.samples);
      before = now;
      await showBuilds(builds, page.signal);
      status.textContent = "Updated " + new Date().toLocaleTimeString();
      status.classList.remove("error");
    } catch (e) {
      if (page.signal.aborted) {
        return;
      }
      status.textContent = "Could not read the metrics: " + (e instanceof ApiError ? e.code + ": " : "") + (e instanceof Error ? e.message : String(e));
      status.classList.add("error");
    }
  };
  void tick();
  const timer = window.setInterval(() => void tick(), everyMs);
  page.signal.addEventListener("abort", () => window.clearInterval(timer));
}

function show(set: (name: string, text: string) => void, now: Reading, before: Reading | null): void {
  const s = now.samples;
  const secs = before ? (now.at - before.at) / 1000 : 0;
  const rate = (names: string[]) => {
    if (!before || secs <= 0) {
      return "…";
    }
    let sum = 0;
    for (const n of names) {
      const a = total(s, n);
      const b = total(before.samples, n);
      if (a !== undefined) {
        // A counter that went down was reset (a restart): count from 0.
        sum += b === undefined || a < b ? a : a - b;
      }
    }
    return (sum / secs).toFixed(1);
  };
  set("write-rate", rate(["protobase_write_records_total"]));
  set("read-rate", rate(["protobase_queries_total", "protobase_get_seconds_count"]));
  const lat = (name: string, q: number) => {
    const b = buckets(s, name);
    if (!b) {
      return "n/a";
    }
    const prev: Buckets | undefined = before ? buckets(before.samples, name) : undefined;
    const d = delta(b, prev);
    const v = quantile(q, d);
    return v === undefined ? "idle" : seconds(v);
  };
  set("latency-p50", lat("protobase_write_batch_seconds", 0.5));
  set("latency-p99", lat("protobase_write_batch_seconds", 0.99));
  set("read-latency-p50", lat("protobase_get_seconds", 0.5));
  set("read-latency-p99", lat("protobase_get_seconds", 0.99));
  const size = (name: string) => {
    const v = total(s, name);
    return v === undefined ? "n/a" : bytes(v);
  };
  set("storage-bytes", size("protobase_storage_disk_bytes"));
  set("table-bytes", size("protobase_storage_table_bytes"));
  set("wal-bytes", size("protobase_storage_wal_bytes"));
  set("memtable-bytes", size("protobase_storage_memtable_bytes"));
}

function backupsText(s: Samples): string {
  const n = total(s, "protobase_backups_in_progress");
  if (n === undefined) {
    return "n/a";
  }
  return n === 0 ? "none" : n + " in progress";
}

async function showBuilds(list: HTMLElement, signal: AbortSignal): Promise<void> {
  const schema = await loadSchema({ signal });
  clear(list);
  for (const t of schema.types ?? []) {
    for (const ix of t.indexes ?? []) {
      if (stateName(ix.state) === "BUILDING") {
        list.append(h("li", { "data-type": t.name, "data-index": ix.name },
          t.name + "." + ix.name + " (" + (ix.fields ?? []).join(", ") + "): " + buildProgress(ix)));
      }
    }
  }
  if (!list.children.length) {
    list.append(h("li", {}, "none"));
  }
}

export function seconds(v: number): string {
  if (v < 1e-3) {
    return (v * 1e6).toFixed(0) + " µs";
  }
  if (v < 1) {
    return (v * 1e3).toFixed(v < 0.01 ? 2 : 1) + " ms";
  }
  return v.toFixed(2) + " s";
}

export function bytes(v: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}
