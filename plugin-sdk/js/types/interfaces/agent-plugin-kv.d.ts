declare module 'agent:plugin/kv@0.4.0' {
  export function get(key: string): Uint8Array | undefined;
  export function set(key: string, value: Uint8Array): void;
  export { _delete as delete };
  function _delete(key: string): void;
}
