import { randomBytes } from 'node:crypto';
import {
  type AdjustCreditsBody,
  type CreatedKey,
  type CreateKeyBody,
  failure,
  type GatewayFailure,
  type KeyList,
  type KeyObject,
  type PatchKeyBody,
  type UsageReport,
} from '@decision-gateway/contract';
import { generateApiKey } from '../auth/api-keys.ts';
import { type BudgetService, createBudgetService, unknownProjectField } from '../budgets/budget-service.ts';
import { fromMicro, toMicro } from '../core/credits.ts';
import { unknownRouteField } from '../routing/route-field.ts';
import type { KeyCursor, KeyRecord, Store } from '../store/store.ts';

export type KeyResult<T> = { ok: true; value: T } | { ok: false; error: GatewayFailure };

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The key object of docs/operating.md#admin-api: what the admin API and the CLI show. Never the hash. */
export function keyObject(key: KeyRecord, budgets: KeyObject['budgets']): KeyObject {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    credits: key.creditsMicro === null ? null : fromMicro(key.creditsMicro),
    rateLimitPerMinute: key.rateLimitPerMinute,
    route: key.route,
    createdAt: iso(key.createdAt) as string,
    expiresAt: iso(key.expiresAt),
    revokedAt: iso(key.revokedAt),
    lastUsedAt: iso(key.lastUsedAt),
    projectId: key.projectId,
    budgets,
  };
}

/** Cursors are opaque to callers: the position (creation time, id) of the last key of a page. */
function encodeCursor(cursor: KeyCursor): string {
  return Buffer.from(JSON.stringify([cursor.createdAt, cursor.id])).toString('base64url');
}

function decodeCursor(text: string): KeyCursor | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      Number.isSafeInteger(value[0]) &&
      typeof value[1] === 'string'
    )
      return { createdAt: value[0], id: value[1] };
  } catch {}
  return null;
}

const notFound = (id: string) => failure('not_found', `no key with id "${id}"`);

/** Key management, shared by the admin API and the `pnpm keys` CLI so both follow one set of rules. */
export function createKeyService(
  store: Store,
  clock: () => number = Date.now,
  /** The routes of the configuration: a key's route must be one of them (docs/operating.md#admin-api). */
  routeNames: readonly string[] = ['default'],
  /** Budgets and projects (docs/budgets.md); by default holds older than 10 minutes count nowhere in reads. */
  budgets: BudgetService = createBudgetService(store, clock, 10 * 60_000),
) {
  const shown = async (key: KeyRecord) => keyObject(key, await budgets.statesOf({ kind: 'key', id: key.id }));
  return {
    async create(body: CreateKeyBody): Promise<KeyResult<CreatedKey>> {
      const now = clock();
      const route = body.route ?? null;
      const unknown = unknownRouteField(route, routeNames);
      if (unknown) return { ok: false, error: unknown };
      const expiresAt = body.expiresAt === undefined ? null : Date.parse(body.expiresAt);
      if (expiresAt !== null && expiresAt <= now) {
        const issues = [{ path: ['expiresAt'], message: 'must be in the future' }];
        return {
          ok: false,
          error: failure('invalid_request', 'expiresAt: must be in the future', { issues }),
        };
      }
      const projectId = body.projectId ?? null;
      if (projectId !== null && !(await store.getProject(projectId)))
        return { ok: false, error: unknownProjectField(projectId) };
      const { key, hash, prefix } = generateApiKey();
      let record = await store.createKey({
        id: `key_${randomBytes(9).toString('base64url')}`,
        name: body.name,
        prefix,
        hash,
        creditsMicro: body.credits === null ? null : toMicro(body.credits),
        route,
        rateLimitPerMinute: body.rateLimitPerMinute ?? null,
        createdAt: now,
        expiresAt,
      });
      if (projectId !== null) {
        const moved = await store.setKeyProject(record.id, projectId);
        if (!moved.ok) return { ok: false, error: unknownProjectField(projectId) };
        record = moved.key;
      }
      if (body.budgets) await budgets.setBudgets({ kind: 'key', id: record.id }, body.budgets);
      return { ok: true, value: { ...(await shown(record)), key } };
    },

    /** `PATCH /admin/keys/{id}`: its project (null: none) and its budgets (the whole list). */
    async patch(id: string, body: PatchKeyBody): Promise<KeyResult<KeyObject>> {
      let key = await store.getKey(id);
      if (!key) return { ok: false, error: notFound(id) };
      if (body.projectId !== undefined) {
        const moved = await store.setKeyProject(id, body.projectId);
        if (!moved.ok)
          return {
            ok: false,
            error: moved.code === 'not_found' ? notFound(id) : unknownProjectField(body.projectId as string),
          };
        key = moved.key;
      }
      if (body.budgets !== undefined) await budgets.setBudgets({ kind: 'key', id }, body.budgets);
      return { ok: true, value: await shown(key) };
    },

    /** One page of keys, newest first; `cursor` is the `nextCursor` of the page before. */
    async list(limit: number, cursor?: string): Promise<KeyResult<KeyList>> {
      const after = cursor === undefined ? undefined : decodeCursor(cursor);
      if (after === null) {
        const message = 'is not a cursor this gateway gave out';
        return {
          ok: false,
          error: failure('invalid_request', `cursor: ${message}`, {
            issues: [{ path: ['cursor'], message }],
          }),
        };
      }
      const page = await store.listKeys(limit, after);
      return {
        ok: true,
        value: {
          keys: await Promise.all(page.keys.map(shown)),
          nextCursor: page.next && encodeCursor(page.next),
        },
      };
    },

    async get(id: string): Promise<KeyResult<KeyObject>> {
      const key = await store.getKey(id);
      return key ? { ok: true, value: await shown(key) } : { ok: false, error: notFound(id) };
    },

    async adjustCredits(id: string, body: AdjustCreditsBody): Promise<KeyResult<KeyObject>> {
      const result = await store.adjustCredits(id, toMicro(body.amount), clock());
      if (result.ok) return { ok: true, value: await shown(result.key) };
      if (result.code === 'not_found') return { ok: false, error: notFound(id) };
      const message = {
        unlimited: 'the key has unlimited credits; its balance cannot be adjusted',
        would_go_negative: 'the balance may not go below 0',
        over_ceiling: 'the balance may not go above 1000000000 credits',
      }[result.code];
      return {
        ok: false,
        error: failure('invalid_request', `amount: ${message}`, { issues: [{ path: ['amount'], message }] }),
      };
    },

    async revoke(id: string): Promise<KeyResult<KeyObject>> {
      const key = await store.revokeKey(id, clock());
      return key ? { ok: true, value: await shown(key) } : { ok: false, error: notFound(id) };
    },

    async usage(id: string, limit: number): Promise<KeyResult<UsageReport>> {
      if (!(await store.getKey(id))) return { ok: false, error: notFound(id) };
      const { totals, recent } = await store.usage(id, limit);
      return {
        ok: true,
        value: {
          totals: {
            requests: totals.requests,
            creditsUsed: fromMicro(totals.creditsMicro),
            input_tokens: totals.inputTokens,
            output_tokens: totals.outputTokens,
          },
          recent: recent.map((entry) => ({
            requestId: entry.requestId,
            creditsUsed: fromMicro(entry.creditsMicro),
            input_tokens: entry.inputTokens,
            output_tokens: entry.outputTokens,
            questions: entry.questions,
            status: entry.status,
            elapsedMs: entry.elapsedMs,
            at: new Date(entry.at).toISOString(),
            route: entry.route,
            upstream: entry.upstream,
            cached: entry.cached,
            subject: entry.subject,
          })),
        },
      };
    },
  };
}

export type KeyService = ReturnType<typeof createKeyService>;
