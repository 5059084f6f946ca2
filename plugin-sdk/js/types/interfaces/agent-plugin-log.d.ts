declare module 'agent:plugin/log@0.4.0' {
  export function log(level: Level, message: string): void;
  /**
   * # Variants
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'debug' | 'info' | 'warn' | 'error';
}
