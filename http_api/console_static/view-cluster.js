// Cluster: nodes, liveness, racks, the controller and coordinator, this node's health, partitions per
// node. Every count is of what the logged-in user may see (the API counts it: GET /v1/cluster).
import { api, probe } from "./api.js";
import { fmtBytes, h, mount, pill, table } from "./dom.js";

export async function clusterView(main) {
  const render = async () => {
    const [cluster, ready] = await Promise.all([
      api("GET", "/v1/cluster"),
      probe("/readyz"),
    ]);
    const replicas = new Map();
    const leaders = new Map();
    for (const topic of cluster.topics || []) {
      for (const p of topic.partitions) {
        for (const n of p.replicas) replicas.set(n, (replicas.get(n) || 0) + 1);
        if (p.leader !== null && p.leader !== undefined) leaders.set(p.leader, (leaders.get(p.leader) || 0) + 1);
      }
    }
    const nodes = cluster.nodes.map((n) => [
      String(n.node_id) + (n.node_id === cluster.node_id ? " (this node)" : ""),
      pill(n.alive ? "alive" : "dead", n.alive), n.rack || "–", n.http_url, n.rpc_address || "–",
      n.grpc_address || "–", String(leaders.get(n.node_id) || 0), String(replicas.get(n.node_id) || 0),
    ]);
    // This node's etcd session: only an etcd coordinator has one, and only operators are told.
    const session = ready && ready.coordinator && ready.coordinator.kind === "etcd" ? ready.coordinator.session_alive : null;
    const storage = ready && ready.storage ? ready.storage : null;
    const counts = cluster.counts;
    mount(main,
      h("h1", {}, `Cluster ${cluster.cluster}`),
      h("div", { class: "grid" },
        stat("nodes", "Nodes alive", `${cluster.nodes.filter((n) => n.alive).length} / ${cluster.nodes.length}`),
        stat("controller", "Controller", cluster.controller === null || cluster.controller === undefined ? "–" : `node ${cluster.controller}`),
        stat("coordinator", "Coordinator", cluster.coordinator === "etcd" ? "etcd" : "embedded (no etcd)"),
        cluster.coordinator === "etcd" && session !== null
          ? stat("session", "etcd session (this node)", session ? "alive" : "lost", session) : null,
        stat("ready", "This node", ready ? (ready.ready ? "ready" : "not ready") : "–", ready ? ready.ready : undefined),
        stat("disk", "Free disk (this node)", storage ? fmtBytes(storage.free_bytes) : "–", storage ? !storage.full : undefined),
        stat("topics", "Topics & queues", String(counts.topics)),
        stat("partitions", "Partitions", String(counts.partitions)),
        counts.internal_partitions ? stat("internal", "Internal partitions", String(counts.internal_partitions)) : null),
      h("h2", {}, "Nodes"),
      table(["Node", "Liveness", "Rack", "HTTP", "Internal RPC", "gRPC", "Leads", "Replicas"], nodes, [6, 7]),
      storage && storage.offline_partitions && storage.offline_partitions.length
        ? h("p", { class: "error" }, `Offline partitions on this node: ${storage.offline_partitions.length}`) : null);
  };
  await render();
  const timer = setInterval(() => render().catch(() => {}), 5000);
  return () => clearInterval(timer);
}

function stat(key, label, value, ok) {
  return h("div", { class: "card stat", "data-stat": key }, h("div", { class: "muted" }, label),
    h("div", { class: "n" }, ok === undefined ? value : pill(value, ok)));
}
