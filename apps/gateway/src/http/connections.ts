import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { Server, type Socket } from 'node:net';
import { failure, type GatewayFailure } from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { DOORS, type DoorName } from '../doors/door.ts';
import { lingeringClose } from './lingering-close.ts';

/**
 * `req_` and 32 hex digits: the time in milliseconds (12 digits), then 20 of a random UUID (72
 * random bits). Ids that grow with time are appended to the usage records' request-id index
 * instead of landing at random pages of it, which, as that index outgrows the cache, costs.
 */
export function newRequestId(): string {
  // A UUID's last 20 hex digits, its dashes skipped by slicing (replaceAll costs more).
  const uuid = randomUUID();
  return `req_${Date.now().toString(16).padStart(12, '0')}${uuid.slice(14, 18)}${uuid.slice(19, 23)}${uuid.slice(24)}`;
}

/** How long a drain waits for idle keep-alive connections to bring one more request. */
const IDLE_GRACE_MS = 1_000;
/**
 * A drain keeps listening (answering 503) until no new connection has come for this long: closing
 * a listening socket resets the connections still waiting in the kernel's accept queue, whose
 * clients may already have sent a request.
 */
const QUIET_MS = 250;
export interface ConnectionOptions {
  /** docs/operating.md: headers and body must have arrived within this (408 otherwise). */
  requestTimeoutMs: number;
  /** docs/operating.md: the longest a drain waits before closing every connection. */
  shutdownTimeoutMs: number;
  logger: Logger;
  /** Told of every answer written below the router (408, 431), for metrics. */
  onAnswered(status: number, code: number): void;
  /**
   * Told of a request whose connection closed before its answer was written (its client went
   * away, even after sending all of its body, which Fastify's onRequestAbort does not report).
   */
  onAbandoned(request: FastifyRequest): void;
  /** The door a routed request belongs to, whose format an answer below the router takes. */
  doorOf(request: FastifyRequest): DoorName;
}

/**
 * What the gateway does at the level of connections, below Fastify's router: timeouts, requests
 * that are not even HTTP, and the drain. Node's own answers (its 408, its 431, its reset of idle
 * keep-alive sockets at close) become the gateway's: the envelope of docs/http-api.md#errors with a request id,
 * and a drain that answers every request fully sent on an open connection.
 */
export function createConnections(options: ConnectionOptions) {
  let app: FastifyInstance | undefined;
  const open = new Set<Socket>();
  /** Copies of the listening socket (listener-copies.ts): they stop listening with it. */
  const copies: Server[] = [];
  let lastConnectionAt = 0;
  /** The drain is closing every connection itself: what they carried is its to account for. */
  let forcing = false;
  /** The request a socket is receiving or being answered for, so a timeout can name it. */
  const receiving = new WeakMap<Socket, { request: FastifyRequest; reply: FastifyReply }>();

  /** A failure written straight to the socket, which is then closed (the request never reached a route). */
  function answerRaw(socket: Socket, gatewayFailure: GatewayFailure, request: FastifyRequest | undefined) {
    const requestId = request?.id ?? newRequestId();
    const door = request === undefined ? 'rest' : options.doorOf(request);
    const { body, headers } = DOORS[door].failure(gatewayFailure, requestId);
    const head = [
      `HTTP/1.1 ${gatewayFailure.status} ${STATUS_CODES[gatewayFailure.status]}`,
      'content-type: application/json; charset=utf-8',
      `content-length: ${Buffer.byteLength(body)}`,
      'connection: close',
      `x-request-id: ${requestId}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    ].join('\r\n');
    socket.write(`${head}\r\n\r\n${body}`);
    lingeringClose(socket);
    if (request) request.outcome = { code: gatewayFailure.code, belowRouter: true };
    options.onAnswered(gatewayFailure.status, gatewayFailure.code);
    options.logger.info(
      {
        requestId,
        method: request?.method,
        path: request?.url.split('?', 1)[0],
        status: gatewayFailure.status,
        code: gatewayFailure.code,
      },
      'request',
    );
  }

  function closeCopies() {
    for (const copy of copies.splice(0)) copy.close();
  }

  return {
    /** Fastify's `clientErrorHandler`: Node reports a connection-level problem with a request. */
    clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket) {
      if (error.code === 'ECONNRESET' || socket.destroyed) return;
      const current = receiving.get(socket);
      // Once an answer has begun, nothing more can be said on this connection.
      if (current?.reply.raw.headersSent || !socket.writable) return void socket.destroy();
      const request = current?.request;
      switch (error.code) {
        case 'ERR_HTTP_REQUEST_TIMEOUT':
          return answerRaw(
            socket,
            failure(
              'request_timeout',
              `the request's headers and body did not all arrive within ${options.requestTimeoutMs} ms`,
            ),
            request,
          );
        case 'HPE_HEADER_OVERFLOW':
          return answerRaw(
            socket,
            failure('headers_too_large', "the request's headers exceed the server's limit of 16 KiB"),
            undefined,
          );
        default:
          // Bytes that are not an HTTP request at all: there is no one to answer (docs/http-api.md#errors).
          socket.destroy();
      }
    },

    /** Node's own timers for the REQUEST_TIMEOUT_MS of docs/operating.md, checked often enough to be punctual. */
    serverOptions() {
      const timeout = options.requestTimeoutMs;
      return {
        requestTimeout: timeout,
        http: {
          headersTimeout: timeout,
          requestTimeout: timeout,
          // Node would answer a missing Host itself, with a bare 400: the gateway answers it (server.ts).
          requireHostHeader: false,
          connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(timeout / 4))),
        },
      };
    },

    /** Copies of the server's listening socket, whose connections are the server's (listener-copies.ts). */
    adoptListenerCopies(more: Server[]) {
      copies.push(...more);
    },

    attach(fastify: FastifyInstance) {
      app = fastify;
      fastify.addHook('preClose', (done) => {
        closeCopies();
        done();
      });
      // An `Expect` other than 100-continue: Node would answer a bare 417. The expectation is
      // ignored instead (RFC 9110 allows it) and the request answered as any other.
      fastify.server.on('checkExpectation', (req, res) => fastify.server.emit('request', req, res));
      fastify.server.on('connection', (socket: Socket) => {
        lastConnectionAt = Date.now();
        open.add(socket);
        socket.once('close', () => {
          open.delete(socket);
          // A request still being answered when its connection closed; not one the drain cut.
          const current = receiving.get(socket);
          if (current !== undefined && !current.reply.raw.writableFinished && !forcing)
            options.onAbandoned(current.request);
        });
      });
      fastify.addHook('onRequest', (request, reply, done) => {
        receiving.set(request.raw.socket as Socket, { request, reply });
        done();
      });
      fastify.addHook('onResponse', (request, _reply, done) => {
        const socket = request.raw.socket as Socket;
        if (receiving.get(socket)?.request === request) receiving.delete(socket);
        done();
      });
    },

    /**
     * Let open connections finish, then stop: each request in flight is answered, and each request
     * that still arrives gets 503 with `Connection: close` (the server's hooks see to that). The
     * listener closes once new connections stop coming; idle connections are closed after a short
     * grace; whatever is still open at `shutdownTimeoutMs` is closed, and `onForced` releases what
     * it held. Resolves `true` when the drain had to force connections closed.
     */
    async drain(onForced: () => Promise<unknown>): Promise<boolean> {
      const server = (app as FastifyInstance).server;
      const deadline = Date.now() + options.shutdownTimeoutMs;
      await until(() => Date.now() - lastConnectionAt >= QUIET_MS, options.shutdownTimeoutMs / 2);
      // net's close, not http's: http's also closes idle keep-alive connections at once, and a
      // request already on its way over one of them would meet a reset.
      if (server.listening) Server.prototype.close.call(server);
      closeCopies();
      await until(() => open.size === 0, Math.min(IDLE_GRACE_MS, options.shutdownTimeoutMs));
      server.closeIdleConnections();
      // Node's leaves out connections that never brought a byte (a preconnect, a balancer's TCP
      // check), which would hold the drain to its timeout; nothing is on its way over them.
      for (const socket of open) if (socket.bytesRead === 0) socket.destroy();
      await until(() => open.size === 0, Math.max(0, deadline - Date.now()));
      if (open.size === 0) return false;
      options.logger.warn(
        { connections: open.size, shutdownTimeoutMs: options.shutdownTimeoutMs },
        'shutdown timeout: closing every connection and releasing what they held',
      );
      forcing = true;
      server.closeAllConnections();
      for (const socket of open) socket.destroy();
      await onForced();
      return true;
    },
  };
}

/**
 * Waits until `done()` or `timeoutMs`, judging every 20 ms, each time just after the event loop has
 * polled for I/O. A timer that fires after the process was paused (a busy machine can stop it for
 * longer than these waits) runs before the loop reads what arrived meanwhile; judged there, the
 * drain would close the listener on connections waiting to be accepted, or an idle connection on
 * the request it has just brought, and both would be reset. `setImmediate` runs after that poll.
 */
async function until(done: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!done() && Date.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    await new Promise((resolve) => setImmediate(resolve));
  }
}
