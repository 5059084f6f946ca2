// The JavaScript side of agent-plugin-sdk: the same conveniences as the Rust SDK over the
// host's interfaces (wit/v0.4.0), for plugins built with build.mjs (componentize-js).
//
//   import { definePlugin, kv, http, invalidInput } from "@agent-host/plugin-sdk";
//   export const command = definePlugin({ name: "hello", version: "0.1.0", ... , execute(call) { ... } });
import * as hostHttp from "agent:plugin/http@0.4.0";
import * as hostKv from "agent:plugin/kv@0.4.0";
import * as hostLlm from "agent:plugin/llm@0.4.0";
import * as hostLog from "agent:plugin/log@0.4.0";
import * as hostMeter from "agent:plugin/meter@0.4.0";
import * as hostProgress from "agent:plugin/progress@0.4.0";

/** A command's failure as the host reports it: `kind` is invalid-input, failed or unavailable. */
export class PluginError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = "PluginError";
    this.kind = kind;
    // componentize-js returns a thrown value's `payload` as the `err` of `execute`.
    this.payload = { tag: kind, val: message };
  }
}

/** The caller's input is wrong; the message says how. */
export const invalidInput = (message) => new PluginError("invalid-input", message);
/** The command ran and failed. */
export const failed = (message) => new PluginError("failed", message);
/** Something it depends on is down or not configured. */
export const unavailable = (message) => new PluginError("unavailable", message);

/** What an import's `err` carries, whatever wrapped it. */
const errorOf = (e) => (e && typeof e === "object" && "payload" in e ? e.payload : e);

/** One run: its parameters (already checked by the host against the declared specs), config and caller. */
export class Call {
  constructor(invocation) {
    this.agentId = invocation.agentId;
    this.command = invocation.command;
    this.params = JSON.parse(invocation.parameters || "{}");
    this.config = JSON.parse(invocation.config || "{}");
    this.rawText = invocation.rawText;
    this.format = invocation.responseFormat;
    this.origin = invocation.origin;
  }

  /** A required parameter; `invalidInput` when it is missing. */
  param(name) {
    const value = this.params[name];
    if (value === undefined || value === null) throw invalidInput(`missing parameter '${name}'`);
    return value;
  }

  /** An optional parameter, or `fallback`. */
  optional(name, fallback = undefined) {
    const value = this.params[name];
    return value === undefined || value === null ? fallback : value;
  }

  string(name) {
    return typed(name, this.param(name), "string");
  }

  number(name) {
    return typed(name, this.param(name), "number");
  }

  boolean(name) {
    return typed(name, this.param(name), "boolean");
  }
}

function typed(name, value, type) {
  if (typeof value !== type) throw invalidInput(`parameter '${name}' must be a ${type}`);
  return value;
}

/** Answers: a string is text in the command's declared format. */
export const text = (response) => ({ response, format: "text" });
export const markdown = (response) => ({ response, format: "markdown" });
export const image = (mediaUrl, caption = "") => ({ response: caption, format: "image", mediaUrl });
export const video = (mediaUrl, caption = "") => ({ response: caption, format: "video", mediaUrl });

function toOutput(answer, declared) {
  if (typeof answer === "string") return { response: answer, format: declared, mediaUrl: undefined };
  if (!answer || typeof answer.response !== "string") throw failed("the plugin returned no response");
  return { response: answer.response, format: answer.format ?? declared, mediaUrl: answer.mediaUrl };
}

/**
 * The `command` export: its manifest, and `execute(call)` (plain or async) wrapped so that
 * any exception becomes a clear `failed` error rather than a crash.
 */
export function definePlugin(plugin) {
  const manifest = {
    name: plugin.name,
    version: plugin.version,
    description: plugin.description ?? "",
    parameters: (plugin.parameters ?? []).map((p) => ({
      name: p.name,
      kind: p.type ?? "string",
      required: Boolean(p.required),
      description: p.description ?? "",
    })),
    responseFormat: plugin.responseFormat ?? "text",
    capabilities: plugin.capabilities ?? [],
    longRunning: Boolean(plugin.longRunning),
  };
  return {
    manifest: () => manifest,
    async execute(invocation) {
      try {
        return toOutput(await plugin.execute(new Call(invocation)), invocation.responseFormat);
      } catch (e) {
        if (e instanceof PluginError) throw e;
        throw failed(e instanceof Error ? e.message : String(e));
      }
    },
  };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The key-value store of this agent's command (capability `kv`). */
export const kv = {
  get(key) {
    try {
      return hostKv.get(key);
    } catch (e) {
      throw unavailable(`key-value store: ${errorOf(e)}`);
    }
  },
  getString(key) {
    const bytes = kv.get(key);
    return bytes === undefined ? undefined : decoder.decode(bytes);
  },
  getJson(key) {
    const text = kv.getString(key);
    return text === undefined ? undefined : JSON.parse(text);
  },
  set(key, value) {
    const bytes = typeof value === "string" ? encoder.encode(value) : value;
    try {
      hostKv.set(key, bytes);
    } catch (e) {
      throw unavailable(`key-value store: ${errorOf(e)}`);
    }
  },
  setJson(key, value) {
    kv.set(key, JSON.stringify(value));
  },
  delete(key) {
    try {
      hostKv.delete(key);
    } catch (e) {
      throw unavailable(`key-value store: ${errorOf(e)}`);
    }
  },
};

/** A response of the host's HTTP client. */
export class Response {
  constructor(url, response) {
    this.url = url;
    this.status = response.status;
    this.headers = response.headers;
    this.body = response.body;
  }
  get ok() {
    return this.status >= 200 && this.status < 300;
  }
  header(name) {
    const wanted = name.toLowerCase();
    return this.headers.find(([n]) => n.toLowerCase() === wanted)?.[1];
  }
  text() {
    return decoder.decode(this.body);
  }
  json() {
    try {
      return JSON.parse(this.text());
    } catch {
      throw failed(`${this.url} answered with no JSON (status ${this.status})`);
    }
  }
}

/**
 * Outbound HTTP through the host (capability `http`): only the hosts granted to the command
 * in its agent manifest are reachable, and the host enforces its size and time limits.
 */
export const http = {
  fetch(url, { method = "GET", headers = {}, body, timeoutMs } = {}) {
    const pairs = Array.isArray(headers) ? headers : Object.entries(headers);
    const bytes = body === undefined ? undefined : typeof body === "string" ? encoder.encode(body) : body;
    try {
      return new Response(url, hostHttp.fetch({ method, url, headers: pairs, body: bytes, timeoutMs }));
    } catch (e) {
      const error = errorOf(e);
      switch (error?.tag) {
        case "denied":
          throw failed(`request to ${url} refused: ${error.val}`);
        case "invalid-request":
          throw failed(`invalid request: ${error.val}`);
        case "timeout":
          throw unavailable(`${url} did not answer in time`);
        case "too-large":
          throw failed(`the response of ${url} passed the host's limit of ${error.val} bytes`);
        case "transport":
          throw unavailable(`${url}: ${error.val}`);
        default:
          throw unavailable(`${url}: ${error}`);
      }
    }
  },
  get(url, options = {}) {
    return http.fetch(url, { ...options, method: "GET" });
  },
  post(url, body, options = {}) {
    const json = typeof body === "object" && !(body instanceof Uint8Array);
    const headers = json ? { "content-type": "application/json", ...(options.headers ?? {}) } : options.headers;
    return http.fetch(url, { ...options, method: "POST", headers, body: json ? JSON.stringify(body) : body });
  },
};

/** The host's language model (capability `llm`, granted with `allow_llm`). */
export const llm = {
  complete(messages, { maxTokens, temperature } = {}) {
    const list = typeof messages === "string" ? [{ role: "user", content: messages }] : messages;
    try {
      return hostLlm.complete({ messages: list, maxTokens, temperature });
    } catch (e) {
      throw unavailable(`language model: ${errorOf(e)}`);
    }
  },
  /** The texts as unit vectors of the host's embedding model, one per text, in order. */
  embed(texts) {
    try {
      return hostLlm.embed(texts).map((vector) => Array.from(vector));
    } catch (e) {
      throw unavailable(`embedding model: ${errorOf(e)}`);
    }
  },
  /** The cosine of two vectors from `embed` (their dot product: they are unit vectors). */
  cosine(a, b) {
    return a.reduce((sum, x, i) => sum + x * b[i], 0);
  },
};

/** Log lines, tagged by the host with the agent and command. */
export const log = {
  debug: (message) => hostLog.log("debug", String(message)),
  info: (message) => hostLog.log("info", String(message)),
  warn: (message) => hostLog.log("warn", String(message)),
  error: (message) => hostLog.log("error", String(message)),
};

/** Progress of a long-running run (capability `progress`), shown at its status address. */
export const progress = (percent, message) =>
  hostProgress.report(Math.max(0, Math.min(100, Math.round(percent))), message);

/**
 * The units of work this run did (WIT 0.4.0). A command its agent sells by use (`by_use`)
 * charges its payer for the units reported; elsewhere the count charges nobody.
 */
export const meter = {
  add(units) {
    if (!Number.isSafeInteger(units) || units < 0) {
      throw new Error(`meter.add takes a whole number of units, 0 or more (got ${units})`);
    }
    return Number(hostMeter.add(BigInt(units)));
  },
};
