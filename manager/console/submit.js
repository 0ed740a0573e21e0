// Submitting a run: a task file's TOML (parsed by the manager, `POST /v1/tasks/parse`), a
// model profile per role (`GET /v1/models`: the manager's own profiles for the manager, the
// names live executor and auditor workers announce for theirs), and a starting workspace from
// a zip or tar upload.

import { get, post } from './api.js';
import { h, clear, toast, errorText } from './dom.js';
import { workspaceFrom } from './archive.js';

// The example task; its [roles] are filled from `GET /v1/models` (the profiles this manager
// and its live workers have), so the example submits as it stands.
const EXAMPLE = `name = "hello"
goal = "Create hello.py that prints exactly: hello, loopgate"

[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \\"$(python3 hello.py)\\" = 'hello, loopgate'"
blocking = true

[roles]
__ROLES__
[budget]
max_rounds = 3
`;

// The example with the roles this manager can serve: the first manager profile (or, with
// none, no manager model: `[budget] manager = false` runs the goal's clauses as the steps) and
// the first profile live executors announce.
export function exampleTask(models) {
  const served = (models && models.roles) || {};
  const manager = (served.manager && served.manager[0]) || (models && models.models && models.models[0]);
  const executor = served.executor && served.executor[0];
  const lines = [];
  if (manager) lines.push(`manager = "${manager.name}"`);
  if (executor) lines.push(`executor = "${executor.name}"`);
  let text = EXAMPLE.replace('__ROLES__\n', lines.length ? lines.join('\n') + '\n\n' : '\n');
  if (!manager) text = text.replace('max_rounds = 3', 'max_rounds = 3\nmanager = false');
  return text;
}

export function submitView(main) {
  const ctl = new AbortController();
  const toml = h('textarea', { id: 'task-toml', rows: 16, spellcheck: 'false', class: 'mono' });
  // Until the profiles are known, the example without roles; filled in below unless edited.
  toml.value = exampleTask(null);
  const untouched = () => toml.value === exampleTask(null);
  const roles = h('fieldset', { id: 'roles' }, h('legend', {}, 'Model profile per role'));
  const selects = {};
  const upload = h('input', { id: 'workspace-file', type: 'file', accept: '.zip,.tar,.tar.gz,.tgz' });
  const problem = h('p', { id: 'submit-error', class: 'error', role: 'alert' });
  const button = h('button', { type: 'submit', id: 'submit-run' }, 'Submit run');
  const f = h('form', { id: 'submit-form', class: 'stack card' },
    h('label', { for: 'task-toml' }, 'Task file (TOML)'), toml,
    roles,
    h('label', { for: 'workspace-file' }, 'Starting workspace (zip, tar or tar.gz; optional)'), upload,
    problem,
    h('div', { class: 'row' }, button));
  clear(main, h('h1', {}, 'New run'), f);

  get('/v1/models', { signal: ctl.signal }).then((m) => {
    if (untouched()) toml.value = exampleTask(m);
    const model = new Map(m.models.map((p) => [p.name, p.model]));
    const served = m.roles || {};
    for (const role of ['manager', 'executor', 'auditor']) {
      const sid = 'role-' + role;
      const names = served[role] || (role === 'manager' ? m.models.map((p) => ({ name: p.name })) : []);
      const label = (p) => {
        if (role === 'manager') return `${p.name} (${model.get(p.name) || 'model profile'})`;
        const n = p.workers === 1 ? '1 live worker' : `${p.workers} live workers`;
        return `${p.name} (${n}${p.manager_profile ? ', also a manager profile' : ''})`;
      };
      const s = h('select', { id: sid },
        h('option', { value: '' }, 'as in the task file'),
        names.map((p) => h('option', { value: p.name }, label(p))));
      selects[role] = s;
      roles.append(h('label', { for: sid }, role), s);
      if (role !== 'manager' && names.length === 0) {
        roles.append(h('p', { class: 'muted', id: sid + '-none' }, `No live ${role} worker announces a profile yet.`));
      }
    }
  }).catch((e) => {
    if (!ctl.signal.aborted) roles.append(h('p', { class: 'error' }, 'Cannot list the model profiles: ' + errorText(e)));
  });

  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    problem.textContent = '';
    button.disabled = true;
    try {
      const { task } = await post('/v1/tasks/parse', { toml: toml.value });
      task.roles = task.roles || {};
      for (const [role, s] of Object.entries(selects)) if (s.value) task.roles[role] = s.value;
      const body = { task };
      if (upload.files && upload.files[0]) body.workspace = await workspaceFrom(upload.files[0]);
      const run = await post('/v1/runs', body);
      toast('Submitted ' + run.id);
      location.hash = `#/runs/${run.id}`;
    } catch (e) {
      problem.textContent = errorText(e);
    } finally {
      button.disabled = false;
    }
  });
  return () => ctl.abort();
}
