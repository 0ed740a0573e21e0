// The snapshot browser (file tree and file view) and the diff between any two snapshots of
// the run (each round's base and candidate).

import { get, blob } from './api.js';
import { h, clear, short, errorText } from './dom.js';

const IMAGE_TYPES = { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp' };
const MAX_TEXT = 512 * 1024;

// The run's snapshots, oldest first, each with a label: the starting one, then each round's
// candidate.
async function snapshots(id, signal) {
  const [run, rounds] = await Promise.all([get(`/v1/runs/${id}`, { signal }), get(`/v1/runs/${id}/rounds`, { signal })]);
  const list = [];
  const seen = new Set();
  const add = (snap, label) => {
    if (!snap || seen.has(snap)) return;
    seen.add(snap);
    list.push({ snap, label: `${label} · ${short(snap)}` });
  };
  for (const r of rounds.rounds) {
    add(r.base_snapshot, r.round === 1 && r.generation <= 1 ? 'start' : `before round ${r.round}`);
    add(r.candidate, `round ${r.round}${r.generation > 1 ? ' (gen ' + r.generation + ')' : ''}`);
  }
  add(run.base_snapshot, 'start');
  add(run.snapshot, 'current');
  return { run, list };
}

function picker(id, label, list, value) {
  return [h('label', { for: id }, label), h('select', { id }, list.map((s) => h('option', { value: s.snap, selected: s.snap === value }, s.label)))];
}

function tabs(id, current) {
  const link = (href, text, name) => h('a', { href, 'aria-current': name === current ? 'page' : null }, text);
  return h('nav', { class: 'tabs', 'aria-label': 'Run views' },
    link(`#/runs/${id}`, 'Overview', 'overview'), link(`#/runs/${id}/files`, 'Files', 'files'), link(`#/runs/${id}/diff`, 'Diff', 'diff'));
}

export function filesView(main, id, params) {
  const ctl = new AbortController();
  const tree = h('ul', { id: 'file-tree', class: 'tree', 'aria-label': 'Files' });
  const view = h('div', { id: 'file-view', class: 'file-view', 'aria-live': 'polite' });
  const controls = h('div', { class: 'toolbar' });
  clear(main, h('h1', {}, 'Files'), tabs(id, 'files'), controls, h('div', { class: 'split' }, h('div', { class: 'card' }, tree), h('div', { class: 'card' }, view)));

  (async () => {
    try {
      const { run, list } = await snapshots(id, ctl.signal);
      const snap = params.get('snapshot') || run.snapshot;
      const [label, select] = picker('snapshot-pick', 'Snapshot', list, snap);
      select.addEventListener('change', () => {
        location.hash = `#/runs/${id}/files?snapshot=${select.value}`;
      });
      clear(controls, label, select);
      const m = await get(`/v1/snapshots/${snap}`, { signal: ctl.signal });
      renderTree(m.entries, snap);
      const path = params.get('path');
      const entry = m.entries.find((e) => e.path === path) || null;
      if (entry) showFile(entry);
      else clear(view, h('p', { class: 'muted' }, `${m.entries.length} files. Pick one to view it.`));
    } catch (e) {
      if (!ctl.signal.aborted) clear(view, h('p', { class: 'error' }, errorText(e)));
    }
  })();

  function renderTree(entries, snap) {
    // Directories as nested lists (paths are sorted in a manifest).
    const root = { dirs: new Map(), files: [] };
    for (const e of entries) {
      const parts = e.path.split('/');
      let node = root;
      for (const d of parts.slice(0, -1)) {
        if (!node.dirs.has(d)) node.dirs.set(d, { dirs: new Map(), files: [] });
        node = node.dirs.get(d);
      }
      node.files.push(e);
    }
    const render = (node) => [
      [...node.dirs.entries()].map(([name, child]) => h('li', {}, h('details', { open: true }, h('summary', {}, name + '/'), h('ul', {}, render(child))))),
      node.files.map((e) => h('li', {}, h('a', { href: `#/runs/${id}/files?snapshot=${snap}&path=${encodeURIComponent(e.path)}`, dataset: { path: e.path } }, e.path.split('/').pop()), h('span', { class: 'muted' }, ` ${e.size} B`))),
    ];
    clear(tree, render(root));
  }

  async function showFile(entry) {
    clear(view, h('h2', { class: 'mono' }, entry.path), h('p', { class: 'muted mono' }, `${entry.size} bytes · mode ${entry.mode.toString(8)} · sha256 ${short(entry.sha256)}`));
    try {
      const bytes = await blob(entry.sha256, { signal: ctl.signal });
      const ext = entry.path.split('.').pop().toLowerCase();
      if (IMAGE_TYPES[ext]) {
        const url = URL.createObjectURL(new Blob([bytes], { type: IMAGE_TYPES[ext] }));
        view.append(h('img', { src: url, alt: entry.path, class: 'shot' }));
      } else if (bytes.slice(0, 8000).includes(0)) {
        view.append(h('p', { class: 'muted' }, 'binary file'));
      } else {
        const text = new TextDecoder().decode(bytes.slice(0, MAX_TEXT));
        // Element.append writes a null as the text "null": append only what there is.
        view.append(h('pre', { class: 'code', id: 'file-text' }, text));
        if (bytes.length > MAX_TEXT) view.append(h('p', { class: 'muted', id: 'file-truncated' }, `truncated: the first ${MAX_TEXT} of ${bytes.length} bytes`));
      }
    } catch (e) {
      if (!ctl.signal.aborted) view.append(h('p', { class: 'alert', role: 'alert' }, e.code === 'integrity' ? 'Integrity violation: ' : '', errorText(e)));
    }
  }

  return () => ctl.abort();
}

export function diffView(main, id, params) {
  const ctl = new AbortController();
  const controls = h('form', { class: 'toolbar', id: 'diff-form' });
  const out = h('div', { id: 'diff', 'aria-live': 'polite' });
  clear(main, h('h1', {}, 'Diff'), tabs(id, 'diff'), controls, out);

  (async () => {
    try {
      const { list } = await snapshots(id, ctl.signal);
      if (list.length < 2) {
        clear(out, h('p', { class: 'muted' }, 'Only one snapshot so far: nothing to compare.'));
        return;
      }
      const from = params.get('from') || list[0].snap;
      const to = params.get('to') || list[list.length - 1].snap;
      const [fl, fs] = picker('diff-from', 'From', list, from);
      const [tl, ts] = picker('diff-to', 'To', list, to);
      clear(controls, fl, fs, tl, ts, h('button', { type: 'submit' }, 'Compare'));
      controls.addEventListener('submit', (ev) => {
        ev.preventDefault();
        location.hash = `#/runs/${id}/diff?from=${fs.value}&to=${ts.value}`;
      });
      const d = await get(`/v1/snapshots/${from}/diff/${to}`, { signal: ctl.signal });
      if (!d.files.length) {
        clear(out, h('p', { class: 'muted' }, 'No differences.'));
        return;
      }
      clear(out,
        h('p', { class: 'muted' }, `${d.files.length} files changed from ${short(from)} to ${short(to)}`),
        d.files.map((f) => h('section', { class: 'card diff-file', dataset: { path: f.path, change: f.change } },
          h('h2', { class: 'mono' }, h('span', { class: 'badge change-' + f.change }, f.change), ' ', f.path),
          h('pre', { class: 'code diff' }, f.diff.split('\n').map((line) => h('span', { class: lineClass(line) }, line + '\n'))))));
    } catch (e) {
      if (!ctl.signal.aborted) clear(out, h('p', { class: 'alert', role: 'alert' }, errorText(e)));
    }
  })();
  return () => ctl.abort();
}

function lineClass(line) {
  if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ')) return 'dh';
  if (line.startsWith('@@')) return 'dhunk';
  if (line.startsWith('+')) return 'dadd';
  if (line.startsWith('-')) return 'ddel';
  return '';
}
