// The page's one way to the daemon: the token (kept in sessionStorage, sent only as a bearer
// header to this origin), JSON calls, and WebSocket URLs that carry a fresh single-use ticket
// instead of the token. No other module reads the token.

const TOKEN_KEY = 'atc.token';

/** An error answer of the API: its HTTP status and the error body's code, message, data. */
export class ApiError extends Error {
  constructor(status, code, message, data) {
    super(message);
    this.status = status;
    this.code = code;
    this.data = data ?? {};
  }

  /** The token was missing, wrong or rotated out. */
  get unauthorized() {
    return this.status === 401;
  }
}

export function hasToken() {
  return !!sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token.trim());
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/**
 * Calls `method path` on this origin's API with the token; answers the JSON body, or throws
 * an ApiError. `path` must be an API path (`/v1/...`), so the token goes nowhere else.
 */
export async function call(method, path, body, extraHeaders = {}) {
  if (!path.startsWith('/v1/')) throw new Error(`not an API path: ${path}`);
  const headers = { ...extraHeaders, Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) ?? ''}` };
  const init = { method, headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unreachable', `the daemon did not answer (${e.message})`);
  }
  const text = await resp.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!resp.ok) {
    const err = json?.error ?? {};
    throw new ApiError(resp.status, err.code ?? 'internal', err.message ?? `HTTP ${resp.status}`, err.data);
  }
  return json;
}

/**
 * A ws:// URL for the socket at `path` with `params`, authorised by a ticket fetched just
 * now (one ticket per upgrade: they are single-use and short-lived).
 */
export async function socketUrl(path, params = {}) {
  const { ticket } = await call('POST', '/v1/tickets');
  const url = new URL(path, window.location.href);
  url.protocol = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  }
  url.searchParams.set('ticket', ticket);
  return url.toString();
}

/** A fresh Idempotency-Key for one spawn (getRandomValues works outside secure contexts too). */
export function idempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `page-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}
