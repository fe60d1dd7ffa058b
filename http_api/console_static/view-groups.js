// Consumer groups: the list, and one group: members, assignment, committed offsets and lag per
// partition, with a live chart of the total lag.
import { api } from "./api.js";
import { LiveChart } from "./charts.js";
import { h, mount, pill, table } from "./dom.js";

export async function groupsView(main) {
  const { groups } = await api("GET", "/v1/groups");
  mount(main, h("h1", {}, "Consumer groups"),
    groups.length ? table(["Group", "State", "Generation", "Strategy", "Members"], groups.map((g) => [
      h("a", { href: `#/groups/${encodeURIComponent(g.group)}` }, g.group), pill(g.state, g.state === "stable"),
      String(g.generation), g.strategy || "–", String(g.members)]), [2, 4])
      : h("p", { class: "muted" }, "No groups you may see."));
}

export async function groupView(main, [name]) {
  const chart = new LiveChart("Consumer lag", "records");
  const body = h("div", {});
  const refresh = async () => {
    const g = await api("GET", `/v1/groups/${encodeURIComponent(name)}`);
    const lags = g.offsets.map((o) => o.lag).filter((l) => l !== null && l !== undefined);
    chart.push(lags.reduce((a, b) => a + b, 0));
    mount(body,
      h("p", {}, "State ", pill(g.state, g.state === "stable"), ` · generation ${g.generation} · strategy ${g.strategy || "–"}`),
      h("h2", {}, "Members"),
      g.members.length ? table(["Member", "User", "Topics", "Assignment", "Session expires in"], g.members.map((m) => [
        m.member_id, m.principal || "–", (m.topics || []).join(", "),
        Object.entries(m.assignment || {}).map(([t, ps]) => `${t}: ${ps.join(", ")}`).join("; ") || "–",
        `${Math.round((m.expires_in_ms || 0) / 1000)} s`]))
        : h("p", { class: "muted" }, "No members now."),
      h("h2", {}, "Offsets and lag"),
      h("div", { id: "group-offsets" }, table(["Topic", "Partition", "Member", "Committed", "High watermark", "Lag"], g.offsets.map((o) => [
        o.topic, String(o.partition), o.member_id || "–", o.committed_offset === null ? "–" : String(o.committed_offset),
        String(o.high_watermark), o.lag === null || o.lag === undefined ? "–" : String(o.lag)]), [1, 3, 4, 5])));
  };
  mount(main, h("h1", {}, `Group ${name}`), h("div", { class: "charts" }, chart.el), body);
  await refresh();
  const timer = setInterval(() => refresh().catch(() => {}), 2000);
  return () => clearInterval(timer);
}
