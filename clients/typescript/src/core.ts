// The hand-written half of the client: sending one operation with `fetch`, turning an error
// body into `ApiError`, and reading the chat event stream. The generated half
// (`operations.ts`) names every operation and calls `call` or `events` here.

/** One operation: its method, path template and what its success answer is. */
export interface Op {
  readonly method: string;
  readonly path: string;
  readonly answer: "json" | "text" | "none" | "events";
}

/**
 * A non-2xx answer. `code` is the API's stable UPPER_SNAKE code (`UNAUTHORIZED`,
 * `TURN_EXPIRED`, ...; the document lists each status's codes in `x-error-codes`); it is empty
 * when the body is not the API's error shape (e.g. `/readyz`'s plain text).
 */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }

  /** From a response's status and body text. */
  static from(status: number, text: string): ApiError {
    try {
      const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
      if (body.error && typeof body.error.code === "string") {
        return new ApiError(status, body.error.code, String(body.error.message ?? ""));
      }
    } catch {
      // not the API's error shape
    }
    return new ApiError(status, "", text.trim());
  }
}

/**
 * One event of `GET /v1/chats/{chat_id}/events`: its `event` name (`refusal.recorded`,
 * `approval.requested`, `approval.resolved`, `approval.revoked`, `resync`), its `id` (send it
 * back as `lastEventId` to carry on after a reconnect) and its `data`, parsed as JSON when it
 * is JSON.
 */
export interface ServerSentEvent {
  event: string;
  id: string | undefined;
  data: unknown;
}

/** How a client is made: the control plane's address and the bearer token it sends. */
export interface ClientOptions {
  /** `Authorization: Bearer` token: the runtime or admin token, or a named one. */
  token?: string;
  /** A `fetch` of your own (defaults to the global one). */
  fetch?: typeof fetch;
}

type Values = Record<string, string | number | boolean | null | undefined>;

function defined(values: Values): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(values)) {
    if (v !== undefined && v !== null) out[k] = String(v);
  }
  return out;
}

/** Parses server-sent events line by line (comments and keep-alives skipped). */
class EventParser {
  private event = "message";
  private id: string | undefined = undefined;
  private data: string[] = [];

  feed(line: string): ServerSentEvent | undefined {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "message";
        return undefined;
      }
      const text = this.data.join("\n");
      let data: unknown = text;
      try {
        data = JSON.parse(text);
      } catch {
        // plain text data
      }
      const out = { event: this.event, id: this.id, data };
      this.event = "message";
      this.data = [];
      return out;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value;
    return undefined;
  }
}

/**
 * What a generated method hands the transport: the operation, its path parameters, query,
 * headers and JSON body. One tuple, so `send`, `call` and `events` take the same parts in the
 * same order and a generated call reads `this.call(OPERATIONS.x, path, query, headers, body)`.
 */
type Sent = [op: Op, path: Record<string, string>, query: Values, headers: Values, body: unknown];

/** The transport every generated method goes through. */
export class Core {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly fetchFn: typeof fetch;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetchFn = options.fetch ?? ((input, init) => fetch(input, init));
  }

  private send(...[op, path, query, headers, body]: Sent): Promise<Response> {
    let url = op.path;
    for (const [name, value] of Object.entries(path)) {
      url = url.replace(`{${name}}`, encodeURIComponent(value));
    }
    const search = new URLSearchParams(defined(query)).toString();
    const sent: Record<string, string> = { accept: "application/json", ...defined(headers) };
    if (this.token) sent["authorization"] = `Bearer ${this.token}`;
    const init: RequestInit = { method: op.method, headers: sent };
    if (body !== undefined) {
      sent["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return this.fetchFn(`${this.baseUrl}${url}${search ? `?${search}` : ""}`, init);
  }

  /** Sends `op`; the success answer, or throws `ApiError`. */
  protected async call<T>(...sent: Sent): Promise<T> {
    const op = sent[0];
    const response = await this.send(...sent);
    const text = await response.text();
    if (!response.ok) throw ApiError.from(response.status, text);
    if (op.answer === "json") return JSON.parse(text) as T;
    if (op.answer === "text") return text as T;
    return undefined as T;
  }

  /** Sends `op` and yields its server-sent events until the stream ends or the loop stops. */
  protected async *events(...sent: Sent): AsyncIterable<ServerSentEvent> {
    const response = await this.send(...sent);
    if (!response.ok || response.body === null) {
      throw ApiError.from(response.status, await response.text());
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new EventParser();
    let buffered = "";
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffered += value;
        let end: number;
        while ((end = buffered.search(/\r\n|\r|\n/)) >= 0) {
          const line = buffered.slice(0, end);
          buffered = buffered.slice(buffered[end] === "\r" && buffered[end + 1] === "\n" ? end + 2 : end + 1);
          const event = parser.feed(line);
          if (event) yield event;
        }
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  }
}
