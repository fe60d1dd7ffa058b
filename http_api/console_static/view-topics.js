// Topics and queues: the list (create, delete), and one topic: partitions with leader, replicas,
// ISR, offsets and size; config (editable by the owner and admins); owner and grants; add
// partitions; produce a test message; a live message-rate chart; for a queue, its delivery state
// and dead letters.
import { api } from "./api.js";
import { LiveChart, Rate } from "./charts.js";
import { field, fmtBytes, h, mount, pill, table, toast } from "./dom.js";

// Config keys that cannot change on a live topic (PATCH /v1/topics/{name}/config refuses them).
const FIXED_CONFIG = ["segment_index_bytes", "dead_letter_topic", "dead_letter_topic_id"];

const link = (name) => h("a", { href: `#/topics/${encodeURIComponent(name)}` }, name);

export async function topicsView(main, _params, ctx) {
  const { topics } = await api("GET", "/v1/topics");
  const name = h("input", { name: "name", required: true, placeholder: "orders" });
  const partitions = h("input", { name: "partitions", type: "number", min: 1, value: "3" });
  const rf = h("input", { name: "replication_factor", type: "number", min: 1, placeholder: "default" });
  const kind = h("select", { name: "kind" }, h("option", { value: "topic" }, "topic"), h("option", { value: "queue" }, "queue"));
  const error = h("span", { class: "error" });
  const create = h("form", { id: "create-topic", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    const body = { name: name.value.trim(), partitions: Number(partitions.value) || 1, kind: kind.value };
    if (rf.value) body.replication_factor = Number(rf.value);
    try {
      await api("POST", "/v1/topics", body);
      toast(`Created ${body.name}`);
      location.hash = `#/topics/${encodeURIComponent(body.name)}`;
    } catch (err) { error.textContent = err.message; }
  } }, field("Name", name), field("Partitions", partitions), field("Replication factor", rf), field("Kind", kind),
  h("button", { type: "submit" }, "Create"), error);
  const rows = topics.map((t) => [link(t.name), t.kind, String(t.partitions), String(t.replication_factor), t.owner,
    t.owner === ctx.user || ctx.role === "admin"
      ? h("button", { class: "danger", "data-delete": t.name, onclick: () => remove(t.name) }, "Delete") : ""]);
  mount(main, h("h1", {}, "Topics & queues"),
    topics.length ? table(["Name", "Kind", "Partitions", "Replication", "Owner", ""], rows, [2, 3])
      : h("p", { class: "muted" }, "Nothing you may see yet: create a topic below."),
    h("h2", {}, "Create"), create);
}

async function remove(name) {
  if (!confirm(`Delete ${name} and all its records?`)) return;
  try {
    await api("DELETE", `/v1/topics/${encodeURIComponent(name)}`);
    toast(`Deleted ${name}`);
    location.hash = "#/topics";
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } catch (err) { toast(err.message); }
}

export async function topicView(main, [name], ctx) {
  const path = `/v1/topics/${encodeURIComponent(name)}`;
  const rate = new Rate();
  const chart = new LiveChart("Message rate", "records/s");
  const parts = h("div", {});
  const queueBox = h("div", {});
  let topic = await api("GET", path);
  const canManage = topic.owner === ctx.user || ctx.role === "admin";

  const drawPartitions = () => {
    // A compacted topic's partitions also show their dirty ratio and last compaction.
    const compacted = topic.partitions.some((p) => p.dirty_ratio !== undefined && p.dirty_ratio !== null);
    const extraHeads = compacted ? ["Dirty", "Last compaction"] : [];
    const extra = (p) => compacted ? [p.dirty_ratio == null ? "" : `${Math.round(p.dirty_ratio * 100)}%`,
      p.last_compaction_ms ? new Date(p.last_compaction_ms).toLocaleString() : "not yet"] : [];
    mount(parts, table(["Partition", "Leader", "Replicas", "In sync", "Earliest", "Latest", "Size", ...extraHeads, ""],
      topic.partitions.map((p) => [String(p.partition), p.leader === null ? pill("none", false) : String(p.leader),
        p.replicas.join(", "), p.in_sync_replicas.join(", "), String(p.earliest_offset), String(p.latest_offset),
        fmtBytes(p.size_bytes), ...extra(p),
        h("a", { href: `#/browse/${encodeURIComponent(name)}/${p.partition}` }, "Browse")]), [4, 5, 6]));
  };
  const refresh = async () => {
    topic = await api("GET", path);
    drawPartitions();
    chart.push(rate.next(topic.partitions.reduce((n, p) => n + p.latest_offset, 0)));
    if (topic.kind === "queue") await drawQueue(queueBox, name);
  };

  const config = h("div", {});
  const drawConfig = () => mount(config, configTable(path, topic, canManage, (changed) => { topic = changed; drawConfig(); }));
  drawConfig();
  const acl = h("div", {});
  if (canManage) drawAcl(acl, name).catch((err) => mount(acl, h("p", { class: "error" }, err.message)));

  const count = h("input", { name: "partitions", type: "number", min: topic.partition_count + 1, value: String(topic.partition_count + 1) });
  const grow = h("form", { id: "add-partitions", onsubmit: async (e) => {
    e.preventDefault();
    try { await api("POST", `${path}/partitions`, { partitions: Number(count.value) }); toast("Partitions added"); await refresh(); }
    catch (err) { toast(err.message); }
  } }, field("Partition count", count), h("button", { type: "submit" }, "Add partitions"));

  mount(main, h("h1", {}, `${topic.kind === "queue" ? "Queue" : "Topic"} ${name}`),
    h("p", { class: "muted" }, `Owner ${topic.owner} · ${topic.partition_count} partitions · replication ${topic.replication_factor}`),
    h("div", { class: "charts" }, chart.el),
    h("h2", {}, "Partitions"), parts, queueBox,
    h("h2", {}, "Produce a test message"), produceForm(name, topic, refresh),
    canManage ? [h("h2", {}, "Add partitions"), grow] : null,
    h("h2", {}, "Config"), config,
    canManage ? [h("h2", {}, "Owner and grants"), acl] : null);
  await refresh();
  const timer = setInterval(() => refresh().catch(() => {}), 2000);
  return () => clearInterval(timer);
}

// The config as a table; for the owner and admins each changeable value is an input, and "Save"
// sends only the keys whose text changed (digits as numbers, a list such as leader_racks as
// comma-separated names), answering with the new config.
function configTable(path, topic, canManage, saved) {
  const entries = Object.entries(topic.config || {});
  if (!canManage) return table(["Setting", "Value"], entries.map(([k, v]) => [k, String(v)]));
  const inputs = new Map();
  const error = h("span", { class: "error", id: "config-error" });
  const rows = entries.map(([k, v]) => {
    if (FIXED_CONFIG.includes(k)) return [k, String(v)];
    const input = h("input", { name: k, "data-config": k, value: String(v), size: 16 });
    inputs.set(k, [input, String(v), Array.isArray(v)]);
    return [k, input];
  });
  return h("form", { id: "topic-config", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    const changes = {};
    for (const [k, [input, was, list]] of inputs) {
      const text = input.value.trim();
      if (text === was) continue;
      if (list) changes[k] = text.split(",").map((item) => item.trim()).filter((item) => item);
      else changes[k] = /^-?[0-9]+$/.test(text) ? Number(text) : text;
    }
    if (!Object.keys(changes).length) { error.textContent = "Nothing changed."; return; }
    try {
      const changed = await api("PATCH", `${path}/config`, changes);
      toast(`Saved ${Object.keys(changes).join(", ")}`);
      saved(changed);
    } catch (err) { error.textContent = err.message; }
  } }, table(["Setting", "Value"], rows), h("button", { type: "submit" }, "Save config"), error);
}

function produceForm(name, topic, refresh) {
  const key = h("input", { name: "key", placeholder: "(none)" });
  const value = h("textarea", { name: "value", rows: 2, cols: 40, required: true });
  const partition = h("select", { name: "partition" }, h("option", { value: "" }, "by key"),
    topic.partitions.map((p) => h("option", { value: String(p.partition) }, String(p.partition))));
  const result = h("span", { class: "muted", id: "produce-result" });
  const target = topic.kind === "queue" ? `/v1/queues/${encodeURIComponent(name)}/messages` : `/v1/topics/${encodeURIComponent(name)}/records`;
  return h("form", { id: "produce", onsubmit: async (e) => {
    e.preventDefault();
    const record = { value: value.value };
    if (key.value) record.key = key.value;
    if (partition.value !== "") record.partition = Number(partition.value);
    try {
      const answer = await api("POST", target, { records: [record] });
      const o = (answer.offsets || [])[0];
      result.textContent = o ? `stored at partition ${o.partition}, offset ${o.offset}` : "stored";
      await refresh();
    } catch (err) { result.textContent = err.message; }
  } }, field("Key", key), field("Value", value), field("Partition", partition), h("button", { type: "submit" }, "Produce"), result);
}

async function drawQueue(box, name) {
  const q = await api("GET", `/v1/queues/${encodeURIComponent(name)}`);
  let dead = "–";
  if (q.dead_letter_topic) {
    try {
      const dlq = await api("GET", `/v1/topics/${encodeURIComponent(q.dead_letter_topic)}`);
      dead = String(dlq.partitions.reduce((n, p) => n + p.latest_offset - p.earliest_offset, 0));
    } catch { dead = "–"; }
  }
  const ready = q.partitions.reduce((n, p) => n + p.not_yet_delivered, 0);
  const inFlight = q.partitions.reduce((n, p) => n + p.in_flight, 0);
  mount(box, h("h2", {}, "Queue"),
    h("p", {}, `Ready ${ready} · in flight ${inFlight} · dead-lettered ${dead}`,
      q.dead_letter_topic ? [" (", h("a", { href: `#/topics/${encodeURIComponent(q.dead_letter_topic)}` }, q.dead_letter_topic), ")"] : null,
      ` · visibility timeout ${q.visibility_timeout_ms} ms · max deliveries ${q.max_deliveries}`),
    table(["Partition", "Done below", "Next offset", "In flight", "Ready"],
      q.partitions.map((p) => [String(p.partition), String(p.done_below), String(p.next_offset), String(p.in_flight), String(p.not_yet_delivered)]),
      [1, 2, 3, 4]));
}

async function drawAcl(box, name) {
  const path = `/v1/topics/${encodeURIComponent(name)}/acl`;
  const acl = await api("GET", path);
  const user = h("input", { name: "user", required: true });
  const read = h("input", { type: "checkbox", name: "read", checked: true });
  const write = h("input", { type: "checkbox", name: "write" });
  mount(box, h("p", {}, `Owner: ${acl.owner}`),
    acl.acl.length ? table(["User", "Permissions"], acl.acl.map((g) => [g.user, (g.permissions || []).join(", ")]))
      : h("p", { class: "muted" }, "No grants."),
    h("form", { id: "grant", onsubmit: async (e) => {
      e.preventDefault();
      const permissions = [read.checked ? "read" : null, write.checked ? "write" : null].filter(Boolean);
      try { await api("PUT", path, { user: user.value, permissions }); toast("Grant saved"); await drawAcl(box, name); }
      catch (err) { toast(err.message); }
    } }, field("User", user), h("label", {}, "read", read), h("label", {}, "write", write), h("button", { type: "submit" }, "Grant / revoke")));
}
