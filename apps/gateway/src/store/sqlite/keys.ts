import { type KeyRow, toKey, toTokenAuth } from '../rows.ts';
import { adjustedBalance } from '../shared-rules.ts';
import { type AdjustResult, type KeyAuth, type NewKey, pageOf, type Store } from '../store.ts';
import type { SqliteParts } from './parts.ts';

/** Keys kept for authentication; past this many the cache starts again from empty. */
const KEY_CACHE_LIMIT = 10_000;

type KeyMethods = Pick<
  Store,
  | 'createKey'
  | 'findKeyByHash'
  | 'createToken'
  | 'findTokenByHash'
  | 'getKey'
  | 'listKeys'
  | 'countKeys'
  | 'adjustCredits'
  | 'revokeKey'
>;

/** Keys and tokens: created, found for authentication, listed, credited by an operator, revoked. */
export function sqliteKeys({ db, sql, write, guarded }: SqliteParts): KeyMethods {
  const createKey = db.transaction((key: NewKey) => {
    sql.insertKey.run(key);
    if (key.creditsMicro !== null && key.creditsMicro > 0)
      sql.grant.run(key.id, key.creditsMicro, key.createdAt);
  });

  const adjustCredits = db.transaction((id: string, delta: number, at: number): AdjustResult => {
    const row = sql.keyById.get(id);
    if (!row) return { ok: false, code: 'not_found' };
    const adjusted = adjustedBalance(row.credits_micro, delta);
    if (!adjusted.ok) return adjusted;
    sql.setCredits.run(adjusted.balanceMicro, id);
    if (delta !== 0) sql.grant.run(id, delta, at);
    return { ok: true, key: toKey({ ...row, credits_micro: adjusted.balanceMicro }) };
  });

  /**
   * Keys read for authentication, by hash, valid while no other connection has written to the
   * database: PRAGMA data_version (a cheap check on every lookup) says when one has, and this
   * connection's own key changes clear it directly. A revocation or a new expiry anywhere is seen
   * on the next request, as docs/http-api.md#keys requires; only the statement that reads the key is saved.
   */
  const keyCache = new Map<string, KeyAuth>();
  let cachedVersion = sql.dataVersion.get();
  const findKeyAuth = (hash: string): KeyAuth | undefined => {
    const version = sql.dataVersion.get();
    if (version !== cachedVersion) {
      keyCache.clear();
      cachedVersion = version;
    }
    const cached = keyCache.get(hash);
    if (cached !== undefined) return cached;
    const key = sql.keyAuthByHash.get(hash);
    // Unknown hashes are not cached: guessed keys must not grow memory.
    if (key !== undefined) {
      if (keyCache.size >= KEY_CACHE_LIMIT) keyCache.clear();
      keyCache.set(hash, key);
    }
    return key;
  };

  return {
    async createKey(key) {
      guarded(() => createKey.immediate(key));
      return toKey(sql.keyById.get(key.id) as KeyRow);
    },
    async findKeyByHash(hash) {
      return findKeyAuth(hash);
    },
    async createToken(token) {
      const originsJson = token.origins === null ? null : JSON.stringify(token.origins);
      await write(() => sql.insertToken.run({ ...token, originsJson }));
    },
    async findTokenByHash(hash) {
      const row = sql.tokenAuthByHash.get(hash);
      return row && toTokenAuth(row);
    },
    async getKey(id) {
      const row = sql.keyById.get(id);
      return row && toKey(row);
    },
    async listKeys(limit, after) {
      const rows = sql.keysPage.all({
        createdAt: after?.createdAt ?? Number.MAX_SAFE_INTEGER,
        id: after?.id ?? '',
        limit: limit + 1,
      });
      return pageOf(rows.map(toKey), limit);
    },
    async countKeys() {
      return sql.countKeys.get()?.n ?? 0;
    },
    async adjustCredits(id, delta, at) {
      return guarded(() => adjustCredits.immediate(id, delta, at));
    },
    async revokeKey(id, at) {
      guarded(() => sql.revoke.run(at, id));
      keyCache.clear();
      const row = sql.keyById.get(id);
      return row && toKey(row);
    },
  };
}
