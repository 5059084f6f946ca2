declare module 'agent:plugin/meter@0.4.0' {
  /**
   * Adds `units` to this run's count and returns the count so far (it stops at the
   * largest u64).
   */
  export function add(units: bigint): bigint;
}
