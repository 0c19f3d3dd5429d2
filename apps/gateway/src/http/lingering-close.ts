import type { Socket } from 'node:net';

/**
 * How long a connection answered before its request's body was all read (a 413 cut midway, a 408)
 * goes on reading, and dropping, what its client still sends. Closing at once would reset the
 * connection, and a reset loses the answer on a client that is still writing (Apache's "lingering
 * close" does the same, for the same reason).
 */
export const LINGER_MS = 5_000;

/** Sends FIN after what was written, drops what still arrives, and closes when the client does or after `LINGER_MS`. */
export function lingeringClose(socket: Socket): void {
  socket.end();
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/**
 * For an answer given before the request's body was all read: Node closes a `Connection: close`
 * answer's socket with `destroySoon`, which would reset it; this socket closes lingering instead.
 */
export function closeLingering(socket: Socket): void {
  socket.destroySoon = () => lingeringClose(socket);
}
