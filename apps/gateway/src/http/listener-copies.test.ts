import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { copyListener } from './listener-copies.ts';

/**
 * A client in a process of its own: it opens `count` connections, says so in `ready` once the
 * kernel has completed every one (they then wait in the listening socket's queue), sends a request
 * on each, and prints how many were answered.
 */
const CLIENT = `
const net = require('node:net');
const fs = require('node:fs');
const [port, count, ready] = process.argv.slice(1);
const sockets = [];
let connected = 0, answered = 0, open = Number(count);
for (let i = 0; i < Number(count); i++) {
  const socket = net.connect(Number(port), '127.0.0.1', () => {
    if (++connected === Number(count)) {
      fs.writeFileSync(ready, '');
      for (const s of sockets) s.write('GET / HTTP/1.1\\r\\nHost: test\\r\\nConnection: close\\r\\n\\r\\n');
    }
  });
  socket.once('data', (data) => {
    if (data.toString().startsWith('HTTP/1.1 200')) answered++;
    socket.destroy();
  });
  socket.on('close', () => { if (--open === 0) console.log(answered); });
  sockets.push(socket);
}
`;

const dirs: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function listening(): Promise<Server> {
  const server = createServer((_request, response) => response.end('ok'));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/**
 * `count` connections made while the event loop is blocked, so all of them wait in the kernel's
 * queue; then the loop runs again. Returns how many the server accepted in each turn of its event
 * loop, and how many requests the client saw answered.
 */
async function acceptedPerTurn(
  server: Server,
  count: number,
): Promise<{ perTurn: number[]; answered: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'dg-listener-copies-'));
  dirs.push(dir);
  const ready = join(dir, 'ready');
  const { port } = server.address() as { port: number };
  let turn = 0;
  const perTurn = new Map<number, number>();
  server.on('connection', () => perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1));
  const client = spawn(process.execPath, ['-e', CLIENT, String(port), String(count), ready], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  client.stdout.on('data', (data) => {
    output += data;
  });
  const exited = new Promise((resolve) => client.once('exit', resolve));
  // Hold the event loop until the client says every connection is queued (a generous deadline).
  const wait = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + 60_000;
  while (!existsSync(ready)) {
    if (Date.now() > deadline) throw new Error('the client never connected');
    Atomics.wait(wait, 0, 0, 10);
  }
  // One turn of the event loop: its poll accepts, then `setImmediate` ends the turn.
  let counting = true;
  const tick = () => {
    turn++;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  await exited;
  counting = false;
  return { perTurn: [...perTurn.values()], answered: Number(output.trim()) };
}

/** How a new connection to `port` on loopback fares: 'connected', or its error's code. */
function connectionTo(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code));
  });
}

describe('copyListener', () => {
  it('without copies, a busy loop takes in one queued connection a turn (libuv#3696)', async () => {
    const server = await listening();
    const { perTurn, answered } = await acceptedPerTurn(server, 12);
    expect(answered).toBe(12);
    expect(Math.max(...perTurn)).toBe(1);
  });

  it('with n copies, it takes in n + 1 a turn, and answers each on the server as its own', async () => {
    const server = await listening();
    const copies = await copyListener(server, 7, 511);
    expect(copies).toHaveLength(7);
    expect(copies.every((copy) => copy.listening)).toBe(true);
    try {
      const { perTurn, answered } = await acceptedPerTurn(server, 20);
      expect(answered).toBe(20);
      expect(perTurn.reduce((sum, n) => sum + n, 0)).toBe(20);
      expect(Math.max(...perTurn)).toBe(8);
    } finally {
      for (const copy of copies) copy.close();
    }
  });

  it('stops taking connections once the server and every copy are closed', async () => {
    const server = await listening();
    const { port } = server.address() as { port: number };
    const copies = await copyListener(server, 3, 511);
    for (const copy of copies) copy.close();
    servers.splice(servers.indexOf(server), 1);
    await new Promise((resolve) => server.close(resolve));
    const refused = await new Promise<string | undefined>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(undefined);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code));
    });
    expect(refused).toBe('ECONNREFUSED');
  });

  it("leaves the socket's queue as long as the server listened with", async () => {
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve) =>
      server.listen({ port: 0, host: '127.0.0.1', backlog: 100 }, resolve),
    );
    const copies = await copyListener(server, 3, 100);
    try {
      // A listening socket's Send-Q in `ss` is its queue's length (Node's own default is 511).
      const { port } = server.address() as { port: number };
      const listed = execFileSync('ss', ['-Hltn', `sport = :${port}`])
        .toString()
        .trim()
        .split(/\s+/);
      expect(listed[2]).toBe('100');
    } finally {
      for (const copy of copies) copy.close();
    }
  });

  it('lets the port go when the gateway dies before its copies have all come back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dg-listener-copies-'));
    dirs.push(dir);
    // A gateway in a process of its own: it listens, asks for copies, and dies `delay` ms later,
    // before the copier is told it is done (at once: before the copier has even started).
    const gateway = join(dir, 'gateway.mjs');
    writeFileSync(
      gateway,
      `import { createServer } from 'node:http';
import { copyListener } from ${JSON.stringify(new URL('./listener-copies.ts', import.meta.url).href)};
const server = createServer((_request, response) => response.end('ok'));
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(server.address().port + '\\n');
  void copyListener(server, 16, 511);
  setTimeout(() => process.exit(1), Number(process.argv[2]));
});
`,
    );
    for (const delay of [0, 20]) {
      const child = spawn(
        process.execPath,
        ['--import', import.meta.resolve('tsx'), gateway, String(delay)],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      let out = '';
      child.stdout.on('data', (chunk) => {
        out += chunk;
      });
      await new Promise((resolve) => child.once('exit', resolve));
      const port = Number(out.trim());
      expect(port).toBeGreaterThan(0);
      // Refused once no process holds the socket (the copier leaves within ~100 ms of its parent).
      let answer = await connectionTo(port);
      for (let waited = 0; answer !== 'ECONNREFUSED' && waited < 10_000; waited += 100) {
        await sleep(100);
        answer = await connectionTo(port);
      }
      expect([delay, answer]).toEqual([delay, 'ECONNREFUSED']);
    }
  });

  it('makes no copies when asked for none', async () => {
    const server = await listening();
    expect(await copyListener(server, 0, 511)).toEqual([]);
  });
});
