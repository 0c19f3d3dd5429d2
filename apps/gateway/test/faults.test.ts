import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { type GatewayProcess, killHard, listeningAddress, startGatewayProcess } from './gateway-process.ts';
import { ADMIN_TOKEN, bearer, get, post, sampleRequest, sleep } from './harness.ts';
import { json, nativeAnswer, startStandIn } from './stand-in-upstream.ts';

// Faults an operator meets, provoked for real: subprocess gateways, SIGKILL and SIGTERM, raw
// sockets that stall or trickle, a load of keep-alive connections during a drain.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

function workdir() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-faults-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function gateway(cwd: string, env: Record<string, string>) {
  const running = startGatewayProcess(cwd, {
    ADMIN_TOKEN,
    DATABASE_URL: `file:${join(cwd, 'gateway.db')}`,
    ...env,
  });
  cleanups.push(async () => {
    if (running.child.exitCode === null) await killHard(running);
  });
  return { running, url: await listeningAddress(running) };
}

async function createKey(url: string, credits: number | null) {
  const created = await post(url, '/admin/keys', { name: 'faults', credits }, bearer(ADMIN_TOKEN));
  if (created.status !== 201) throw new Error(created.text);
  return created.body.data as { id: string; key: string };
}

/** A raw TCP connection to the gateway, to send exactly (and only) what a test wants. */
async function rawSocket(url: string) {
  const connection = await dial(url);
  if (!connection.connected) throw new Error(`could not connect: ${connection.error()}`);
  return connection;
}

/**
 * A raw TCP connection that may be refused: `connected` says whether the kernel accepted it (as it
 * does into the listener's queue while the gateway itself is paused), `error` how it ended if not cleanly.
 */
async function dial(url: string) {
  const { hostname, port } = new URL(url);
  const socket: Socket = connect(Number(port), hostname);
  cleanups.push(() => void socket.destroy());
  let received = '';
  let error: string | undefined;
  let ended = false;
  socket.on('data', (chunk) => {
    received += chunk.toString('utf8');
  });
  socket.on('end', () => {
    ended = true;
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const connected = await new Promise<boolean>((resolve) => {
    socket.once('connect', () => resolve(true));
    // Every error kept (never thrown): a refusal before `connect`, a reset after it.
    socket.on('error', (failed: NodeJS.ErrnoException) => {
      error = failed.code ?? failed.message;
      resolve(false);
    });
  });
  return {
    socket,
    connected,
    closed,
    received: () => received,
    /** The gateway closed its side (FIN). */
    ended: () => ended,
    /** The reset or refusal that ended the connection, if any. */
    error: () => error,
    clear() {
      received = '';
    },
  };
}

function restRequest(key: string): string {
  const body = JSON.stringify(sampleRequest());
  return `POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** Whether `text` holds a whole HTTP answer (its headers and as many bytes of body as they announce). */
function wholeAnswer(text: string): boolean {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return false;
  const length = /content-length: (\d+)/i.exec(text.slice(0, end));
  return length !== null && Buffer.byteLength(text.slice(end + 4)) >= Number(length[1]);
}

async function waitFor(done: () => boolean, what: string) {
  for (let waited = 0; !done(); waited += 20) {
    if (waited > 30_000) throw new Error(`waited 30 s for ${what}`);
    await sleep(20);
  }
}

/** The JSON body of a raw HTTP response, and its status and headers. */
function parseRaw(text: string) {
  const [head = '', body = ''] = text.split('\r\n\r\n');
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers = Object.fromEntries(
    headerLines.map((line) => [
      line.slice(0, line.indexOf(':')).toLowerCase(),
      line.slice(line.indexOf(':') + 1).trim(),
    ]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: body ? JSON.parse(body) : undefined };
}

describe('after kill -9 with requests in flight', () => {
  it('a stale reservation counts nowhere: every request answered afterwards pays its full cost', async () => {
    const cwd = workdir();
    const standIn = await startStandIn(() => {}); // hangs: the requests stay in flight
    cleanups.push(standIn.close);
    const first = await gateway(cwd, {
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: standIn.url,
      UPSTREAM_TIMEOUT_MS: '60000',
    });
    const { id, key } = await createKey(first.url, 10);
    // Eight requests reserve ~1.2 credits each (body bytes + 256 tokens per question), then hang.
    for (let i = 0; i < 8; i++)
      void post(first.url, '/v1/systemone', sampleRequest(), bearer(key)).catch(() => {});
    while (standIn.seen.length < 8) await sleep(20);
    await killHard(first.running);
    // The dead holds were made over a stretch of the first gateway's time, longer on a busy machine:
    // each goes stale that long after the oldest. Read from the file it left (epoch ms).
    const left = new Database(join(cwd, 'gateway.db'));
    const made = left.prepare('SELECT created_at FROM reservations').pluck().all() as number[];
    left.close();
    expect(made).toHaveLength(8);
    const spreadMs = Math.max(...made) - Math.min(...made);

    standIn.setHandler((req, res) => json(res, 200, nativeAnswer(req)));
    const second = await gateway(cwd, {
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: standIn.url,
      // The route deadline is twice this: reservations older than 2 × 4 s + 1 s are stale. Long
      // enough that the request below surely comes while they are live, however slow the boot.
      UPSTREAM_TIMEOUT_MS: '4000',
    });
    // While the dead reservations are live they hold almost everything (and the store's periodic
    // sweep runs now, finding nothing stale yet).
    const early = await post(second.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect(early.body.code).toBe(40200);
    // Then, once they are stale, requests pass: waited for, not timed.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const probe = await post(second.url, '/v1/systemone', sampleRequest(), bearer(key));
      if (probe.status === 200) {
        expect(probe.body.data.creditsUsed).toBe(0.412);
        // This probe's reserve came once the oldest hold was stale: the newest is by `spreadMs` later.
        const allStale = Date.now() + spreadMs + 1;
        while (Date.now() < allStale) await sleep(Math.min(250, allStale - Date.now()));
        break;
      }
      expect(probe.body.code).toBe(40200);
      if (Date.now() > deadline) throw new Error('the dead reservations never went stale');
      await sleep(250);
    }
    for (let i = 0; i < 5; i++) {
      const answered = await post(second.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(answered.status).toBe(200);
      expect(answered.body.data.creditsUsed).toBe(0.412);
    }
    const shown = await get(second.url, `/admin/keys/${id}`, bearer(ADMIN_TOKEN));
    // The probe that passed and the five after it, each at full cost.
    expect(shown.body.data.credits).toBeCloseTo(10 - 6 * 0.412, 9);
    // Two gateways started and at least 9 s of waiting for the holds to go stale: the waits above
    // have deadlines of their own, so the test's is generous, as for the other long ones here.
  }, 60_000);
});

describe('SIGTERM with clients that never finish', () => {
  it('exits 0 within SHUTDOWN_TIMEOUT_MS, closing every connection and releasing what was reserved', async () => {
    const cwd = workdir();
    const standIn = await startStandIn(() => {}); // an evaluation in flight that never gets its answer
    cleanups.push(standIn.close);
    const { running, url } = await gateway(cwd, {
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: standIn.url,
      UPSTREAM_TIMEOUT_MS: '60000',
      REQUEST_TIMEOUT_MS: '120000', // the request timeout must not be what saves the shutdown
      SHUTDOWN_TIMEOUT_MS: '1500',
    });
    const { id, key } = await createKey(url, 10);
    const inFlight = post(url, '/v1/systemone', sampleRequest(), bearer(key)).catch((e: Error) => e);
    while (standIn.seen.length < 1) await sleep(20);
    // One connection stalled mid-headers, one body arriving at 10 bytes a second.
    const stalled = await rawSocket(url);
    stalled.socket.write('POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Ty');
    const trickle = await rawSocket(url);
    trickle.socket.write(
      `POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 30000\r\n\r\n`,
    );
    const timer = setInterval(() => trickle.socket.write('0123456789'), 1000);
    cleanups.push(() => clearInterval(timer));
    await sleep(200);

    const started = performance.now();
    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(1_400);
    // Far below what the trickling client would take (minutes), however busy the machine.
    expect(took).toBeLessThan(15_000);
    await Promise.all([stalled.closed, trickle.closed]);
    expect(await inFlight).toBeInstanceOf(Error); // its connection was closed, unanswered

    // Nothing stays reserved; the released request has its usage record, and nothing was charged.
    const db = new Database(join(cwd, 'gateway.db'), { readonly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) AS n FROM reservations').get()).toEqual({ n: 0 });
      expect(db.prepare('SELECT status, credits_micro FROM usage_records WHERE key_id = ?').all(id)).toEqual([
        { status: 503, credits_micro: 0 },
      ]);
      expect(db.prepare('SELECT credits_micro FROM api_keys WHERE id = ?').get(id)).toEqual({
        credits_micro: 10_000_000,
      });
    } finally {
      db.close();
    }
    expect(running.logs().some((l) => String(l.msg).startsWith('shutdown timeout'))).toBe(true);
  });

  it("closes a connection that never sent a byte (a preconnect, a balancer's TCP check) after the idle grace, not at SHUTDOWN_TIMEOUT_MS", async () => {
    const { running, url } = await gateway(workdir(), { SHUTDOWN_TIMEOUT_MS: '20000' });
    const silent = await rawSocket(url);
    running.child.kill('SIGTERM');
    await silent.closed;
    expect(silent.received()).toBe('');
    expect(await running.exited).toBe(0);
    // The drain needed no force: with the connection held to the timeout, it would have.
    expect(running.logs().some((l) => String(l.msg).startsWith('shutdown timeout'))).toBe(false);
  }, 60_000);
});

describe('REQUEST_TIMEOUT_MS', () => {
  it('answers 408 / 40800 in the envelope to a body that does not arrive in time, closes the socket, charges nothing', async () => {
    const cwd = workdir();
    const { running, url } = await gateway(cwd, { REQUEST_TIMEOUT_MS: '1000' });
    const { id, key } = await createKey(url, 10);
    const slow = await rawSocket(url);
    slow.socket.write(
      `POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 30000\r\n\r\n{"model":`,
    );
    const timer = setInterval(() => slow.socket.writable && slow.socket.write('          '), 100);
    cleanups.push(() => clearInterval(timer));
    const started = performance.now();
    await slow.closed;
    const took = performance.now() - started;
    // Never before REQUEST_TIMEOUT_MS (1 s); long before the 30 s default, however busy the machine.
    expect(took).toBeGreaterThan(800);
    expect(took).toBeLessThan(15_000);
    const answer = parseRaw(slow.received());
    expect(answer.status).toBe(408);
    expect(answer.body).toMatchObject({ code: 40800, data: null, error: { type: 'request_timeout' } });
    expect(answer.body.requestId).toMatch(/^req_/);
    expect(answer.headers['x-request-id']).toBe(answer.body.requestId);
    const shown = await get(url, `/admin/keys/${id}`, bearer(ADMIN_TOKEN));
    expect(shown.body.data.credits).toBe(10);
    // The abandoned request is over: no error logged, nothing left counted as in flight (but
    // the scrape itself), and one request line with its code.
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/dg_http_requests_in_flight 1\b/);
    expect(running.logs().filter((l) => (l.level as number) >= 50)).toEqual([]);
    expect(running.logs().filter((l) => l.msg === 'request' && l.code === 40800)).toHaveLength(1);
  });

  it('answers 408 and closes a connection stalled in the middle of its headers', async () => {
    const cwd = workdir();
    const { url } = await gateway(cwd, { REQUEST_TIMEOUT_MS: '800' });
    const stalled = await rawSocket(url);
    stalled.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Half: ');
    await stalled.closed;
    const answer = parseRaw(stalled.received());
    expect(answer.status).toBe(408);
    expect(answer.body).toMatchObject({ code: 40800, error: { type: 'request_timeout' } });
    expect(answer.body.requestId).toMatch(/^req_/);
  });
});

describe('answers below the router', () => {
  it('answers 431 / 43100 with a request id to headers over the limit', async () => {
    const cwd = workdir();
    const { url } = await gateway(cwd, {});
    const big = await rawSocket(url);
    big.socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`);
    await big.closed;
    const answer = parseRaw(big.received());
    expect(answer.status).toBe(431);
    expect(answer.body).toMatchObject({ code: 43100, data: null, error: { type: 'headers_too_large' } });
    expect(answer.headers['x-request-id']).toBe(answer.body.requestId);
  });

  it('forgets a request whose client leaves in the middle of its body: not in flight, no error', async () => {
    const cwd = workdir();
    const { running, url } = await gateway(cwd, {});
    const leaving = await rawSocket(url);
    leaving.socket.write(
      'POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"mo',
    );
    await sleep(100);
    leaving.socket.destroy();
    // Waited for, not timed: the gateway notices the client left, then counts it out.
    const deadline = Date.now() + 15_000;
    while (!running.logs().some((l) => l.msg === 'request aborted by the client')) {
      if (Date.now() > deadline) throw new Error('the abort was never logged');
      await sleep(50);
    }
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/dg_http_requests_in_flight 1\b/); // the scrape itself
    expect(running.logs().filter((l) => (l.level as number) >= 50)).toEqual([]);
    expect(running.logs().some((l) => l.msg === 'request aborted by the client')).toBe(true);
  });

  it('forgets a request whose client leaves while its answer is awaited: not in flight, logged once, still charged', async () => {
    const cwd = workdir();
    let answer: (() => void) | undefined;
    const standIn = await startStandIn(async (req, res) => {
      await new Promise<void>((resolve) => {
        answer = resolve;
      });
      json(res, 200, nativeAnswer(req));
    });
    cleanups.push(standIn.close);
    const { running, url } = await gateway(cwd, { UPSTREAM: 'systemone', UPSTREAM_BASE_URL: standIn.url });
    const { id, key } = await createKey(url, 10);
    const leaving = await rawSocket(url);
    leaving.socket.write(restRequest(key));
    // Waited for, not timed: the whole body is in and the upstream asked; then the client leaves.
    await waitFor(() => answer !== undefined, 'the upstream to be asked');
    leaving.socket.destroy();
    const aborted = () => running.logs().filter((l) => l.msg === 'request aborted by the client');
    await waitFor(() => aborted().length > 0, 'the abort to be logged');
    expect(aborted()[0]).toMatchObject({ method: 'POST', path: '/v1/systemone' });
    let metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/dg_http_requests_in_flight 1\b/); // the scrape itself
    // The upstream answers after all: the decision is charged and recorded, nothing counted twice.
    answer?.();
    let credits = 10;
    const charged = Date.now() + 15_000;
    while (credits === 10) {
      if (Date.now() > charged) throw new Error('the answered decision was never charged');
      await sleep(50);
      credits = (await get(url, `/admin/keys/${id}`, bearer(ADMIN_TOKEN))).body.data.credits;
    }
    expect(credits).toBeCloseTo(10 - 0.412, 9);
    metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/dg_http_requests_in_flight 1\b/);
    expect(aborted()).toHaveLength(1);
    expect(running.logs().filter((l) => (l.level as number) >= 50)).toEqual([]);
  });

  it('closes a connection whose bytes are not HTTP at all', async () => {
    const cwd = workdir();
    const { url } = await gateway(cwd, {});
    const garbage = await rawSocket(url);
    garbage.socket.write('\u0016\u0003\u0001 this is not HTTP\r\n\r\n');
    await garbage.closed;
    expect(garbage.received()).toBe('');
  });

  it.each(['foo', ';;;', '""'])(
    'checks a Content-Type that does not parse (%s) after authentication, leaving a usage record',
    async (contentType) => {
      const cwd = workdir();
      const { url } = await gateway(cwd, {});
      const { id, key } = await createKey(url, 10);
      const send = (headers: Record<string, string>) =>
        fetch(`${url}/v1/systemone`, {
          method: 'POST',
          headers: { 'content-type': contentType, ...headers },
          body: JSON.stringify(sampleRequest()),
        }).then(async (r) => ({ status: r.status, body: await r.json() }));
      expect(await send({})).toMatchObject({ status: 401, body: { code: 40100 } });
      expect(await send(bearer(key))).toMatchObject({ status: 415, body: { code: 41500 } });
      const usage = await get(url, `/admin/keys/${id}/usage`, bearer(ADMIN_TOKEN));
      expect(usage.body.data.recent).toMatchObject([{ status: 415, creditsUsed: 0 }]);
    },
  );
});

/**
 * The system calls in which a Node process on Linux waits for events (libuv's epoll), by
 * architecture: x64's `epoll_wait` and `epoll_pwait`, arm64's `epoll_pwait`.
 */
const WAITS_FOR_EVENTS: Partial<Record<NodeJS.Architecture, number[]>> = { x64: [232, 281], arm64: [22] };

/**
 * Stops the process and says where it stopped. `waiting`: its main thread was asleep waiting for
 * events (an epoll wait with a timeout), so on resuming it reads whatever arrived meanwhile before
 * it acts. `elsewhere`: it was running, between reading its sockets and acting on what it read
 * (a busy machine preempts a process anywhere); on resuming it may act first, on a connection
 * whose request it has not read. `unknown`: this system does not say (no /proc, another machine).
 */
async function pause(running: GatewayProcess): Promise<'waiting' | 'elsewhere' | 'unknown'> {
  const { pid } = running.child;
  running.child.kill('SIGSTOP');
  const read = (file: string) => {
    try {
      return readFileSync(`/proc/${pid}/${file}`, 'utf8');
    } catch {
      return undefined;
    }
  };
  const waits = WAITS_FOR_EVENTS[process.arch];
  if (waits === undefined || read('stat') === undefined) {
    await sleep(20); // a turn or two of its loop, for the stop to take hold
    return 'unknown';
  }
  // The stop takes hold within a moment: its state reads `T` (stopped) from then on.
  const state = () => read('stat')?.replace(/^.*\) /s, '') ?? '';
  await waitFor(() => state().startsWith('T'), 'the stop to take hold');
  const [call, , , , timeout] = (read('syscall') ?? '').trim().split(' ');
  if (call === undefined || call === '') return 'unknown';
  return waits.includes(Number(call)) && Number(timeout) !== 0 ? 'waiting' : 'elsewhere';
}

const drainBegun = (running: GatewayProcess) =>
  waitFor(() => running.logs().some((l) => String(l.msg).startsWith('draining')), 'the drain to begin');

/**
 * Runs `round` on a fresh draining-ready gateway until a round finds its premise held (it returns
 * true once it has checked what it came for), at most 5 times; a round whose premise failed
 * returns false, and its gateway is resumed and must still exit 0.
 */
async function roundsUntil(
  premise: string,
  round: (gw: { running: GatewayProcess; url: string; key: string }) => Promise<boolean>,
) {
  for (let tries = 0; tries < 5; tries++) {
    const { running, url } = await gateway(workdir(), {
      RATE_LIMIT_PER_MINUTE: '0',
      SHUTDOWN_TIMEOUT_MS: '10000',
    });
    const { key } = await createKey(url, null);
    if (await round({ running, url, key })) return;
    running.child.kill('SIGCONT');
    expect(await running.exited).toBe(0);
  }
  throw new Error(`in 5 rounds, never ${premise}`);
}

// A busy machine can pause a process for longer than the drain's own waits (its quiet period
// before the listener closes, its grace for idle connections). SIGSTOP and SIGCONT pause the
// gateway for real: whatever clients sent meanwhile must still be answered when it resumes.
describe('a drain paused by a busy machine', () => {
  it('answers 503, never a reset, to connections the kernel queued while the gateway was paused and still listening', async () => {
    await roundsUntil('paused while still listening', async ({ running, url, key }) => {
      running.child.kill('SIGTERM');
      await drainBegun(running);
      // A connection now keeps the draining gateway listening a little longer (well past 50 ms);
      // paused then, back waiting for events, it still listens, and the kernel queues what comes
      // next for it to accept on resuming.
      await dial(url);
      await sleep(50);
      // Stopped between its last look at its sockets and closing the listener, it would close it on
      // resuming before accepting what the kernel queued meanwhile: this round proves nothing.
      if ((await pause(running)) === 'elsewhere') return false;
      const queued = await Promise.all(Array.from({ length: 8 }, () => dial(url)));
      // The listener had closed before the pause took hold: this round proves nothing.
      if (queued.some((connection) => !connection.connected)) return false;
      for (const connection of queued) connection.socket.write(restRequest(key));
      // Paused for longer than the drain waits for a quiet moment before it stops listening.
      await sleep(1_000);
      running.child.kill('SIGCONT');
      await Promise.all(queued.map((connection) => connection.closed));
      expect(queued.map((c) => c.error() ?? parseRaw(c.received()).status)).toEqual(Array(8).fill(503));
      expect(await running.exited).toBe(0);
      return true;
    });
  }, 60_000);

  it("answers 503, never a reset, to a request that reached an idle keep-alive connection while the paused gateway's idle grace ran out", async () => {
    await roundsUntil('paused within the idle grace', async ({ running, url, key }) => {
      const idle = await dial(url);
      idle.socket.write(restRequest(key));
      await waitFor(() => wholeAnswer(idle.received()), 'the first answer');
      expect(parseRaw(idle.received()).status).toBe(200);
      idle.clear();
      // Idle for longer than the drain's quiet period, so the listener closes as the drain begins
      // and the idle connections' grace (a second) starts at once.
      await sleep(500);
      running.child.kill('SIGTERM');
      await drainBegun(running);
      // Stopped between its last look at its sockets and the grace's end, it would close the
      // connection on resuming before reading the request sent meanwhile: this round proves nothing.
      if ((await pause(running)) === 'elsewhere') return false;
      // A turn or two of this process's loop, for a close the gateway sent just before the stop to be heard.
      await sleep(20);
      // The grace had run out before the pause took hold: this round proves nothing.
      if (idle.ended()) return false;
      idle.socket.write(restRequest(key));
      // Paused past the end of the grace, with the request waiting unread on the connection.
      await sleep(1_500);
      running.child.kill('SIGCONT');
      await idle.closed;
      expect(idle.error()).toBeUndefined();
      const answer = parseRaw(idle.received());
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ code: 50300 });
      expect(await running.exited).toBe(0);
      return true;
    });
  }, 60_000);
});

describe('a drain under keep-alive load', () => {
  it('answers every request fully sent on an open connection (served or 503), with no reset, at c=64', async () => {
    const cwd = workdir();
    // Each reset as the client saw it (its code and message), so that a failure names its cause.
    const resets: string[] = [];
    let served = 0;
    // Answers written during the drain carry `Connection: close` (served or 503): proof that the
    // drain met requests in flight, however fast the machine reconnects afterwards.
    let answeredWhileDraining = 0;
    for (let round = 0; round < 4; round++) {
      const { running, url } = await gateway(cwd, {
        RATE_LIMIT_PER_MINUTE: '0',
        SHUTDOWN_TIMEOUT_MS: '10000',
      });
      const { key } = await createKey(url, null);
      const pool = new Pool(url, { connections: 64, pipelining: 1, keepAliveTimeout: 60_000 });
      let stop = false;
      const body = JSON.stringify(sampleRequest());
      const worker = async () => {
        while (!stop) {
          try {
            const response = await pool.request({
              path: '/v1/systemone',
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
              body,
            });
            await response.body.text();
            if (response.headers.connection === 'close') answeredWhileDraining++;
            if (response.statusCode === 200) served++;
            else if (response.statusCode === 503) {
              // A well-behaved client waits as told before it tries again.
              await sleep(Number(response.headers['retry-after']) * 1000);
            } else throw new Error(`unexpected ${response.statusCode}`);
          } catch (error) {
            const { code, syscall } = error as { code?: string; syscall?: string };
            // A connection refused, or reset before it was connected (one the kernel had queued
            // when the listener closed: the client had not yet been told it was open), never
            // carried a request: undici writes a request only once its socket has connected.
            if (code === 'ECONNREFUSED' || syscall === 'connect') {
              stop = true;
              return;
            }
            resets.push(`${code ?? 'no code'}: ${(error as Error).message}`);
            stop = true;
          }
        }
      };
      const servedBefore = served;
      const workers = Array.from({ length: 64 }, worker);
      // The drain starts under load: once this round has served some requests, however long
      // that takes on a busy machine (never a fixed wait).
      const loadedBy = Date.now() + 30_000;
      while (served - servedBefore < 30) {
        if (Date.now() > loadedBy) throw new Error('the gateway served no load before the drain');
        await sleep(20);
      }
      running.child.kill('SIGTERM');
      expect(await running.exited).toBe(0);
      stop = true;
      await Promise.all(workers);
      await pool.destroy();
    }
    expect(resets).toEqual([]);
    expect(served).toBeGreaterThan(100);
    expect(answeredWhileDraining).toBeGreaterThan(0);
  }, 60_000);

  it('a request that arrives while draining is answered 503 even while its body is still coming: the connection closes lingering, never with a reset', async () => {
    const { running, url } = await gateway(workdir(), {
      RATE_LIMIT_PER_MINUTE: '0',
      SHUTDOWN_TIMEOUT_MS: '10000',
    });
    const { key } = await createKey(url, null);
    const { hostname, port } = new URL(url);
    // Connected before the drain, so the request meets the draining gateway on an open connection.
    const socket = connect(Number(port), hostname);
    cleanups.push(() => void socket.destroy());
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let received = '';
    let failed: string | undefined;
    socket.on('data', (data) => {
      received += data.toString('latin1');
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      failed = error.code;
    });
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    running.child.kill('SIGTERM');
    await drainBegun(running);
    // Not reading until the body is all sent: a gateway that closed at once, its 503 written and
    // the body still arriving, would reset the connection, and a reset drops what the client had
    // received but not read.
    socket.pause();
    const total = 4 * 1024 * 1024;
    socket.write(
      `POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${total}\r\n\r\n`,
    );
    const chunk = Buffer.alloc(256 * 1024, 0x20);
    await new Promise<void>((resolve) => {
      let sent = 0;
      const pump = () => {
        while (sent < total && !socket.destroyed) {
          sent += chunk.length;
          if (!socket.write(chunk)) return void socket.once('drain', pump);
        }
        resolve();
      };
      pump();
    });
    socket.resume();
    await closed;
    expect(failed).toBeUndefined();
    const answer = parseRaw(received);
    expect(answer.status).toBe(503);
    expect(answer.headers.connection).toBe('close');
    expect(answer.body).toMatchObject({ code: 50300, error: { type: 'unavailable' } });
    expect(await running.exited).toBe(0);
  });
});
