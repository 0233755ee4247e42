// The console's query view: Druid SQL through the service's own POST /druid/v2/sql, as
// Druid's console runs it (the rows tasks hold as well as the published ones), with cancel
// (DELETE /druid/v2/sql/{sqlQueryId}). It uses el() and send() from console.js.
"use strict";

const SQL = "/druid/v2/sql";
const SQL_KEY = "sluicegate.sql"; // the last query run, kept for this tab
const SQL_MAX_ROWS = 1000; // shown at most (Druid's console cuts its results too)
const FIRST_QUERY = "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'";
let running = null; // the query id of the query under way, for Cancel

function queryId() {
  if (window.crypto && crypto.randomUUID) return `console-${crypto.randomUUID()}`;
  return `console-${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

function cell(value) {
  if (value === null || value === undefined) return el("td", { class: "muted" }, "null");
  if (typeof value === "number") return el("td", { class: "num" }, String(value));
  if (typeof value === "object") return el("td", {}, el("code", {}, JSON.stringify(value)));
  return el("td", {}, String(value));
}

function resultTable(header, rows) {
  return el("table", { id: "results" },
    el("thead", {}, el("tr", {}, header.map((name) => el("th", {}, name)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, row.map(cell)))));
}

// The groups Druid's response context says the answer lacks (tasks that did not answer).
function lackingLine(response) {
  const text = response.headers.get("X-Druid-Response-Context");
  if (!text) return null;
  let groups = [];
  try { groups = JSON.parse(text).missingTaskGroups || []; } catch (error) { return null; }
  if (!groups.length) return null;
  const named = groups.map((g) => `${g.dataSource || g.supervisor} group ${g.groupId}: ${g.reason}`);
  return el("p", { id: "query-lacking", class: "badge warn" },
    `Not in this answer (rows tasks hold): ${named.join("; ")}`);
}

async function runQuery() {
  const text = document.getElementById("sql").value.trim();
  const status = document.getElementById("query-status");
  const out = document.getElementById("query-result");
  if (!text || running) return;
  sessionStorage.setItem(SQL_KEY, text);
  const id = running = queryId();
  document.getElementById("cancel").disabled = false;
  document.getElementById("run").disabled = true;
  status.textContent = "Running…";
  out.replaceChildren();
  const began = performance.now();
  try {
    const response = await send(SQL, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        query: text, resultFormat: "array", header: true,
        context: { sqlQueryId: id, sqlOuterLimit: SQL_MAX_ROWS + 1 },
      }),
    });
    const took = Math.round(performance.now() - began);
    const body = await response.json().catch(() => null);
    if (response.status === 401) throw new LoginNeeded("log in");
    if (!response.ok) {
      const why = (body && (body.errorMessage || body.error)) || response.statusText;
      status.replaceChildren(el("span", { id: "query-error", class: "badge bad" }, `${response.status}: ${why}`));
      return;
    }
    const [header, ...rows] = body;
    const more = rows.length > SQL_MAX_ROWS;
    const shown = rows.slice(0, SQL_MAX_ROWS);
    status.textContent = `${shown.length}${more ? "+" : ""} row${shown.length === 1 ? "" : "s"} in ${took} ms · ${id}`;
    out.replaceChildren(...[lackingLine(response),
      more ? el("p", { class: "muted" }, `Only the first ${SQL_MAX_ROWS} rows are shown.`) : null,
      resultTable(header, shown)].filter((node) => node));
  } catch (error) {
    if (error instanceof LoginNeeded) { render(); return; }
    status.replaceChildren(el("span", { id: "query-error", class: "badge bad" }, error.message));
  } finally {
    running = null;
    document.getElementById("cancel").disabled = true;
    document.getElementById("run").disabled = false;
  }
}

async function cancelQuery() {
  if (!running) return;
  const response = await send(`${SQL}/${encodeURIComponent(running)}`, { method: "DELETE" });
  if (!response.ok && response.status !== 404) toast(`cancel failed: ${response.status}`);
}

// Built once: the page's refresh leaves it alone, so the text and the answer stay.
function queryView() {
  const box = el("textarea", { id: "sql", rows: 8, spellcheck: "false" });
  box.value = sessionStorage.getItem(SQL_KEY) || FIRST_QUERY;
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); runQuery(); }
  });
  return [
    el("h1", {}, "Query"),
    el("p", { class: "muted" },
      "Druid SQL over the published tables and the rows running tasks hold, the sys tables and INFORMATION_SCHEMA. Ctrl+Enter runs it."),
    box,
    el("div", { class: "actions" },
      el("button", { id: "run", onclick: runQuery }, "Run"),
      el("button", { id: "cancel", disabled: "", onclick: cancelQuery }, "Cancel"),
      el("span", { id: "query-status", class: "muted" })),
    el("div", { id: "query-result" }),
  ];
}
