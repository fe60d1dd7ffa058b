// Users (admins): list, create, delete, and what each one owns and is granted.
import { api } from "./api.js";
import { field, fmtTime, h, mount, table, toast } from "./dom.js";

export async function usersView(main, _params, ctx) {
  if (ctx.role !== "admin") {
    mount(main, h("h1", {}, "Users"), h("p", { class: "muted" }, "Only admins manage users."));
    return;
  }
  const { users } = await api("GET", "/v1/users");
  const name = h("input", { name: "username", required: true });
  const password = h("input", { name: "password", type: "password", minlength: 8, required: true });
  const role = h("select", { name: "role" }, h("option", { value: "user" }, "user"), h("option", { value: "admin" }, "admin"));
  const error = h("span", { class: "error" });
  const details = h("div", {});
  const rows = users.map((u) => [u.name, u.role, fmtTime(u.created_ms),
    h("button", { class: "secondary", onclick: () => showHoldings(details, u.name) }, "Topics and grants"),
    u.name === ctx.user ? "" : h("button", { class: "danger", onclick: async () => {
      if (!confirm(`Delete user ${u.name}?`)) return;
      try { await api("DELETE", `/v1/users/${encodeURIComponent(u.name)}`); toast(`Deleted ${u.name}`); await usersView(main, _params, ctx); }
      catch (err) { toast(err.message); }
    } }, "Delete")]);
  mount(main, h("h1", {}, "Users"), table(["User", "Role", "Created (UTC)", "", ""], rows), details,
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
    const held = await api("GET", `/v1/users/${encodeURIComponent(user)}/topics`);
    const owned = held.topics || [];
    const granted = held.grants || [];
    mount(box, h("h2", {}, `${user}: topics and grants`),
      h("p", {}, `Owns: ${owned.map((t) => (typeof t === "string" ? t : t.name)).join(", ") || "nothing"}`),
      h("p", {}, `Granted: ${granted.map((g) => (typeof g === "string" ? g : `${g.topic || g.name} (${(g.permissions || []).join(", ")})`)).join("; ") || "nothing"}`));
  } catch (err) { toast(err.message); }
}
