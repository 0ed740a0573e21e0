// What the agent did in a round: its episode transcript (model turns, tool calls with their
// arguments and results, self-check refusals; redacted by the executor) as a readable
// timeline, with the round's diff (its base snapshot to its candidate) beside it. Loaded when
// the panel is opened. Also the small time helpers the run page's timeline uses.

import { get } from './api.js';
import { h, clear, errorText } from './dom.js';

// `HH:MM:SS` (local time) of a Unix-milliseconds instant.
export function clockTime(ms) {
  if (ms === undefined || ms === null) return '';
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

// `N.N s` of a span in milliseconds.
export function span(ms) {
  return (Math.max(0, ms || 0) / 1000).toFixed(1) + ' s';
}

// The line a running episode's latest progress notice reads as, `elapsed` ms in.
export function progressText(p, elapsed) {
  const parts = [`turn ${p.turn}`];
  if (p.tool) parts.push(`calling ${p.tool}`);
  parts.push(`${p.tool_calls || 0} tool calls`, `${p.tokens || 0} tokens`, `${span(elapsed)} elapsed`, `on ${p.worker}`);
  return 'executing… ' + parts.join(' · ');
}

// The line a running audit's latest progress notice reads as, `elapsed` ms in.
export function auditProgressText(p, elapsed) {
  let doing;
  if (p.stage === 'checks') doing = p.check ? `running check ${p.check} (${p.check_index} of ${p.checks_total})` : `running checks (${p.checks_total || 0})`;
  else if (p.stage === 'judge') doing = `asking the judge (${p.check_index} of ${p.checks_total} checks run)`;
  else doing = `scoring the rubric (${p.check_index} of ${p.checks_total} checks run)`;
  return `auditing… ${doing} · ${span(elapsed)} elapsed · on ${p.worker}`;
}

function entryView(e) {
  const at = h('span', { class: 'muted tx-at' }, `+${span(e.at_ms)} `);
  switch (e.type) {
    case 'model_turn':
      return h('li', { class: 'tx tx-model', dataset: { kind: e.type } }, at, h('strong', {}, `turn ${e.turn} · model`), h('span', { class: 'muted' }, ` (${e.tokens} tokens)`),
        e.text ? h('pre', { class: 'tx-text' }, e.text) : null);
    case 'tool_call':
      return h('li', { class: 'tx tx-call', dataset: { kind: e.type, tool: e.tool } }, at, h('strong', {}, `turn ${e.turn} · call `), h('code', {}, e.tool),
        h('pre', { class: 'tx-text' }, e.arguments));
    case 'tool_result':
      return h('li', { class: 'tx tx-result' + (e.ok ? '' : ' bad'), dataset: { kind: e.type, tool: e.tool } }, at, h('strong', {}, `${e.tool} ${e.ok ? 'returned' : 'failed'}`),
        h('pre', { class: 'tx-text' }, e.result));
    case 'self_check_refusal':
      return h('li', { class: 'tx tx-refusal', dataset: { kind: e.type } }, at, h('strong', {}, `turn ${e.turn} · self-check refused finish`),
        h('pre', { class: 'tx-text' }, e.text));
    case 'output':
      return h('li', { class: 'tx tx-output', dataset: { kind: e.type } }, at, h('code', {}, e.text));
    default:
      return h('li', { class: 'tx', dataset: { kind: e.type || 'entry' } }, at, JSON.stringify(e));
  }
}

function diffLineClass(line) {
  if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ')) return 'dh';
  if (line.startsWith('@@')) return 'dhunk';
  if (line.startsWith('+')) return 'dadd';
  if (line.startsWith('-')) return 'ddel';
  return '';
}

async function load(body, runId, round, base, candidate, signal) {
  const [t, d] = await Promise.all([
    get(`/v1/runs/${runId}/rounds/${round}/transcript`, { signal }).catch((e) => ({ error: e })),
    base && candidate ? get(`/v1/snapshots/${base}/diff/${candidate}`, { signal }).catch((e) => ({ error: e })) : Promise.resolve(null),
  ]);
  const left = t.error
    ? h('p', { class: 'error' }, 'Transcript: ', errorText(t.error))
    : h('div', {},
      h('p', { class: 'muted' }, `${t.entries.length} entries by ${t.worker} with ${t.profile || '?'}`, t.omitted ? ` · ${t.omitted} more left out (size bound)` : ''),
      h('ol', { class: 'tx-list' }, t.entries.map(entryView)));
  let right = h('p', { class: 'muted' }, 'No candidate snapshot: no diff.');
  if (d && d.error) right = h('p', { class: 'error' }, 'Diff: ', errorText(d.error));
  else if (d) right = d.files.length
    ? h('div', {}, d.files.map((f) => h('section', { class: 'diff-file', dataset: { path: f.path, change: f.change } },
      h('h4', {}, h('code', {}, f.path), ` (${f.change})`),
      h('pre', { class: 'code diff' }, f.diff.split('\n').map((line) => h('span', { class: diffLineClass(line) }, line + '\n'))))))
    : h('p', { class: 'muted' }, 'No differences.');
  clear(body, h('div', { class: 'tx-grid' },
    h('section', { class: 'tx-timeline', 'aria-label': `What the agent did in round ${round}` }, h('h4', {}, 'What the agent did'), left),
    h('section', { class: 'tx-diff', 'aria-label': `Diff of round ${round}` }, h('h4', {}, 'Diff'), right)));
}

// A closed panel for round `round`; its transcript and diff load the first time it opens.
export function transcriptPanel(runId, round, base, candidate, signal) {
  const body = h('div', { class: 'tx-body' }, h('p', { class: 'muted' }, 'loading…'));
  let loaded = false;
  const panel = h('details', { class: 'transcript', dataset: { round } },
    h('summary', {}, 'What the agent did (transcript and diff)'), body);
  panel.addEventListener('toggle', () => {
    if (!panel.open || loaded) return;
    loaded = true;
    load(body, runId, round, base, candidate, signal).catch((e) => {
      if (!signal.aborted) clear(body, h('p', { class: 'error' }, errorText(e)));
    });
  });
  return panel;
}
