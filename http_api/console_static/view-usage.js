// Usage: what each user moved, asked and stored, per topic, by hour or day (GET /v1/usage). An
// admin sees everyone; a user their own rows. The CSV link downloads the same rows.
import { api, session } from "./api.js";
import { fmtBytes, fmtTime, h, mount, table } from "./dom.js";

export async function usageView(main) {
  const by = h("select", { id: "usage-by" }, h("option", { value: "hour" }, "by hour"), h("option", { value: "day" }, "by day"));
  const days = h("select", { id: "usage-days" }, ...[1, 7, 31].map((d) => h("option", { value: String(d) }, `last ${d} day${d > 1 ? "s" : ""}`)));
  const body = h("div", { id: "usage-rows" });
  const csv = h("button", { type: "button", onclick: () => download(by.value, Number(days.value)) }, "Download CSV");
  const refresh = async () => {
    const to = Date.now();
    const { usage } = await api("GET", `/v1/usage?by=${by.value}&from=${to - Number(days.value) * 86400000}&to=${to}`);
    mount(body, usage.length ? table(
      ["Start", "User", "Topic", "In", "Records in", "Out", "Records out", "Requests", "Stream s", "Stored"],
      usage.map((r) => [fmtTime(r.start_ms), r.user, r.topic, fmtBytes(r.bytes_in), String(r.records_in),
        fmtBytes(r.bytes_out), String(r.records_out), String(r.requests), String(r.stream_seconds), fmtBytes(r.storage_bytes)]),
      [3, 4, 5, 6, 7, 8, 9]) : h("p", { class: "muted" }, "No usage in this range."));
  };
  by.onchange = days.onchange = () => refresh().catch(() => {});
  mount(main, h("h1", {}, "Usage"), h("p", {}, by, " ", days, " ", csv), body);
  await refresh();
}

async function download(by, days) {
  const to = Date.now();
  const response = await fetch(`/v1/usage?by=${by}&from=${to - days * 86400000}&to=${to}`, {
    headers: { Authorization: `Bearer ${session().token}`, Accept: "text/csv" } });
  const link = h("a", { href: URL.createObjectURL(await response.blob()), download: `usage-${by}.csv` });
  link.click();
  URL.revokeObjectURL(link.href);
}
