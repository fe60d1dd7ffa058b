// Users (admins): list, create, delete, what each one owns and is granted, the bytes each one
// stores and their storage limit (settable here).
import { api } from "./api.js";
import { field, fmtStorage, fmtTime, h, mount, table, toast } from "./dom.js";

const MIB = 1024 * 1024;

export async function usersView(main, _params, ctx) {
  if (ctx.role !== "admin") {
    const me = await api("GET", `/v1/users/${encodeURIComponent(ctx.user)}`);
    mount(main, h("h1", {}, "Users"), h("p", { class: "muted" }, "Only admins manage users."),
      h("p", { id: "my-storage" }, `You store ${fmtStorage(me.storage)}.`));
    return;
  }
  const { users } = await api("GET", "/v1/users");
  const name = h("input", { name: "username", required: true });
  const password = h("input", { name: "password", type: "password", minlength: 8, required: true });
  const role = h("select", { name: "role" }, h("option", { value: "user" }, "user"), h("option", { value: "admin" }, "admin"));
  const error = h("span", { class: "error" });
  const details = h("div", {});
  const rows = users.map((u) => [u.name, u.role, fmtTime(u.created_ms),
    h("span", { class: "storage", "data-user": u.name }, fmtStorage(u.storage)),
    h("button", { class: "secondary", onclick: () => showHoldings(details, u.name) }, "Topics and grants"),
    u.name === ctx.user ? "" : h("button", { class: "danger", onclick: async () => {
      if (!confirm(`Delete user ${u.name}?`)) return;
      try { await api("DELETE", `/v1/users/${encodeURIComponent(u.name)}`); toast(`Deleted ${u.name}`); await usersView(main, _params, ctx); }
      catch (err) { toast(err.message); }
    } }, "Delete")]);
  mount(main, h("h1", {}, "Users"), table(["User", "Role", "Created (UTC)", "Storage (used of limit)", "", ""], rows), details,
    h("h2", {}, "Create a user"),
    h("form", { id: "create-user", onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api("POST", "/v1/users", { username: name.value, password: password.value, role: role.value });
        toast(`Created ${name.value}`);
        await usersView(main, _params, ctx);
      } catch (err) { error.textContent = err.message; }
    } }, field("Username", name), field("Password", password), field("Role", role), h("button", { type: "submit" }, "Create"), error));
}

async function showHoldings(box, user) {
  try {
    const path = `/v1/users/${encodeURIComponent(user)}`;
    const [held, record] = await Promise.all([api("GET", `${path}/topics`), api("GET", path)]);
    const owned = held.topics || [];
    const granted = held.grants || [];
    mount(box, h("h2", {}, `${user}: topics and grants`),
      h("p", {}, `Owns: ${owned.map((t) => (typeof t === "string" ? t : t.name)).join(", ") || "nothing"}`),
      h("p", {}, `Granted: ${granted.map((g) => (typeof g === "string" ? g : `${g.topic || g.name} (${(g.permissions || []).join(", ")})`)).join("; ") || "nothing"}`),
      h("p", { id: "holdings-storage" }, `Stores ${fmtStorage(record.storage)}`),
      storageLimitForm(box, user, record));
  } catch (err) { toast(err.message); }
}

// Sets the user's storage_bytes_max, keeping their other quota overrides (PUT replaces them all).
function storageLimitForm(box, user, record) {
  const quotas = record.quotas || {};
  const set = quotas.storage_bytes_max;
  const limit = h("input", { name: "limit_mib", type: "number", min: 0, step: "any",
    value: set === undefined ? "" : String(set / MIB) });
  const error = h("span", { class: "error" });
  return h("form", { id: "storage-limit", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const { storage_bytes_max: _old, ...others } = quotas;
      const body = limit.value === "" ? others : { ...others, storage_bytes_max: Math.round(Number(limit.value) * MIB) };
      await api("PUT", `/v1/users/${encodeURIComponent(user)}/quotas`, body);
      toast(`Storage limit of ${user} set`);
      await showHoldings(box, user);
    } catch (err) { error.textContent = err.message; }
  } }, field("Storage limit (MiB, 0: none; empty: the node's default)", limit), h("button", { type: "submit" }, "Set"), error);
}
