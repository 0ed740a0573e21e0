// Every call the console makes goes through here: the documented /v1 routes, with the bearer
// token (kept in this tab's sessionStorage) when the manager requires one.

const KEY = 'loopgate.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let tokenRequired = false;
let documented = {};
let askForToken = null;

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

// Whether this manager documents (and so serves) `method path`: the console offers only the
// actions the manager it talks to has.
export function hasRoute(method, path) {
  return Boolean(documented[path] && documented[path][method.toLowerCase()]);
}

export function requiresToken() {
  return tokenRequired;
}

// The OpenAPI document (public) says whether /v1 needs a bearer token; ask for it before the
// first data call rather than after a 401.
export async function init(ask) {
  askForToken = ask;
  const r = await fetch('/openapi.json');
  const doc = await r.json();
  documented = doc.paths || {};
  tokenRequired = Boolean(doc.components && doc.components.securitySchemes && doc.components.securitySchemes.bearer);
  if (tokenRequired && !token()) await askForToken('');
}

function headers(body) {
  const h = {};
  const t = token();
  if (t) h.Authorization = 'Bearer ' + t;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  return h;
}

async function failure(r) {
  let detail = {};
  try {
    detail = (await r.json()).error || {};
  } catch (_) {
    detail = {};
  }
  return new ApiError(r.status, detail.code || 'http_' + r.status, detail.message || r.statusText);
}

export async function call(method, path, body, opts = {}) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(path, {
      method,
      headers: headers(body),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: opts.signal,
    });
    if (r.status === 401 && askForToken && attempt < 3) {
      await askForToken('The token was refused; enter it again.');
      continue;
    }
    if (!r.ok) throw await failure(r);
    return opts.raw ? r : r.json();
  }
}

export const get = (path, opts) => call('GET', path, undefined, opts);
export const post = (path, body, opts) => call('POST', path, body === undefined ? {} : body, opts);

export async function blob(sha, opts) {
  const r = await call('GET', `/v1/blobs/${sha}`, undefined, { ...opts, raw: true });
  return new Uint8Array(await r.arrayBuffer());
}

// A screenshot a check of run `id` took, by the digest its evidence record names (served as
// image/png only for digests the run's evidence names, re-hashed by the manager).
export async function screenshot(id, digest, opts) {
  const r = await call('GET', `/v1/runs/${id}/screenshots/${digest}`, undefined, { ...opts, raw: true });
  return r.blob();
}

// A completed run's change as a `git format-patch` file (`GET /v1/runs/{id}/patch`).
export async function patch(id, opts) {
  const r = await call('GET', `/v1/runs/${id}/patch`, undefined, { ...opts, raw: true });
  return r.text();
}

// Server-Sent Events over fetch (EventSource cannot send the Authorization header).
// Reconnects with Last-Event-ID until the stream sends `end` or `signal` aborts.
export async function events(path, onEvent, signal, onState) {
  let lastId = '';
  let ended = false;
  while (!ended && !signal.aborted) {
    try {
      const h = headers();
      h.Accept = 'text/event-stream';
      if (lastId) h['Last-Event-ID'] = lastId;
      const r = await fetch(path, { headers: h, signal });
      if (r.status === 401 && askForToken) {
        await askForToken('The token was refused; enter it again.');
        continue;
      }
      if (!r.ok) throw await failure(r);
      if (onState) onState('live');
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, '\n');
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const raw = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const ev = { event: 'message', id: '', data: '' };
          const data = [];
          for (const line of raw.split('\n')) {
            if (line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') ev.event = val;
            else if (field === 'id') ev.id = val;
            else if (field === 'data') data.push(val);
          }
          if (!data.length) continue;
          ev.data = data.join('\n');
          if (ev.id) lastId = ev.id;
          if (ev.event === 'end') ended = true;
          onEvent(ev);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && e.status < 500) throw e;
    }
    if (!ended && !signal.aborted) {
      if (onState) onState('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
  if (onState && !signal.aborted) onState('ended');
}
