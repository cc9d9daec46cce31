// gpusched console: fetches /api/v1 once, then follows /api/v1/events (server-sent events). No dependencies.
'use strict';
(function () {
  const WINDOW_MS = 10 * 60 * 1000;
  const history = {};          // gpu index -> [{t, util, memUsed, temp, power}]
  let devices = [];
  let allocations = [];
  let knownAllocations = new Set();

  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };
  const gib = (b) => b === null || b === undefined ? '?' : (b / 1073741824).toFixed(b >= 10 * 1073741824 ? 0 : 1) + ' GiB';
  const num = (v, unit, digits) => v === null || v === undefined ? '–' : v.toFixed(digits || 0) + unit;
  const SVG = 'http://www.w3.org/2000/svg';

  function leaseLeft(expiresAt) {
    if (!expiresAt) return 'no lease';
    const s = Math.round((Date.parse(expiresAt) - Date.now()) / 1000);
    if (s <= 0) return 'expired';
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + r + 's';
  }

  function sparkline(points, key, max) {
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', '0 0 100 26');
    svg.setAttribute('data-metric', key);
    svg.setAttribute('preserveAspectRatio', 'none');
    const now = Date.now();
    const pts = points.filter(p => p[key] !== null && p[key] !== undefined && now - p.t <= WINDOW_MS);
    svg.setAttribute('data-points', String(pts.length));
    if (pts.length === 0) return svg;
    svg.setAttribute('data-from', String(pts[0].t));
    const top = max || Math.max(1, ...pts.map(p => p[key]));
    const xy = pts.map(p => {
      const x = 100 - (now - p.t) / WINDOW_MS * 100;
      const y = 25 - Math.min(1, p[key] / top) * 24;
      return x.toFixed(2) + ',' + y.toFixed(2);
    });
    if (pts.length === 1) xy.unshift('0,' + xy[0].split(',')[1]);
    const area = document.createElementNS(SVG, 'polygon');
    area.setAttribute('class', 'area');
    area.setAttribute('points', xy[0].split(',')[0] + ',26 ' + xy.join(' ') + ' ' + xy[xy.length - 1].split(',')[0] + ',26');
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', xy.join(' '));
    svg.appendChild(area);
    svg.appendChild(line);
    return svg;
  }

  function metric(label, value, svg) {
    const m = el('div', 'metric');
    m.appendChild(el('div', 'label', label));
    m.appendChild(el('div', 'value', value));
    m.appendChild(svg);
    return m;
  }

  function renderCards() {
    const cards = $('cards');
    cards.textContent = '';
    for (const d of devices) {
      const c = el('article', 'card ' + d.health.toLowerCase() + (d.pool !== 'IN_POOL' ? ' ' + d.pool.toLowerCase() : ''));
      c.id = 'gpu-' + d.index;
      c.dataset.gpu = d.index;
      const title = el('div', 'title');
      title.appendChild(el('span', 'name', d.name));
      title.appendChild(el('span', 'idx', 'GPU ' + d.index));
      c.appendChild(title);
      c.appendChild(el('div', 'uuid', d.uuid));
      const h = history[d.index] || [];
      const ms = el('div', 'metrics');
      ms.appendChild(metric('Memory', gib(d.memoryUsedBytes) + ' / ' + gib(d.memoryTotalBytes), sparkline(h, 'memUsed', d.memoryTotalBytes)));
      ms.appendChild(metric('Utilization', num(d.utilizationPercent, ' %'), sparkline(h, 'util', 100)));
      ms.appendChild(metric('Temperature', num(d.temperatureCelsius, ' °C'), sparkline(h, 'temp', 100)));
      ms.appendChild(metric('Power', num(d.powerWatts, ' W'), sparkline(h, 'power')));
      c.appendChild(ms);
      const health = el('div', 'health ' + d.health, d.health + (d.healthReason ? ': ' + d.healthReason : ''));
      health.dataset.role = 'health';
      c.appendChild(health);
      if (d.pool !== 'IN_POOL') c.appendChild(el('div', 'health UNHEALTHY', d.pool + (d.poolReason ? ': ' + d.poolReason : '')));
      const holders = allocations.filter(a => a.devices.includes(d.index));
      if (holders.length === 0) {
        c.appendChild(el('div', 'holder', 'free'));
      }
      for (const a of holders.slice(0, 64)) {
        const hd = el('div', 'holder');
        hd.dataset.allocation = a.id;
        hd.appendChild(el('b', null, a.id));
        hd.appendChild(document.createTextNode(' · ' + (a.owner || 'no owner') + ' · ' + a.sharing.toLowerCase()
          + ' · ' + leaseLeft(a.expiresAt) + ' · ' + (a.holderPid ? 'pid ' + a.holderPid : 'detached')));
        c.appendChild(hd);
      }
      if (holders.length > 64) c.appendChild(el('div', 'holder', '… and ' + (holders.length - 64) + ' more'));
      cards.appendChild(c);
    }
  }

  function labelText(labels) {
    const kv = Object.entries(labels || {}).map(([k, v]) => k + '=' + v);
    return kv.length ? kv.join(', ') : '–';
  }

  function renderAllocations() {
    const rows = $('alloc-rows');
    rows.textContent = '';
    $('alloc-count').textContent = '(' + allocations.length + ')';
    if (allocations.length === 0) {
      const tr = el('tr');
      const td = el('td', 'empty', 'no allocations');
      td.colSpan = 9;
      tr.appendChild(td);
      rows.appendChild(tr);
    }
    const seen = new Set();
    for (const a of allocations) {
      seen.add(a.id);
      const tr = el('tr', knownAllocations.has(a.id) ? '' : 'new');
      tr.dataset.allocation = a.id;
      for (const v of [a.id, a.devices.join(', '), a.sharing + (a.sharedMemoryBytes ? ' ' + gib(a.sharedMemoryBytes) : ''),
        a.owner || '–', a.jobId || '–', labelText(a.labels), leaseLeft(a.expiresAt), a.holderPid ? 'pid ' + a.holderPid : 'detached',
        new Date(a.createdAt).toLocaleTimeString()]) {
        tr.appendChild(el('td', null, v));
      }
      rows.appendChild(tr);
    }
    knownAllocations = seen;
  }

  function renderTopology(t) {
    const table = $('topo');
    table.textContent = '';
    const head = el('tr');
    head.appendChild(el('th', null, ''));
    t.devices.forEach(i => head.appendChild(el('th', null, 'GPU' + i)));
    head.appendChild(el('th', null, 'NUMA'));
    table.appendChild(head);
    t.matrix.forEach((row, r) => {
      const tr = el('tr');
      tr.appendChild(el('th', null, 'GPU' + t.devices[r]));
      row.forEach(label => {
        const kind = label.replace(/[0-9]+$/, '');
        const cls = 'l-' + (kind === 'NV' || kind === 'XG' ? (label.length > 3 || Number(label.slice(2)) >= 3 ? kind + '3' : label) : label);
        tr.appendChild(el('td', cls, label));
      });
      tr.appendChild(el('td', null, t.numa[r] === null ? 'N/A' : String(t.numa[r])));
      table.appendChild(tr);
    });
    $('legend').textContent = t.legend;
  }

  function addAudit(e) {
    const list = $('audit-list');
    const li = el('li', e.type);
    li.appendChild(el('span', 't', new Date(e.at).toLocaleTimeString()));
    li.appendChild(el('span', 'k', e.type));
    li.appendChild(document.createTextNode((e.allocationId ? e.allocationId + ' ' : '') + (e.owner ? '(' + e.owner + ') ' : '')
      + (e.reason ? e.reason + ': ' : '') + e.message));
    list.insertBefore(li, list.firstChild);
    while (list.children.length > 200) list.removeChild(list.lastChild);
  }

  function renderDoctor(d) {
    const box = $('doctor-body');
    box.textContent = '';
    const sim = d.node && d.node.simulated;
    if (sim) {
      box.appendChild(el('h3', null, 'Node'));
      box.appendChild(el('div', 'ok', 'simulated (' + d.node.backend + '), ' + d.node.gpus + ' GPUs, '
        + (d.node.driver ? 'NVIDIA driver ' + d.node.driver : 'no NVIDIA driver named')
        + ': this host\'s GPUs and providers are not used'));
    }
    box.appendChild(el('h3', null, sim ? 'This host\'s inventory providers (not used by the simulated node)'
      : 'Inventory providers'));
    const ul = el('ul');
    for (const p of d.providers) {
      const li = el('li');
      li.appendChild(el('span', p.available ? 'ok' : 'no', p.available ? '✔ ' : '✘ '));
      li.appendChild(document.createTextNode(p.name + ' (priority ' + p.priority + '): ' + (p.cause || 'available')
        + (p.advice ? ' → ' + p.advice : '')));
      ul.appendChild(li);
    }
    box.appendChild(ul);
    box.appendChild(el('h3', null, 'Isolation'));
    const iso = d.isolation;
    box.appendChild(el('div', iso.available ? 'ok' : 'no', iso.available ? 'available: ' + iso.mechanism
      : 'unavailable: ' + iso.cause));
    box.appendChild(el('div', null, 'cgroup v1 devices: ' + (iso.v1Root || 'not mounted') + ' · cgroup v2: ' + (iso.v2Root || 'not mounted')));
    box.appendChild(el('h3', null, 'CUDA (' + (sim ? 'the simulated node\'s driver ' : 'driver ')
      + (d.driver || 'not loaded') + ')'));
    const cu = el('ul');
    if (d.cuda.length === 0) cu.appendChild(el('li', 'empty', 'no CUDA installation found'));
    for (const c of d.cuda) {
      cu.appendChild(el('li', null, c.root + ': CUDA ' + (c.version || '?') + (c.runtime ? ', runtime' : '')
        + (c.nvcc ? ', nvcc' : '') + ' — ' + c.verdict));
    }
    for (const p of d.cudaProblems) cu.appendChild(el('li', 'no', 'problem: ' + p));
    box.appendChild(cu);
    if (d.uvm && d.uvm.checked) {
      box.appendChild(el('h3', null, 'NVIDIA unified memory (nvidia-uvm)'));
      box.appendChild(el('div', d.uvm.problem ? 'no' : 'ok', d.uvm.problem
        ? d.uvm.problem + ' → ' + d.uvm.advice : 'loaded (major ' + d.uvm.major + '), nodes present'));
    }
  }

  // the stream starts with the whole state; then each 'delta' carries only what changed, each item whole (applying
  // one twice, or to a newer state, gives the same result); holders are derived from the allocations
  // a state event carries at most its byte bound of allocations; 'truncated' then names the REST page (a cursor) where
  // the rest start, read here page by page (allocations a delta already brought or removed since are kept as the
  // delta left them)
  let stateGen = 0;
  let removedSince = new Set();
  function applyState(s) {
    devices = s.devices;
    allocations = s.allocations;
    removedSince = new Set();
    const gen = ++stateGen;
    renderCards();
    renderAllocations();
    if (s.truncated && s.truncated.rest) fetchRest(s.truncated.rest, gen);
  }

  async function fetchRest(path, gen) {
    // pages by cursor: each page's Link rel="next" header names the next (after=<last id of the page>), and only
    // while allocations follow; an allocation that ends meanwhile shifts none of the rest off the pages
    let next = path;
    while (next) {
      let r;
      let page;
      try {
        r = await fetch(next, { headers: { 'Accept': 'application/json' }, credentials: 'omit' });
        if (!r.ok) return;
        page = await r.json();
      } catch (e) {
        return;
      }
      if (gen !== stateGen) return; // a newer state event started over
      const byId = new Map(allocations.map(a => [a.id, a]));
      for (const a of page) if (!byId.has(a.id) && !removedSince.has(a.id)) byId.set(a.id, a);
      allocations = Array.from(byId.values());
      renderCards();
      renderAllocations();
      next = nextPage(r.headers.get('Link'));
    }
  }

  // the target of a Link header's rel="next", if any (same origin only)
  function nextPage(link) {
    const m = /<([^>]*)>\s*;\s*rel="next"/.exec(link || '');
    if (!m) return null;
    const u = new URL(m[1], location.href);
    return u.origin === location.origin ? u.pathname + u.search : null;
  }

  function applyDelta(d) {
    for (const dev of d.devices) {
      const i = devices.findIndex(x => x.index === dev.index);
      if (i >= 0) devices[i] = dev; else devices.push(dev);
    }
    for (const id of d.allocations.remove) removedSince.add(id);
    const gone = new Set(d.allocations.remove);
    const byId = new Map(allocations.filter(a => !gone.has(a.id)).map(a => [a.id, a]));
    for (const a of d.allocations.upsert) byId.set(a.id, a);
    allocations = Array.from(byId.values());
    renderCards();
    renderAllocations();
  }

  async function getJson(path) {
    const r = await fetch(path, { headers: { 'Accept': 'application/json' }, credentials: 'omit' });
    if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
    return r.json();
  }

  async function start() {
    const [node, topo, samples, audit] = await Promise.all([getJson('/api/v1/node'), getJson('/api/v1/topology'),
      getJson('/api/v1/samples?window=10m'), getJson('/api/v1/audit')]);
    $('node').textContent = node.hostname + ' · ' + node.backend + ' · ' + node.gpus + ' GPUs · ' + node.strategy
      + (node.simulated ? ' · simulated node' : '');
    // the server's last ten minutes first, so sparklines start full; live ticks append after
    for (const [gpu, pts] of Object.entries(samples)) {
      const h = history[gpu] || [];
      const last = pts.length ? pts[pts.length - 1].t : -Infinity;
      history[gpu] = pts.concat(h.filter(p => p.t > last));
    }
    renderTopology(topo);
    audit.forEach(addAudit);
    connect();
    getJson('/api/v1/doctor').then(renderDoctor).catch(e => { $('doctor-body').textContent = String(e); });
    setInterval(() => { renderAllocations(); }, 1000);
  }

  function connect() {
    const es = new EventSource('/api/v1/events');
    const live = $('live');
    es.onopen = () => { live.textContent = 'live'; live.className = 'live'; };
    es.onerror = () => { live.textContent = 'reconnecting'; live.className = 'live off'; };
    es.addEventListener('state', ev => applyState(JSON.parse(ev.data)));
    es.addEventListener('delta', ev => applyDelta(JSON.parse(ev.data)));
    es.addEventListener('audit', ev => addAudit(JSON.parse(ev.data)));
    es.addEventListener('tick', ev => {
      const tick = JSON.parse(ev.data);
      for (const p of tick.points) {
        const h = history[p.gpu] || (history[p.gpu] = []);
        h.push(p.point);
        while (h.length && tick.t - h[0].t > WINDOW_MS) h.shift();
      }
      renderCards();
    });
  }

  start().catch(e => { $('node').textContent = 'cannot load: ' + e; });
})();
