// chime's dashboard: one script, no build step. Each page has its own URL and is drawn from the
// REST API; pages follow /api/v1/events (task changes, once a second) instead of re-reading
// lists. Everything shown is put in the page as text (never as HTML), so nothing a task or a
// user wrote can run here.
"use strict";

const LIVE = ["waiting", "ready", "running", "retrying"];
const STATUSES = [...LIVE, "succeeded", "failed", "killed"];

// ---- DOM helpers -----------------------------------------------------------------------------

/** An element: attributes (on* are listeners), then children (strings become text). */
function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}
function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);
const link = (href, ...text) => h("a", { href }, ...text);
const status = (s) => h("span", { class: `status ${s}` }, s);
const section = (title, ...children) => h("section", {}, h("h2", {}, ...[title].flat()), ...children);
function table(headers, rows, attrs = {}) {
  return h("table", attrs, h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows));
}
const shortId = (id) => String(id).slice(0, 8) + "…" + String(id).slice(-4);
const jobName = (job) => job ? `${job.group}.${job.name}` : "";
/** The page of a job given as `group.name` (split at the first dot, as the API does). */
const jobHref = (full) => {
  const i = full.indexOf(".");
  const [g, n] = i < 0 ? ["default", full] : [full.slice(0, i), full.slice(i + 1)];
  return `/jobs/${encodeURIComponent(g)}/${encodeURIComponent(n)}`;
};
const jobLink = (job) => job ? link(`/jobs/${encodeURIComponent(job.group)}/${encodeURIComponent(job.name)}`, jobName(job)) : h("span", { class: "muted" }, "ad hoc");
const taskLink = (id) => link(`/tasks/${id}`, h("span", { class: "mono" }, shortId(id)));

// ---- time ------------------------------------------------------------------------------------

// Every time says its zone. Timestamps (created, started, next fire…) are shown in the zone the
// header's toggle picks, UTC or the viewer's own, with how long ago or ahead they are; data times
// in the zone their job's data times are taken in. Filters are read in the zone shown.

const LOCAL_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
/** The zone timestamps are shown in. */
const viewZone = () => localStorage.getItem("chime-zone") === "local" ? LOCAL_ZONE : "UTC";

/** "in 12 s", "3 min ago". */
function relative(d) {
  const s = Math.round((d.getTime() - Date.now()) / 1000);
  const a = Math.abs(s);
  const unit = a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min`
    : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return s > 0 ? `in ${unit}` : `${unit} ago`;
}

/** A timestamp in the shown zone, labelled, with how far it is from now (UTC in the tooltip). */
function when(t) {
  if (!t) return h("span", { class: "muted" }, "–");
  const d = new Date(t);
  const zone = viewZone();
  return h("span", { title: d.toISOString(), class: "time" }, `${inZone(d, zone)} ${zone}`,
    h("span", { class: "muted" }, ` (${relative(d)})`));
}

/** A data time in its job's data-time zone (UTC for ad-hoc tasks), labelled. */
function whenData(t, zone) {
  if (!t) return h("span", { class: "muted" }, "–");
  const d = new Date(t);
  const z = zone || "UTC";
  return h("span", { title: d.toISOString(), class: "data-time" }, `${inZone(d, z)} ${z}`);
}

/** A `datetime-local` input's value, read in the shown zone, as an RFC 3339 time. */
function fromShownZone(value) {
  if (!value) return "";
  if (viewZone() === "UTC") return new Date(`${value.length === 16 ? value + ":00" : value}Z`).toISOString();
  return new Date(value).toISOString();
}
/** `YYYY-MM-DD HH:MM:SS` of `d` in `zone` (the browser's zone when undefined). */
function inZone(d, zone) {
  try {
    return new Intl.DateTimeFormat("sv-SE", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false,
    }).format(d);
  } catch (_) {
    return d.toISOString();
  }
}
function ago(t) {
  if (!t) return "–";
  const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}
/** A trigger's zone: its schedule's time_zone, UTC for the kinds that have none. */
const zoneOf = (schedule) => (schedule && schedule.time_zone) || "UTC";
function describeSchedule(s) {
  if (!s) return "";
  switch (s.kind) {
    case "cron": return `cron ${s.cron}`;
    case "simple": return `every ${s.interval_ms} ms` + (s.repeat_count >= 0 ? `, ${s.repeat_count + 1} times` : "");
    case "calendar_interval": return `every ${s.interval} ${s.unit}`;
    case "daily_time_interval": return `every ${s.interval} ${s.unit} from ${s.start_time_of_day || "00:00"} to ${s.end_time_of_day || "23:59:59"}`;
    default: return JSON.stringify(s);
  }
}

// ---- API -------------------------------------------------------------------------------------

// The token lives in this tab's session storage and goes in an Authorization header: never in a
// cookie, so another site cannot make the browser send it.
const token = () => sessionStorage.getItem("chime-token") || "";
const headers = (extra = {}) => token() ? { ...extra, authorization: "Bearer " + token() } : extra;

class ApiError extends Error {}
async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (response.status === 401) {
    $("signin-state").textContent = "sign in with an API token";
    throw new ApiError("sign in with an API token (top right)");
  }
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = text; }
  if (!response.ok) throw new ApiError((body && body.error) || response.statusText);
  return body;
}
const post = (path, body = {}) => api(path, {
  method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
});

/** Reads a server-sent event stream from `path` (with the token), calling `onEvent(name, data)`. */
async function readEvents(path, onEvent, signal) {
  const response = await fetch(path, { headers: headers(), signal });
  if (!response.ok || !response.body) throw new ApiError(`events: HTTP ${response.status}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    pending += value;
    let end;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const block = pending.slice(0, end);
      pending = pending.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) {
        let parsed = data.join("\n");
        try { parsed = JSON.parse(parsed); } catch (_) { /* text */ }
        onEvent(name, parsed);
      }
    }
  }
}

// ---- live updates: one stream for the whole app ----------------------------------------------

let page = null; // the current page's handlers: { onTasks(changes), onTick(), dispose() }
let liveAbort = null;
let handling = Promise.resolve();
/** Runs `work` after every event handler before it (and before any after it). */
function serially(work) {
  handling = handling.then(work).catch(() => {});
  return handling;
}
async function followEvents() {
  if (liveAbort) liveAbort.abort();
  const abort = new AbortController();
  liveAbort = abort;
  while (!abort.signal.aborted) {
    try {
      $("live").textContent = "live";
      $("live").className = "on";
      await readEvents("/api/v1/events", (name, data) => {
        // One event at a time, in order: a handler that reads the API finishes before the next
        // change is applied, so an older read never overwrites a newer change.
        serially(async () => {
          if (!page) return;
          if (name === "tasks" && page.onTasks) await page.onTasks(data.changes || []);
          else if (name === "tick") {
            window.chimeTicks = (window.chimeTicks || 0) + 1;
            // A redraw would take away a question the user is reading (Drain? Cancel?): the
            // page refreshes at the first tick after it is answered.
            if (page.onTick && !document.querySelector("#main .confirm:not([hidden])")) await page.onTick();
          }
          else if (name === "resync") await render();
        });
      }, abort.signal);
    } catch (e) {
      if (abort.signal.aborted) return;
    }
    $("live").textContent = "reconnecting…";
    $("live").className = "";
    await new Promise((r) => setTimeout(r, 3000));
  }
}

// ---- pages -----------------------------------------------------------------------------------

const routes = [
  [/^\/$/, overviewPage],
  [/^\/jobs$/, jobsPage],
  [/^\/jobs\/([^/]+)\/([^/]+)$/, jobPage],
  [/^\/triggers$/, triggersPage],
  [/^\/calendars$/, calendarsPage],
  [/^\/tasks$/, tasksPage],
  [/^\/tasks\/([^/]+)$/, taskPage],
  [/^\/dependencies$/, dependenciesPage],
  [/^\/backfills$/, backfillsPage],
  [/^\/workers$/, workersPage],
  [/^\/schedulers$/, schedulersPage],
];

async function render() {
  if (page && page.dispose) page.dispose();
  page = null;
  const path = location.pathname;
  for (const a of document.querySelectorAll("nav a")) {
    const href = a.getAttribute("href");
    a.classList.toggle("active", href === "/" ? path === "/" : path.startsWith(href));
  }
  const main = $("main");
  const route = routes.find(([pattern]) => pattern.test(path));
  if (!route) { main.replaceChildren(section("Not found", h("p", {}, "No such page."))); return; }
  const params = path.match(route[0]).slice(1).map(decodeURIComponent);
  main.replaceChildren(h("p", { class: "muted" }, "loading…"));
  try {
    const handlers = await route[1](main, ...params);
    page = handlers || {};
  } catch (e) {
    main.replaceChildren(section("Error", h("p", { class: "error" }, e.message)));
  }
}
function go(href) { history.pushState(null, "", href); render(); }
document.addEventListener("click", (e) => {
  const a = e.target.closest("a[href]");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const href = a.getAttribute("href");
  if (!href.startsWith("/") || href.startsWith("/api/")) return;
  e.preventDefault();
  go(href);
});
window.addEventListener("popstate", render);
// Streams die with the page: a browser allows six connections to a host, and a page kept in the
// back-forward cache would otherwise hold its streams open.
window.addEventListener("pagehide", () => {
  if (liveAbort) liveAbort.abort();
  if (page && page.dispose) page.dispose();
});
window.addEventListener("pageshow", (e) => { if (e.persisted) { followEvents(); render(); } });

/** A button that runs `action`, shows its error beside it, then calls `after`. */
/**
 * A button that runs `action`, then `after`. With `confirm` (what will happen, in words, or a
 * function that says it when clicked), the first click only asks: the sentence and a
 * "Yes, <label>" button appear beside it, and nothing is done until that is clicked.
 */
function actionButton(label, action, after, cls = "", confirm = "") {
  const error = h("span", { class: "error" });
  const run = async (button) => {
    button.disabled = true;
    error.textContent = "";
    try { await action(); if (after) await after(); } catch (err) { error.textContent = err.message; }
    button.disabled = false;
  };
  const ask = h("span", { class: "confirm", hidden: true });
  const button = h("button", {
    class: cls, onclick: async (e) => {
      e.preventDefault();
      const question = typeof confirm === "function" ? confirm() : confirm;
      if (!question) return run(button);
      const yes = h("button", { class: cls, onclick: async (e2) => {
        e2.preventDefault(); ask.hidden = true; button.hidden = false; await run(button);
      } }, `Yes, ${label.toLowerCase()}`);
      const no = h("button", { class: "secondary", onclick: (e2) => { e2.preventDefault(); ask.hidden = true; button.hidden = false; } }, "No");
      ask.replaceChildren(h("span", {}, question), " ", yes, " ", no);
      ask.hidden = false;
      button.hidden = true;
    },
  }, label);
  return h("span", {}, button, ask, " ", error);
}

// Overview -------------------------------------------------------------------------------------

async function overviewPage(main) {
  let data = await api("/api/v1/overview");
  const triggers = await api("/api/v1/triggers").catch(() => []);
  const counts = {};
  const draw = () => {
    const cards = STATUSES.map((s) => h("a", { class: "card", href: `/tasks?status=${s}` },
      h("b", { class: s, "data-count": s }, String(counts[s] || 0)), s));
    const groups = table(["worker group", ...LIVE, "workers online", "queue depth", "consumers"],
      data.groups.map((g) => h("tr", {},
        h("td", {}, link(`/tasks?worker_group=${encodeURIComponent(g.worker_group)}`, g.worker_group)),
        LIVE.map((s) => h("td", {}, String(g.live[s] || 0))),
        h("td", {}, String(g.workers_online)),
        h("td", {}, g.queue_depth ?? "?"), h("td", {}, g.consumers ?? "?"))));
    const next = triggers.filter((t) => t.next_fire_time && t.state === "waiting")
      .sort((a, b) => a.next_fire_time.localeCompare(b.next_fire_time)).slice(0, 8);
    const alive = data.services_alive || {};
    main.replaceChildren(
      (data.warnings || []).length ? section("Stalled", h("ul", { class: "warnings" },
        data.warnings.map((w) => h("li", { class: "error" }, w)))) : "",
      section("Tasks", h("div", { class: "cards" }, cards)),
      section("System", h("dl", {},
        h("dt", {}, "schedulers alive"), h("dd", {}, link("/schedulers", String(data.schedulers_alive))),
        h("dt", {}, "dependency services alive"), h("dd", {}, link("/schedulers", String(alive.dependency ?? 0))),
        h("dt", {}, "API instances alive"), h("dd", {}, link("/schedulers", String(alive.api ?? 0))),
        h("dt", {}, "broker"), h("dd", {}, data.broker_connected ? "connected" : h("span", { class: "error" }, "disconnected")),
        h("dt", {}, "outbox backlog"), h("dd", {}, `${data.outbox_backlog} row(s)` + (data.outbox_backlog ? `, oldest ${data.outbox_oldest_seconds.toFixed(1)} s` : "")))),
      section("Worker groups", groups),
      section("Next fires", next.length ? table(["trigger", "job", "next fire", "in the trigger's zone"], next.map((t) => h("tr", {},
        h("td", {}, `${t.group}.${t.name}`), h("td", {}, jobLink({ group: t.job_group, name: t.job })),
        h("td", {}, when(t.next_fire_time)),
        h("td", { class: "muted" }, `${inZone(new Date(t.next_fire_time), zoneOf(t.schedule))} ${zoneOf(t.schedule)}`))))
        : h("p", { class: "muted" }, "No trigger is waiting to fire.")),
      section("Recent failures", data.recent_failures.length ? taskTable(data.recent_failures) : h("p", { class: "muted" }, "None.")));
  };
  Object.assign(counts, data.counts);
  draw();
  let ticks = 0;
  return {
    onTasks(changes) {
      for (const { from, task, new: created } of changes) {
        // A task that was neither new nor live at the last look was rerun from an end we do
        // not know: the periodic refresh corrects the counts.
        if (!from && !created) continue;
        if (from) counts[from] = Math.max(0, (counts[from] || 0) - 1);
        counts[task.status] = (counts[task.status] || 0) + 1;
      }
      for (const s of STATUSES) {
        const node = main.querySelector(`[data-count="${s}"]`);
        if (node) node.textContent = String(counts[s] || 0);
      }
    },
    async onTick() {
      if (++ticks % 3) return;
      data = await api("/api/v1/overview");
      Object.keys(counts).forEach((k) => delete counts[k]);
      Object.assign(counts, data.counts);
      draw();
    },
  };
}

// Tasks ----------------------------------------------------------------------------------------

/**
 * An attempt's output: a box that follows the tail as text arrives (unless the reader scrolled
 * up), with a search that keeps only the lines containing it, a wrap toggle and a download.
 * `append` adds text, `reset` empties it.
 */
function logBox(text, fileName) {
  let all = text || "";
  let query = "";
  const pre = h("pre", { class: "mono output" });
  const count = h("span", { class: "muted" });
  const atBottom = () => pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  const show = (follow) => {
    const lines = query ? all.split("\n").filter((l) => l.toLowerCase().includes(query)) : null;
    pre.textContent = lines ? lines.join("\n") : all;
    count.textContent = lines ? ` ${lines.length} matching line(s)` : "";
    if (follow) pre.scrollTop = pre.scrollHeight;
  };
  const search = h("input", { type: "search", placeholder: "search the output", "aria-label": "search the output",
    oninput: () => { query = search.value.toLowerCase(); show(true); } });
  const wrap = h("input", { type: "checkbox", checked: true,
    onchange: () => { pre.style.whiteSpace = wrap.checked ? "pre-wrap" : "pre"; } });
  const download = h("a", { href: "#", onclick: (e) => {
    e.preventDefault();
    const url = URL.createObjectURL(new Blob([all], { type: "text/plain" }));
    const a = h("a", { href: url, download: fileName });
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  } }, "download");
  const box = h("div", { class: "logbox" },
    h("div", { class: "row-actions" }, search, count, " ", h("label", {}, wrap, " wrap"), " ", download),
    pre);
  box.append_text = (more) => { const follow = atBottom(); all += more; show(follow); };
  box.reset = () => { all = ""; show(true); };
  // Shown at its end: the newest lines are what a reader of a log wants first.
  requestAnimationFrame(() => show(true));
  show(false);
  return box;
}

/** `850 ms`, `12.4 s`, `3 min 4 s`, `2 h 5 min`. */
function seconds(s) {
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}
/** How long a task's current attempt ran (or has run so far), in seconds; null before it starts. */
function ranFor(t) {
  if (!t.started_at) return null;
  return ((t.finished_at ? new Date(t.finished_at) : new Date()) - new Date(t.started_at)) / 1000;
}
function duration(t) {
  const s = ranFor(t);
  return s === null ? h("span", { class: "muted" }, "–") : `${seconds(s)}${t.finished_at ? "" : " so far"}`;
}
/** The last runs' durations as bars, oldest first, coloured by outcome; each links its task. */
function runsChart(runs) {
  const ran = runs.filter((t) => t.started_at).slice(0, 50).reverse();
  if (!ran.length) return "";
  const secs = ran.map(ranFor);
  const longest = Math.max(0.001, ...secs);
  return h("div", { class: "runs-chart", title: `longest ${seconds(longest)}` }, ran.map((t, i) =>
    h("a", { href: `/tasks/${t.id}`, class: `bar-run bg-${t.status}`,
      title: `${t.data_time ? inZone(new Date(t.data_time), (t.job && t.job.data_time_zone) || "UTC") : inZone(new Date(t.created_at), viewZone())}: ${t.status}, ${seconds(secs[i])}`,
      style: `height:${Math.max(3, Math.round(60 * secs[i] / longest))}px` })));
}

const TASK_HEADERS = ["id", "status", "job / name", "kind", "worker group", "attempt", "data time", "created", "finished", "duration", "reason"];
/** Whether `task` was made no earlier than the task of `row` (lists go by creation, not by id: a
 * caller may choose the id). */
function newer(task, row) {
  return !row?.dataset.created || Date.parse(task.created_at) >= Date.parse(row.dataset.created);
}

function taskRow(t) {
  return h("tr", { "data-task": t.id, "data-created": t.created_at },
    h("td", {}, taskLink(t.id)), h("td", {}, status(t.status)), h("td", {}, t.job ? jobLink(t.job) : t.name ? `"${t.name}"` : t.command ? h("code", {}, `$ ${t.command}`) : jobLink(t.job)),
    h("td", {}, t.kind), h("td", {}, t.group), h("td", {}, String(t.attempt)),
    h("td", {}, whenData(t.data_time, t.job && t.job.data_time_zone)), h("td", {}, when(t.created_at)), h("td", {}, when(t.finished_at)),
    h("td", {}, duration(t)), h("td", {}, t.reason || ""));
}
const taskTable = (tasks) => table(TASK_HEADERS, tasks.map(taskRow));

/** Whether a task summary passes the list's filters (what the API would return). */
/**
 * Whether a task summary passes the list's filters. `shown`: the row is on the page already,
 * so what a summary cannot tell (its worker, its backfill, its command) was checked by the API;
 * a new row must pass them here, and a list filtered by them takes no new rows live.
 */
function matches(t, f, shown = false) {
  if (!shown && (f.worker || f.backfill)) return false;
  if (f.status && t.status !== f.status) return false;
  if (f.job_name && (!t.job || t.job.group !== (f.job_group || "default") || t.job.name !== f.job_name)) return false;
  if (f.job) {
    const [g, n] = f.job.includes(".") ? [f.job.slice(0, f.job.indexOf(".")), f.job.slice(f.job.indexOf(".") + 1)] : ["default", f.job];
    if (!t.job || t.job.group !== g || t.job.name !== n) return false;
  }
  if (f.worker_group && t.group !== f.worker_group) return false;
  if (f.kind && t.kind !== f.kind) return false;
  if (f.data_time_from && (!t.data_time || new Date(t.data_time) < new Date(fromShownZone(f.data_time_from)))) return false;
  if (f.data_time_to && (!t.data_time || new Date(t.data_time) >= new Date(fromShownZone(f.data_time_to)))) return false;
  if (f.q && !shown) {
    const q = f.q.toLowerCase();
    const hay = [t.kind, t.reason, t.submit_user, t.name, t.job && t.job.name].map((x) => (x || "").toLowerCase());
    if (!t.id.startsWith(q) && !hay.some((x) => x.includes(q))) return false;
  }
  return true;
}

const FILTERS = ["status", "job", "job_group", "job_name", "worker_group", "kind", "data_time_from", "data_time_to", "q", "worker", "backfill"];
async function tasksPage(main) {
  const search = new URLSearchParams(location.search);
  const filter = Object.fromEntries(FILTERS.map((k) => [k, search.get(k) || ""]));
  const before = search.get("before") || "";
  const query = new URLSearchParams({ limit: "50" });
  for (const [k, v] of Object.entries(filter)) {
    if (!v) continue;
    query.set(k, k.startsWith("data_time") ? fromShownZone(v) : v);
  }
  if (before) query.set("before", before);
  const tasks = await api(`/api/v1/tasks?${query}`);
  const field = (name, placeholder, size = 12, type = "text") =>
    h("input", { name, placeholder, size, type, value: filter[name], title: placeholder });
  const form = h("form", {
    onsubmit: (e) => {
      e.preventDefault();
      const next = new URLSearchParams();
      for (const [k, v] of new FormData(form)) if (v) next.set(k, v);
      // A job typed in replaces one named apart by a link.
      if (next.get("job")) { next.delete("job_group"); next.delete("job_name"); }
      go(`/tasks${next.toString() ? "?" + next : ""}`);
    },
  },
  h("select", { name: "status" }, h("option", { value: "" }, "any status"),
    STATUSES.map((s) => h("option", { value: s, selected: filter.status === s }, s))),
  field("job", "job (group.name)", 16), field("worker_group", "worker group"), field("kind", "kind", 8),
  // A job named apart (its group may hold a dot) stays in the filter.
  ["job_group", "job_name"].filter((k) => filter[k]).map((k) => h("input", { type: "hidden", name: k, value: filter[k] })),
  h("label", { class: "muted" }, `data time (${viewZone()}) `, field("data_time_from", "from", 0, "datetime-local"), " – ",
    field("data_time_to", "to", 0, "datetime-local")),
  field("q", "text or id", 14), h("button", {}, "Filter"), link("/tasks", "clear"));
  // Rows can be selected, and the selection killed or re-run in one go.
  const selectable = (t) => {
    const row = taskRow(t);
    row.prepend(h("td", {}, h("input", { type: "checkbox", class: "pick", "data-id": t.id, "data-status": t.status,
      "aria-label": `select ${t.id}`, onchange: () => bulk.update() })));
    return row;
  };
  const body = h("tbody", {}, tasks.map(selectable));
  const all = h("input", { type: "checkbox", "aria-label": "select all shown", onchange: () => {
    for (const box of body.querySelectorAll("input.pick")) box.checked = all.checked;
    bulk.update();
  } });
  const rows = h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, all), TASK_HEADERS.map((x) => h("th", {}, x)))), body);
  const bulk = bulkActions(body);
  const pager = h("p", {},
    before ? link(`/tasks?${new URLSearchParams(Object.entries(filter).filter(([, v]) => v))}`, "⇤ newest") : "",
    " ",
    tasks.length === 50 ? link(`/tasks?${new URLSearchParams([...Object.entries(filter).filter(([, v]) => v), ["before", tasks[tasks.length - 1].id]])}`, "older →") : "");
  main.replaceChildren(
    section("Tasks", form, bulk.bar, rows, pager),
    submitSection());
  return {
    onTasks(changes) {
      for (const { task } of changes) {
        const row = body.querySelector(`tr[data-task="${CSS.escape(task.id)}"]`);
        if (row) {
          if (matches(task, filter, true)) {
            const was = row.querySelector("input.pick")?.checked;
            const fresh = selectable(task);
            fresh.className = "flash";
            if (was) fresh.querySelector("input.pick").checked = true;
            row.replaceWith(fresh);
            bulk.update();
          }
          else { row.remove(); bulk.update(); }
        } else if (!before && matches(task, filter) && newer(task, body.firstElementChild)) {
          const fresh = selectable(task);
          fresh.className = "flash";
          body.prepend(fresh);
          while (body.children.length > 50) body.lastElementChild.remove();
          bulk.update();
        }
      }
    },
  };
}

/**
 * Kill or re-run the selected rows: each action names how many tasks it applies to and asks
 * first; tasks it does not apply to (a kill of an ended task, a rerun of a live one) are left
 * out and counted.
 */
function bulkActions(body) {
  const count = h("span", { class: "muted" });
  const result = h("span", {});
  const picked = (statuses) => [...body.querySelectorAll("input.pick:checked")]
    .filter((b) => statuses.includes(b.dataset.status)).map((b) => b.dataset.id);
  const ENDED = ["succeeded", "failed", "killed"];
  const act = (verb, statuses, path) => async () => {
    const ids = picked(statuses);
    let done = 0;
    const errors = [];
    for (const id of ids) {
      try { await post(path(id)); done += 1; } catch (err) { errors.push(`${shortId(id)}: ${err.message}`); }
    }
    result.textContent = `${done} task(s) ${verb}` + (errors.length ? `; ${errors.length} not: ${errors.join("; ")}` : "");
  };
  const selected = () => body.querySelectorAll("input.pick:checked").length;
  // Each question says how many of the selection the action applies to.
  const kill = actionButton("Kill selected", act("killed", LIVE, (id) => `/api/v1/tasks/${id}/kill`), null, "danger",
    () => `Kill ${picked(LIVE).length} task(s)? ${selected() - picked(LIVE).length} of the selection have ended and are left as they are.`);
  const rerun = actionButton("Rerun selected", act("re-run", ENDED, (id) => `/api/v1/tasks/${id}/rerun`), null, "",
    () => `Run ${picked(ENDED).length} task(s) again? ${selected() - picked(ENDED).length} of the selection have not ended and are left as they are.`);
  const rerunDown = actionButton("Rerun selected with downstream", act("re-run with downstream", ENDED, (id) => `/api/v1/tasks/${id}/rerun?downstream=true`), null, "",
    () => `Run ${picked(ENDED).length} task(s) again, and every task downstream of each for its data time, succeeded ones too?`);
  const bar = h("div", { class: "row-actions", hidden: true }, count, " ", kill, " ", rerun, " ", rerunDown, " ", result);
  const update = () => {
    bar.hidden = selected() === 0;
    count.textContent = `${selected()} selected`;
  };
  return { bar, update };
}

function submitSection() {
  const error = h("span", { class: "error" });
  const form = h("form", {
    onsubmit: async (e) => {
      e.preventDefault();
      const f = new FormData(form);
      const body = { kind: f.get("kind"), spec: f.get("kind") === "shell" ? { command: f.get("command") } : {} };
      if (f.get("group")) body.group = f.get("group");
      try { const task = await post("/api/v1/tasks", body); go(`/tasks/${task.id}`); } catch (err) { error.textContent = err.message; }
    },
  },
  h("select", { name: "kind" }, h("option", {}, "shell"), h("option", {}, "noop")),
  h("input", { name: "group", placeholder: "worker group (default)", size: 16 }),
  h("input", { name: "command", placeholder: "script, run with sh -c", size: 40 }),
  h("button", {}, "Submit"), error);
  return section("Submit an ad-hoc task", form);
}

async function taskPage(main, rawId) {
  const id = rawId.toLowerCase();
  let follow = null;
  let task;
  const output = new Map(); // attempt → <pre>
  const draw = async () => {
    task = await api(`/api/v1/tasks/${encodeURIComponent(id)}`);
    const t = task;
    const live = LIVE.includes(t.status);
    const actions = h("div", { class: "row-actions" },
      live ? actionButton("Kill", () => post(`/api/v1/tasks/${t.id}/kill`), draw, "danger",
        t.status === "running" ? "Kill this task? Its processes are killed now and it ends killed." : "Kill this task? It will not run.") : "",
      !live ? actionButton("Rerun", () => post(`/api/v1/tasks/${t.id}/rerun`), draw, "",
        `Run this task again as attempt ${t.attempt + 1}? Its downstream tasks that failed with it wait for it again.`) : "",
      !live && t.job ? actionButton("Rerun with downstream", () => post(`/api/v1/tasks/${t.id}/rerun?downstream=true`), draw, "",
        "Run this task again, and every task downstream of it for its data time, succeeded ones too?") : "");
    const facts = h("dl", {},
      h("dt", {}, "job"), h("dd", {}, jobLink(t.job)),
      h("dt", {}, "kind"), h("dd", {}, t.kind),
      t.name ? [h("dt", {}, "name"), h("dd", {}, t.name)] : "",
      h("dt", {}, "worker group"), h("dd", {}, t.group),
      h("dt", {}, "attempt"), h("dd", {}, String(t.attempt)),
      h("dt", {}, "priority"), h("dd", {}, String(t.priority)),
      h("dt", {}, "data time"), h("dd", {}, whenData(t.data_time, t.job && t.job.data_time_zone)),
      h("dt", {}, "created"), h("dd", {}, when(t.created_at)),
      h("dt", {}, "started"), h("dd", {}, when(t.started_at)),
      h("dt", {}, "finished"), h("dd", {}, when(t.finished_at)),
      t.next_attempt_at ? [h("dt", {}, "next try"), h("dd", {}, when(t.next_attempt_at))] : "",
      t.reason ? [h("dt", {}, "reason"), h("dd", {}, t.reason)] : "",
      t.backfill_id ? [h("dt", {}, "backfill"), h("dd", {}, link("/backfills", `#${t.backfill_id}`))] : "");
    const stalled = t.stalled && t.stalled.length ? section("Why it is not running",
      h("ul", {}, t.stalled.map((w) => h("li", { class: "error" }, w)))) : "";
    const waiting = t.waiting_on && t.waiting_on.length ? section("Why it waits", table(["upstream", "data time", "state"],
      t.waiting_on.map((w) => h("tr", {}, h("td", {}, w.upstream), h("td", {}, whenData(w.data_time, t.job && t.job.data_time_zone)),
        h("td", {}, w.task ? link(`/tasks/${w.task}`, w.state) : w.state))))) : "";
    output.clear();
    const attempts = t.attempts.slice().reverse().map((a) => {
      const pre = logBox(a.output || "", `task-${t.id}-attempt-${a.attempt}.log`);
      pre.setAttribute("data-attempt", a.attempt);
      output.set(a.attempt, pre);
      return h("div", {},
        h("h3", { style: "font-size:13px;margin:10px 0 2px" }, `Attempt ${a.attempt} `, status(a.outcome || "running"),
          h("span", { class: "muted" }, ` on ${a.worker || "?"}, `, when(a.started_at), " → ", when(a.finished_at),
            a.exit_code !== null && a.exit_code !== undefined ? `, exit code ${a.exit_code}` : "")),
        a.error ? h("div", { class: "error" }, a.error) : "",
        a.value !== undefined && a.value !== null
          ? h("div", {}, h("span", { class: "muted" }, "result"),
            h("pre", { class: "mono task-result" }, JSON.stringify(a.value, null, 2)))
          : "",
        pre);
    });
    main.replaceChildren(
      section([h("span", {}, "Task "), h("span", { class: "mono" }, t.id), status(t.status)], actions, facts),
      stalled,
      waiting,
      section("Attempts", attempts.length ? attempts : h("p", { class: "muted" }, "Not started yet.")),
      section("Spec", h("pre", { class: "mono" }, JSON.stringify(t.spec, null, 2))),
      section("Data", h("pre", { class: "mono" }, JSON.stringify(t.data, null, 2))));
    // A running attempt's output streams in as the worker writes it.
    if (follow) { follow.abort(); follow = null; }
    const running = t.attempts.find((a) => !a.outcome);
    if (running) {
      follow = new AbortController();
      const pre = output.get(running.attempt);
      readEvents(`/api/v1/tasks/${t.id}/logs?follow=true&attempt=${running.attempt}`, (name, data) => {
        if (name === "output" && pre && data.attempt === running.attempt) pre.append_text(data.text);
        if (name === "attempt" && pre) pre.reset();
      }, follow.signal).catch(() => {});
    }
  };
  await draw();
  return {
    onTasks(changes) {
      const mine = changes.find((c) => c.task.id === id);
      if (mine && (mine.task.status !== task.status || mine.task.attempt !== task.attempt)) draw();
    },
    dispose() { if (follow) follow.abort(); },
  };
}

// Jobs -----------------------------------------------------------------------------------------

async function jobsPage(main) {
  const [jobs, triggers] = await Promise.all([api("/api/v1/jobs"), api("/api/v1/triggers")]);
  const zones = {};
  for (const t of triggers) {
    const key = `${t.job_group}.${t.job}`;
    if (t.state === "waiting" && t.next_fire_time && (!zones[key] || t.next_fire_time < zones[key].at)) {
      zones[key] = { at: t.next_fire_time, zone: zoneOf(t.schedule) };
    }
  }
  const row = (j) => {
    const next = zones[`${j.group}.${j.name}`];
    return h("tr", { "data-job": `${j.group}.${j.name}` },
      h("td", {}, jobLink(j)), h("td", {}, j.kind), h("td", {}, j.worker_group),
      h("td", {}, String(j.triggers ?? 0)),
      h("td", {}, next ? `${inZone(new Date(next.at), next.zone)} ${next.zone}` : h("span", { class: "muted" }, "–")),
      h("td", { class: "last-run" }, j.last_run ? [status(j.last_run.status), " ", taskLink(j.last_run.task_id)] : h("span", { class: "muted" }, "never")),
      h("td", {}, h("span", { class: "strip", title: "its latest runs, newest first" },
        (j.recent_runs || []).map((s) => h("span", { class: `bg-${s}`, title: s })))),
      h("td", {}, j.paused ? h("span", { class: "wait" }, "paused") : ""));
  };
  const body = h("tbody", {}, jobs.map(row));
  main.replaceChildren(section("Jobs",
    jobs.length ? h("table", {}, h("thead", {}, h("tr", {}, ["job", "kind", "worker group", "triggers", "next fire (trigger's zone)", "last run", "recent runs", ""].map((x) => h("th", {}, x)))), body)
      : h("p", { class: "muted" }, "No jobs yet: chime job create NAME --kind shell -- CMD")));
  return {
    onTasks(changes) {
      for (const { task } of changes) {
        if (!task.job) continue;
        const cell = body.querySelector(`tr[data-job="${CSS.escape(jobName(task.job))}"] td.last-run`);
        if (cell) cell.replaceChildren(status(task.status), " ", taskLink(task.id));
      }
    },
  };
}

async function jobPage(main, group, name) {
  const path = `/api/v1/jobs/${encodeURIComponent(group)}/${encodeURIComponent(name)}`;
  const full = `${group}.${name}`;
  const [job, allTriggers, deps] = await Promise.all([api(path), api("/api/v1/triggers"), api(`${path}/dependencies`)]);
  const triggers = await Promise.all(allTriggers.filter((t) => t.job_group === group && t.job === name)
    .map((t) => api(`/api/v1/triggers/${encodeURIComponent(t.group)}/${encodeURIComponent(t.name)}`)));
  const runs = await api(`/api/v1/tasks?${new URLSearchParams({ job_group: group, job_name: name, limit: "20" })}`);
  const reload = () => render();
  const settings = h("dl", {},
    h("dt", {}, "kind"), h("dd", {}, job.kind),
    h("dt", {}, "worker group"), h("dd", {}, job.worker_group),
    h("dt", {}, "description"), h("dd", {}, job.description || "–"),
    h("dt", {}, "priority"), h("dd", {}, String(job.priority)),
    h("dt", {}, "concurrent"), h("dd", {}, job.concurrent ? "yes" : "no (one task at a time)"),
    h("dt", {}, "retries"), h("dd", {}, `${job.failed_retries} after failure, ${job.reject_retries} after rejection`),
    h("dt", {}, "timeout"), h("dd", {}, job.timeout_ms ? `${job.timeout_ms} ms` : "none"),
    h("dt", {}, "data-time period"), h("dd", {}, job.data_time_period ? `${job.data_time_period} (${job.data_time_zone || "UTC"})` : "none"),
    h("dt", {}, "execute user"), h("dd", {}, job.execute_user || "the worker's default"),
    h("dt", {}, "success expected"), h("dd", {}, job.expect_success_within_ms
      ? `within ${job.expect_success_within_ms / 3600000 >= 1 ? `${+(job.expect_success_within_ms / 3600000).toFixed(2)} h` : `${+(job.expect_success_within_ms / 60000).toFixed(2)} min`} (else the webhooks are told)`
      : "–"),
    h("dt", {}, "source"), h("dd", { class: "job-source" }, job.source
      ? `${job.source} (chime apply: edits made here are overwritten by its next apply)`
      : "made by hand"),
    h("dt", {}, "state"), h("dd", {}, job.paused ? "paused" : "active"),
    h("dt", {}, "spec"), h("dd", {}, h("pre", { class: "mono" }, JSON.stringify(job.spec, null, 2))));
  const actions = h("div", { class: "row-actions" },
    job.paused ? actionButton("Resume", () => post(`${path}/resume`), reload)
      : actionButton("Pause", () => post(`${path}/pause`), reload, "secondary"),
    actionButton("Run now", async () => { const r = await post(`${path}/run`, {}); go(`/tasks/${r.task_id}`); }));
  const triggerRows = triggers.map((t) => {
    const zone = zoneOf(t.schedule);
    return h("tr", { "data-trigger": `${t.group}.${t.name}` },
      h("td", {}, `${t.group}.${t.name}`), h("td", {}, describeSchedule(t.schedule)),
      h("td", {}, zone), h("td", {}, t.state),
      h("td", { class: "next-fires" }, (t.next_fires || []).length
        ? h("ol", { style: "margin:0;padding-left:18px" }, t.next_fires.map((f) => h("li", { class: "mono" }, `${inZone(new Date(f), zone)} ${zone}`)))
        : h("span", { class: "muted" }, "none")));
  });
  const depRow = (d, other) => h("tr", {}, h("td", {}, link(jobHref(other), other)),
    h("td", {}, d.window), h("td", {}, d.on_upstream_failure));
  const runsBody = h("tbody", {}, runs.map(taskRow));
  main.replaceChildren(
    section([h("span", {}, "Job "), h("span", { class: "mono" }, full)], actions, settings),
    section("Triggers (next 10 fire times, in the trigger's zone)", triggers.length
      ? table(["trigger", "schedule", "zone", "state", "next fires"], triggerRows) : h("p", { class: "muted" }, "No triggers: it runs when run by hand or by its upstreams.")),
    section("Depends on", deps.upstreams.length ? table(["upstream", "window", "on failure"], deps.upstreams.map((d) => depRow(d, d.upstream))) : h("p", { class: "muted" }, "Nothing.")),
    section("Needed by", deps.downstreams.length ? table(["downstream", "window", "on failure"], deps.downstreams.map((d) => depRow(d, d.job))) : h("p", { class: "muted" }, "Nothing.")),
    section([h("span", {}, "Recent runs"), link(`/tasks?${new URLSearchParams({ job_group: group, job_name: name })}`, "all")],
      runsChart(runs),
      h("table", {}, h("thead", {}, h("tr", {}, TASK_HEADERS.map((x) => h("th", {}, x)))), runsBody)));
  return {
    onTasks(changes) {
      for (const { task } of changes) {
        if (jobName(task.job) !== full) continue;
        const row = runsBody.querySelector(`tr[data-task="${CSS.escape(task.id)}"]`);
        const fresh = taskRow(task);
        fresh.className = "flash";
        if (row) row.replaceWith(fresh); else runsBody.prepend(fresh);
      }
    },
  };
}

async function triggersPage(main) {
  const triggers = await api("/api/v1/triggers");
  const rows = triggers.map((t) => {
    const zone = zoneOf(t.schedule);
    const base = `/api/v1/triggers/${encodeURIComponent(t.group)}/${encodeURIComponent(t.name)}`;
    return h("tr", {},
      h("td", {}, `${t.group}.${t.name}`), h("td", {}, jobLink({ group: t.job_group, name: t.job })),
      h("td", {}, describeSchedule(t.schedule)), h("td", {}, zone), h("td", {}, t.calendar || "–"),
      h("td", {}, t.misfire_policy), h("td", {}, t.state),
      h("td", {}, t.next_fire_time ? `${inZone(new Date(t.next_fire_time), zone)} ${zone}` : "–"),
      h("td", {}, when(t.prev_fire_time)), h("td", {}, String(t.times_triggered)),
      h("td", {}, t.state === "paused" ? actionButton("Resume", () => post(`${base}/resume`), render)
        : actionButton("Pause", () => post(`${base}/pause`), render, "secondary")));
  });
  main.replaceChildren(section("Triggers", triggers.length
    ? table(["trigger", "job", "schedule", "zone", "calendar", "misfire", "state", "next fire", "last fire", "fired", ""], rows)
    : h("p", { class: "muted" }, "No triggers yet: chime trigger create NAME --job JOB --cron '0 * * * * ?'")));
  return { onTick: () => {} };
}

async function calendarsPage(main) {
  const calendars = await api("/api/v1/calendars");
  main.replaceChildren(section("Calendars", calendars.length
    ? table(["name", "description", "definition"], calendars.map((c) => h("tr", {},
      h("td", {}, c.name), h("td", {}, c.description || ""),
      h("td", {}, h("pre", { class: "mono" }, JSON.stringify(c.calendar ?? c.definition ?? c, null, 2))))))
    : h("p", { class: "muted" }, "No calendars.")));
}

// Dependencies: the graph and the grid -------------------------------------------------------------

const PERIOD_ORDER = ["minute", "hour", "day", "week", "month"];
const STATUS_FILL = { succeeded: "#dafbe1", failed: "#ffebe9", killed: "#ffebe9", running: "#ddf4ff",
  ready: "#fbefff", waiting: "#fff8c5", retrying: "#fff8c5" };

/** A data time as short as its period allows, in the job's zone. */
function shortDataTime(t, job) {
  const full = inZone(new Date(t), job.data_time_zone || "UTC"); // YYYY-MM-DD HH:MM:SS
  switch (job.data_time_period) {
    case "month": return full.slice(0, 7);
    case "day": case "week": return full.slice(5, 10);
    default: return full.slice(5, 16);
  }
}

/**
 * The DAG page: the graph (layered, upstream left, each node coloured by its latest run) and the
 * grid, one row per job with its own latest runs, newest on the left, grouped by data-time
 * period, so a daily job's days sit beside an hourly job's hours. Live events update cells in
 * place; a redraw keeps the scroll position and the selected cell. `?before=T` pages back.
 */
async function dependenciesPage(main) {
  const before = new URLSearchParams(location.search).get("before") || "";
  const COLUMNS = 30;
  const fetchGrid = () => api(`/api/v1/dependencies/grid?columns=${COLUMNS}${before ? `&before=${encodeURIComponent(before)}` : ""}`);
  let grid = await fetchGrid();
  let selected = null;
  let stale = false; // a redraw put off while a question was open
  const detail = h("div");
  const wrap = h("div", { class: "grid-wrap" });
  const cellKey = (job, t) => `${job}|${new Date(t).toISOString().replace(".000Z", "Z")}`;

  const graph = () => {
    const el = (tag, attrs, text) => {
      const n = document.createElementNS("http://www.w3.org/2000/svg", tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      return n;
    };
    const levels = {};
    const level = (job, seen = new Set()) => {
      if (levels[job] !== undefined) return levels[job];
      if (seen.has(job)) return 0;
      seen.add(job);
      const ups = grid.edges.filter((e) => e.job === job).map((e) => level(e.upstream, seen));
      return (levels[job] = ups.length ? Math.max(...ups) + 1 : 0);
    };
    grid.jobs.forEach((j) => level(j.job));
    const columns = [];
    grid.jobs.forEach((j) => (columns[levels[j.job]] = columns[levels[j.job]] || []).push(j.job));
    // Each layer in the order of its upstreams' mean position (the barycentre): few crossings.
    const pos = {};
    const W = 210, H = 44;
    columns.forEach((jobs, l) => {
      if (l > 0) {
        const centre = (job) => {
          const ys = grid.edges.filter((e) => e.job === job && pos[e.upstream]).map((e) => pos[e.upstream].y);
          return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : 0;
        };
        jobs.sort((a, b) => centre(a) - centre(b) || a.localeCompare(b));
      }
      jobs.forEach((job, i) => (pos[job] = { x: 10 + l * W, y: 10 + i * H }));
    });
    const svg = el("svg", { width: 10 + columns.length * W, height: 20 + Math.max(1, ...columns.map((c) => c.length)) * H });
    const defs = el("defs", {});
    const marker = el("marker", { id: "arrow", markerWidth: 8, markerHeight: 8, refX: 8, refY: 4, orient: "auto" });
    marker.append(el("path", { d: "M0,0 L8,4 L0,8 z", fill: "#6b7684" }));
    defs.append(marker);
    svg.append(defs);
    for (const e of grid.edges) {
      const a = pos[e.upstream], b = pos[e.job];
      if (!a || !b) continue;
      svg.append(el("path", { d: `M${a.x + 170},${a.y + 14} C${a.x + 190},${a.y + 14} ${b.x - 20},${b.y + 14} ${b.x},${b.y + 14}`, stroke: "#6b7684", fill: "none", "marker-end": "url(#arrow)" }));
    }
    for (const j of grid.jobs) {
      const p = pos[j.job];
      const latest = grid.cells.find((c) => c.job === j.job); // newest first per job
      const a = el("a", { href: jobHref(j.job), "data-node": j.job, "data-status": latest ? latest.status : "none" });
      a.append(el("rect", { x: p.x, y: p.y, width: 170, height: 28, rx: 6, fill: latest ? STATUS_FILL[latest.status] || "#fff" : "#fff", stroke: "#c9d1d9" }));
      a.append(el("text", { x: p.x + 8, y: p.y + 18 }, j.job));
      a.append(el("title", {}, latest ? `${j.job}: latest run ${latest.status}` : `${j.job}: no run yet`));
      svg.append(a);
    }
    return svg;
  };

  const cellLink = (c, job) => h("a", {
    href: `/tasks/${c.task_id}`, class: `run bg-${c.status}${selected === c.task_id ? " selected" : ""}`,
    title: `${job.job} for ${inZone(new Date(c.data_time), job.data_time_zone)} ${job.data_time_zone}: ${c.status}`,
    "data-cell": cellKey(job.job, c.data_time), "data-status": c.status, "data-task": c.task_id,
    onclick: (e) => { e.preventDefault(); e.stopPropagation(); select(c); },
  }, shortDataTime(c.data_time, job));

  const gridTable = () => {
    const byPeriod = {};
    for (const j of grid.jobs) (byPeriod[j.data_time_period || "none"] = byPeriod[j.data_time_period || "none"] || []).push(j);
    const periods = Object.keys(byPeriod).sort((a, b) => (PERIOD_ORDER.indexOf(a) + 1 || 99) - (PERIOD_ORDER.indexOf(b) + 1 || 99));
    const rows = [];
    for (const period of periods) {
      rows.push(h("tr", { class: "period" }, h("th", { class: "sticky" }, period === "none" ? "no period" : `${period}ly`.replace("dayly", "daily")), h("td", { colspan: COLUMNS })));
      for (const job of byPeriod[period]) {
        const runs = grid.cells.filter((c) => c.job === job.job);
        rows.push(h("tr", {}, h("th", { class: "sticky" }, link(jobHref(job.job), job.job),
          h("div", { class: "muted", style: "font-weight:normal;font-size:11px" }, job.data_time_zone)),
          runs.map((c) => h("td", { class: "cell" }, cellLink(c, job))),
          runs.length ? "" : h("td", { class: "muted" }, "no runs")));
      }
    }
    return h("table", { class: "grid" }, h("tbody", {}, rows));
  };

  const pager = () => {
    // The next page starts before the latest of each row's oldest run shown: no row skips runs
    // (a slower row may show some again).
    const oldestPerJob = grid.jobs.map((j) => {
      const runs = grid.cells.filter((c) => c.job === j.job);
      return runs.length ? runs[runs.length - 1].data_time : null;
    }).filter(Boolean);
    const oldest = oldestPerJob.length ? oldestPerJob.reduce((a, b) => (new Date(a) > new Date(b) ? a : b)) : null;
    return h("p", {},
      before ? link("/dependencies", "⇤ newest") : "", " ",
      oldest ? link(`/dependencies?before=${encodeURIComponent(oldest)}`, "older →") : "");
  };

  const draw = () => {
    // Redrawing keeps where the reader was: the page's scroll and the grid's own.
    const y = window.scrollY, x = wrap.scrollLeft;
    wrap.replaceChildren(grid.jobs.length ? gridTable() : "");
    main.replaceChildren(
      section("Graph (each job coloured by its latest run)", grid.jobs.length ? graph() : h("p", { class: "muted" }, "No dependencies: chime job depend DOWNSTREAM --on UPSTREAM")),
      section(`Grid (each job's own runs, newest first, data times in the job's zone; click a run)`, wrap, pager(), detail));
    wrap.scrollLeft = x;
    window.scrollTo(0, y);
  };
  const refresh = () => serially(async () => { grid = await fetchGrid(); draw(); if (selected) { const c = grid.cells.find((x) => x.task_id === selected); if (c) select(c); } });
  const select = (c) => {
    selected = c.task_id;
    for (const a of wrap.querySelectorAll("a.run.selected")) a.classList.remove("selected");
    const mine = wrap.querySelector(`a.run[data-task="${CSS.escape(c.task_id)}"]`);
    if (mine) mine.classList.add("selected");
    const job = grid.jobs.find((j) => j.job === c.job) || { data_time_zone: "UTC" };
    const live = LIVE.includes(c.status);
    detail.replaceChildren(h("p", {}, `${c.job} for ${inZone(new Date(c.data_time), job.data_time_zone)} ${job.data_time_zone}: `, status(c.status), " ",
      taskLink(c.task_id), " ",
      live ? actionButton("Kill", () => post(`/api/v1/tasks/${c.task_id}/kill`), refresh, "danger", `Kill ${c.job}'s run for this data time?`) : "",
      live ? "" : actionButton("Rerun", () => post(`/api/v1/tasks/${c.task_id}/rerun`), refresh, "", `Run ${c.job} for this data time again?`), " ",
      live ? "" : actionButton("Rerun with downstream", () => post(`/api/v1/tasks/${c.task_id}/rerun?downstream=true`), refresh, "",
        `Run ${c.job} and every task downstream of it for this data time again, succeeded ones too?`)));
  };
  draw();
  return {
    async onTasks(changes) {
      let refetch = false;
      for (const { task } of changes) {
        if (!task.job || !task.data_time) continue;
        const name = jobName(task.job);
        const job = grid.jobs.find((j) => j.job === name);
        if (!job) continue;
        const cell = grid.cells.find((c) => c.job === name && new Date(c.data_time).getTime() === new Date(task.data_time).getTime());
        if (!cell) { if (!before) refetch = true; continue; }
        // In place: the cell's colour and task, nothing else moves.
        cell.status = task.status; cell.task_id = task.id;
        const a = wrap.querySelector(`a.run[data-cell="${CSS.escape(cellKey(name, cell.data_time))}"]`);
        if (a) a.replaceWith(cellLink(cell, job));
        if (selected === task.id) select(cell);
        // The graph's node shows its job's latest run.
        if (grid.cells.find((c) => c.job === name) === cell) {
          const node = main.querySelector(`a[data-node="${CSS.escape(name)}"]`);
          if (node) {
            node.setAttribute("data-status", cell.status);
            node.querySelector("rect")?.setAttribute("fill", STATUS_FILL[cell.status] || "#fff");
          }
        }
      }
      // Not through `serially`: this runs inside it already (the live events' queue). A new
      // cell redraws the grid, which would take away an open Kill or Rerun question: then the
      // redraw waits for the next change after it is answered.
      if (refetch || stale) {
        if (main.querySelector(".confirm:not([hidden])")) { stale = true; return; }
        stale = false;
        grid = await fetchGrid();
        draw();
        const sel = selected && grid.cells.find((x) => x.task_id === selected);
        if (sel) select(sel);
      }
    },
  };
}

// Backfills, workers, schedulers -------------------------------------------------------------------

async function backfillsPage(main) {
  const draw = async () => {
    const backfills = await api("/api/v1/backfills");
    const rows = backfills.map((b) => {
      const total = Object.values(b.tasks).reduce((a, n) => a + n, 0);
      const done = (b.tasks.succeeded || 0);
      return h("tr", {},
        h("td", {}, `#${b.id}`), h("td", {}, jobLink({ group: b.job.split(".")[0], name: b.job.split(".").slice(1).join(".") })),
        h("td", {}, when(b.from), " → ", when(b.to)), h("td", {}, String(b.parallelism)),
        h("td", {}, h("div", { class: "bar", title: `${done}/${total} succeeded` }, h("div", { style: `width:${total ? (100 * done / total).toFixed(1) : 0}%` })),
          h("span", { class: "muted" }, Object.entries(b.tasks).map(([s, n]) => `${n} ${s}`).join(", "))),
        h("td", {}, link(`/tasks?backfill=${b.id}`, "its tasks")),
        h("td", {}, b.done ? "done" : actionButton("Cancel", () => post(`/api/v1/backfills/${b.id}/cancel`), draw, "danger",
          `Cancel backfill ${b.id}? Its tasks that have not ended are killed.`)));
    });
    main.replaceChildren(section("Backfills", backfills.length
      ? table(["id", "job", "range", "parallel", "progress", "", ""], rows)
      : h("p", { class: "muted" }, "No backfills: chime backfill JOB --from T --to T")));
  };
  await draw();
  return { onTick: draw };
}

async function workersPage(main) {
  const draw = async () => {
    const workers = await api("/api/v1/workers");
    main.replaceChildren(section("Workers", workers.length ? table(
      ["name", "status", "worker groups", "kinds", "slots", "running now", "heartbeat", "started", ""],
      workers.map((w) => h("tr", {},
        h("td", { class: "mono" }, w.name), h("td", {}, w.status), h("td", {}, w.groups.join(", ")),
        h("td", {}, w.kinds.join(", ")), h("td", {}, w.inline_concurrency
          ? `${w.concurrency} processes, ${w.inline_concurrency} inline` : String(w.concurrency)),
        h("td", {}, link(`/tasks?status=running&worker=${w.id}`, String(w.running ?? 0)), " ", link(`/tasks?worker=${w.id}`, "recent")),
        h("td", {}, ago(w.last_heartbeat)), h("td", {}, when(w.started_at)),
        h("td", {}, w.status === "online" ? actionButton("Drain", () => post(`/api/v1/workers/${w.id}/drain`), draw, "secondary",
          `Drain ${w.name}? It takes no more work, finishes what runs and goes offline.`) : ""))))
      : h("p", { class: "muted" }, "No workers: chime worker --groups default")));
  };
  await draw();
  return { onTick: draw };
}

async function schedulersPage(main) {
  const draw = async () => {
    const services = await api("/api/v1/services");
    const missing = ["scheduler", "dependency", "api"].filter((k) => !services.some((s) => s.kind === k && s.status === "alive"));
    main.replaceChildren(section("Services", services.length ? table(["kind", "instance", "host", "pid", "last check-in", "status"],
      services.map((s) => h("tr", {}, h("td", {}, s.kind), h("td", { class: "mono" }, s.instance_id), h("td", {}, s.host), h("td", {}, String(s.pid)),
        h("td", {}, `${s.seconds_since_checkin.toFixed(1)} s ago`), h("td", {}, s.status))))
      : h("p", { class: "muted" }, "No service is running: chime up"),
      missing.length ? h("p", { class: "error" }, `No live ${missing.join(", ")} instance: start chime ${missing.join(", chime ")}`) : ""));
  };
  await draw();
  return { onTick: draw };
}

// ---- sign-in and start -----------------------------------------------------------------------

/** Shows the sign-in box only where the API asks for a token: an open API needs none. */
async function showSignin() {
  $("signin-state").textContent = token() ? "signed in" : "";
  $("signin-button").textContent = token() ? "Sign out" : "Sign in";
  $("token").hidden = !!token();
  if (!token()) {
    const open = await fetch("/api/v1/overview").then((r) => r.ok).catch(() => false);
    $("signin").hidden = open;
  } else {
    $("signin").hidden = false;
  }
}
$("signin").addEventListener("submit", (e) => {
  e.preventDefault();
  if (token()) sessionStorage.removeItem("chime-token");
  else if ($("token").value) sessionStorage.setItem("chime-token", $("token").value.trim());
  $("token").value = "";
  showSignin();
  followEvents();
  render();
});
function showZone() {
  $("zone-toggle").textContent = `times: ${viewZone()}`;
}
$("zone-toggle").addEventListener("click", (e) => {
  e.preventDefault();
  localStorage.setItem("chime-zone", viewZone() === "UTC" ? "local" : "UTC");
  showZone();
  render();
});
showZone();
showSignin();
followEvents();
render();
