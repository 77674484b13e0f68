// The dashboard's only way to the controller: the authenticated JSON API under /api/v1.
// The token is typed once, kept in this tab's sessionStorage and sent as a bearer header; it is
// never put in a URL or shown. The event stream is read with fetch (EventSource cannot send an
// Authorization header) and parsed as server-sent events.

const TOKEN_KEY = 'inac.token';

export const session = {
  token: () => sessionStorage.getItem(TOKEN_KEY),
  setToken: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    const err = body && body.error;
    super(err ? `${status} ${err.code}: ${err.message}` : `HTTP ${status}`);
    this.status = status;
    this.code = err ? err.code : '';
  }
}

function headers(json) {
  const h = { Accept: 'application/json' };
  const t = session.token();
  if (t) h.Authorization = `Bearer ${t}`;
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

// The answer's JSON and its headers; ApiError for a non-2xx answer.
export async function request(path, { method = 'GET', body, signal } = {}) {
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: 'no-store',
    credentials: 'omit',
  });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return { data, headers: res.headers };
}

export async function get(path, options) {
  return (await request(path, options)).data;
}

// GET that answers null for 404 (no plan yet, no topology yet).
export async function getOrNull(path) {
  try {
    return await get(path);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

// Every job, following next_after cursors (at most `max`).
export async function allJobs(max = 5000) {
  const jobs = [];
  let after = 0;
  while (jobs.length < max) {
    const page = await get(`/jobs?limit=1000&after=${after}`);
    jobs.push(...page.jobs);
    if (page.next_after == null) break;
    after = page.next_after;
  }
  return jobs;
}

// Reads GET /events/stream from `since` and calls onEvent(event) for each event, reconnecting
// (from the last id seen) after a drop; onState(true|false) reports the connection. Stops when
// `signal` aborts or the token is refused (onState(false, error)).
export async function streamEvents({ since = 0, onEvent, onState, signal }) {
  let last = since;
  while (!signal.aborted) {
    try {
      const res = await fetch(`/api/v1/events/stream?since=${last}`, {
        headers: { ...headers(false), Accept: 'text/event-stream' },
        signal,
        cache: 'no-store',
        credentials: 'omit',
      });
      if (res.status === 401 || res.status === 403) {
        onState(false, new ApiError(res.status, null));
        return;
      }
      if (!res.ok || !res.body) throw new Error(`stream: HTTP ${res.status}`);
      onState(true);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('data:')) data += line.slice(5).trimStart();
            else if (line.startsWith('id:')) last = Number(line.slice(3).trim()) || last;
          }
          if (data) {
            try {
              onEvent(JSON.parse(data));
            } catch (e) {
              console.warn('event stream: bad event', e);
            }
          }
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      console.warn('event stream:', e.message);
    }
    onState(false);
    await new Promise((r) => setTimeout(r, 2000));
  }
}
