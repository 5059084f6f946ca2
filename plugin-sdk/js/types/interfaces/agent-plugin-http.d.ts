declare module 'agent:plugin/http@0.4.0' {
  export function fetch(request: Request): Response;
  export interface Request {
    method: string,
    url: string,
    headers: Array<[string, string]>,
    body?: Uint8Array,
    /**
     * Capped by the host's own limit.
     */
    timeoutMs?: number,
  }
  export interface Response {
    status: number,
    headers: Array<[string, string]>,
    body: Uint8Array,
  }
  export type HttpError = HttpErrorDenied | HttpErrorInvalidRequest | HttpErrorTimeout | HttpErrorTooLarge | HttpErrorTransport;
  /**
   * The destination is not granted to this command, or is a refused address.
   */
  export interface HttpErrorDenied {
    tag: 'denied',
    val: string,
  }
  export interface HttpErrorInvalidRequest {
    tag: 'invalid-request',
    val: string,
  }
  export interface HttpErrorTimeout {
    tag: 'timeout',
  }
  /**
   * The response body passed the host's size limit (in bytes).
   */
  export interface HttpErrorTooLarge {
    tag: 'too-large',
    val: bigint,
  }
  export interface HttpErrorTransport {
    tag: 'transport',
    val: string,
  }
}
