import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay on 127.0.0.1 in front of a real server (PostgreSQL here), for provoking what a
 * network does to a gateway: `cut()` drops every connection and refuses new ones until
 * `restore()`; `stall()` holds what clients send (nothing reaches the server, answers already on
 * their way still arrive) until `resume()`.
 */
export interface TcpRelay {
  port: number;
  cut(): void;
  restore(): void;
  stall(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  const pairs = new Set<{ client: Socket; server: Socket; held: Buffer[] }>();
  let refusing = false;
  let stalled = false;

  const relay: Server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const server = connect(target.port, target.host);
    const pair = { client, server, held: [] as Buffer[] };
    pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      if (stalled) pair.held.push(chunk);
      else server.write(chunk);
    });
    server.on('data', (chunk: Buffer) => client.write(chunk));
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on('close', end).on('error', end);
    server.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const address = relay.address();
  if (address === null || typeof address === 'string') throw new Error('the relay has no port');

  return {
    port: address.port,
    cut() {
      refusing = true;
      for (const pair of pairs) {
        pair.client.destroy();
        pair.server.destroy();
      }
      pairs.clear();
    },
    restore() {
      refusing = false;
    },
    stall() {
      stalled = true;
    },
    resume() {
      stalled = false;
      for (const pair of pairs) {
        for (const chunk of pair.held) pair.server.write(chunk);
        pair.held = [];
      }
    },
    async close() {
      refusing = true;
      for (const pair of pairs) {
        pair.client.destroy();
        pair.server.destroy();
      }
      await new Promise((resolve) => relay.close(resolve));
    },
  };
}
