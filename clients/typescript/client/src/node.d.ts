// The Node.js (>= 20) globals this package uses, declared by hand: Debian
// ships no @types/node, and these few signatures are all the code needs. They
// follow the WHATWG definitions Node implements (fetch, streams, abort,
// encoding); only the members used here are declared.

interface AbortSignal {
  readonly aborted: boolean
  readonly reason: unknown
  throwIfAborted(): void
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void
  removeEventListener(type: 'abort', listener: () => void): void
}
declare var AbortSignal: {
  prototype: AbortSignal
  abort(reason?: unknown): AbortSignal
  timeout(ms: number): AbortSignal
}

interface AbortController {
  readonly signal: AbortSignal
  abort(reason?: unknown): void
}
declare var AbortController: {
  prototype: AbortController
  new (): AbortController
}

interface ReadableStreamReadResult<T> {
  done: boolean
  value?: T
}
interface ReadableStreamDefaultReader<T> {
  read(): Promise<ReadableStreamReadResult<T>>
  cancel(reason?: unknown): Promise<void>
  releaseLock(): void
}
interface ReadableStream<T> {
  getReader(): ReadableStreamDefaultReader<T>
  cancel(reason?: unknown): Promise<void>
}

interface Headers {
  get(name: string): string | null
  forEach(callback: (value: string, key: string) => void): void
}

interface RequestInit {
  method?: string
  headers?: Record<string, string>
  body?: string | Uint8Array
  signal?: AbortSignal
}

interface Response {
  readonly ok: boolean
  readonly status: number
  readonly statusText: string
  readonly headers: Headers
  readonly body: ReadableStream<Uint8Array> | null
  text(): Promise<string>
  arrayBuffer(): Promise<ArrayBuffer>
}

declare function fetch(input: string, init?: RequestInit): Promise<Response>

interface TextDecodeOptions {
  stream?: boolean
}
interface TextDecoder {
  decode(input?: Uint8Array, options?: TextDecodeOptions): string
}
declare var TextDecoder: {
  prototype: TextDecoder
  new (label?: string, options?: { fatal?: boolean }): TextDecoder
}
interface TextEncoder {
  encode(input?: string): Uint8Array
}
declare var TextEncoder: {
  prototype: TextEncoder
  new (): TextEncoder
}

declare function atob(data: string): string
declare function btoa(data: string): string

interface Crypto {
  randomUUID(): string
}
declare var crypto: Crypto

// Node's timers return objects (Timeout); only their opaque identity and
// unref (so that a keeper alone does not keep the process alive) are used.
interface NodeTimer {
  unref(): NodeTimer
  ref(): NodeTimer
}
declare function setTimeout(callback: () => void, ms?: number): NodeTimer
declare function clearTimeout(timer: NodeTimer | undefined): void
