import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';

/** How long the copier may take before the gateway goes on with the one listening socket. */
const COPIER_DEADLINE_MS = 10_000;

/**
 * More connections accepted each turn of the event loop. libuv accepts one connection each time
 * its poll finds the listening socket ready (libuv#3696, since 1.45: Node 20 has it), so a gateway
 * whose loop turns every 100 ms under load takes in ten new connections a second while the rest
 * wait in the kernel's queue. Each copy of the listening socket (another file descriptor for the
 * same socket) is polled on its own, so `count` copies take in up to `count` more a turn
 * (docs/performance.md#new-connections-under-load). A connection a copy accepts is handed to
 * `server` as its own: the same HTTP parser, timeouts, hooks and drain.
 *
 * Node 20 duplicates a descriptor only by passing it to another process, so a short-lived child
 * (copy-listener.mjs) sends each copy straight back; Node 22.12's `reusePort` would serve instead.
 * `backlog` is the length of the socket's queue the server listened with. Resolves with the copies, listening; rejects, with none left open, if the child fails.
 */
export async function copyListener(server: Server, count: number, backlog: number): Promise<Server[]> {
  if (count === 0) return [];
  const handOver = (socket: Socket) => server.emit('connection', socket);
  // Its argument is this process's pid: the copier leaves once this process is gone.
  const child = fork(new URL('./copy-listener.mjs', import.meta.url), [String(process.pid)], {
    execArgv: [],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const copies: Server[] = [];
  const deadline = AbortSignal.timeout(COPIER_DEADLINE_MS);
  try {
    const received = new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) =>
        reject(new Error(`the listener's copier exited (${code}) before its copies came`)),
      );
      deadline.addEventListener('abort', () =>
        reject(new Error(`the listener's copier took over ${COPIER_DEADLINE_MS} ms`)),
      );
      child.on('message', (message, handle) => {
        if (message === 'connection') {
          // Accepted by the copier in passing: Node made its socket with net's defaults, so it
          // gets what an HTTP server sets on the sockets it accepts (half-open ones stay as made).
          const socket = handle as Socket;
          socket.setNoDelay(true);
          return handOver(socket);
        }
        if (message !== 'copy') return;
        // A server with HTTP's socket options over the copy's descriptor (`listen` takes the handle
        // over). Each listen sets the one socket's queue length; Node received the copy with its
        // default, so this, the last, sets the gateway's again.
        const copy = createServer({ allowHalfOpen: true, noDelay: true }, handOver);
        copy.listen(handle as Server, backlog);
        copies.push(copy);
        if (copies.length === count) resolve();
      });
    });
    for (let i = 0; i < count; i++) child.send('copy', server);
    await received;
    child.send('done');
    // Whatever the copier accepted meanwhile comes before its disconnect.
    await once(child, 'disconnect', { signal: deadline });
    return copies;
  } catch (error) {
    for (const copy of copies) copy.close();
    child.kill();
    throw error;
  }
}
