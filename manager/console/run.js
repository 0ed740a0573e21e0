// One run: header, budgets, actions, contract, the live round-by-round timeline (over the
// SSE stream), evidence, the snapshot's integrity and the completion certificate (with, for a
// run started from a git repository, the `loopgate apply` command line and the patch download).

import { get, post, blob, screenshot, patch, events, hasRoute } from './api.js';
import { h, clear, short, isIdPrefix, stateBadge, usd, TERMINAL, toast, errorText, action, form } from './dom.js';
import { transcriptPanel, clockTime, span, progressText, auditProgressText } from './transcript.js';

const REFRESH_MS = 300;
// How often a running episode's elapsed time moves on the page.
const TICK_MS = 500;

export function runView(main, id) {
  const ctl = new AbortController();
  const entries = [];
  let run = null;
  let refreshTimer = null;
  let checkedIntegrity = '';
  // Each round's transcript panel, kept across re-renders (an open one stays open).
  const panels = new Map();
  // Each shown progress line's notice, to move its elapsed time on.
  const progressOf = new WeakMap();
  const ticker = setInterval(tickProgress, TICK_MS);

  const title = h('h1', { id: 'run-title' }, short(id));
  const head = h('div', { id: 'run-head', class: 'card' });
  const integrity = h('div', { id: 'integrity', 'aria-live': 'polite' });
  const budget = h('section', { id: 'budget', class: 'card', 'aria-labelledby': 'budget-h' });
  const actions = h('section', { id: 'actions', class: 'card', 'aria-labelledby': 'actions-h' });
  const contract = h('section', { id: 'contract', class: 'card', 'aria-labelledby': 'contract-h' });
  const timeline = h('ol', { id: 'timeline', class: 'timeline', 'aria-live': 'polite' });
  const evidence = h('section', { id: 'evidence', class: 'card', 'aria-labelledby': 'evidence-h' });
  const certificate = h('section', { id: 'certificate', class: 'card', hidden: true, 'aria-labelledby': 'cert-h' });
  const live = h('span', { id: 'stream-state', class: 'muted' }, 'connecting…');

  clear(main,
    title,
    h('nav', { class: 'tabs', 'aria-label': 'Run views' },
      h('a', { href: `#/runs/${id}`, 'aria-current': 'page' }, 'Overview'),
      h('a', { href: `#/runs/${id}/files` }, 'Files'),
      h('a', { href: `#/runs/${id}/diff` }, 'Diff')),
    integrity,
    head,
    h('div', { class: 'grid' }, budget, actions),
    contract,
    h('section', { class: 'card', 'aria-labelledby': 'timeline-h' },
      h('h2', { id: 'timeline-h' }, 'Timeline ', live),
      timeline),
    evidence,
    certificate);

  function scheduleRefresh() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(async () => {
      refreshTimer = null;
      await refresh();
    }, REFRESH_MS);
  }

  async function refresh() {
    if (!run && id.length < 36 && isIdPrefix(id)) {
      // A short id: find its run (`id_prefix`) rather than ask for a run of that id.
      ctl.abort();
      await missing({ code: 'not_found', message: `no run id is ${id}` });
      return false;
    }
    try {
      const [r, b] = await Promise.all([get(`/v1/runs/${id}`, { signal: ctl.signal }), get(`/v1/runs/${id}/budget`, { signal: ctl.signal })]);
      const changed = !run || run.state !== r.state || run.phase !== r.phase || run.planning !== r.planning || run.question !== r.question
        || JSON.stringify(run.actions) !== JSON.stringify(r.actions);
      run = r;
      renderHead();
      renderBudget(b);
      if (changed) {
        renderActions();
        renderContract();
      }
      renderEvidence();
      if (r.snapshot && r.snapshot !== checkedIntegrity) checkIntegrity(r.snapshot);
      if (r.state === 'completed' && certificate.hidden) renderCertificate();
      return true;
    } catch (e) {
      if (ctl.signal.aborted) return false;
      if (!run && e.status === 404) {
        ctl.abort();
        await missing(e);
        return false;
      }
      toast('Cannot load the run: ' + errorText(e), 'bad');
      return Boolean(run);
    }
  }

  // No run has this id: a short id (a prefix) goes to its one run; otherwise the page says so,
  // with the runs the prefix matches, if several.
  async function missing(e) {
    let matches = [];
    if (isIdPrefix(id)) {
      try {
        matches = (await get(`/v1/runs?id_prefix=${encodeURIComponent(id)}&limit=10`)).runs || [];
      } catch (_) {
        matches = [];
      }
    }
    if (matches.length === 1) {
      location.replace(`#/runs/${matches[0].id}`);
      return;
    }
    clear(main,
      h('h1', {}, 'No such run'),
      h('div', { class: 'alert', role: 'alert', id: 'run-missing' },
        matches.length ? `${matches.length} runs have an id starting with ${id}: pick one.`
          : id.length < 36 && isIdPrefix(id) ? `No run id starts with ${id}.`
            : `No run has the id ${id} (${errorText(e)}). Runs expire from the store some days after they end.`),
      matches.length ? h('ul', { id: 'run-candidates' }, matches.map((r) => h('li', {}, h('a', { href: `#/runs/${r.id}` }, r.id), ' ', r.name || '', ' · ', r.state))) : null,
      h('p', {}, h('a', { href: '#/' }, 'Back to the runs')));
  }

  function renderHead() {
    title.textContent = run.name || short(run.id);
    clear(head,
      h('div', { class: 'row' }, stateBadge(run.state), h('span', { class: 'muted' }, run.phase ? run.phase.replaceAll('_', ' ') : ''),
        run.planning ? h('span', { class: 'muted' }, 'planning: ' + run.planning) : null),
      // Where the run stands, from its state, the gate and the checks only (the API's words).
      h('p', { id: 'run-standing', class: 'standing' }, run.standing || run.state.replaceAll('_', ' ')),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Goal'), h('dd', { id: 'run-goal' }, run.goal || '—'),
        h('dt', {}, 'Run id'), h('dd', { class: 'mono' }, run.id),
        h('dt', {}, 'Generation / rounds'), h('dd', { id: 'run-rounds' }, `${run.generation} / ${run.rounds || run.round}`),
        h('dt', {}, 'Snapshot'), h('dd', { class: 'mono' }, short(run.snapshot)),
        run.origin ? [h('dt', {}, 'Start commit'), h('dd', { id: 'run-origin', class: 'mono' }, originText(run.origin))] : null,
        h('dt', {}, 'Checks'), h('dd', { id: 'run-checks' }, run.checks ? `${run.checks.passing}/${run.checks.total} passing` : '—'),
        run.verdicts ? [h('dt', {}, 'Verdicts'), h('dd', {}, verdictTriple(run.verdicts))] : null,
        run.gate ? [h('dt', {}, 'Gate'), h('dd', { id: 'run-gate' }, gateWord(run.gate), run.gate.reasons.length ? ': ' + run.gate.reasons.join('; ') : '')] : null,
        run.queued_since ? [h('dt', {}, 'Queue'), h('dd', { id: 'run-queued' },
          `round ${run.round} waits for a free worker (${Math.max(0, Math.round((Date.now() - run.queued_since) / 1000))} s so far; a wait costs no round)`)] : null,
        // The manager's own words about the task: shown as its claim, beside the facts above.
        run.task_state ? [h('dt', {}, "Manager's note (claim)"), h('dd', { id: 'manager-note' }, h('span', { class: 'claim' }, run.task_state),
          h('span', { class: 'muted' }, TERMINAL.includes(run.state) ? ' — its last note before the run ended; not checked' : ' — not checked; the standing above is from the gate'))] : null,
        run.terminal_reason ? [h('dt', {}, 'Ended'), h('dd', { id: 'terminal-reason' }, run.terminal_reason)] : null));
  }

  function renderBudget(b) {
    const line = (label, l, fmt = String) => h('tr', {},
      h('th', { scope: 'row' }, label),
      h('td', {}, fmt(l.used)),
      h('td', {}, l.limit === null || l.limit === undefined ? 'unlimited' : fmt(l.limit)),
      h('td', {}, l.left === null || l.left === undefined ? '—' : fmt(l.left)));
    const u = run.usage || {};
    const role = (name) => {
      const r = u[name];
      if (!r) return null;
      const cached = r.cached_prompt_tokens ? ` (${r.cached_prompt_tokens} prompt tokens from cache)` : '';
      return `${name} ${r.input_tokens + r.output_tokens}${cached}`;
    };
    clear(budget,
      h('h2', { id: 'budget-h' }, 'Budgets'),
      h('table', { class: 'budget' },
        h('thead', {}, h('tr', {}, ['', 'used', 'limit', 'left'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {},
          line('Rounds', b.rounds),
          line('Tokens', b.tokens),
          line('Cost', b.cost_micros, usd),
          line('Wall (s)', b.wall_secs))),
      h('p', { class: 'muted' }, 'Tokens by role: ', ['manager', 'executor', 'auditor'].map(role).filter(Boolean).join(' · ')));
  }

  function renderActions() {
    // A live update re-renders the actions; what the operator is typing stays.
    const typed = new Map();
    for (const el of actions.querySelectorAll('input[id], textarea[id]')) {
      if (el.value) typed.set(el.id, el.value);
    }
    const focused = actions.contains(document.activeElement) ? document.activeElement.id : '';
    const items = [h('h2', { id: 'actions-h' }, 'Actions')];
    const terminal = TERMINAL.includes(run.state);
    // Offer what the API accepts now (`actions`, the routes' own rule); a manager that does not
    // send the list gets the console's older guesses.
    const can = (a, guess) => (Array.isArray(run.actions) ? run.actions.includes(a) : guess);
    if (run.question && run.planning !== 'approval' && can('answer', true)) {
      items.push(h('p', { class: 'question', id: 'question' }, 'Question: ', run.question),
        form('answer', [{ name: 'text', label: 'Answer', required: true }], 'Send answer', async (v, inputs) => {
          run = await post(`/v1/runs/${id}/answer`, { text: v.text });
          inputs.text.value = '';
          toast('Answer sent');
          renderActions();
        }));
    }
    if (run.planning === 'approval' && can('approve', true)) {
      items.push(h('p', {}, 'The proposed contract waits for approval (see Contract below).'),
        action('Approve contract', async () => {
          run = await post(`/v1/runs/${id}/approve`, {});
          toast('Contract approved');
          renderActions();
          renderContract();
        }, { id: 'approve' }));
    }
    {
      if (can('instruct', !terminal) && hasRoute('post', '/v1/runs/{id}/instructions')) items.push(form('instruct', [{ name: 'text', label: 'Instruction to the manager', multiline: true, rows: 2, required: true, placeholder: 'e.g. prefer the standard library' }], 'Send instruction', async (v, inputs) => {
        await post(`/v1/runs/${id}/instructions`, { text: v.text });
        inputs.text.value = '';
        toast('Instruction sent');
      }));
      const row = h('div', { class: 'row' });
      const canPause = hasRoute('post', '/v1/runs/{id}/pause');
      if (canPause && can('unpause', !terminal && run.state === 'paused')) {
        row.append(action('Unpause', async () => {
          run = await post(`/v1/runs/${id}/unpause`);
          toast('Unpaused');
          renderActions();
        }, { id: 'unpause' }));
      } else if (canPause && can('pause', !terminal && run.state !== 'paused')) {
        row.append(action('Pause', async () => {
          run = await post(`/v1/runs/${id}/pause`);
          toast('Paused: the episode in flight finishes, no new step starts');
          renderActions();
        }, { id: 'pause' }));
      }
      if (can('cancel', !terminal)) row.append(action('Cancel run', async () => {
        if (!confirmCancel()) return;
        run = await post(`/v1/runs/${id}/cancel`);
        toast('Cancelled');
        renderHead();
        renderActions();
      }, { id: 'cancel', class: 'danger' }));
      if (row.childNodes.length) items.push(row);
    }
    if (can('resume', terminal)) {
      items.push(form('resume', [
        { name: 'max_rounds', label: 'Resume with max rounds', type: 'number', min: 1, inputmode: 'numeric', value: String((run.max_rounds || 3)) },
        { name: 'max_total_tokens', label: 'and max total tokens (empty: unchanged)', type: 'number', min: 1, inputmode: 'numeric' },
      ], 'Resume', async (v) => {
        const b = {};
        if (v.max_rounds) b.max_rounds = Number(v.max_rounds);
        if (v.max_total_tokens) b.max_total_tokens = Number(v.max_total_tokens);
        run = await post(`/v1/runs/${id}/resume`, { budget: b });
        toast('Resumed as generation ' + run.generation);
        renderActions();
      }));
    }
    {
      if (can('continue', run.state === 'completed') && hasRoute('post', '/v1/runs/{id}/continue')) {
        items.push(form('continue', [{ name: 'goal', label: 'Continue with a new goal', multiline: true, rows: 2, required: true }], 'Continue', async (v) => {
          run = await post(`/v1/runs/${id}/continue`, { goal: v.goal });
          toast('Continued as generation ' + run.generation);
          renderActions();
        }));
      }
    }
    if (items.length === 1) items.push(h('p', { class: 'muted', id: 'no-actions' }, 'Nothing to do: the API accepts no change to this run now.'));
    clear(actions, items);
    for (const [fid, value] of typed) {
      const el = document.getElementById(fid);
      if (el && actions.contains(el) && !el.value) el.value = value;
    }
    if (focused) document.getElementById(focused)?.focus();
  }

  function confirmCancel() {
    // No blocking dialogs: the button asks once, a second press within 5 s cancels.
    const b = document.getElementById('cancel');
    if (b && b.dataset.armed === '1') return true;
    if (b) {
      b.dataset.armed = '1';
      b.textContent = 'Press again to cancel';
      setTimeout(() => {
        if (b.isConnected) {
          b.dataset.armed = '';
          b.textContent = 'Cancel run';
        }
      }, 5000);
    }
    return false;
  }

  async function renderContract() {
    try {
      const c = await get(`/v1/runs/${id}/contract`, { signal: ctl.signal });
      const criteria = (c.contract && c.contract.acceptance) || [];
      const items = [
        h('h2', { id: 'contract-h' }, 'Contract'),
        h('dl', { class: 'facts' },
          h('dt', {}, 'Status'), h('dd', { id: 'contract-status' }, c.status),
          h('dt', {}, 'Spec hash'), h('dd', { class: 'mono', id: 'spec-hash' }, c.spec_hash || '—')),
        criteria.length ? h('ul', { class: 'criteria' }, criteria.map((a) => h('li', {}, h('strong', {}, a.id), a.blocking === false ? ' (advisory)' : '', ': ', a.description || '', h('code', {}, a.check || '')))) : null,
      ];
      if (run && run.planning === 'approval') {
        items.push(form('edit-contract', [{ name: 'toml', label: 'Edit the proposed contract (TOML) and approve it', multiline: true, rows: 10, value: c.toml }], 'Approve edited contract', async (v) => {
          run = await post(`/v1/runs/${id}/approve`, { contract: v.toml });
          toast('Edited contract approved');
          renderActions();
          renderContract();
        }));
      } else if (c.toml) {
        items.push(h('details', {}, h('summary', {}, 'contract.toml'), h('pre', {}, c.toml)));
      }
      clear(contract, items);
    } catch (e) {
      if (!ctl.signal.aborted) clear(contract, h('h2', { id: 'contract-h' }, 'Contract'), h('p', { class: 'error' }, errorText(e)));
    }
  }

  // A running episode's elapsed time: its latest notice's, plus the time since it arrived.
  function elapsedOf(p) {
    return (p.elapsed_ms || 0) + Math.max(0, Date.now() - (p._seen || Date.now()));
  }

  function tickProgress() {
    for (const el of timeline.querySelectorAll('p.progress')) {
      const p = progressOf.get(el);
      if (p) el.textContent = p.type === 'audit_progress' ? auditProgressText(p, elapsedOf(p)) : progressText(p, elapsedOf(p));
    }
  }

  function progressLine(p) {
    const el = h('p', { class: 'progress muted', dataset: { tool: p.tool || '', turn: p.turn } }, progressText(p, elapsedOf(p)));
    progressOf.set(el, p);
    return el;
  }

  function auditProgressLine(p) {
    const el = h('p', { class: 'progress audit-progress muted', dataset: { stage: p.stage, check: p.check || '' } }, auditProgressText(p, elapsedOf(p)));
    progressOf.set(el, p);
    return el;
  }

  function panelFor(r) {
    const key = `${r.generation}:${r.round}:${r.exec.transcript}`;
    if (!panels.has(key)) panels.set(key, transcriptPanel(id, r.round, r.base, r.exec.candidate, ctl.signal));
    return panels.get(key);
  }

  function renderTimeline() {
    const { rounds, general } = buildRounds(entries);
    const terminal = run && TERMINAL.includes(run.state);
    clear(timeline,
      collapse(general).map((n) => { const li = noteItem(n); li.className = 'note'; return li; }),
      rounds.map((r) => h('li', { class: 'round', dataset: { round: r.round, generation: r.generation } },
        h('h3', {}, h('span', { class: 'at' }, clockTime(r.startedAt)), `Round ${r.round}`, r.generation > 1 ? ` · generation ${r.generation}` : '', ' · ', h('span', { class: 'route' }, r.route),
          r.gate && r.startedAt ? h('span', { class: 'muted round-took' }, ` · took ${span(r.gate.at - r.startedAt)}`) : '',
          r.clause ? h('span', { class: 'clause-step', title: headline(r.clause) }, ` · goal clause ${r.clause.clause} of ${r.clause.of} (try ${r.clause.attempt}), no manager decision`) : ''),
        h('p', { class: 'objective' }, r.objective),
        r.exec ? h('div', { class: 'exec' },
          // The executor's own account: a claim, with what the audit and the gate say below it.
          h('strong', {}, "Executor's summary (claim): "), h('span', { class: 'claim' }, r.exec.summary || (r.exec.error ? 'failed' : '—')),
          h('span', { class: 'muted' }, ` · ${r.exec.tool_calls} tool calls · ${r.exec.self_check_refusals} self-check refusals`, r.exec.claimed_done ? ' · claimed done' : '', r.exec.tokens != null ? h('span', { class: 'tokens' }, ` · ${r.exec.tokens} tokens`) : '',
            r.exec.duration_ms != null ? h('span', { class: 'exec-took' }, ` · took ${span(r.exec.duration_ms)}`) : ''),
          r.exec.claimed_done && r.gate && !r.gate.passed ? h('div', { class: 'refuted' }, 'The executor claimed done; the gate stayed closed (below).') : null,
          r.exec.error ? h('div', { class: 'error' }, r.exec.error) : null,
          r.exec.transcript ? panelFor(r) : null) : r.progress && !terminal ? progressLine(r.progress) : h('p', { class: 'muted' }, 'executing…'),
        r.audit ? h('div', { class: 'audit' },
          h('strong', {}, 'Audit (evidence): '), verdictTriple(r.audit.verdicts),
          h('span', { class: 'evidence-count' }, ` · evidence ${r.audit.passing}/${r.audit.checked}`),
          r.audit.gaps && r.audit.gaps.length ? h('ul', {}, r.audit.gaps.map((g) => h('li', {}, g))) : null) : r.exec ? (r.auditProgress && !terminal ? auditProgressLine(r.auditProgress) : h('p', { class: 'muted' }, 'auditing…')) : null,
        r.gate ? h('div', { class: r.gate.passed ? 'gate ok' : 'gate bad' },
          h('strong', {}, 'Gate: '), gateWord(r.gate),
          r.gate.reasons.length ? h('ul', {}, r.gate.reasons.map((g) => h('li', {}, g))) : null) : null,
        r.notes.length ? h('ul', { class: 'notes' }, collapse(r.notes).map(noteItem)) : null)));
  }

  let evidenceKey = null;
  let shotUrls = [];
  function renderEvidence() {
    const key = JSON.stringify([run.snapshot, run.evidence]);
    if (key === evidenceKey) return;
    evidenceKey = key;
    for (const u of shotUrls) URL.revokeObjectURL(u);
    shotUrls = [];
    const items = [h('h2', { id: 'evidence-h' }, 'Evidence')];
    const current = run.evidence || [];
    if (!current.length) items.push(h('p', { class: 'muted' }, 'No evidence on the current snapshot yet.'));
    items.push(h('ul', { class: 'evidence' }, current.map((e) => {
      const li = h('li', { class: 'verdict-' + e.verdict, dataset: { check: e.check_id } },
        h('div', { class: 'row' }, h('strong', {}, e.check_id), h('span', { class: 'badge verdict-' + e.verdict }, e.verdict),
          h('span', { class: 'muted' }, `exit ${e.exit_code ?? '—'} · ${e.duration_ms ?? 0} ms · on ${short(e.artifact_version)}`)),
        e.output_excerpt ? h('pre', { class: 'output' }, e.output_excerpt) : null);
      if (e.log_digest) {
        li.append(action('Full output', async () => {
          const bytes = await blob(e.log_digest, { signal: ctl.signal });
          li.querySelector('pre.output')?.remove();
          li.append(h('pre', { class: 'output full' }, new TextDecoder().decode(bytes)));
        }, { class: 'quiet' }));
      }
      // The check's own screenshots, as its (signed) evidence record names them by digest.
      const shots = e.screenshots || [];
      if (shots.length) {
        const figures = h('div', { class: 'shots' });
        li.append(figures);
        for (const s of shots) showScreenshot(figures, e.check_id, s);
      }
      return li;
    })));
    clear(evidence, items);
  }

  async function showScreenshot(parent, check, s) {
    const figure = h('figure', { class: 'shot', dataset: { digest: s.digest } });
    parent.append(figure);
    try {
      const b = await screenshot(id, s.digest, { signal: ctl.signal });
      const url = URL.createObjectURL(b.type === 'image/png' ? b : new Blob([b], { type: 'image/png' }));
      shotUrls.push(url);
      clear(figure,
        h('img', { src: url, alt: `screenshot ${s.path} of ${check}`, class: 'shot' }),
        h('figcaption', { class: 'muted' }, h('code', {}, s.path), ` · ${s.size_bytes} bytes · sha256 ${short(s.digest)}`));
    } catch (err) {
      if (ctl.signal.aborted) return;
      // A screenshot that is gone or does not match its digest is shown as such, never skipped.
      clear(figure, h('p', { class: err.code === 'integrity' ? 'alert' : 'error', role: err.code === 'integrity' ? 'alert' : null },
        `Screenshot ${s.path} (${short(s.digest)}): `, errorText(err)));
    }
  }

  async function checkIntegrity(snapshot) {
    checkedIntegrity = snapshot;
    try {
      const rep = await get(`/v1/snapshots/${snapshot}/integrity`, { signal: ctl.signal });
      if (rep.intact && !rep.checked) {
        clear(integrity, h('p', { class: 'muted', id: 'integrity-empty' }, `Snapshot ${short(snapshot)} holds no files: there was nothing to check.`));
      } else if (rep.intact) {
        clear(integrity, h('p', { class: 'ok', id: 'integrity-ok' }, `Snapshot ${short(snapshot)}: all ${rep.checked} files match their digests.`));
      } else {
        clear(integrity, h('div', { class: 'alert', role: 'alert', id: 'integrity-violation' },
          h('strong', {}, 'Integrity violation'), ` in snapshot ${short(snapshot)}: `,
          h('ul', {}, rep.violations.map((v) => h('li', {}, h('code', {}, v.path), ` (${v.kind}): ${v.detail}`)))));
      }
    } catch (e) {
      if (!ctl.signal.aborted) clear(integrity, h('p', { class: 'error' }, 'Integrity check failed: ' + errorText(e)));
    }
  }

  function originText(o) {
    const name = o.ref_name ? o.ref_name.replace(/^refs\/heads\//, '') + ' @ ' : '';
    return name + short(o.commit) + (o.dirty ? ' + uncommitted changes' : '');
  }

  // The way back into the repository: `loopgate apply` (verifies, then commits on a new
  // branch) and the patch file the manager serves (not verified by the console).
  function applyPart(o) {
    const items = [h('h3', {}, 'Back into your repository'),
      h('p', {}, 'Verify and commit it on a new branch on top of ', h('code', {}, short(o.commit)), ': ',
        h('code', { id: 'apply-command' }, `loopgate apply ${id} --repo PATH`))];
    if (hasRoute('GET', '/v1/runs/{id}/patch')) {
      items.push(h('p', {}, action('Download patch', async () => {
        const text = await patch(id, { signal: ctl.signal });
        const link = h('a', { href: URL.createObjectURL(new Blob([text], { type: 'text/plain' })), download: `loopgate-${id.slice(0, 8)}.patch` });
        link.click();
        setTimeout(() => URL.revokeObjectURL(link.href), 60000);
      }, { id: 'patch-download' }), ' — ', h('code', {}, 'git am FILE'), ` applies it on ${short(o.commit)}${o.dirty ? ' plus the uncommitted changes the run started with' : ''}; unlike `, h('code', {}, 'loopgate apply'), ', it is not verified'));
    }
    return h('div', { id: 'apply' }, items);
  }

  async function renderCertificate() {
    try {
      const c = await get(`/v1/runs/${id}/certificate`, { signal: ctl.signal });
      const text = JSON.stringify(c, null, 2);
      const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
      clear(certificate,
        h('h2', { id: 'cert-h' }, 'Completion certificate'),
        h('dl', { class: 'facts' },
          h('dt', {}, 'Format'), h('dd', {}, c.format),
          h('dt', {}, 'Snapshot'), h('dd', { class: 'mono' }, c.snapshot),
          h('dt', {}, 'Spec hash'), h('dd', { class: 'mono' }, c.contract && c.contract.spec_hash),
          h('dt', {}, 'Signed by'), h('dd', { class: 'mono' }, (c.signature && (c.signature.key_id || JSON.stringify(c.signature))) || 'unsigned'),
          h('dt', {}, 'Trusted keys'), h('dd', { class: 'mono' }, (c.trusted_keys || []).map((k) => k.key_id).join(', ') || 'none')),
        h('p', {}, h('a', { href: url, download: `certificate-${id}.json` }, 'Download certificate'), ' — check it with ', h('code', {}, 'loopgate verify --offline')),
        run.origin ? applyPart(run.origin) : null);
      certificate.hidden = false;
    } catch (e) {
      if (!ctl.signal.aborted && e.status !== 404) toast('Certificate: ' + errorText(e), 'bad');
    }
  }

  refresh().then((found) => {
    if (!found) return;
    events(`/v1/runs/${id}/events`, (ev) => {
      if (ev.event === 'log') {
        try {
          const entry = JSON.parse(ev.data);
          // When it arrived here: a running episode's elapsed time moves on from it.
          if (entry && typeof entry === 'object') entry._seen = Date.now();
          entries.push(entry);
        } catch (_) {
          return;
        }
        renderTimeline();
        scheduleRefresh();
      } else if (ev.event === 'end') {
        scheduleRefresh();
      }
    }, ctl.signal, (s) => {
      live.textContent = s === 'live' ? '● live' : s === 'ended' ? 'run ended' : s;
    }).catch((e) => {
      if (!ctl.signal.aborted) live.textContent = 'stream failed: ' + errorText(e);
    });
  });

  return () => {
    clearInterval(ticker);
    ctl.abort();
    clearTimeout(refreshTimer);
    for (const u of shotUrls) URL.revokeObjectURL(u);
  };
}

export function verdictTriple(v) {
  if (!v) return '—';
  return h('span', { class: 'verdicts' },
    h('span', { class: 'v v-' + v.status }, v.status), ' / ',
    h('span', { class: 'v v-' + v.integrity }, v.integrity), ' / ',
    h('span', { class: 'v v-' + v.contract }, v.contract.replaceAll('_', ' ')));
}

// Rounds from the run log: a round starts at `exec_dispatched` (with the decision before it,
// or the `clause_step` after it when the goal's clause was the step without a decision); its
// result, audit and gate follow. Other entries are notes on the round they happen in.
export function buildRounds(entries) {
  const rounds = [];
  const general = [];
  let decision = null;
  let cur = null;
  for (const e of entries) {
    if (!e || !e.type) continue;
    switch (e.type) {
      case 'episode_started':
      case 'audit_dispatched':
        break;
      // A running episode's latest progress: shown live on its round, not as a note.
      case 'episode_progress':
        if (cur && cur.round === e.round && cur.generation === e.generation) cur.progress = e;
        break;
      case 'audit_progress':
        if (cur && cur.round === e.round && cur.generation === e.generation && !cur.audit) cur.auditProgress = e;
        break;
      case 'decision':
        if (e.route === 'cli' || e.route === 'gui') decision = e;
        else (cur ? cur.notes : general).push(e);
        break;
      case 'exec_dispatched':
        cur = { generation: e.generation, round: e.round, route: e.capability || (decision && decision.route) || '?', objective: e.objective || (decision && decision.task) || '', decision, clause: null, notes: [], exec: null, audit: null, gate: null,
          base: e.base_snapshot, startedAt: (decision && decision.at) || e.at, progress: null, auditProgress: null };
        decision = null;
        rounds.push(cur);
        break;
      case 'clause_step':
        if (cur && cur.round === e.round && !cur.clause) cur.clause = e;
        else (cur ? cur.notes : general).push(e);
        break;
      // A step of several attempts: each sibling's episode and checks-only audit is a note;
      // the winner's episode and the full audit are the round's.
      case 'exec_result':
        if (e.step_attempt) (cur ? cur.notes : general).push(e);
        else if (cur && !cur.exec) cur.exec = e;
        break;
      case 'attempt_won':
        if (cur && !cur.exec) cur.exec = cur.notes.find((n) => n.type === 'exec_result' && n.step_attempt === e.attempt) || null;
        (cur ? cur.notes : general).push(e);
        break;
      case 'audit_report':
        if (cur && !cur.audit && e.purpose !== 'plan' && !e.step_attempt) cur.audit = e;
        else (cur ? cur.notes : general).push(e);
        break;
      case 'gate':
        if (cur && !cur.gate) cur.gate = e;
        else (cur ? cur.notes : general).push(e);
        break;
      default:
        (cur ? cur.notes : general).push(e);
    }
  }
  return { rounds, general };
}

// The gate's one word (`open` / `closed`), as the API, `loopgate` and the log headlines say it.
export function gateWord(g) {
  return g.word || (g.passed ? 'open' : 'closed');
}

// Entries repeated back to back (same headlines) as one, with how many times: one entry
// (`×11`) or a block of up to 3 (a `next: done` and its `done refused`, again and again), as
// `loopgate log` collapses them.
export function collapse(entries) {
  const out = [];
  const key = entries.map(headline);
  const same = (a, b, p) => { for (let k = 0; k < p; k++) if (key[a + k] !== key[b + k]) return false; return true; };
  let i = 0;
  while (i < entries.length) {
    let period = 1;
    let repeats = 1;
    for (let p = 1; p <= Math.min(3, entries.length - i); p++) {
      let r = 1;
      while (i + (r + 1) * p <= entries.length && same(i, i + r * p, p)) r++;
      if (r > 1 && r * p > period * repeats) { period = p; repeats = r; }
    }
    for (let k = 0; k < period; k++) out.push({ entry: entries[i + k], count: k === period - 1 ? repeats : 1, period });
    i += period * repeats;
  }
  return out;
}

function noteItem(n) {
  const dataset = n.count > 1 ? { kind: n.entry.type, count: String(n.count) } : { kind: n.entry.type };
  const label = n.period > 1 ? ` (these ${n.period} entries ×${n.count})` : ` ×${n.count}`;
  return h('li', { dataset }, h('span', { class: 'at' }, clockTime(n.entry.at)), headline(n.entry),
    n.count > 1 ? h('span', { class: 'repeat', title: `repeated ${n.count} times in a row` }, label) : null);
}

// An entry in one line: the `headline` the manager adds to every log entry it serves (the
// same words `loopgate log` prints after `[round N]`), or the event's name without one.
function headline(e) {
  return e.headline || e.type.replaceAll('_', ' ');
}
