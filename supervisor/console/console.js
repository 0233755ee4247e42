// The Sluicegate console: plain JavaScript over the service's own HTTP API, no build step.
"use strict";

const SUPERVISORS = "/druid/indexer/v1/supervisor";
const DATASOURCES = "/druid/coordinator/v1/metadata/datasources";
const REFRESH_MS = 2000;
const lagHistory = new Map(); // supervisor id -> [aggregate lag, ...] since the page opened
let timer = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }
  return node;
}

// With authentication on, the console logs in with a user's password or an API token, kept
// for this tab only (sessionStorage) and sent as the Authorization header of its API calls.
const AUTH_KEY = "sluicegate.authorization";

class LoginNeeded extends Error {}

function send(path, options = {}) {
  const headers = { ...(options.headers || {}), "X-Sluicegate-Console": "1" };
  const authorization = sessionStorage.getItem(AUTH_KEY);
  if (authorization) headers.Authorization = authorization;
  return fetch(path, { ...options, headers });
}

function loginView(failed) {
  const user = el("input", { id: "login-user", autocomplete: "username", placeholder: "user" });
  const password = el("input", { id: "login-password", type: "password", autocomplete: "current-password", placeholder: "password or API token" });
  const submit = (event) => {
    event.preventDefault();
    const secret = password.value;
    const value = user.value
      ? `Basic ${btoa(String.fromCharCode(...new TextEncoder().encode(`${user.value}:${secret}`)))}`
      : `Bearer ${secret}`;
    sessionStorage.setItem(AUTH_KEY, value);
    document.getElementById("view").replaceChildren();
    render();
  };
  return [
    el("h1", {}, "Log in"),
    failed ? el("p", { class: "muted" }, "Those credentials were not accepted.") : null,
    el("form", { id: "login", onsubmit: submit },
      user, " ", password, " ", el("button", { type: "submit", id: "login-submit" }, "Log in")),
    el("p", { class: "muted" }, "A user and password, or an API token alone."),
  ];
}

function logout() {
  sessionStorage.removeItem(AUTH_KEY);
  render();
}

async function api(path, options = {}) {
  const response = await send(path, options);
  if (response.status === 401) throw new LoginNeeded("log in");
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  if (!response.ok && response.status !== 503) {
    throw new Error(`${response.status}: ${(body && body.error) || response.statusText}`);
  }
  return body;
}

function toast(message) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.hidden = false;
  setTimeout(() => { box.hidden = true; }, 4000);
}

function badge(text, kind) { return el("span", { class: `badge ${kind || ""}` }, text); }

function stateBadge(state, healthy) {
  const kind = !healthy ? "bad" : state === "RUNNING" ? "ok" : "warn";
  return badge(state, kind);
}

function table(headers, rows, id) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) =>
      typeof c === "number" ? el("td", { class: "num" }, c.toLocaleString()) : el("td", {}, c))))));
}

function offsets(map) {
  const keys = Object.keys(map || {});
  return keys.length ? keys.map((k) => `${k}=${map[k]}`).join(" ") : "–";
}

function sparkline(values) {
  const width = 400, height = 60;
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(height - (v / max) * (height - 4) - 2).toFixed(1)}`);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points.join(" "));
  svg.append(line);
  return svg;
}

function remember(id, lag) {
  const series = lagHistory.get(id) || [];
  series.push(lag);
  if (series.length > 300) series.shift();
  lagHistory.set(id, series);
  return series;
}

async function supervisorsView() {
  const list = await api(`${SUPERVISORS}?state=true`);
  const rows = await Promise.all(list.map(async (s) => {
    if (s.id.startsWith("autocompact__")) {
      // a compaction supervisor: its state here, its progress on the segments page
      return [
        el("a", { href: "#/segments" }, s.id), s.dataSource, stateBadge(s.state, s.healthy),
        "compaction", badge("healthy", "ok"), "", "",
      ];
    }
    const status = await api(`${SUPERVISORS}/${encodeURIComponent(s.id)}/status`);
    const payload = status.payload;
    remember(s.id, payload.aggregateLag);
    return [
      el("a", { href: `#/supervisors/${encodeURIComponent(s.id)}` }, s.id),
      s.dataSource,
      stateBadge(payload.state, payload.healthy),
      payload.detailedState,
      payload.healthy ? badge("healthy", "ok") : badge("unhealthy", "bad"),
      payload.aggregateLag,
      payload.activeTasks.length + payload.publishingTasks.length,
    ];
  }));
  return [
    el("h1", {}, "Supervisors"),
    list.length
      ? table(["Supervisor", "Datasource", "State", "Detailed state", "Health", "Lag", "Tasks"],
          rows, "supervisors")
      : el("p", { class: "muted" }, "No supervisors yet: submit one with `sluicegate supervisor submit FILE`."),
  ];
}

// On a follower overlord (two or more share a PostgreSQL metadata DB) writes belong to the
// leader: the console says which overlord leads and takes actions to the leader's console
// (a browser does not follow a redirect of a JSON POST to another origin).
async function leaderElsewhere() {
  const here = await send("/druid/indexer/v1/isLeader");
  if (here.status !== 404) return null;
  const leader = await send("/druid/indexer/v1/leader");
  const url = leader.ok ? (await leader.text()).replace(/\/$/, "") : "";
  return /^https?:\/\/[^\s]+$/.test(url) ? url : "";
}

async function showLeader() {
  const banner = document.getElementById("leader");
  const leader = await leaderElsewhere().catch(() => null);
  banner.hidden = leader === null;
  if (leader !== null) {
    const link = el("a", { href: `${leader}/console/${window.location.hash}` }, leader || "none");
    banner.replaceChildren("This overlord follows; the leader is ", link, ".");
  }
}

async function act(id, action, question, body) {
  if (question && !window.confirm(question)) return;
  const leader = await leaderElsewhere().catch(() => null);
  if (leader !== null) {
    if (leader) {
      window.location.href = `${leader}/console/${window.location.hash}`;
    } else {
      toast("No overlord leads right now; try again in a few seconds.");
    }
    return;
  }
  const options = { method: "POST" };
  if (body) {
    options.headers = { "Content-Type": "application/json" };
    options.body = JSON.stringify(body);
  }
  try {
    await api(`${SUPERVISORS}/${encodeURIComponent(id)}/${action}`, options);
    toast(`${id}: ${action} done`);
  } catch (error) {
    toast(`${id}: ${action} failed: ${error.message}`);
  }
  render();
}

async function supervisorView(id) {
  const path = `${SUPERVISORS}/${encodeURIComponent(id)}`;
  const [status, history] = await Promise.all([api(`${path}/status`), api(`${path}/history?count=10`)]);
  const p = status.payload;
  const series = remember(id, p.aggregateLag);
  const tasks = [...p.activeTasks, ...p.publishingTasks]
    .sort((a, b) => a.taskGroupId - b.taskGroupId || a.id.localeCompare(b.id));
  const groups = [...new Set(p.activeTasks.map((t) => t.taskGroupId))].sort();
  const partitions = Object.keys({ ...p.latestOffsets, ...p.committedOffsets });
  return [
    el("h1", {}, `Supervisor ${id} `, stateBadge(p.state, p.healthy)),
    el("div", { class: "summary" },
      el("div", {}, el("span", {}, "Detailed state"), el("b", { id: "detailed-state" }, p.detailedState)),
      el("div", {}, el("span", {}, "Datasource"), el("b", {}, p.dataSource)),
      el("div", {}, el("span", {}, "Stream"), el("b", {}, p.stream)),
      el("div", {}, el("span", {}, "Aggregate lag"), el("b", { id: "lag" }, p.aggregateLag.toLocaleString())),
      el("div", {}, el("span", {}, "Partitions"), el("b", {}, p.partitions))),
    el("div", { class: "actions" },
      p.suspended
        ? el("button", { id: "resume", onclick: () => act(id, "resume") }, "Resume")
        : el("button", { id: "suspend", onclick: () => act(id, "suspend", `Suspend ${id}? Its tasks publish and none start.`) }, "Suspend"),
      groups.map((g) => el("button", {
        class: "handoff", onclick: () => act(id, "taskGroups/handoff", null, { taskGroupIds: [g] }),
      }, `Hand off group ${g}`)),
      el("button", { id: "reset", class: "danger",
        onclick: () => act(id, "reset", `Reset ${id}? Its committed offsets are forgotten and its tasks killed.`) }, "Reset…")),
    el("h2", {}, "Lag over time"),
    sparkline(series),
    el("p", { class: "muted" }, `${series.length} samples, every ${REFRESH_MS / 1000}s since this page opened; now ${p.aggregateLag}`),
    el("h2", {}, "Task groups"),
    tasks.length
      ? table(["Group", "Task", "Type", "Remaining", "Current offsets", "Lag"],
          tasks.map((t) => [String(t.taskGroupId), el("code", {}, t.id), t.type, `${t.remainingSeconds}s`,
            offsets(t.currentOffsets), Object.values(t.lag || {}).reduce((a, b) => a + b, 0)]), "tasks")
      : el("p", { class: "muted" }, "No running tasks."),
    el("h2", {}, "Partitions"),
    table(["Partition", "Latest", "Committed", "Lag"],
      partitions.map((k) => [k, p.latestOffsets[k] ?? "–", p.committedOffsets[k] ?? "–", p.minimumLag[k] ?? "–"]),
      "partitions"),
    el("h2", {}, "Recent errors"),
    p.recentErrors.length
      ? table(["When", "Error"], p.recentErrors.map((e) => [e.timestamp, `${e.exceptionClass}: ${e.message}`]))
      : el("p", { class: "muted" }, "None."),
    el("h2", {}, "History"),
    table(["Version", "State", "Task count", "Replicas", "Task duration"], history.map((h) => {
      const io = (h.spec.spec || {}).ioConfig || {};
      const state = h.spec.type === "NoopSupervisorSpec" ? "terminated" : h.spec.suspended ? "suspended" : "running";
      return [h.version, state, io.taskCount ?? "–", io.replicas ?? "–", io.taskDuration ?? "–"];
    })),
  ];
}

// A datasource's retention rules (its own, then the default ones) in a line.
function describeRule(rule) {
  const what = rule.period || rule.interval || "";
  const future = rule.includeFuture === false ? " (not the future)" : "";
  return `${rule.type}${what ? ` ${what}` : ""}${future}`;
}

// A datasource's compaction: not configured, or Druid's status counts.
async function compactionLine(name) {
  const path = `/druid/coordinator/v1/compaction/status?dataSource=${encodeURIComponent(name)}`;
  const response = await send(path);
  if (response.status === 404) return "compaction: not configured";
  if (!response.ok) return `compaction: ${response.status}`;
  const [status] = (await response.json()).latestStatus;
  return `compaction: ${status.intervalCountCompacted} intervals compacted, ` +
    `${status.intervalCountAwaitingCompaction} awaiting (${status.bytesAwaitingCompaction.toLocaleString()} bytes), ` +
    `${status.intervalCountSkipped} skipped`;
}

async function segmentsView() {
  const names = await api(DATASOURCES);
  const sections = await Promise.all(names.map(async (name) => {
    const path = encodeURIComponent(name);
    const [segments, rules, compaction] = await Promise.all([
      api(`${DATASOURCES}/${path}/segments?full`),
      api(`/druid/coordinator/v1/rules/${path}?full`),
      compactionLine(name),
    ]);
    const rows = segments.reduce((sum, s) => sum + s.numRows, 0);
    return [
      el("h2", {}, `${name} `, el("span", { class: "muted" }, `${segments.length} segments, ${rows.toLocaleString()} rows`)),
      el("p", { class: "muted", id: `retention-${name}` },
        `retention: ${rules.map(describeRule).join(", then ")}`, el("br"), compaction),
      table(["Interval", "Segment", "Rows", "Bytes", "File"],
        segments.map((s) => [s.interval, el("code", {}, s.identifier), s.numRows, s.size, el("code", {}, segmentFile(s.loadSpec))])),
    ];
  }));
  return [el("h1", {}, "Segments"),
    names.length ? sections : el("p", { class: "muted" }, "Nothing published yet.")];
}

function segmentFile(loadSpec) {
  return loadSpec.type === "s3_zip" ? `s3://${loadSpec.bucket}/${loadSpec.key}` : loadSpec.path;
}

async function workersView() {
  const hosts = await api("/druid/indexer/v1/workers");
  if (!hosts.length) {
    return [el("h1", {}, "Task hosts"),
      el("p", { class: "muted" }, "No task host registered: tasks run on the overlord's own host.")];
  }
  return [el("h1", {}, "Task hosts"),
    table(["Host", "Enabled", "Used", "Running tasks", "Last completed"],
      hosts.map((w) => [
        el("code", {}, w.worker.host),
        w.worker.version ? badge("yes", "ok") : badge("disabled", "warn"),
        `${w.currCapacityUsed} / ${w.worker.capacity}`,
        w.runningTasks.length ? w.runningTasks.map((t) => el("div", {}, el("code", {}, t))) : "–",
        w.lastCompletedTaskTime || "–",
      ]), "workers")];
}

async function render() {
  const hash = window.location.hash || "#/";
  const view = document.getElementById("view");
  let content;
  if (hash === "#/query" && document.getElementById("sql")) return; // built once (query.js)
  try {
    if (hash === "#/query") {
      await api(SUPERVISORS); // logged in first
      content = queryView();
    } else if (hash.startsWith("#/supervisors/")) {
      content = await supervisorView(decodeURIComponent(hash.slice("#/supervisors/".length)));
    } else if (hash === "#/segments") {
      content = await segmentsView();
    } else if (hash === "#/workers") {
      content = await workersView();
    } else {
      content = await supervisorsView();
    }
  } catch (error) {
    if (error instanceof LoginNeeded) {
      const failed = sessionStorage.getItem(AUTH_KEY) !== null;
      if (!document.getElementById("login")) view.replaceChildren(...loginView(failed).flat(Infinity));
      document.getElementById("logout").hidden = true;
      return;
    }
    content = [el("h1", {}, "Cannot load"), el("p", { class: "muted" }, error.message)];
  }
  document.getElementById("logout").hidden = !sessionStorage.getItem(AUTH_KEY);
  view.replaceChildren(...[content].flat(Infinity));
  await showLeader();
  document.getElementById("refreshed").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

function schedule() {
  clearInterval(timer);
  timer = setInterval(render, REFRESH_MS);
}

window.addEventListener("hashchange", () => { render(); schedule(); });
document.getElementById("logout").addEventListener("click", (event) => { event.preventDefault(); logout(); });
render();
schedule();
