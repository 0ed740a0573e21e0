// The console's entry point: the token prompt and the hash router
// (#/ runs, #/submit, #/runs/ID, #/runs/ID/files, #/runs/ID/diff).

import { init, setToken, token, requiresToken } from './api.js';
import { runsView } from './runs.js';
import { runView } from './run.js';
import { filesView, diffView } from './files.js';
import { submitView } from './submit.js';

const main = document.getElementById('main');
const dialog = document.getElementById('token-dialog');
const forget = document.getElementById('forget-token');
let cleanup = null;
let pendingAsk = null;

function askToken(message) {
  if (pendingAsk) return pendingAsk;
  pendingAsk = new Promise((resolve) => {
    const input = document.getElementById('token-input');
    document.getElementById('token-error').textContent = message || '';
    input.value = '';
    const form = document.getElementById('token-form');
    const done = (ev) => {
      ev.preventDefault();
      if (!input.value.trim()) return;
      setToken(input.value.trim());
      form.removeEventListener('submit', done);
      dialog.close();
      forget.hidden = false;
      pendingAsk = null;
      resolve();
    };
    form.addEventListener('submit', done);
    dialog.showModal();
    input.focus();
  });
  return pendingAsk;
}

dialog.addEventListener('cancel', (ev) => ev.preventDefault());
forget.addEventListener('click', () => {
  setToken('');
  forget.hidden = true;
  route();
});

function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean);
  for (const a of document.querySelectorAll('header nav a')) {
    const target = a.getAttribute('href').replace(/^#/, '');
    if (target === '/' + (parts[0] === 'submit' ? 'submit' : '')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (parts.length === 0) cleanup = runsView(main, params);
  else if (parts[0] === 'submit') cleanup = submitView(main);
  else if (parts[0] === 'runs' && parts[1] && parts[2] === 'files') cleanup = filesView(main, parts[1], params);
  else if (parts[0] === 'runs' && parts[1] && parts[2] === 'diff') cleanup = diffView(main, parts[1], params);
  else if (parts[0] === 'runs' && parts[1]) cleanup = runView(main, parts[1]);
  else main.replaceChildren(Object.assign(document.createElement('p'), { textContent: 'No such page.' }));
  document.title = 'loopgate console';
}

// "/" focuses the search box on the runs page.
document.addEventListener('keydown', (ev) => {
  const typing = ['INPUT', 'TEXTAREA', 'SELECT'].includes(document.activeElement && document.activeElement.tagName);
  if (ev.key === '/' && !typing) {
    const search = document.getElementById('run-search');
    if (search) {
      ev.preventDefault();
      search.focus();
    }
  }
});

window.addEventListener('hashchange', route);

init(askToken).then(() => {
  forget.hidden = !(requiresToken() && token());
  route();
});
