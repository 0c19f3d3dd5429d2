import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { LRUCache } from 'lru-cache';
import type { ExchangeTransport } from './transport.ts';

/** An MCP session: the SDK's server and transport for one client, and the key that opened it. */
export interface McpSession {
  keyId: string;
  server: Server;
  transport: ExchangeTransport;
}

export interface SessionLimits {
  /** MCP_MAX_SESSIONS: past it, the least recently used session is closed. */
  max: number;
  /** A session unused for this long is closed. */
  idleMs: number;
  /** Judges idleness (epoch ms); a test's clock. */
  clock?: () => number;
}

export const SESSION_DEFAULTS = { max: 1000, idleMs: 10 * 60_000 } as const;

/**
 * The open sessions, bounded in number and in idle time (docs/mcp.md#sessions): an LRU cache
 * whose entries age from their last use. A session it lets go is closed once the calls already in
 * it are answered (none is charged and lost), and its client's next request is a 404, so the
 * client initializes again, as the protocol says.
 */
export function createSessionTable(limits: SessionLimits) {
  const table = new LRUCache<string, McpSession>({
    max: limits.max,
    ttl: limits.idleMs,
    updateAgeOnGet: true,
    ...(limits.clock && { perf: { now: limits.clock } }),
    dispose: (session) => void session.transport.settled().then(() => session.server.close()),
  });
  // A session nobody asks for again is closed by a sweep, not only when its id is next read.
  const sweep = setInterval(() => table.purgeStale(), Math.min(limits.idleMs, 60_000));
  sweep.unref();

  return {
    /** The session with this id, if it is open and was opened by this key (another key's is not found). */
    find(id: string, keyId: string): McpSession | undefined {
      const session = table.get(id);
      return session?.keyId === keyId ? session : undefined;
    },
    add(id: string, session: McpSession) {
      table.set(id, session);
    },
    /** A session its client ended (DELETE). */
    remove(id: string) {
      table.delete(id);
    },
    get size() {
      return table.size;
    },
    closeAll() {
      clearInterval(sweep);
      table.clear();
    },
  };
}

export type SessionTable = ReturnType<typeof createSessionTable>;
