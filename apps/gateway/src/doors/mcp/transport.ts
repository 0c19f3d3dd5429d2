import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type CancelledNotification,
  CancelledNotificationSchema,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  type JSONRPCRequest,
  type JSONRPCResultResponse,
  type MessageExtraInfo,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';

/** What an exchange's requests were answered with, or that the session closed before they were. */
export type ExchangeAnswers =
  | { ok: true; answers: JSONRPCMessage[] }
  | { ok: false; reason: 'closed' | 'id_in_use' };

/**
 * Answers a request without the server's dispatch, or leaves it to the server (undefined). Its
 * answer must come (an error is an answer); once its request is cancelled it is dropped.
 */
export type DirectAnswer = (
  request: JSONRPCRequest,
  extra: MessageExtraInfo,
) => Promise<JSONRPCResultResponse | JSONRPCErrorResponse> | undefined;

/**
 * One session's transport under the SDK's server: Streamable HTTP's JSON-response mode, where each
 * HTTP exchange hands its messages in and waits for the answers to its requests. Nothing is
 * pushed, so a message the server sends of its own accord (a notification, a request to the
 * client) has nowhere to go and is dropped, as the SDK's own transport drops it in this mode.
 *
 * The SDK's WebStandardStreamableHTTPServerTransport does the same through a web `Request` and
 * `Response` per exchange; the door judges the HTTP rules itself (index.ts) and hands over plain
 * messages, which took a loaded tool call from 323 to 251 µs of CPU (docs/performance.md#the-mcp-door).
 * A request its `DirectAnswer` takes (the door's tool calls) is answered without the server.
 */
export class ExchangeTransport implements Transport {
  sessionId: string | undefined;
  onmessage?: Transport['onmessage'];
  onclose?: () => void;
  onerror?: (error: Error) => void;
  /** Each request in flight, by its JSON-RPC id: where its answer goes. */
  readonly #waiting = new Map<RequestId, (answer: JSONRPCMessage | undefined) => void>();
  /** The exchanges in flight, each until every one of its requests is answered. */
  readonly #inFlight = new Set<Promise<unknown>>();
  #closed = false;
  readonly #direct: DirectAnswer | undefined;

  constructor(direct?: DirectAnswer) {
    this.#direct = direct;
  }

  /** Resolves once every exchange now in flight has its answers: a session ends after them. */
  async settled(): Promise<void> {
    await Promise.allSettled(this.#inFlight);
  }

  async start(): Promise<void> {}

  async send(message: JSONRPCMessage): Promise<void> {
    if (!isAnswer(message) || message.id === undefined) return;
    const deliver = this.#waiting.get(message.id);
    this.#waiting.delete(message.id);
    deliver?.(message);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // An exchange still waiting is told the session went, rather than left hanging.
    for (const deliver of this.#waiting.values()) deliver(undefined);
    this.#waiting.clear();
    this.onclose?.();
  }

  /**
   * Hands one exchange's messages to the server and resolves with the answers to its requests, in
   * their order (none if it held only notifications and responses). A request whose id is still
   * being answered is refused whole: its answer could not tell the two apart.
   */
  async exchange(messages: JSONRPCMessage[], extra: MessageExtraInfo): Promise<ExchangeAnswers> {
    if (this.#closed) return { ok: false, reason: 'closed' };
    const requests = messages.filter(isRequest);
    const ids = new Set(requests.map((request) => request.id));
    if (ids.size < requests.length || requests.some((request) => this.#waiting.has(request.id)))
      return { ok: false, reason: 'id_in_use' };
    const answers = requests.map(
      (request) =>
        new Promise<JSONRPCMessage | undefined>((resolve) => this.#waiting.set(request.id, resolve)),
    );
    const all = Promise.all(answers);
    this.#inFlight.add(all);
    for (const message of messages) {
      if (!this.#answeredDirectly(message, extra)) this.onmessage?.(message, extra);
      if (isCancellation(message)) this.#answerCancelled(message.params.requestId);
    }
    const answered = await all.finally(() => this.#inFlight.delete(all));
    if (answered.some((answer) => answer === undefined)) return { ok: false, reason: 'closed' };
    return { ok: true, answers: answered as JSONRPCMessage[] };
  }

  /**
   * A request the direct answer takes, answered by it: the answer goes to the exchange that asked,
   * if that one still waits (a request cancelled meanwhile was answered -32800, and its id may
   * since have been taken by another).
   */
  #answeredDirectly(message: JSONRPCMessage, extra: MessageExtraInfo): boolean {
    if (!isRequest(message)) return false;
    const answer = this.#direct?.(message, extra);
    if (answer === undefined) return false;
    const { id } = message;
    const deliver = this.#waiting.get(id);
    void answer.then((message) => {
      if (this.#waiting.get(id) !== deliver) return;
      this.#waiting.delete(id);
      deliver?.(message);
    });
    return true;
  }

  /**
   * The server drops a request its client cancelled and sends no answer; the HTTP exchange that
   * carried it still needs one, so it gets LSP's "request cancelled" error rather than hanging.
   */
  #answerCancelled(id: RequestId | undefined) {
    if (id === undefined) return;
    const deliver = this.#waiting.get(id);
    this.#waiting.delete(id);
    deliver?.({ jsonrpc: '2.0', id, error: { code: REQUEST_CANCELLED, message: 'Request cancelled' } });
  }
}

// The messages here are JSON-RPC already: the door checked each one coming in against the SDK's
// schema (json-rpc.ts), and the SDK's server builds its own. Which kind each is shows in its keys;
// the SDK's guards would parse the whole message again, a decision and its answers included.
const isRequest = (message: JSONRPCMessage): message is JSONRPCRequest =>
  'method' in message && 'id' in message;
const isAnswer = (message: JSONRPCMessage): message is JSONRPCResultResponse | JSONRPCErrorResponse =>
  'result' in message || 'error' in message;

const isCancelledNotification = (message: unknown): message is CancelledNotification =>
  CancelledNotificationSchema.safeParse(message).success;

/** LSP's code for a cancelled request; JSON-RPC and MCP define none. */
const REQUEST_CANCELLED = -32800;

function isCancellation(message: JSONRPCMessage): message is CancelledNotification & JSONRPCMessage {
  return (
    'method' in message && message.method === 'notifications/cancelled' && isCancelledNotification(message)
  );
}
