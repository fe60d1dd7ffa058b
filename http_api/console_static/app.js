// The console's shell: log in, then a hash router over the views. Each view renders into <main>
// and may return a function that stops what it started (timers, live streams) when the user
// leaves it.
import { api, login, logout, session } from "./api.js";
import { fmtStorage, h, mount, toast } from "./dom.js";
import { clusterView } from "./view-cluster.js";
import { topicsView, topicView } from "./view-topics.js";
import { browserView } from "./view-browser.js";
import { groupsView, groupView } from "./view-groups.js";
import { usageView } from "./view-usage.js";
import { usersView } from "./view-users.js";

const main = document.getElementById("main");
const ctx = { role: "user", user: "", storage: null };
let stop = null;

const ROUTES = [
  [/^#\/cluster$/, () => clusterView],
  [/^#\/topics$/, () => topicsView],
  [/^#\/topics\/([^/]+)$/, () => topicView],
  [/^#\/browse\/([^/]+)\/(\d+)$/, () => browserView],
  [/^#\/groups$/, () => groupsView],
  [/^#\/groups\/([^/]+)$/, () => groupView],
  [/^#\/usage$/, () => usageView],
  [/^#\/users$/, () => usersView],
];

function loginView() {
  const user = h("input", { name: "username", autocomplete: "username", required: true });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true });
  const error = h("div", { class: "error", id: "login-error" });
  const form = h("form", { id: "login", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      await login(user.value, password.value);
      await start();
    } catch (err) {
      error.textContent = err.message;
    }
  } }, h("label", {}, "Username", user), h("label", {}, "Password", password), h("button", { type: "submit" }, "Log in"), error);
  mount(main, h("div", { class: "card login" }, h("h1", {}, "Log in to LogBroker"), form));
}

async function route() {
  if (stop) { try { stop(); } catch { /* the view is gone either way */ } stop = null; }
  if (!session()) { showChrome(false); loginView(); return; }
  const hash = location.hash || "#/cluster";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", hash.startsWith(a.getAttribute("href")));
  refreshWho();
  for (const [pattern, view] of ROUTES) {
    const match = hash.match(pattern);
    if (match) {
      mount(main, h("p", { class: "muted" }, "Loading…"));
      try {
        stop = (await view()(main, match.slice(1).map(decodeURIComponent), ctx)) || null;
      } catch (err) {
        mount(main, h("h1", {}, "Cannot show this page"), h("p", { class: "error" }, err.message));
      }
      return;
    }
  }
  location.hash = "#/cluster";
}

function showChrome(on) {
  document.getElementById("nav").hidden = !on;
  document.getElementById("logout").hidden = !on;
  document.getElementById("nav-users").hidden = !(on && ctx.role === "admin");
  document.getElementById("who").textContent = on ? `${ctx.user} (${ctx.role})` : "";
  document.getElementById("who-storage").textContent = on && ctx.storage ? `stores ${fmtStorage(ctx.storage)}` : "";
}

// The user's own storage in the header, read again on every page change (cheap: held in memory).
async function refreshWho() {
  try {
    const me = await api("GET", `/v1/users/${encodeURIComponent(ctx.user)}`);
    ctx.storage = me.storage || null;
    document.getElementById("who-storage").textContent = ctx.storage ? `stores ${fmtStorage(ctx.storage)}` : "";
  } catch { /* the header keeps what it showed */ }
}

async function start() {
  const s = session();
  if (!s) { route(); return; }
  ctx.user = s.user;
  try {
    const me = await api("GET", `/v1/users/${encodeURIComponent(s.user)}`);
    ctx.role = me.role || "user";
    ctx.storage = me.storage || null;
  } catch {
    ctx.role = "user";
  }
  showChrome(true);
  route();
}

document.getElementById("logout").addEventListener("click", () => { logout(); location.hash = ""; route(); });
window.addEventListener("hashchange", route);
window.addEventListener("logbroker:logged-out", () => { toast("Your session ended: log in again"); showChrome(false); });
start();
