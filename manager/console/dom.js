// Small DOM helpers: elements from data (text only, never HTML strings), formatting, toasts.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// The characters of a run id shown: the first 12 (what `loopgate` accepts as RUN).
export const SHORT_ID_LEN = 12;

export function short(id) {
  return id ? String(id).slice(0, SHORT_ID_LEN) : '—';
}

// The id each of `ids` is shown by in a list: its first 12 characters, longer where another id
// of the list shares them (as `loopgate runs` shows them: each one resolves to its run).
export function shortIds(ids) {
  return ids.map((id) => {
    let len = Math.min(SHORT_ID_LEN, id.length);
    while (len < id.length && ids.some((o) => o !== id && o.slice(0, len) === id.slice(0, len))) len++;
    return id.slice(0, len);
  });
}

// Whether `text` can be a run id prefix (hex digits and dashes).
export function isIdPrefix(text) {
  return /^[0-9a-fA-F-]{1,36}$/.test(text);
}

export function stateBadge(state) {
  return h('span', { class: 'badge state-' + state, dataset: { state } }, state.replaceAll('_', ' '));
}

export function ago(ms) {
  if (!ms) return '—';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return Math.round(s / 3600) + ' h ago';
  return new Date(ms).toISOString().slice(0, 16).replace('T', ' ');
}

export function usd(micros) {
  return '$' + (micros / 1e6).toFixed(4);
}

export const TERMINAL = ['completed', 'blocked', 'budget_exhausted', 'cancelled', 'failed'];

let toastTimer = null;
export function toast(message, kind) {
  const el = document.getElementById('toast');
  el.textContent = message;
  el.className = 'toast show ' + (kind || '');
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    el.className = 'toast';
  }, 5000);
}

export function errorText(e) {
  return e && e.code ? `${e.message} (${e.code})` : String((e && e.message) || e);
}

// A button that runs an async action once at a time and reports its error.
export function action(label, run, attrs = {}) {
  const b = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await run();
    } catch (e) {
      toast(errorText(e), 'bad');
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// A small form: labelled fields, a submit button; `run(values)` on submit (Enter works).
export function form(id, fields, submitLabel, run) {
  const f = h('form', { id, class: 'stack' });
  const inputs = {};
  for (const fl of fields) {
    const fid = `${id}-${fl.name}`;
    const input = fl.multiline
      ? h('textarea', { id: fid, name: fl.name, rows: fl.rows || 3, required: fl.required, placeholder: fl.placeholder || '' })
      : h('input', { id: fid, name: fl.name, type: fl.type || 'text', required: fl.required, placeholder: fl.placeholder || '', min: fl.min, inputmode: fl.inputmode });
    if (fl.value !== undefined) input.value = fl.value;
    inputs[fl.name] = input;
    f.append(h('label', { for: fid }, fl.label), input);
  }
  const button = h('button', { type: 'submit' }, submitLabel);
  f.append(h('div', { class: 'row' }, button));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    button.disabled = true;
    try {
      const values = {};
      for (const [k, v] of Object.entries(inputs)) values[k] = v.value;
      await run(values, inputs);
    } catch (e) {
      toast(errorText(e), 'bad');
    } finally {
      button.disabled = false;
    }
  });
  for (const input of Object.values(inputs)) {
    if (input.tagName === 'TEXTAREA') {
      input.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) f.requestSubmit();
      });
    }
  }
  return f;
}
