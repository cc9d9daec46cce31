// gpusched console, usage page: GPU usage per owner and per day from /api/v1/usage (the accounting store), as bar
// charts and tables, refreshed every minute. No dependencies; every value is set as text, never as HTML.
'use strict';
(function () {
  const SVG = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };
  const fmt = (v, digits, unit) => v === null || v === undefined ? 'n/m' : v.toFixed(digits) + (unit || '');
  // the owner row of allocations without an owner has the empty key (no owner can be blank); its label gets a '*'
  // while an owner of the rows shown has that name (any printable text can be an owner's: review53)
  let noOwner = '(no owner)';
  const labelFor = (rows) => {
    noOwner = '(no owner)';
    const owners = new Set(rows.filter(r => r.key !== '').map(r => r.key));
    while (owners.has(noOwner)) noOwner += '*';
  };
  const shown = (r) => r.key === '' ? noOwner : r.key;

  // horizontal bars: GPU-hours per row (label left, value right), the idle share drawn darker at the bar's end;
  // data-* attributes carry the figures for tests; every label is set as text
  function bars(rows, label) {
    const max = Math.max(0.0001, ...rows.map(r => r.gpuHours));
    const h = 24, w = 600, left = 150, right = 90, len0 = w - left - right;
    const height = rows.length * h + 4;
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('class', 'bars');
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + height);
    svg.setAttribute('height', String(height));
    svg.setAttribute('data-chart', label);
    rows.forEach((r, i) => {
      const y = i * h + 4;
      const name = document.createElementNS(SVG, 'text');
      name.setAttribute('x', String(left - 6));
      name.setAttribute('y', String(y + 15));
      name.setAttribute('text-anchor', 'end');
      name.textContent = shown(r).length > 22 ? shown(r).slice(0, 21) + '…' : shown(r);
      svg.appendChild(name);
      const len = r.gpuHours / max * len0;
      const busy = document.createElementNS(SVG, 'rect');
      busy.setAttribute('x', String(left));
      busy.setAttribute('y', String(y));
      busy.setAttribute('width', len.toFixed(2));
      busy.setAttribute('height', String(h - 6));
      busy.setAttribute('class', 'busy');
      busy.setAttribute('data-key', r.key);
      busy.setAttribute('data-gpu-hours', String(r.gpuHours));
      const title = document.createElementNS(SVG, 'title');
      title.textContent = shown(r) + ': ' + fmt(r.gpuHours, 2, ' GPU-h') + ', idle ' + fmt(r.idleFraction === null ? null
        : 100 * r.idleFraction, 0, ' %');
      busy.appendChild(title);
      svg.appendChild(busy);
      const idleLen = r.idleFraction === null ? 0 : len * r.idleFraction;
      if (idleLen > 0) {
        const idle = document.createElementNS(SVG, 'rect');
        idle.setAttribute('x', (left + len - idleLen).toFixed(2));
        idle.setAttribute('y', String(y));
        idle.setAttribute('width', idleLen.toFixed(2));
        idle.setAttribute('height', String(h - 6));
        idle.setAttribute('class', 'idle');
        svg.appendChild(idle);
      }
      const value = document.createElementNS(SVG, 'text');
      value.setAttribute('x', (left + len + 6).toFixed(2));
      value.setAttribute('y', String(y + 15));
      value.textContent = fmt(r.gpuHours, 2, ' GPU-h');
      svg.appendChild(value);
    });
    return svg;
  }

  function table(rows, keyName) {
    const t = el('table', 'grid');
    const head = el('tr');
    [keyName, 'Allocations', 'GPU-hours', 'kWh', 'Mean util', 'Idle', 'Peak memory'].forEach(h => head.appendChild(el('th', null, h)));
    const thead = el('thead');
    thead.appendChild(head);
    t.appendChild(thead);
    const body = el('tbody');
    rows.forEach(r => {
      const tr = el('tr');
      tr.setAttribute('data-key', r.key);
      const key = el('td', null, shown(r));
      if (r.idleSteps && r.idleSteps.indexOf('flagged') >= 0) key.appendChild(el('span', 'flag', ' idle'));
      tr.appendChild(key);
      tr.appendChild(el('td', null, String(r.allocations)));
      tr.appendChild(el('td', null, fmt(r.gpuHours, 2)));
      tr.appendChild(el('td', null, (r.energyEstimated ? '~' : '') + fmt(r.kwh, 3)));
      tr.appendChild(el('td', null, fmt(r.meanUtilization, 1, ' %')));
      tr.appendChild(el('td', null, fmt(r.idleFraction === null ? null : 100 * r.idleFraction, 0, ' %')));
      tr.appendChild(el('td', null, r.peakMemoryBytes === null ? 'n/m' : (r.peakMemoryBytes / 1073741824).toFixed(1) + ' GiB'));
      body.appendChild(tr);
    });
    t.appendChild(body);
    return t;
  }

  function render(target, report, keyName) {
    const box = $(target);
    if (!box) return;
    box.replaceChildren();
    if (report.rows.length === 0) {
      box.appendChild(el('p', 'empty', 'No usage recorded in this period.'));
      return;
    }
    labelFor(report.rows);
    box.appendChild(bars(report.rows, target));
    box.appendChild(table(report.rows, keyName));
    const t = report.total;
    box.appendChild(el('p', 'total', 'Total: ' + report.allocations + ' allocations, ' + fmt(t.gpuHours, 2) + ' GPU-hours, '
      + (t.energyEstimated ? '~' : '') + fmt(t.kwh, 3) + ' kWh, mean utilization ' + fmt(t.meanUtilization, 1, ' %')
      + ', idle ' + fmt(t.idleFraction === null ? null : 100 * t.idleFraction, 0, ' %')));
  }

  function load() {
    const since = ($('usage-since') && $('usage-since').value) || '7d';
    Promise.all([
      fetch('/api/v1/usage?by=owner&since=' + encodeURIComponent(since)).then(r => r.json()),
      fetch('/api/v1/usage?by=day&since=' + encodeURIComponent(since)).then(r => r.json()),
    ]).then(([owners, days]) => {
      if (owners.rows === undefined || days.rows === undefined) throw new Error(owners.error || days.error);
      render('usage-owners', owners, 'Owner');
      render('usage-days', days, 'Day (UTC)');
      $('usage-status').textContent = 'since ' + owners.since + (owners.warnings.length ? ' · ' + owners.warnings.length + ' warnings' : '');
    }).catch(e => { $('usage-status').textContent = 'usage unavailable: ' + e.message; });
  }

  document.addEventListener('DOMContentLoaded', () => {
    if (!$('usage')) return;
    const sel = $('usage-since');
    if (sel) sel.addEventListener('change', load);
    load();
    setInterval(load, 60000);
  });
})();
