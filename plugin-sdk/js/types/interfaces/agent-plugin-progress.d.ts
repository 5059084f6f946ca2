declare module 'agent:plugin/progress@0.4.0' {
  export function report(percent: number, message: string | undefined): void;
}
