declare module 'agent:plugin/types@0.4.0' {
  /**
   * The kinds of value a command parameter takes (`file` is declared but unsupported).
   * # Variants
   * 
   * ## `"string"`
   * 
   * ## `"number"`
   * 
   * ## `"boolean"`
   * 
   * ## `"array"`
   * 
   * ## `"object"`
   * 
   * ## `"file"`
   */
  export type ParamType = 'string' | 'number' | 'boolean' | 'array' | 'object' | 'file';
  export interface ParamSpec {
    name: string,
    kind: ParamType,
    required: boolean,
    description: string,
  }
  /**
   * # Variants
   * 
   * ## `"text"`
   * 
   * ## `"markdown"`
   * 
   * ## `"image"`
   * 
   * ## `"video"`
   */
  export type ResponseFormat = 'text' | 'markdown' | 'image' | 'video';
  /**
   * Who asked for this run.
   * # Variants
   * 
   * ## `"api"`
   * 
   * ## `"chat-tool"`
   * 
   * ## `"x402"`
   * 
   * ## `"chatapp"`
   * 
   * ## `"social"`
   */
  export type Origin = 'api' | 'chat-tool' | 'x402' | 'chatapp' | 'social';
  /**
   * What a plugin may ask the host for, declared in its manifest. `log` is always there.
   * # Variants
   * 
   * ## `"http"`
   * 
   * ## `"kv"`
   * 
   * ## `"llm"`
   * 
   * ## `"progress"`
   * 
   * ## `"agent-info"`
   */
  export type Capability = 'http' | 'kv' | 'llm' | 'progress' | 'agent-info';
  /**
   * What a component is and needs, returned by `command.manifest`.
   */
  export interface PluginManifest {
    /**
     * Short machine name, e.g. `weather`.
     */
    name: string,
    /**
     * The plugin's own version (semver).
     */
    version: string,
    description: string,
    /**
     * The parameters the plugin understands; an agent manifest may narrow them.
     */
    parameters: Array<ParamSpec>,
    responseFormat: ResponseFormat,
    capabilities: Array<Capability>,
    /**
     * True when a run may take longer than a request should wait.
     */
    longRunning: boolean,
  }
  export interface Invocation {
    agentId: string,
    /**
     * The command's name as the agent offers it (without `/`).
     */
    command: string,
    /**
     * A JSON object, already checked by the host against the parameter specs.
     */
    parameters: string,
    /**
     * The text the caller typed, when the command came as `/name ...`.
     */
    rawText?: string,
    /**
     * The command's `config` table from the agent manifest, as a JSON object.
     */
    config: string,
    /**
     * The format the agent manifest declares for this command.
     */
    responseFormat: ResponseFormat,
    origin: Origin,
  }
  export interface Output {
    response: string,
    format: ResponseFormat,
    /**
     * Set for `image` and `video` results.
     */
    mediaUrl?: string,
  }
  export type CommandError = CommandErrorInvalidInput | CommandErrorFailed | CommandErrorUnavailable;
  /**
   * The caller's input is wrong; the message says how.
   */
  export interface CommandErrorInvalidInput {
    tag: 'invalid-input',
    val: string,
  }
  /**
   * The command ran and failed.
   */
  export interface CommandErrorFailed {
    tag: 'failed',
    val: string,
  }
  /**
   * Something it depends on is down or not configured.
   */
  export interface CommandErrorUnavailable {
    tag: 'unavailable',
    val: string,
  }
}
