// Weir's dashboard, where scripts run: polls the job's control API every
// second and redraws the page from it (the job graph and the checkpoint
// history as SVG, the tables as the server renders them, the shadow run's
// report), and sends the actions (savepoint, stop with savepoint, module
// swap, shadow runs) with the bearer token, following each operation to its
// outcome.
//
// Every string from the job goes into the page as text (textContent or an
// attribute value set through the DOM), never as markup.
'use strict';

(() => {
  const POLL_MS = 1000;
  // The plan changes only on a swap; read it this often, and after one.
  const PLAN_MS = 10000;
  const TOKEN_KEY = 'weir-token';
  // Rows of the checkpoint history table (the chart shows all of it).
  const HISTORY_ROWS = 20;
  // Rows of the shadow run's table of keys with differences.
  const SHADOW_KEY_ROWS = 50;
  const SVG_NS = 'http://www.w3.org/2000/svg';
  // JSON's i64::MAX (the watermark at the end of input), as a JS number.
  const END_OF_INPUT = 9.2e18;

  const $ = (selector) => document.querySelector(selector);

  // ---- the token ---------------------------------------------------------

  // Takes the token from the address (`#token=` as `host status` prints it,
  // or `?token=` of an older link), keeps it for this tab only, and takes
  // it out of the address bar (and so out of history and bookmarks). The
  // page's form hands it over without an address (see `wire`).
  function takeToken() {
    const fragment = new URLSearchParams(location.hash.slice(1));
    const query = new URLSearchParams(location.search);
    const given = fragment.get('token') || query.get('token');
    if (given) {
      sessionStorage.setItem(TOKEN_KEY, given);
      fragment.delete('token');
      query.delete('token');
      const q = query.toString();
      const f = fragment.toString();
      history.replaceState(null, '', location.pathname + (q ? '?' + q : '') + (f ? '#' + f : ''));
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  let token = takeToken();

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, options = {}) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    if (options.body) headers['Content-Type'] = 'application/json';
    let response;
    try {
      response = await fetch(path, { ...options, headers, cache: 'no-store' });
    } catch (e) {
      throw new ApiError(0, 'the job is not reachable (it may have ended)');
    }
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const message = body && body.error ? body.error : response.status + ' ' + response.statusText;
      throw new ApiError(response.status, message);
    }
    return body;
  }

  // ---- formatting --------------------------------------------------------

  const fmtCount = (n) => (n == null ? '—' : Math.round(n).toLocaleString('en-US'));

  function fmtRate(r) {
    if (r == null) return '—';
    if (r >= 1e6) return (r / 1e6).toFixed(2) + 'M';
    if (r >= 1e4) return (r / 1e3).toFixed(1) + 'k';
    if (r >= 10) return r.toFixed(0);
    return r.toFixed(1);
  }

  const fmtPercent = (ratio) => (ratio == null ? '—' : Math.round(ratio * 100) + ' %');

  function fmtBytes(n) {
    if (n == null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n;
    let u = 0;
    while (v >= 1024 && u + 1 < units.length) {
      v /= 1024;
      u += 1;
    }
    return u === 0 ? n + ' B' : v.toFixed(1) + ' ' + units[u];
  }

  function fmtDuration(ms) {
    if (ms == null) return '—';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600);
    const m = Math.floor(s / 60) % 60;
    return h > 0 ? `${h}h ${pad(m)}m ${pad(s % 60)}s` : `${m}m ${pad(s % 60)}s`;
  }

  const pad = (x, n) => String(x).padStart(n || 2, '0');

  // A local time of day, 24-hour, as 13:04:05 (and .678 with `millis`).
  function fmtClock(ms, millis) {
    const d = new Date(ms);
    if (Number.isNaN(d.getTime())) return String(ms);
    const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    return millis ? time + '.' + pad(d.getMilliseconds(), 3) : time;
  }

  const fmtTime = (ms) => (ms == null ? '—' : fmtClock(ms, false));

  // A date and time, local, as 2026-11-30 13:04:05.
  function fmtDateTime(ms) {
    const d = new Date(ms);
    if (Number.isNaN(d.getTime())) return String(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${fmtClock(ms, false)}`;
  }

  function fmtWatermark(w) {
    if (w == null) return '—';
    if (w >= END_OF_INPUT) return 'end of input';
    // Wall-clock milliseconds read as a time; other event times as numbers.
    if (w > 1e11 && w < 253402300800000) return fmtClock(w, true);
    return String(w);
  }

  // ---- building elements -------------------------------------------------

  // An element: attributes set through the DOM, children as nodes or text.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v != null && v !== false) e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v != null) e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // A table: `columns` as the server writes them ('#' before a numeric
  // one), `rows` as arrays of cells (a node, or text).
  function table(columns, rows, className) {
    const head = el('tr', null, columns.map((c) =>
      c.startsWith('#') ? el('th', { class: 'n' }, c.slice(1)) : el('th', null, c)));
    const body = rows.map((cells) => el('tr', null, cells.map((c, i) => {
      if (c instanceof Node && (c.tagName === 'TD' || c.tagName === 'TH')) return c;
      return el('td', columns[i].startsWith('#') ? { class: 'n' } : null, c);
    })));
    return el('table', { class: className }, el('thead', null, head), el('tbody', null, body));
  }

  const rowHead = (text, ...more) => el('th', { scope: 'row' }, text, ...more);

  function replace(target, ...children) {
    target.replaceChildren(...children.flat().filter((c) => c != null));
  }

  // Class names only from known values.
  const levelOf = (level) => (['ok', 'low', 'high'].includes(level) ? level : 'unknown');
  const statusClass = (s) => (['completed', 'failed'].includes(s) ? s : 'in-progress');

  // ---- the views ---------------------------------------------------------

  const STATE_CLASSES = {
    running: 'running', failing: 'failing', failed: 'failing', cancelled: 'failing',
    cancelling: 'failing', restarting: 'restarting', '': 'unknown',
  };

  function renderHeader(job) {
    $('#job-name').textContent = job.job;
    document.title = job.job + ' · Weir';
    const state = $('#job-state');
    state.textContent = job.state;
    state.className = 'state state-' + (STATE_CLASSES[job.state] || 'busy');
    const items = [
      ['Uptime', fmtDuration(job.uptime_ms)],
      ['Started', fmtDateTime(job.start_time_ms)],
      ['Attempt', job.attempt],
      ['Records read', fmtCount(job.records_read)],
      ['Records written', fmtCount(job.records_written)],
      ['Parallelism', `${job.parallelism} (max ${job.max_parallelism})`],
    ];
    replace($('#summary'), items.map(([k, v]) => el('div', null, el('dt', null, k), el('dd', null, v))));
  }

  // Per node: records and rates summed over its subtasks, busy time of the
  // busiest one.
  function nodeRates(metrics) {
    const byNode = new Map();
    for (const t of metrics.tasks) {
      const n = byNode.get(t.node) || { in: 0, out: 0, inRate: 0, outRate: 0, busy: 0, rated: false };
      n.in += t.records_in;
      n.out += t.records_out;
      if (t.rates) {
        n.rated = true;
        n.inRate += t.rates.records_in_per_second;
        n.outRate += t.rates.records_out_per_second;
        n.busy = Math.max(n.busy, t.rates.busy_ms_per_second / 1000);
      }
      byNode.set(t.node, n);
    }
    return byNode;
  }

  // Columns left to right: each node one past the furthest node feeding
  // it (the plan lists nodes in topological order).
  function layout(plan) {
    const column = new Map(plan.nodes.map((n) => [n.id, 0]));
    for (const n of plan.nodes) {
      for (const e of plan.edges) {
        if (e.from === n.id && column.has(e.to)) {
          column.set(e.to, Math.max(column.get(e.to), column.get(n.id) + 1));
        }
      }
    }
    const rows = [];
    const place = new Map();
    for (const n of plan.nodes) {
      const c = column.get(n.id);
      rows[c] = (rows[c] || 0) + 1;
      place.set(n.id, { col: c, row: rows[c] - 1 });
    }
    return { place, columns: rows.length, rows: Math.max(1, ...rows.map((r) => r || 0)) };
  }

  function clip(text, max) {
    return text.length > max ? text.slice(0, max - 1) + '…' : text;
  }

  function renderGraph(plan, metrics, backPressure) {
    const W = 210;
    const H = 84;
    const GAP_X = 96;
    const GAP_Y = 26;
    const PAD = 12;
    const { place, columns, rows } = layout(plan);
    const width = PAD * 2 + columns * W + (columns - 1) * GAP_X;
    const height = PAD * 2 + rows * H + (rows - 1) * GAP_Y;
    const rates = nodeRates(metrics);
    const levels = new Map(backPressure.nodes.map((n) => [n.id, n]));
    const pos = (id) => {
      const p = place.get(id);
      return { x: PAD + p.col * (W + GAP_X), y: PAD + p.row * (H + GAP_Y) };
    };
    const g = $('#graph');
    g.setAttribute('viewBox', `0 0 ${width} ${height}`);
    g.setAttribute('width', width);
    g.setAttribute('height', height);
    const defs = svg('defs', null, svg('marker', {
      id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
    }, svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' })));
    const edges = plan.edges.filter((e) => place.has(e.from) && place.has(e.to)).map((e) => {
      const a = pos(e.from);
      const b = pos(e.to);
      const x1 = a.x + W;
      const y1 = a.y + H / 2;
      const x2 = b.x - 2;
      const y2 = b.y + H / 2;
      const mx = (x1 + x2) / 2;
      return svg('g', { class: 'edge', 'data-from': e.from, 'data-to': e.to },
        svg('path', { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)' }),
        svg('text', { x: mx, y: (y1 + y2) / 2 - 6, 'text-anchor': 'middle', class: 'edge-label' }, e.partitioning));
    });
    const nodes = plan.nodes.map((n) => {
      const p = pos(n.id);
      const r = rates.get(n.id);
      const bp = levels.get(n.id);
      const level = bp ? levelOf(bp.level) : 'unknown';
      const lines = [
        `${n.role} · ${n.kind} · ×${n.parallelism}`,
        r && r.rated ? `in ${fmtRate(r.inRate)}/s · out ${fmtRate(r.outRate)}/s` : 'in — · out —',
        bp ? `back-pressure ${fmtPercent(bp.ratio)} · busy ${fmtPercent(r ? r.busy : null)}` : 'back-pressure —',
      ];
      return svg('g', { class: `node role-${n.role} level-${level}`, 'data-id': n.id, transform: `translate(${p.x},${p.y})` },
        svg('title', null, `${n.id}: ${lines.join('; ')}` + (n.module ? `; module ${n.module.path}` : '')),
        svg('rect', { width: W, height: H, rx: 7 }),
        svg('rect', { class: 'band', width: 6, height: H, rx: 3 }),
        svg('text', { x: 16, y: 22, class: 'node-id' }, clip(n.id, 24)),
        lines.map((l, i) => svg('text', { x: 16, y: 42 + i * 16, class: 'node-line' }, l)));
    });
    replace(g, defs, edges, nodes);
  }

  function renderNodes(plan, metrics, backPressure) {
    const rates = nodeRates(metrics);
    const levels = new Map(backPressure.nodes.map((n) => [n.id, n]));
    const rows = plan.nodes.map((n) => {
      const r = rates.get(n.id);
      const bp = levels.get(n.id);
      const level = bp
        ? el('td', null, el('span', { class: 'level level-' + levelOf(bp.level) }, bp.level), ' ' + fmtPercent(bp.ratio))
        : '';
      return [rowHead(n.id), n.role, n.kind, n.parallelism,
        r ? fmtCount(r.in) : '', r ? fmtCount(r.out) : '',
        r && r.rated ? fmtRate(r.inRate) : '', r && r.rated ? fmtRate(r.outRate) : '',
        level, r && r.rated ? fmtPercent(r.busy) : ''];
    });
    const columns = ['Node', 'Role', 'Kind', '#Parallelism', '#Records in', '#Records out', '#In/s', '#Out/s',
      'Back-pressure', '#Busy'];
    const edges = plan.edges.length
      ? el('p', { class: 'edges' }, 'Edges: ' + plan.edges.map((e) => `${e.from} → ${e.to} (${e.partitioning})`).join(', '))
      : null;
    replace($('#nodes'), table(columns, rows, 'nodes'), edges);
  }

  // A bar in a table cell, `share` of its width (0 to 1).
  function meter(share, className) {
    const bar = el('span', { class: 'meter-fill ' + (className || '') });
    // CSSOM, which the page's policy allows (an inline style would not be).
    bar.style.width = Math.max(0, Math.min(1, share || 0)) * 100 + '%';
    return el('span', { class: 'meter' }, bar);
  }

  function renderWatermarks(watermarks) {
    const lags = watermarks.nodes.map((n) => n.lag_ms).filter((l) => l != null);
    const worst = Math.max(1000, ...lags);
    const rows = watermarks.nodes.map((n) => [
      rowHead(n.id),
      fmtWatermark(n.min_input),
      n.lag_ms == null ? '—' : el('td', { class: 'n lag' }, meter(n.lag_ms / worst, 'meter-lag'), fmtDuration(Math.max(0, n.lag_ms))),
      // Subtasks that agree (the usual case) read as one.
      n.subtasks.map((s) => fmtWatermark(s.output)).filter((w, i, all) => i === 0 || w !== all[i - 1]).join(', '),
    ]);
    replace($('#watermarks'), table(['Node', 'Input watermark', '#Lag', 'Output watermarks'], rows));
  }

  function renderGuests(plan, metrics) {
    const byNode = new Map();
    for (const t of metrics.tasks) {
      if (!t.guest) continue;
      const g = t.guest;
      const n = byNode.get(t.node) || { state: null, memory: 0, peak: 0, backend: g.backend, keyGroups: 0, calls: 0, traps: 0, interruptions: 0 };
      if (g.state_bytes != null) n.state = (n.state || 0) + g.state_bytes;
      n.memory += g.memory_bytes;
      n.peak += g.memory_peak_bytes;
      n.keyGroups += g.key_groups;
      n.calls += Object.values(g.calls || {}).reduce((sum, c) => sum + c.count, 0);
      n.traps += g.traps;
      n.interruptions += g.interruptions;
      byNode.set(t.node, n);
    }
    if (byNode.size === 0) {
      replace($('#guests'), el('p', { class: 'muted' }, 'No operator has reported its guest yet.'));
      return;
    }
    const maxState = Math.max(1, ...[...byNode.values()].map((n) => n.state || 0));
    const maxMemory = Math.max(1, ...[...byNode.values()].map((n) => n.peak));
    const modules = new Map(plan.nodes.filter((n) => n.module).map((n) => [n.id, n.module]));
    const rows = [...byNode.entries()].map(([id, n]) => {
      const m = modules.get(id);
      const module = m ? el('div', { class: 'module', title: m.sha256 }, m.path) : null;
      return [rowHead(id, module), n.backend,
        el('td', { class: 'n' }, meter((n.state || 0) / maxState, 'meter-state'), fmtBytes(n.state)),
        el('td', { class: 'n' }, meter(n.memory / maxMemory, 'meter-memory'), fmtBytes(n.memory)),
        fmtBytes(n.peak), n.keyGroups, fmtCount(n.calls), `${n.traps} / ${n.interruptions}`];
    });
    const columns = ['Operator', 'Backend', '#State', '#Memory', '#Peak memory', '#Key groups', '#Calls', '#Traps / interrupts'];
    replace($('#guests'), table(columns, rows));
  }

  function renderCheckpointCounts(c) {
    const items = [
      ['Completed', fmtCount(c.counts.completed)],
      ['Failed', fmtCount(c.counts.failed)],
      ['In progress', fmtCount(c.counts.in_progress)],
      ['Restored', fmtCount(c.counts.restored)],
    ];
    const latest = (label, s) => s && items.push([label, ['#' + s.id + ' ', el('span', { class: 'path' }, s.location || s.failure || '')]]);
    latest('Latest checkpoint', c.latest_completed);
    latest('Latest savepoint', c.latest_savepoint);
    latest('Latest failure', c.latest_failed);
    if (c.latest_restored) {
      items.push(['Restored from', ['#' + c.latest_restored.id + ' ', el('span', { class: 'path' }, c.latest_restored.location)]]);
    }
    replace($('#checkpoint-counts'),
      el('dl', { class: 'counts' }, items.map(([k, v]) => el('div', null, el('dt', null, k), el('dd', null, v)))));
  }

  // Duration (top) and size (bottom) of each checkpoint, oldest on the
  // left: one bar per checkpoint in each, the incremental part of a size
  // drawn over its full size, savepoints marked with a diamond, failed
  // ones red.
  function renderChart(history) {
    const chart = $('#checkpoint-chart');
    const points = history.slice().reverse();
    if (points.length === 0) {
      replace(chart);
      return;
    }
    const WIDTH = 960;
    const LEFT = 70;
    const RIGHT = 12;
    const PANEL = 110;
    const TOP = 26;
    const GAP = 34;
    const HEIGHT = TOP + PANEL + GAP + PANEL + 30;
    chart.setAttribute('viewBox', `0 0 ${WIDTH} ${HEIGHT}`);
    const plotW = WIDTH - LEFT - RIGHT;
    const step = plotW / points.length;
    const barW = Math.max(2, Math.min(26, step * 0.7));
    const xOf = (i) => LEFT + i * step + (step - barW) / 2;
    const maxDuration = Math.max(1, ...points.map((p) => p.duration_ms));
    const maxSize = Math.max(1, ...points.map((p) => p.size));
    const durationTop = TOP;
    const sizeTop = TOP + PANEL + GAP;
    const parts = [];
    const axis = (top, label, max, fmt) => {
      parts.push(svg('text', { x: LEFT, y: top - 8, class: 'panel-title' }, label));
      parts.push(svg('line', { x1: LEFT, x2: WIDTH - RIGHT, y1: top + PANEL, y2: top + PANEL, class: 'axis' }));
      parts.push(svg('line', { x1: LEFT, x2: WIDTH - RIGHT, y1: top, y2: top, class: 'grid' }));
      parts.push(svg('text', { x: LEFT - 6, y: top + 4, 'text-anchor': 'end', class: 'tick' }, fmt(max)));
      parts.push(svg('text', { x: LEFT - 6, y: top + PANEL + 4, 'text-anchor': 'end', class: 'tick' }, '0'));
    };
    axis(durationTop, 'Duration', maxDuration, fmtDuration);
    axis(sizeTop, 'Size (dark: stored incrementally)', maxSize, fmtBytes);
    const labelEvery = Math.max(1, Math.ceil(points.length / 12));
    points.forEach((p, i) => {
      const x = xOf(i);
      const kind = p.savepoint ? 'savepoint' : 'checkpoint';
      const status = statusClass(p.status);
      const title = `${kind} ${p.id}: ${p.status}, ${fmtDuration(p.duration_ms)}, ${fmtBytes(p.size)}` +
        ` (incremental ${fmtBytes(p.incremental_size)}), ${p.acknowledged}/${p.subtasks} acknowledged` +
        (p.failure ? ` — ${p.failure}` : '');
      const dh = Math.max(1, (p.duration_ms / maxDuration) * PANEL);
      parts.push(svg('rect', {
        class: `bar ${kind} status-${status}`, 'data-id': p.id,
        x, y: durationTop + PANEL - dh, width: barW, height: dh,
      }, svg('title', null, title)));
      if (p.savepoint) {
        const cx = x + barW / 2;
        const cy = durationTop + PANEL - dh - 8;
        parts.push(svg('path', { class: 'savepoint-mark', d: `M${cx},${cy - 5} L${cx + 5},${cy} L${cx},${cy + 5} L${cx - 5},${cy} z` },
          svg('title', null, title)));
      }
      const fh = (p.size / maxSize) * PANEL;
      const ih = Math.min(fh, (p.incremental_size / maxSize) * PANEL);
      parts.push(svg('rect', { class: `size-full ${kind}`, x, y: sizeTop + PANEL - fh, width: barW, height: fh },
        svg('title', null, title)));
      parts.push(svg('rect', { class: `size-incremental ${kind}`, x, y: sizeTop + PANEL - ih, width: barW, height: ih },
        svg('title', null, title)));
      if (i % labelEvery === 0 || i === points.length - 1) {
        parts.push(svg('text', { x: x + barW / 2, y: sizeTop + PANEL + 16, 'text-anchor': 'middle', class: 'tick' }, p.id));
      }
    });
    // The legend.
    const legend = [['legend checkpoint', 'checkpoint'], ['legend savepoint', 'savepoint'], ['legend status-failed', 'failed']];
    legend.forEach(([cls, label], i) => {
      const x = WIDTH - RIGHT - 300 + i * 100;
      parts.push(svg('rect', { class: cls, x, y: 6, width: 12, height: 12 }));
      parts.push(svg('text', { x: x + 18, y: 16, class: 'tick' }, label));
    });
    replace(chart, parts);
  }

  function renderHistory(history) {
    if (history.length === 0) {
      replace($('#checkpoint-history'), el('p', { class: 'muted' }, 'No checkpoint yet.'));
      return;
    }
    const columns = ['#ID', 'Type', 'Status', 'Triggered', '#Duration', '#Size', '#Incremental', '#Acknowledged',
      'Location or failure'];
    const shown = history.slice(0, HISTORY_ROWS);
    const rows = shown.map((s) => [s.id, s.savepoint ? 'savepoint' : 'checkpoint', s.status, fmtTime(s.trigger_time_ms),
      fmtDuration(s.duration_ms), fmtBytes(s.size), fmtBytes(s.incremental_size), `${s.acknowledged}/${s.subtasks}`,
      el('td', { class: 'path' }, s.location || s.failure || '')]);
    const t = table(columns, rows, 'history');
    t.querySelectorAll('tbody tr').forEach((tr, i) => {
      tr.className = 'status-' + statusClass(shown[i].status);
    });
    const older = history.length - shown.length;
    replace($('#checkpoint-history'), t, older > 0 ? el('p', { class: 'muted' }, `… and ${older} older ones.`) : null);
  }

  function renderRestarts(job) {
    if (!job.restarts || job.restarts.length === 0) {
      replace($('#restarts'), el('p', { class: 'muted' }, 'No restarts.'));
      return;
    }
    const rows = job.restarts.map((r) => [r.attempt, fmtDateTime(r.time_ms),
      el('td', { class: 'cause' }, r.cause), el('td', { class: 'path' }, r.restored_from || '—')]);
    replace($('#restarts'), table(['#Attempt', 'Time', 'Cause', 'Restored from'], rows));
  }

  function describe(op) {
    if (op.status === 'in-progress') return 'in progress…';
    if (op.error) return op.error;
    if (op.swap) {
      return `swapped (operator paused ${op.swap.pause_ms.toFixed(1)} ms); savepoint before it: ${op.swap.savepoint.location}`;
    }
    if (op.savepoint) {
      return `${op.savepoint.location} (${fmtBytes(op.savepoint.size)}, ${fmtDuration(op.savepoint.duration_ms)})` +
        (op.savepoint.stopped ? ', job stopped' : '');
    }
    if (op.rescale) {
      const r = op.rescale;
      return `${r.operator} ${r.from} → ${r.to} subtasks at checkpoint ${r.checkpoint} (paused ${r.pause_ms.toFixed(1)} ms)`;
    }
    if (op.shadow) {
      const s = op.shadow;
      return `shadow ${s.id} of ${s.operator} forked at checkpoint ${s.checkpoint}, running ${s.module}`;
    }
    return op.status;
  }

  function renderOperations(ops) {
    const items = ops.map((op) => el('li', { class: 'op status-' + statusClass(op.status), 'data-id': op.request_id },
      el('span', { class: 'op-kind' }, op.kind),
      el('span', { class: 'op-status' }, op.status),
      el('span', { class: 'op-time' }, fmtTime(op.start_time_ms)),
      el('span', { class: 'op-outcome path' }, describe(op))));
    replace($('#operations'), items.length ? items : el('li', { class: 'muted' }, 'None yet.'));
  }

  // The operators a module can be swapped in for (or shadowed by) in
  // `select`; the choice is kept.
  function renderOperatorChoices(select, plan) {
    const ids = plan.nodes.filter((n) => n.role === 'operator').map((n) => n.id);
    const current = [...select.options].map((o) => o.value);
    if (ids.join('\n') === current.join('\n')) return;
    const chosen = select.value;
    replace(select, ids.map((id) => el('option', { value: id }, id)));
    if (ids.includes(chosen)) select.value = chosen;
  }

  function renderSwapChoices(plan) {
    renderOperatorChoices($('#swap-operator'), plan);
    renderOperatorChoices($('#shadow-operator'), plan);
  }

  // Class names only from known values.
  const SHADOW_STATES = ['starting', 'running', 'ended', 'dropped'];
  const shadowClass = (s) => 'shadow-status shadow-' + (SHADOW_STATES.includes(s) ? s : 'unknown');
  const shadowLive = (report) => report != null && (report.status === 'running' || report.status === 'starting');

  // A key or payload from the shadow's report: text, or a muted dash
  // (`none`) where there is none.
  const maybe = (text, none) => (text == null ? el('span', { class: 'muted' }, none || '—') : text);

  // The current (or last) shadow run, `null` when the job has had none.
  function renderShadow(report) {
    const live = shadowLive(report);
    $('#shadow-stop-button').hidden = !live;
    $('#shadow-promote-button').hidden = !live;
    if (report == null) {
      replace($('#shadow-report'), el('p', { class: 'muted' }, 'No shadow run.'));
      return;
    }
    const c = report.counts;
    const items = [
      ['status', 'Status', el('span', { class: shadowClass(report.status) }, report.status)],
      ['operator', 'Operator', report.operator],
      ['module', 'Module', el('span', { class: 'path' }, report.module)],
      ['checkpoint', 'Forked at checkpoint', report.checkpoint > 0 ? '#' + report.checkpoint : '—'],
      ['elapsed', 'Elapsed', fmtDuration(report.elapsed_ms)],
      ['records_in', 'Records in', fmtCount(report.records_in)],
      ['lag', 'Lag (batches)', fmtCount(report.lag)],
      ['equal', 'Equal', fmtCount(c.equal)],
      ['different', 'Different', fmtCount(c.different)],
      ['only_live', 'Only live', fmtCount(c.only_live)],
      ['only_shadow', 'Only shadow', fmtCount(c.only_shadow)],
    ];
    const summary = el('dl', { class: 'counts' }, items.map(([field, k, v]) =>
      el('div', { 'data-field': field }, el('dt', null, k), el('dd', null, v))));
    const reason = report.reason
      ? el('p', { id: 'shadow-reason', class: report.status === 'dropped' ? 'error' : 'muted' }, report.reason)
      : null;
    const parts = [el('h3', { class: 'shadow-title' }, `Shadow ${report.id} of ${report.operator}`), summary, reason];
    if (report.keys.length === 0 && report.unlisted === 0) {
      parts.push(el('p', { class: 'muted' }, 'No key with a difference.'));
    } else {
      const shown = report.keys.slice(0, SHADOW_KEY_ROWS);
      const rows = shown.map((k) => [el('th', { scope: 'row', class: 'path' }, maybe(k.key, '(no key)')),
        fmtCount(k.different), fmtCount(k.only_live), fmtCount(k.only_shadow)]);
      const notes = [];
      const more = report.keys.length - shown.length;
      if (more > 0) notes.push(`… and ${fmtCount(more)} more keys with differences.`);
      if (report.unlisted > 0) notes.push(`${fmtCount(report.unlisted)} differences on keys not listed.`);
      parts.push(el('h3', null, 'Keys with differences'),
        table(['Key', '#Different', '#Only live', '#Only shadow'], rows, 'shadow-keys'),
        notes.length ? el('p', { class: 'muted' }, notes.join(' ')) : null);
    }
    if (report.samples.length > 0) {
      const rows = report.samples.map((s) => [el('th', { scope: 'row', class: 'path' }, maybe(s.key, '(no key)')),
        el('td', { class: 'path' }, maybe(s.live)), el('td', { class: 'path' }, maybe(s.shadow))]);
      parts.push(el('h3', null, 'Samples'), table(['Key', 'Live', 'Shadow'], rows, 'shadow-samples'));
    }
    replace($('#shadow-report'), parts);
  }

  // ---- polling -----------------------------------------------------------

  let plan = null;
  let planRead = 0;
  let shown = false;
  // The swaps and rescales (which change the plan) seen completed; `null`
  // before the first poll.
  let planChanges = null;

  // Whether `operations` has a swap or rescale that completed since the
  // last poll (asked for here or elsewhere, `host rescale` say): the plan
  // changed.
  function replanned(operations) {
    const done = operations.filter((op) => (op.kind === 'swap' || op.kind === 'rescale') && op.status === 'completed')
      .map((op) => op.request_id);
    const before = planChanges;
    planChanges = new Set(done);
    return before != null && done.some((id) => !before.has(id));
  }

  function show() {
    if (shown) return;
    shown = true;
    const form = $('#token-form');
    if (form) form.hidden = true;
    $('#dashboard').hidden = false;
    $('#actions').hidden = false;
    $('#shadow').hidden = false;
  }

  function askForToken(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    token = null;
    const form = $('#token-form');
    const error = $('#token-error');
    if (form && error) {
      error.textContent = message || '';
      error.hidden = !message;
      form.hidden = false;
      $('#dashboard').hidden = true;
      shown = false;
    } else {
      // The server rendered the job, so it took the token; it changed since.
      status((message || 'The job needs its token.') + ' Reload the page to enter it.', true);
    }
  }

  function status(message, error) {
    const s = $('#updated');
    s.textContent = message;
    s.className = error ? 'error' : '';
  }

  // The poll loop that runs: a token entered in the form starts a new
  // loop, and an older one still waiting for its timer then ends.
  let loop = 0;

  function restartPolling() {
    loop += 1;
    poll(loop);
  }

  async function poll(mine) {
    if (mine !== loop) return;
    try {
      if (!plan || Date.now() - planRead > PLAN_MS) {
        plan = await api('/v1/job/plan');
        planRead = Date.now();
      }
      const [job, metrics, backPressure, watermarks, checkpoints, operations, shadow] = await Promise.all([
        api('/v1/job'), api('/v1/job/metrics'), api('/v1/job/backpressure'), api('/v1/job/watermarks'),
        api('/v1/checkpoints'), api('/v1/operations'),
        // 404: no shadow run yet.
        api('/v1/shadow').catch((e) => {
          if (e.status === 404) return null;
          throw e;
        }),
      ]);
      if (replanned(operations)) {
        plan = await api('/v1/job/plan');
        planRead = Date.now();
      }
      show();
      renderHeader(job);
      renderGraph(plan, metrics, backPressure);
      renderNodes(plan, metrics, backPressure);
      renderWatermarks(watermarks);
      renderGuests(plan, metrics);
      renderCheckpointCounts(checkpoints);
      renderChart(checkpoints.history);
      renderHistory(checkpoints.history);
      renderRestarts(job);
      renderOperations(operations);
      renderSwapChoices(plan);
      renderShadow(shadow);
      status('Updated ' + fmtClock(Date.now(), false));
    } catch (e) {
      if (e.status === 401) {
        askForToken(token ? 'The token was not accepted.' : null);
        return;
      }
      const state = $('#job-state');
      if (shown && state) {
        state.textContent = e.status === 503 ? 'not answering' : 'unreachable';
        state.className = 'state state-unknown';
      }
      status(e.message, true);
    }
    setTimeout(() => poll(mine), POLL_MS);
  }

  // ---- actions -----------------------------------------------------------

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  const BUTTONS = ['#savepoint-button', '#stop-button', '#swap-button', '#shadow-button', '#shadow-stop-button',
    '#shadow-promote-button'];

  function setBusy(busy) {
    for (const id of BUTTONS) $(id).disabled = busy;
  }

  // An action's outcome, in the actions card or (`where`) another one's.
  function result(message, kind, where) {
    const r = $(where || '#action-result');
    r.textContent = message;
    r.className = 'result ' + (kind || '');
  }

  // Without the token, says so in `where` and answers false.
  function haveToken(label, where) {
    if (token) return true;
    result(label + ': actions need the job\'s token (open the address `host status <job>` prints, with #token=).',
      'error', where);
    return false;
  }

  // POSTs an action, then follows its operation to its end.
  async function act(label, path, body, where) {
    if (!haveToken(label, where)) return;
    setBusy(true);
    result(label + ': requested…', 'pending', where);
    try {
      const accepted = await api(path, { method: 'POST', body: JSON.stringify(body) });
      let op;
      for (;;) {
        op = await api(accepted.location);
        if (op.status !== 'in-progress') break;
        result(`${label}: in progress (${accepted.request_id})…`, 'pending', where);
        await sleep(300);
      }
      result(`${label} ${op.status}: ${describe(op)}`, op.status === 'completed' ? 'ok' : 'error', where);
      if (op.kind === 'swap' || op.kind === 'rescale') planRead = 0;
    } catch (e) {
      result(`${label} failed: ${e.message}`, 'error', where);
    } finally {
      setBusy(false);
    }
  }

  // Ends the shadow run: the answer is its final report.
  async function stopShadow() {
    const label = 'Stop shadow run';
    if (!haveToken(label, '#shadow-result')) return;
    setBusy(true);
    result(label + ': requested…', 'pending', '#shadow-result');
    try {
      const report = await api('/v1/shadow/stop', { method: 'POST' });
      renderShadow(report);
      result(`${label}: shadow ${report.id} ${report.status}` + (report.reason ? ` (${report.reason})` : ''), 'ok',
        '#shadow-result');
    } catch (e) {
      result(`${label} failed: ${e.message}`, 'error', '#shadow-result');
    } finally {
      setBusy(false);
    }
  }

  function wire() {
    // Where scripts run, the form's token goes to this tab's storage and
    // then only into the Authorization header: the form is not sent (it
    // posts it to the server where scripts do not run, never in an
    // address).
    $('#token-form')?.addEventListener('submit', (event) => {
      event.preventDefault();
      const given = $('#token').value.trim();
      if (!given) return;
      $('#token').value = '';
      sessionStorage.setItem(TOKEN_KEY, given);
      token = given;
      $('#token-form').hidden = true;
      restartPolling();
    });
    $('#savepoint-button').addEventListener('click', () =>
      act('Savepoint', '/v1/savepoints', { dir: null, stop: false, drain: false }));
    $('#stop-button').addEventListener('click', () => {
      if (window.confirm('Take a savepoint and stop the job?')) {
        act('Stop with savepoint', '/v1/savepoints', { dir: null, stop: true, drain: false });
      }
    });
    $('#swap-button').addEventListener('click', () => {
      const operator = $('#swap-operator').value;
      const module = $('#swap-module').value.trim();
      if (!operator || !module) {
        result('Swap module: choose an operator and give the new module\'s absolute path.', 'error');
        return;
      }
      act('Swap module of ' + operator, '/v1/swaps', { operator, module, dir: null });
    });
    $('#shadow-button').addEventListener('click', () => {
      const operator = $('#shadow-operator').value;
      const module = $('#shadow-module').value.trim();
      const duration = $('#shadow-duration').value.trim();
      const where = '#shadow-result';
      if (!operator || !module) {
        result('Shadow run: choose an operator and give the module\'s absolute path.', 'error', where);
        return;
      }
      const seconds = duration === '' ? null : Number(duration);
      if (seconds != null && !(seconds > 0 && Number.isFinite(seconds))) {
        result('Shadow run: the duration is a number of seconds above 0 (or empty: until stopped).', 'error', where);
        return;
      }
      const request = { operator, module };
      if (seconds != null) request.duration_ms = Math.round(seconds * 1000);
      act('Shadow run of ' + operator, '/v1/shadows', request, where);
    });
    $('#shadow-stop-button').addEventListener('click', stopShadow);
    $('#shadow-promote-button').addEventListener('click', () => {
      if (window.confirm('Swap the shadow\'s module in for the live one?')) {
        act('Promote shadow run', '/v1/shadow/promote', {}, '#shadow-result');
      }
    });
  }

  function start() {
    wire();
    // Without a token, the page either shows the job (open reads) or the
    // form; either way try the API: open reads answer without one.
    if (token) {
      const form = $('#token-form');
      if (form) form.hidden = true;
    }
    restartPolling();
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
