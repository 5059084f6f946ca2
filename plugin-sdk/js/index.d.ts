/// <reference path="./types/command-plugin.d.ts" />
// Types of the SDK (index.js). The host's own interfaces, generated from the WIT by jco,
// are in types/ (`npm run types` regenerates them).

export type ParamType = import("agent:plugin/types@0.4.0").ParamType;
export type ResponseFormat = import("agent:plugin/types@0.4.0").ResponseFormat;
export type Capability = import("agent:plugin/types@0.4.0").Capability;
export type Origin = import("agent:plugin/types@0.4.0").Origin;
export type Invocation = import("agent:plugin/types@0.4.0").Invocation;
export type Output = import("agent:plugin/types@0.4.0").Output;
export type PluginManifest = import("agent:plugin/types@0.4.0").PluginManifest;

export type ErrorKind = "invalid-input" | "failed" | "unavailable";

export class PluginError extends Error {
  readonly kind: ErrorKind;
  readonly payload: { tag: ErrorKind; val: string };
  constructor(kind: ErrorKind, message: string);
}
export function invalidInput(message: string): PluginError;
export function failed(message: string): PluginError;
export function unavailable(message: string): PluginError;

export interface Param {
  name: string;
  /** Default `string`. */
  type?: ParamType;
  required?: boolean;
  description?: string;
}

export class Call {
  readonly agentId: string;
  readonly command: string;
  /** Checked by the host against the declared parameters before the plugin runs. */
  readonly params: Record<string, unknown>;
  /** The command's `config` table from the agent manifest. */
  readonly config: Record<string, unknown>;
  readonly rawText: string | undefined;
  readonly format: ResponseFormat;
  readonly origin: Origin;
  param(name: string): unknown;
  optional<T>(name: string, fallback?: T): unknown | T;
  string(name: string): string;
  number(name: string): number;
  boolean(name: string): boolean;
}

export interface Answer {
  response: string;
  format?: ResponseFormat;
  mediaUrl?: string;
}
export function text(response: string): Answer;
export function markdown(response: string): Answer;
export function image(mediaUrl: string, caption?: string): Answer;
export function video(mediaUrl: string, caption?: string): Answer;

export interface Plugin {
  name: string;
  version: string;
  description?: string;
  parameters?: Param[];
  responseFormat?: ResponseFormat;
  capabilities?: Capability[];
  longRunning?: boolean;
  execute(call: Call): string | Answer | Promise<string | Answer>;
}

/** The `command` export of the world: `export const command = definePlugin({...})`. */
export function definePlugin(plugin: Plugin): {
  manifest(): PluginManifest;
  execute(invocation: Invocation): Promise<Output>;
};

export const kv: {
  get(key: string): Uint8Array | undefined;
  getString(key: string): string | undefined;
  getJson<T = unknown>(key: string): T | undefined;
  set(key: string, value: Uint8Array | string): void;
  setJson(key: string, value: unknown): void;
  delete(key: string): void;
};

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string> | Array<[string, string]>;
  body?: string | Uint8Array;
  timeoutMs?: number;
}
export class Response {
  readonly url: string;
  readonly status: number;
  readonly ok: boolean;
  readonly headers: Array<[string, string]>;
  readonly body: Uint8Array;
  header(name: string): string | undefined;
  text(): string;
  json<T = unknown>(): T;
}
export const http: {
  fetch(url: string, options?: RequestOptions): Response;
  get(url: string, options?: RequestOptions): Response;
  /** An object body is sent as JSON. */
  post(url: string, body: unknown, options?: RequestOptions): Response;
};

export const llm: {
  complete(
    messages: string | Array<{ role: "system" | "user" | "assistant"; content: string }>,
    options?: { maxTokens?: number; temperature?: number },
  ): string;
  /** The texts as unit vectors of the host's embedding model (WIT 0.3.0), one per text. */
  embed(texts: string[]): number[][];
  /** The cosine of two vectors from `embed`. */
  cosine(a: number[], b: number[]): number;
};

export const log: {
  debug(message: unknown): void;
  info(message: unknown): void;
  warn(message: unknown): void;
  error(message: unknown): void;
};

export function progress(percent: number, message?: string): void;

/**
 * The units of work this run did (WIT 0.4.0). A command its agent sells by use (`by_use`)
 * charges its payer for the units reported; elsewhere the count charges nobody.
 */
export const meter: {
  /** Adds `units` (a whole number, 0 or more) and returns the count so far. */
  add(units: number): number;
};
