declare module 'agent:plugin/llm@0.4.0' {
  export function complete(request: CompletionRequest): string;
  /**
   * The texts as vectors of the host's embedding model (all-MiniLM-L6-v2 by default: 384
   * numbers each), one per text, in order. They are unit vectors: the dot product of two
   * is their cosine, near 1 for texts of like meaning. At most 64 texts, 100,000
   * characters in all, a call; a text past the model's 256 tokens is read to there.
   * An error when the host has no embedding model, or the command is not granted `llm`.
   */
  export function embed(texts: Array<string>): Array<Float32Array>;
  /**
   * # Variants
   * 
   * ## `"system"`
   * 
   * ## `"user"`
   * 
   * ## `"assistant"`
   */
  export type Role = 'system' | 'user' | 'assistant';
  export interface Message {
    role: Role,
    content: string,
  }
  export interface CompletionRequest {
    messages: Array<Message>,
    maxTokens?: number,
    temperature?: number,
  }
}
