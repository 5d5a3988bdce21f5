/* dashboard.js - eddy's live web dashboard.
 *
 * Polls the coordinator's JSON APIs every POLL_MS (status: jobs and workers;
 * scaling: the controller's decisions; timeseries/JOB: the selected job's
 * per-operator history) and redraws. Charts and the job graph are inline
 * SVG drawn here; nothing is loaded from anywhere else. Elements the
 * browser test reads carry data-* attributes (data-live, data-op,
 * data-values).
 *
 * Every string shown here comes from the coordinator, and so from whoever
 * can name a job, an operator or a worker, pass job arguments, or post a
 * scaling decision: none of it may become markup. Markup is written only as
 * html`...` templates, which escape every value put into them (unless it is
 * itself an html`...` result, or an array of them); setHtml() and
 * appendHtml() accept nothing else. The server's Content-Security-Policy
 * (net/http.c) requires Trusted Types, so where the browser enforces them
 * (Chromium) an innerHTML given a plain string throws: this file's policy,
 * reachable only through html`...`, is the one way in. The same policy
 * allows no inline style: sizes and colours computed here travel as data-*
 * attributes that applyStyles() sets through the CSSOM. */
'use strict';

const POLL_MS = 1500;
const PALETTE = ['#2f6fde', '#e0892f', '#3fa36b', '#a05bd6', '#d64545', '#1aa3b8', '#8c6d3a', '#d15fa6',
  '#5b6bd6', '#7a9a1f'];
const view = { status: null, decisions: [], series: null, selected: null, lastOk: 0, error: null, polls: 0 };

/* ---- markup ----------------------------------------------------------- */

class Html { constructor(s) { this.s = s; } }
const htmlPolicy = window.trustedTypes ? window.trustedTypes.createPolicy('eddy-html', { createHTML: s => s }) : null;

function esc(s) {
  return String(s).replace(/[&<>"'`]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' }[c]));
}
function htmlPart(v) {
  if (v instanceof Html) return v.s;
  if (Array.isArray(v)) return v.map(htmlPart).join('');
  if (v === null || v === undefined || v === false) return '';
  return esc(v);
}
/* The one way to make markup: html`<b>${text}</b>` escapes text. */
function html(strings, ...values) {
  let s = strings[0];
  for (let i = 0; i < values.length; i++) s += htmlPart(values[i]) + strings[i + 1];
  return new Html(s);
}
function trusted(h) {
  if (!(h instanceof Html)) throw new TypeError('markup must be made with html``');
  return htmlPolicy ? htmlPolicy.createHTML(h.s) : h.s;
}
function applyStyles(root) {
  for (const e of root.querySelectorAll('[data-bg]')) { e.style.background = e.dataset.bg; e.style.borderColor = e.dataset.bg; }
  for (const e of root.querySelectorAll('[data-width]')) e.style.width = e.dataset.width;
  for (const e of root.querySelectorAll('[data-max-width]')) e.style.maxWidth = e.dataset.maxWidth;
}
function setHtml(el, h) { el.innerHTML = trusted(h); applyStyles(el); }
function appendHtml(el, h) { el.insertAdjacentHTML('beforeend', trusted(h)); applyStyles(el); }

/* ---- formatting ------------------------------------------------------- */
function fmtNum(v, digits) {
  if (v === null || v === undefined || !isFinite(v)) return '—';
  const a = Math.abs(v);
  const d = digits === undefined ? (a >= 100 ? 0 : a >= 10 ? 1 : 2) : digits;
  if (a >= 1e9) return (v / 1e9).toFixed(2) + ' G';
  if (a >= 1e6) return (v / 1e6).toFixed(2) + ' M';
  if (a >= 1e4) return (v / 1e3).toFixed(1) + ' k';
  return v.toFixed(Number.isInteger(v) ? 0 : d);
}
function fmtCount(v) {
  if (v === null || v === undefined) return '—';
  return Math.round(v).toLocaleString('en-US');
}
function fmtRate(v) { return v === null || v === undefined ? '—' : fmtNum(v) + '/s'; }
function fmtBytes(b) {
  if (b === null || b === undefined || !isFinite(b)) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i === 0 ? b.toFixed(0) : b.toFixed(b >= 100 ? 0 : 1)) + ' ' + u[i];
}
function fmtMs(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return '—';
  if (ms < 1) return ms.toFixed(2) + ' ms';
  if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + pad2(Math.floor(s % 60)) + 's';
  if (m < 48 * 60) return Math.floor(m / 60) + 'h ' + pad2(m % 60) + 'm';
  return Math.floor(m / 1440) + 'd ' + pad2(Math.floor(m / 60) % 24) + 'h';
}
function fmtPct(f) { return f === null || f === undefined || !isFinite(f) ? '—' : (f * 100).toFixed(f < 0.1 ? 1 : 0) + ' %'; }
function pad2(n) { return String(n).padStart(2, '0'); }
function fmtClock(ms) {
  const d = new Date(ms);
  return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
}
function fmtDateTime(ms) {
  const d = new Date(ms);
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + fmtClock(ms);
}
function opColor(i) { return PALETTE[i % PALETTE.length]; }

/* ---- data access ------------------------------------------------------ */

/* With --http-token-file the API needs the token: open the page with
 * #token=TOKEN after its address (a fragment never reaches a server or a
 * log). It is kept in this variable only, never in sessionStorage or
 * localStorage (where any script of the origin could read it later), and
 * removed from the address bar; a reload needs the #token= address again. */
const TOKEN = (() => {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!m) return null;
  history.replaceState(null, '', location.pathname + location.search);
  return decodeURIComponent(m[1]);
})();

async function getJson(path) {
  const headers = TOKEN ? { Authorization: 'Bearer ' + TOKEN } : {};
  const r = await fetch(path, { cache: 'no-store', headers });
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}

function jobs() { return (view.status && view.status.jobs) || []; }
function selectedJob() { return jobs().find(j => j.id === view.selected) || null; }
function isLive(j) { return !['finished', 'failed', 'cancelled'].includes(j.state); }

function pickDefault() {
  const js = jobs();
  if (view.selected && js.some(j => j.id === view.selected)) return;
  const running = js.filter(isLive);
  const pick = (running.length ? running : js)[(running.length ? running : js).length - 1];
  view.selected = pick ? pick.id : null;
}

/* Latest value of a column (skipping nulls). */
function last(col) {
  if (!col) return null;
  for (let i = col.length - 1; i >= 0; i--) if (col[i] !== null && col[i] !== undefined) return col[i];
  return null;
}
function seriesOp(name) {
  const s = view.series;
  return s && s.operators ? s.operators.find(o => o.name === name) : null;
}
/* An operator's latency from its sources: p50/p99 of the last second that
 * measured a batch (timeseries), else since the job started (status). */
function latencyOf(o) {
  const so = seriesOp(o.name) || {};
  const p50 = last(so.latency_p50_ms), p99 = last(so.latency_p99_ms);
  if (p99 !== null) return { p50, p99, recent: true };
  const l = o.latency;
  return l && l.count ? { p50: l.p50_ms, p99: l.p99_ms, recent: false } : { p50: null, p99: null, recent: false };
}
/* Operators no other operator reads: their latency is end to end. */
function sinksOf(ops) {
  return ops.filter(o => !ops.some(p => p.input === o.name || p.second_input === o.name));
}

async function poll() {
  try {
    const [status, decisions] = await Promise.all([getJson('/api/v1/status'), getJson('/api/v1/scaling')]);
    view.status = status;
    view.decisions = Array.isArray(decisions) ? decisions : [];
    const hash = decodeURIComponent((location.hash.match(/job=([^&]+)/) || [])[1] || '');
    if (hash) view.selected = hash;
    pickDefault();
    view.series = view.selected ? await getJson('/api/v1/timeseries/' + encodeURIComponent(view.selected)).catch(() => null) : null;
    view.lastOk = Date.now();
    view.error = null;
    view.polls++;
  } catch (e) {
    view.error = e.message || String(e);
  }
  try { render(); } catch (e) { console.error(e); }
  setTimeout(poll, POLL_MS);
}

/* ---- rendering -------------------------------------------------------- */

function render() {
  renderHeader();
  renderJobList();
  renderWorkers();
  const j = selectedJob();
  const detail = document.getElementById('detail');
  if (!j) {
    detail.dataset.job = '';
    setHtml(document.getElementById('job-head'), html`<div class="empty">No job selected. Submit one with <code>eddy submit</code> or run <code>eddy local</code>.</div>`);
    for (const id of ['tiles', 'graph', 'operators', 'chart-rates', 'chart-throughput', 'chart-latency', 'chart-parallelism', 'chart-busy', 'chart-checkpoints', 'rescales', 'decisions'])
      document.getElementById(id).replaceChildren();
    return;
  }
  detail.dataset.job = j.id;
  renderJobHead(j);
  renderTiles(j);
  renderGraph(j);
  renderOperators(j);
  renderCharts(j);
  renderRescales(j);
  renderDecisions(j);
}

function renderHeader() {
  const live = document.getElementById('live');
  const s = view.status;
  if (s) {
    const ws = s.workers || [];
    const alive = ws.filter(w => w.alive).length;
    const running = jobs().filter(isLive).length;
    document.getElementById('cluster').textContent =
      `coordinator up ${fmtMs(s.uptime_s * 1000)} · ${alive}/${ws.length} workers alive · ${running} running / ${jobs().length} jobs`;
  }
  live.className = 'live ' + (view.error ? 'err' : 'ok');
  live.dataset.polls = view.polls;
  document.getElementById('updated').textContent = view.error
    ? 'coordinator unreachable: ' + view.error + (view.lastOk ? ' (last update ' + fmtClock(view.lastOk) + ')' : '')
    : 'live · updated ' + fmtClock(view.lastOk);
}

function renderJobList() {
  const el = document.getElementById('job-list');
  const js = jobs().slice().sort((a, b) => (isLive(b) - isLive(a)) || 0);
  if (!js.length) { setHtml(el, html`<p class="muted">No jobs yet.</p>`); return; }
  setHtml(el, js.map(j => {
    const ops = j.operators || [];
    const src = ops.filter(o => o.source).reduce((a, o) => a + (o.records_in || 0), 0);
    return html`<div class="job${j.id === view.selected ? ' sel' : ''}" data-job="${j.id}">
      <div class="name"><span>${j.id}</span><span class="badge ${j.state}">${j.state}</span></div>
      <div class="meta">${j.job} · ${ops.length} operators · up ${fmtMs(j.uptime_s * 1000)}</div>
      <div class="meta">${fmtCount(src)} records read · ${rescaleCount(j)} rescales · ${j.restarts} restarts</div>
    </div>`;
  }).reduce((a, h) => html`${a}${h}`, html``));
  for (const card of el.querySelectorAll('.job')) {
    card.onclick = () => {
      view.selected = card.dataset.job;
      location.hash = 'job=' + encodeURIComponent(view.selected);
      view.series = null;
      render();
    };
  }
}

function renderWorkers() {
  const ws = (view.status && view.status.workers) || [];
  const el = document.getElementById('workers');
  if (!ws.length) { setHtml(el, html`<p class="muted">No workers registered.</p>`); return; }
  setHtml(el, html`<table id="worker-table"><tr><th>id</th><th>worker</th><th class="n">tasks</th></tr>${
    ws.map(w => html`<tr data-worker="${w.id}"><td>${w.id}</td>
      <td><span class="badge ${w.alive ? 'running' : 'dead'}">${w.alive ? (w.busy ? 'busy' : 'alive') : 'dead'}</span> ${w.name}
        <div class="muted small">pid ${w.pid} · ${w.address}<br>heartbeat ${fmtMs(w.last_heartbeat_ms_ago)} ago</div></td>
      <td class="n">${w.tasks}</td></tr>`)}</table>`);
}

function renderJobHead(j) {
  setHtml(document.getElementById('job-head'),
    html`<h1>${j.id}</h1><span class="badge ${j.state}">${j.state}</span>
     <span class="muted">${j.job} · ${j.guarantee || ''} · epoch ${j.epoch} · ${j.max_parallelism} key groups</span>
     <span class="args">${(j.args || []).join(' ')}</span>
     ${j.error ? html`<div class="error">${j.error}</div>` : ''}`);
}

/* All the job's rescales (those of earlier coordinators too); the list has the recent ones. */
function rescaleCount(j) {
  return j.rescales_total !== undefined ? j.rescales_total : (j.rescales || []).length;
}

function tile(key, label, value, sub, raw) {
  return html`<div class="tile" data-live="${key}" data-value="${raw === undefined ? '' : raw}">
    <div class="k">${label}</div><div class="v">${value}</div><div class="s">${sub || '\u00a0'}</div></div>`;
}

function renderTiles(j) {
  const ops = j.operators || [];
  const sources = ops.filter(o => o.source);
  const sinks = sinksOf(ops);
  const readTotal = sources.reduce((a, o) => a + (o.records_in || 0), 0);
  const sinkTotal = sinks.reduce((a, o) => a + (o.records_in || 0), 0);
  const srcRate = sources.reduce((a, o) => a + (last((seriesOp(o.name) || {}).rate_in) || 0), 0);
  const offered = sources.reduce((a, o) => a + (last((seriesOp(o.name) || {}).offered_rate) || 0), 0);
  const sinkRate = sinks.reduce((a, o) => a + (last((seriesOp(o.name) || {}).rate_in) || 0), 0);
  const ck = j.last_checkpoint || {};
  const rs = j.rescales || [];
  const lastRs = rs[rs.length - 1];
  const lags = ops.map(o => last((seriesOp(o.name) || {}).watermark_lag_ms)).filter(v => v !== null);
  const lats = sinks.map(latencyOf).filter(l => l.p99 !== null);
  const worst = lats.length ? lats.reduce((a, l) => (l.p99 > a.p99 ? l : a)) : null;
  setHtml(document.getElementById('tiles'), [
    tile('uptime', 'Uptime', fmtMs(j.uptime_s * 1000), j.state, j.uptime_s),
    tile('source_rate', 'Read rate', fmtRate(srcRate), offered > 0 ? 'offered ' + fmtRate(offered) : 'sources unlimited', srcRate),
    tile('records_in', 'Records read', fmtNum(readTotal), fmtCount(readTotal) + ' records', readTotal),
    tile('sink_rate', 'Output rate', fmtRate(sinkRate), fmtCount(sinkTotal) + ' records into sinks', sinkRate),
    tile('checkpoints', 'Checkpoints', fmtCount(ck.completed), (ck.failed ? ck.failed + ' failed · ' : '') + (ck.id ? 'last #' + ck.id : 'none yet'), ck.completed),
    tile('checkpoint_last', 'Last checkpoint', ck.id ? fmtMs(ck.duration_ms) : '—', ck.id ? fmtBytes(ck.bytes) + ' at ' + fmtClock(ck.time_ms) : '', ck.duration_ms),
    tile('latency', 'Latency p99', worst ? fmtMs(worst.p99) : '—',
      worst ? `p50 ${fmtMs(worst.p50)} · source to sink${worst.recent ? '' : ' · since start'}` : 'no batch measured yet', worst ? worst.p99 : ''),
    tile('rescales', 'Rescales', String(rescaleCount(j)), lastRs ? `last ${rescaleWhat(lastRs)}, pause ${fmtMs(lastRs.pause_ms)}` : 'none', rescaleCount(j)),
    tile('lag', 'Event-time lag', lags.length ? fmtMs(Math.max(...lags)) : '—', lags.length ? 'now − slowest watermark' : 'no event time', lags.length ? Math.max(...lags) : ''),
    tile('restarts', 'Restarts', String(j.restarts), j.restarts ? 'restored from checkpoints' : 'no failures', j.restarts),
  ].reduce((a, h) => html`${a}${h}`, html``));
}

/* Columns of the graph: a source is at depth 0, others one right of their inputs. */
function layout(ops) {
  const depth = {};
  const byName = Object.fromEntries(ops.map(o => [o.name, o]));
  function d(o, seen) {
    if (depth[o.name] !== undefined) return depth[o.name];
    if (seen.has(o.name)) return 0;
    seen.add(o.name);
    let v = 0;
    for (const inp of [o.input, o.second_input]) if (inp && byName[inp]) v = Math.max(v, d(byName[inp], seen) + 1);
    return (depth[o.name] = v);
  }
  ops.forEach(o => d(o, new Set()));
  const cols = [];
  ops.forEach(o => { (cols[depth[o.name]] = cols[depth[o.name]] || []).push(o); });
  return cols;
}

function renderGraph(j) {
  const ops = j.operators || [];
  const el = document.getElementById('graph');
  const cols = layout(ops);
  const W = 210, H = 118, GX = 70, GY = 22;
  const rows = Math.max(1, ...cols.map(c => c.length));
  const width = Math.max(cols.length * (W + GX) - GX + 20, 300);
  const height = rows * (H + GY) - GY + 20;
  const pos = {};
  cols.forEach((c, ci) => c.forEach((o, ri) => {
    const off = (rows - c.length) * (H + GY) / 2;
    pos[o.name] = { x: 10 + ci * (W + GX), y: 10 + off + ri * (H + GY) };
  }));
  const svg = [html`<svg id="job-graph" viewBox="0 0 ${width} ${height}" data-max-width="${width}px" role="img" aria-label="job graph">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
    <path d="M0,0 L10,5 L0,10 z" fill="#8fa0b5"/></marker></defs>`];
  ops.forEach(o => {
    for (const inp of [o.input, o.second_input]) {
      if (!inp || !pos[inp]) continue;
      const a = pos[inp], b = pos[o.name];
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x - 2, y2 = b.y + H / 2;
      const mx = (x1 + x2) / 2;
      svg.push(html`<path d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}" fill="none" stroke="#8fa0b5" stroke-width="1.6" marker-end="url(#arrow)"/>`);
      svg.push(html`<text x="${mx}" y="${(y1 + y2) / 2 - 5}" text-anchor="middle" font-size="10" fill="#8393a7">${o.keyed ? 'hash' : 'forward'}</text>`);
    }
  });
  ops.forEach((o, i) => {
    const p = pos[o.name];
    const so = seriesOp(o.name) || {};
    const busy = last(so.busy), bp = last(so.backpressure);
    const lag = last(so.watermark_lag_ms);
    const lat = latencyOf(o);
    const foot = [lat.p99 !== null && !o.source ? 'p99 ' + fmtMs(lat.p99) : '', lag !== null ? 'watermark lag ' + fmtMs(lag) : ''].filter(x => x).join(' · ');
    const rin = last(so.rate_in), rout = last(so.rate_out);
    const color = opColor(i);
    const heat = bp !== null && bp > 0.5 ? '#fff4e8' : busy !== null && busy > 0.8 ? '#fdf0f0' : '#fff';
    svg.push(html`<g class="op" data-op="${o.name}" data-parallelism="${o.parallelism}" data-tip="${opTip(o, so)}" transform="translate(${p.x},${p.y})">
      <rect width="${W}" height="${H}" rx="9" fill="${heat}" stroke="${color}" stroke-width="1.8"/>
      <rect width="6" height="${H}" rx="3" fill="${color}"/>
      <text x="16" y="22" font-size="14" font-weight="600" fill="#1d2733">${o.name}</text>
      <text x="${W - 12}" y="22" font-size="14" font-weight="700" fill="${color}" text-anchor="end" class="par">×${o.parallelism}</text>
      <text x="16" y="42" font-size="11" fill="#6b7785">${o.source ? 'source' : o.keyed ? 'keyed' : 'stateless'}${o.state_bytes ? ' · state ' + fmtBytes(o.state_bytes) : ''}</text>
      <text x="16" y="62" font-size="12" fill="#1d2733">${o.source ? 'read' : 'in'} ${fmtRate(rin)}  ·  out ${fmtRate(rout)}</text>
      <text x="16" y="82" font-size="11" fill="#6b7785">busy ${fmtPct(busy)} · backpressure ${fmtPct(bp)}</text>
      <rect x="16" y="90" width="${W - 32}" height="7" rx="3" fill="#eef1f5"/>
      <rect x="16" y="90" width="${(W - 32) * Math.min(1, busy || 0)}" height="7" rx="3" fill="#3fa36b"/>
      <rect x="${16 + (W - 32) * Math.min(1, busy || 0)}" y="90" width="${(W - 32) * Math.min(1 - Math.min(1, busy || 0), bp || 0)}" height="7" fill="#e0892f"/>
      <text x="16" y="${H - 6}" font-size="10" fill="#8393a7">${foot}</text>
    </g>`);
  });
  setHtml(el, html`${svg}</svg>`);
}

function opTip(o, so) {
  const inst = (o.instances || []).map(x => `#${x.index} on worker ${x.worker !== undefined ? x.worker : '?'}${x.key_groups ? ' key groups ' + x.key_groups[0] + '–' + (x.key_groups[1] - 1) : ''}`);
  return `${o.name} ×${o.parallelism}  (min ${o.min_parallelism || 1}, max ${o.max_parallelism || '—'})\n` +
    `records in ${fmtCount(o.records_in)}, out ${fmtCount(o.records_out)}\n` +
    `state ${fmtCount(o.state_keys)} keys, ${fmtBytes(o.state_bytes)}\n` + inst.join('\n');
}

function renderOperators(j) {
  const ops = j.operators || [];
  setHtml(document.getElementById('operators'), html`<table id="operator-table"><tr><th>operator</th><th class="n">parallelism</th>
    <th class="n">records in</th><th class="n">records out</th><th class="n">in/s</th><th class="n">out/s</th>
    <th>busy · backpressure</th><th class="n">state</th><th class="n">latency p50 · p99</th><th class="n">watermark lag</th></tr>${
    ops.map((o, i) => {
      const so = seriesOp(o.name) || {};
      const busy = last(so.busy), bp = last(so.backpressure);
      const lat = latencyOf(o);
      return html`<tr data-op="${o.name}"><td><span class="swatch" data-bg="${opColor(i)}"></span>${o.name}
        <span class="muted">${o.source ? 'source' : o.keyed ? 'keyed' : ''}</span></td>
        <td class="n">${o.parallelism}</td><td class="n" data-live="op_records_in">${fmtCount(o.records_in)}</td>
        <td class="n">${fmtCount(o.records_out)}</td><td class="n">${fmtRate(last(so.rate_in))}</td>
        <td class="n">${fmtRate(last(so.rate_out))}</td>
        <td><span class="bar"><b class="busy" data-width="${Math.min(100, (busy || 0) * 100)}%"></b><b class="bp" data-width="${Math.min(100, (bp || 0) * 100)}%"></b></span>${fmtPct(busy)} · ${fmtPct(bp)}</td>
        <td class="n">${o.state_keys ? fmtCount(o.state_keys) + ' keys · ' : ''}${fmtBytes(o.state_bytes)}</td>
        <td class="n" data-live="op_latency" data-value="${lat.p99 === null ? '' : lat.p99}">${lat.p99 === null ? '—' : fmtMs(lat.p50) + ' · ' + fmtMs(lat.p99)}</td>
        <td class="n" data-live="op_watermark_lag">${fmtMs(last(so.watermark_lag_ms))}</td></tr>`;
    })}</table>`);
}

/* ---- charts ----------------------------------------------------------- */

/* An SVG line chart over time. spec: {t: [ms], series: [{name, color,
 * values, step, dash, width}], fmtY, yMin, yMax, integer, markers: [{t,
 * kind: 'decision'|'rescale', color, tip}], bars: [{t, v, tip}]}. */
function chart(el, spec) {
  const W = Math.max(320, el.clientWidth || 600), H = 200;
  const L = 58, R = 12, T = 12, B = 24;
  const t = spec.t || [];
  if (t.length < 2 && !(spec.bars && spec.bars.length)) {
    setHtml(el, html`<div class="empty">${spec.emptyText || 'Collecting samples…'}</div>`);
    return;
  }
  let t0 = t.length ? t[0] : Infinity, t1 = t.length ? t[t.length - 1] : -Infinity;
  for (const b of spec.bars || []) { t0 = Math.min(t0, b.t); t1 = Math.max(t1, b.t); }
  if (t1 <= t0) t1 = t0 + 1000;
  let yMax = spec.yMax !== undefined ? spec.yMax : 0;
  if (spec.yMax === undefined) {
    for (const s of spec.series) for (const v of s.values) if (v !== null && v > yMax) yMax = v;
    for (const b of spec.bars || []) if (b.v > yMax) yMax = b.v;
    yMax = niceMax(yMax * 1.08, spec.integer);
  }
  const yMin = 0;
  const X = ms => L + (ms - t0) / (t1 - t0) * (W - L - R);
  const Y = v => T + (1 - (v - yMin) / (yMax - yMin)) * (H - T - B);
  const svg = [html`<svg viewBox="0 0 ${W} ${H}" height="${H}" data-t0="${t0}" data-t1="${t1}">`];
  const ticks = spec.integer ? intTicks(yMax) : [0, 0.25, 0.5, 0.75, 1].map(f => f * yMax);
  for (const v of ticks) {
    svg.push(html`<line x1="${L}" x2="${W - R}" y1="${Y(v)}" y2="${Y(v)}" stroke="#edf0f4"/>`);
    svg.push(html`<text x="${L - 6}" y="${Y(v) + 4}" font-size="10" fill="#8393a7" text-anchor="end">${spec.fmtY(v)}</text>`);
  }
  const nx = Math.max(2, Math.floor((W - L - R) / 90));
  for (let k = 0; k <= nx; k++) {
    const ms = t0 + (t1 - t0) * k / nx;
    svg.push(html`<text x="${X(ms)}" y="${H - 6}" font-size="10" fill="#8393a7" text-anchor="${k === 0 ? 'start' : k === nx ? 'end' : 'middle'}">${fmtClock(ms)}</text>`);
  }
  svg.push(html`<line x1="${L}" x2="${W - R}" y1="${Y(0)}" y2="${Y(0)}" stroke="#c9d1dc"/>`);
  for (const b of spec.bars || []) {
    const bw = Math.max(3, Math.min(14, (W - L - R) / Math.max(20, spec.bars.length * 1.6)));
    svg.push(html`<rect class="bar-mark" x="${X(b.t) - bw / 2}" y="${Y(b.v)}" width="${bw}" height="${Math.max(1, Y(0) - Y(b.v))}" fill="${b.color || '#7aa7ee'}" data-tip="${b.tip}"/>`);
  }
  for (const s of spec.series) {
    let d = '', pen = false, prevY = null;
    const distinct = new Set();
    s.values.forEach((v, i) => {
      if (v === null || v === undefined) { pen = false; return; }
      distinct.add(v);
      const x = X(t[i]), y = Y(Math.min(v, yMax));
      if (!pen) d += `M${x.toFixed(1)},${y.toFixed(1)}`;
      else if (s.step) d += `H${x.toFixed(1)}V${y.toFixed(1)}`;
      else d += `L${x.toFixed(1)},${y.toFixed(1)}`;
      pen = true; prevY = y;
    });
    void prevY;
    svg.push(html`<path class="series" data-op="${s.op || s.name}" data-kind="${s.kind || ''}" data-values="${[...distinct].sort((a, b) => a - b).join(',')}" d="${d}" fill="none" stroke="${s.color}" stroke-width="${s.width || 2}" ${s.dash ? html`stroke-dasharray="6 4"` : ''} stroke-linejoin="round"/>`);
  }
  for (const m of spec.markers || []) {
    if (m.t < t0 - 1000 || m.t > t1 + 1000) continue;
    const x = X(Math.min(Math.max(m.t, t0), t1));
    if (m.kind === 'rescale') {
      svg.push(html`<g class="marker rescale-marker" data-op="${m.op}" data-tip="${m.tip}">
        <line x1="${x}" x2="${x}" y1="${T}" y2="${Y(0)}" stroke="${m.color}" stroke-width="1.5" stroke-dasharray="3 3"/>
        <rect x="${x - 5}" y="${T}" width="10" height="${Y(0) - T}" fill="transparent"/></g>`);
    } else {
      svg.push(html`<g class="marker decision-marker" data-op="${m.op}" data-tip="${m.tip}">
        <path d="M${x - 6},${Y(0) - 1} L${x + 6},${Y(0) - 1} L${x},${Y(0) - 12} z" fill="${m.color}" stroke="#fff"/>
        <rect x="${x - 8}" y="${Y(0) - 14}" width="16" height="16" fill="transparent"/></g>`);
    }
  }
  svg.push(html`<line class="cross" x1="0" x2="0" y1="${T}" y2="${Y(0)}" stroke="#9aa8b8" visibility="hidden"/>`);
  svg.push(html`</svg>`);
  const legend = html`<div class="legend">${spec.series.filter(s => !s.noLegend).map(s =>
    html`<span><i class="${s.dash ? 'dash' : ''}" data-bg="${s.color}"></i>${s.name}</span>`)}</div>`;
  setHtml(el, html`${svg}${legend}`);
  const svgEl = el.querySelector('svg');
  svgEl.onmousemove = ev => {
    if (ev.target.closest('[data-tip]')) return;
    const r = svgEl.getBoundingClientRect();
    const ms = t0 + ((ev.clientX - r.left) * W / r.width - L) / (W - L - R) * (t1 - t0);
    let i = 0;
    for (let k = 0; k < t.length; k++) if (Math.abs(t[k] - ms) < Math.abs(t[i] - ms)) i = k;
    if (!t.length) return;
    const cross = svgEl.querySelector('.cross');
    cross.setAttribute('x1', X(t[i])); cross.setAttribute('x2', X(t[i])); cross.setAttribute('visibility', 'visible');
    showTip(ev, fmtClock(t[i]) + '\n' + spec.series.map(s => `${s.name}: ${spec.fmtY(s.values[i])}`).join('\n'));
  };
  svgEl.onmouseleave = () => { svgEl.querySelector('.cross').setAttribute('visibility', 'hidden'); hideTip(); };
}

function niceMax(v, integer) {
  if (!(v > 0)) return integer ? 2 : 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  const n = [1, 2, 2.5, 5, 10].find(m => m * p >= v) * p;
  return integer ? Math.max(2, Math.ceil(n)) : n;
}
function intTicks(max) {
  const step = Math.max(1, Math.ceil(max / 5));
  const out = [];
  for (let v = 0; v <= max; v += step) out.push(v);
  return out;
}

function decisionTip(d) {
  const r = d.rates || {};
  const rates = [];
  if (r.target_input_rate !== undefined && r.target_input_rate !== null) rates.push('target input ' + fmtRate(r.target_input_rate));
  if (r.observed_input_rate !== undefined && r.observed_input_rate !== null) rates.push('observed ' + fmtRate(r.observed_input_rate));
  if (r.true_rate_per_instance !== undefined && r.true_rate_per_instance !== null) rates.push('true rate/instance ' + fmtRate(r.true_rate_per_instance));
  if (r.utilisation !== undefined && r.utilisation !== null) rates.push('utilisation ' + fmtPct(r.utilisation));
  if (r.state_bytes !== undefined && r.state_bytes !== null) rates.push('state ' + fmtBytes(r.state_bytes));
  return `${fmtDateTime(d.time_ms)} · ${d.action} ${d.operator} ${d.old_parallelism} → ${d.new_parallelism}` +
    ` (${d.applied ? 'applied' : 'not applied'})\n${d.reason || ''}` + (rates.length ? '\n' + rates.join(' · ') : '');
}

function jobDecisions(j) {
  return view.decisions.filter(d => d.job === j.id);
}
function changed(d) { return d.action !== 'no_change' && d.old_parallelism !== d.new_parallelism; }

function renderCharts(j) {
  const s = view.series;
  const ops = j.operators || [];
  const t = s ? s.t : [];
  const colorOf = name => opColor(Math.max(0, ops.findIndex(o => o.name === name)));
  const sops = s ? s.operators : [];
  /* Sources (lines read against the offered rate) and the operators after
   * them (records, often many per line) get a chart each, so neither flattens
   * the other. */
  const rateSeries = [], opSeries = [];
  for (const o of sops) {
    const def = ops.find(x => x.name === o.name) || {};
    if (def.source) {
      if (o.offered_rate && o.offered_rate.some(v => v > 0))
        rateSeries.push({ name: o.name + ' offered', op: o.name, kind: 'offered', color: '#8393a7', values: o.offered_rate.map(v => v > 0 ? v : null), step: true, dash: true, width: 1.6 });
      rateSeries.push({ name: o.name + ' achieved (read)', op: o.name, kind: 'achieved', color: colorOf(o.name), values: o.rate_in, width: 2.2 });
    } else {
      opSeries.push({ name: o.name + ' in', op: o.name, kind: 'in', color: colorOf(o.name), values: o.rate_in, width: 1.8 });
    }
  }
  chart(document.getElementById('chart-rates'), { t, series: rateSeries, fmtY: v => fmtNum(v) + '/s' });
  chart(document.getElementById('chart-throughput'), { t, series: opSeries, fmtY: v => fmtNum(v) + '/s' });

  const sinkNames = new Set(sinksOf(ops).map(o => o.name));
  const latSeries = [];
  for (const o of sops) {
    if (!sinkNames.has(o.name) || !o.latency_p99_ms || !o.latency_p99_ms.some(v => v !== null)) continue;
    latSeries.push({ name: o.name + ' p99', op: o.name, kind: 'p99', color: colorOf(o.name), values: o.latency_p99_ms, width: 2 });
    latSeries.push({ name: o.name + ' p50', op: o.name, kind: 'p50', color: colorOf(o.name), values: o.latency_p50_ms, dash: true, width: 1.4 });
  }
  chart(document.getElementById('chart-latency'), { t: latSeries.length ? t : [], series: latSeries, fmtY: v => fmtMs(v), emptyText: 'No batch measured yet.' });

  const decisions = jobDecisions(j).filter(changed);
  const markers = decisions.map(d => ({ t: d.time_ms, kind: 'decision', op: d.operator, color: d.applied ? colorOf(d.operator) : '#9aa8b8', tip: decisionTip(d) }));
  for (const r of j.rescales || [])
    markers.push({ t: r.time_ms, kind: 'rescale', op: r.operator, color: colorOf(r.operator),
      tip: `${fmtDateTime(r.time_ms)} · ${r.kind === 'migration' ? 'migration: ' + r.reason + '\n' : ''}rescale ${r.operator} ${r.old_parallelism} → ${r.new_parallelism}\npause ${fmtMs(r.pause_ms)} · ${fmtBytes(r.bytes_moved)} moved in ${r.key_groups_moved} key groups` +
        (r.checkpoint ? ` · migration snapshot #${r.checkpoint}` : '') });
  const parSeries = sops.map(o => ({ name: o.name, op: o.name, color: colorOf(o.name), values: o.parallelism, step: true, width: 2.2 }));
  let pmax = 1;
  for (const o of sops) for (const v of o.parallelism) pmax = Math.max(pmax, v);
  chart(document.getElementById('chart-parallelism'), { t, series: parSeries, markers, integer: true, yMax: pmax + 1, fmtY: v => v === null || v === undefined ? '—' : String(Math.round(v)) });

  const busySeries = [];
  for (const o of sops) {
    busySeries.push({ name: o.name + ' busy', op: o.name, color: colorOf(o.name), values: o.busy, width: 1.8 });
    if (o.backpressure.some(v => v > 0.01))
      busySeries.push({ name: o.name + ' backpressure', op: o.name, color: colorOf(o.name), values: o.backpressure, dash: true, width: 1.4 });
  }
  chart(document.getElementById('chart-busy'), { t, series: busySeries, yMax: 1, fmtY: v => fmtPct(v) });

  const cks = s ? s.checkpoints : [];
  chart(document.getElementById('chart-checkpoints'), {
    t: [], series: [], emptyText: 'No checkpoint completed yet.',
    bars: cks.map(k => ({ t: k.time_ms, v: k.duration_ms, tip: `checkpoint #${k.id} at ${fmtClock(k.time_ms)}\nduration ${fmtMs(k.duration_ms)} · size ${fmtBytes(k.bytes)} in ${fmtCount(k.objects)} files\nslowest task: sync ${fmtMs(k.sync_ms)} · async ${fmtMs(k.async_ms)} · alignment ${fmtMs(k.alignment_ms)}` })),
    fmtY: v => fmtMs(v),
  });
  if (cks.length) {
    const lastK = cks[cks.length - 1];
    const sizes = cks.map(k => k.bytes);
    appendHtml(document.getElementById('chart-checkpoints'),
      html`<div class="legend"><span>${cks.length} recent · last #${lastK.id}: ${fmtMs(lastK.duration_ms)} (sync ${fmtMs(lastK.sync_ms)}, async ${fmtMs(lastK.async_ms)}, alignment ${fmtMs(lastK.alignment_ms)}), ${fmtBytes(lastK.bytes)}</span>
       <span>size ${fmtBytes(Math.min(...sizes))} – ${fmtBytes(Math.max(...sizes))}</span></div>`);
  }
}

/* "count 2→3", or for a rebalancing migration "count: 3 instances moved" */
function rescaleWhat(r) {
  return r.kind === 'migration' ? `${r.operator}: ${r.instances_moved} moved to balance workers`
                                : `${r.operator} ${r.old_parallelism}→${r.new_parallelism}`;
}

function renderRescales(j) {
  const rs = (j.rescales || []).slice().reverse();
  setHtml(document.getElementById('rescales'), rs.length
    ? html`<table id="rescale-table"><tr><th>time</th><th>operator</th><th class="n">parallelism</th><th class="n">pause</th><th class="n">moved</th><th class="n">key groups</th></tr>${
      rs.map(r => html`<tr><td>${fmtClock(r.time_ms)}</td><td>${r.operator}</td><td class="n" title="${r.kind === 'migration' ? r.reason : ''}">${r.old_parallelism} → ${r.new_parallelism}${r.kind === 'migration' ? `, ${r.instances_moved} instances to other workers (rebalance)` : ''}</td>
        <td class="n">${fmtMs(r.pause_ms)}</td><td class="n">${fmtBytes(r.bytes_moved)}</td><td class="n">${r.key_groups_moved}</td></tr>`)}</table>`
    : html`<p class="muted">No rescales yet. <code>eddy rescale JOB OPERATOR N</code> or <code>--autoscale</code>.</p>`);
}

function renderDecisions(j) {
  const all = document.getElementById('show-all-decisions').checked;
  const ds = jobDecisions(j).filter(d => all || changed(d)).slice(-50).reverse();
  const hidden = jobDecisions(j).length - jobDecisions(j).filter(changed).length;
  setHtml(document.getElementById('decisions'), ds.length
    ? html`<table><tr><th>time</th><th>operator</th><th class="n">parallelism</th><th>why</th></tr>${
      ds.map(d => html`<tr><td>${fmtClock(d.time_ms)}</td><td>${d.operator}</td>
        <td class="n">${d.old_parallelism} → ${d.new_parallelism}${d.applied ? '' : html` <span class="muted">(not applied)</span>`}</td>
        <td class="reason">${d.reason || d.action}</td></tr>`)}</table>`
    : html`<p class="muted">No scaling decisions${hidden ? ` that changed anything (${hidden} no-change hidden)` : ''}. The controller runs with <code>eddy local --autoscale</code> or <code>eddy controller</code>.</p>`);
}

/* ---- tooltips --------------------------------------------------------- */

const tipEl = document.getElementById('tooltip');
function showTip(ev, text) {
  tipEl.textContent = text;
  tipEl.hidden = false;
  const x = Math.min(ev.clientX + 14, window.innerWidth - tipEl.offsetWidth - 8);
  const y = Math.min(ev.clientY + 14, window.innerHeight - tipEl.offsetHeight - 8);
  tipEl.style.left = x + 'px';
  tipEl.style.top = y + 'px';
}
function hideTip() { tipEl.hidden = true; }
document.addEventListener('mousemove', ev => {
  const t = ev.target.closest && ev.target.closest('[data-tip]');
  if (t) showTip(ev, t.dataset.tip);
  else if (!ev.target.closest || !ev.target.closest('.chart svg')) hideTip();
});
document.getElementById('show-all-decisions').onchange = () => render();
window.addEventListener('resize', () => render());

poll();
