// The runs list: counts by state, a state filter, search by name or id prefix, pages of 50
// (`has_more` from the API), refreshed every 2 s.

import { get } from './api.js';
import { h, clear, short, shortIds, isIdPrefix, stateBadge, ago, errorText } from './dom.js';

const STATES = ['queued', 'running', 'paused', 'waiting_for_input', 'completed', 'blocked', 'budget_exhausted', 'cancelled', 'failed'];
const POLL_MS = 2000;
const PAGE = 50;

export function runsView(main, params) {
  const state = params.get('state') || '';
  const query = params.get('q') || '';
  let offset = Math.max(0, parseInt(params.get('offset') || '0', 10) || 0);
  let stopped = false;
  let timer = null;

  const search = h('input', { id: 'run-search', type: 'search', value: query, placeholder: 'name or id', 'aria-label': 'Search runs by name or id' });
  const filter = h('select', { id: 'state-filter', 'aria-label': 'Filter by state' },
    h('option', { value: '' }, 'all states'),
    STATES.map((s) => h('option', { value: s, selected: s === state }, s.replaceAll('_', ' '))));
  const counts = h('ul', { id: 'state-counts', class: 'counts', 'aria-label': 'Runs by state' });
  const table = h('tbody', { id: 'run-rows' });
  const status = h('p', { class: 'muted', id: 'runs-status', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', id: 'runs-prev', disabled: true }, 'Newer');
  const next = h('button', { type: 'button', id: 'runs-next', disabled: true }, 'Older');
  const pager = h('div', { class: 'toolbar pager', 'aria-label': 'Pages of runs' }, prev, next);
  prev.addEventListener('click', () => { offset = Math.max(0, offset - PAGE); navigate(); });
  next.addEventListener('click', () => { offset += PAGE; navigate(); });

  const navigate = () => {
    const p = new URLSearchParams();
    if (filter.value) p.set('state', filter.value);
    if (search.value.trim()) p.set('q', search.value.trim());
    if (offset) p.set('offset', String(offset));
    const qs = p.toString();
    history.replaceState(null, '', '#/' + (qs ? '?' + qs : ''));
    refresh();
  };
  filter.addEventListener('change', () => { offset = 0; navigate(); });
  // A name filters the page shown; an id prefix asks the manager (`id_prefix`), every page.
  search.addEventListener('input', () => {
    render(lastRuns, lastMore);
    offset = 0;
    navigate();
  });

  clear(main,
    h('h1', {}, 'Runs'),
    counts,
    h('div', { class: 'toolbar' }, search, filter, h('a', { class: 'button', href: '#/submit' }, 'New run')),
    h('div', { class: 'table-wrap' },
      h('table', { class: 'runs' },
        h('thead', {}, h('tr', {}, ['Run', 'State', 'Round', 'Checks', 'Tokens', 'Updated'].map((t) => h('th', { scope: 'col' }, t)))),
        table)),
    status,
    pager);

  let lastRuns = [];
  let lastMore = false;

  function render(runs, more) {
    lastRuns = runs;
    lastMore = more;
    const q = search.value.trim().toLowerCase();
    const shown = runs.filter((r) => !q || r.id.toLowerCase().startsWith(q) || (r.name || '').toLowerCase().includes(q));
    const ids = shortIds(shown.map((r) => r.id));
    clear(table, shown.map((r, i) => h('tr', { dataset: { run: r.id, state: r.state } },
      h('td', { 'data-label': 'Run' }, h('a', { href: `#/runs/${r.id}` }, r.name || ids[i]), h('div', { class: 'muted mono', dataset: { shortId: ids[i] }, title: r.id }, ids[i]), h('div', { class: 'goal', title: r.goal || '' }, r.goal || '')),
      h('td', { 'data-label': 'State' }, stateBadge(r.state), r.phase && r.phase !== 'finished' ? h('div', { class: 'muted' }, r.phase.replaceAll('_', ' ')) : null),
      h('td', { 'data-label': 'Round' }, r.rounds || `${r.counted_rounds ?? r.round}/${r.max_rounds ?? '?'}`),
      h('td', { 'data-label': 'Checks' }, r.checks ? `${r.checks.passing}/${r.checks.total}` : '—'),
      h('td', { 'data-label': 'Tokens' }, String(r.total_tokens ?? 0)),
      h('td', { 'data-label': 'Updated' }, ago(r.updated_at)))));
    const first = runs.length ? offset + 1 : offset;
    status.textContent = shown.length
      ? `runs ${first}–${offset + runs.length}${more ? ' (more exist)' : ''}; ${shown.length} shown`
      : (offset ? 'No runs on this page.' : 'No runs match.');
    prev.disabled = offset === 0;
    next.disabled = !more;
    // One page only: no pager.
    pager.hidden = offset === 0 && !more;
  }

  function renderCounts(c) {
    // Offer only the states this manager knows.
    for (const opt of [...filter.options]) if (opt.value && !(opt.value in c.counts)) opt.remove();
    clear(counts,
      h('li', {}, h('a', { href: '#/', class: filter.value ? '' : 'current' }, 'all ', h('strong', {}, String(c.total)))),
      STATES.filter((s) => s in c.counts).map((s) => h('li', {},
        h('a', { href: `#/?state=${s}`, class: filter.value === s ? 'current' : '', dataset: { count: s } },
          stateBadge(s), ' ', h('strong', {}, String(c.counts[s]))))));
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const p = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
      if (filter.value) p.set('state', filter.value);
      const q = search.value.trim();
      if (q && isIdPrefix(q)) p.set('id_prefix', q);
      const [list, c] = await Promise.all([get('/v1/runs?' + p), get('/v1/runs/counts')]);
      if (stopped) return;
      render(list.runs, Boolean(list.has_more));
      renderCounts(c);
    } catch (e) {
      if (!stopped) status.textContent = 'Cannot load runs: ' + errorText(e);
    }
    if (!stopped) timer = setTimeout(refresh, POLL_MS);
  }

  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
