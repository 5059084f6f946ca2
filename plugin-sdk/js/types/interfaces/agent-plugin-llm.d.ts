declare module 'agent:plugin/llm@0.2.0' {
  export function complete(request: CompletionRequest): string;
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
