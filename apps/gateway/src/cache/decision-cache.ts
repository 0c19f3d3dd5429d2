import { createHash } from 'node:crypto';
import type { Answer, DecisionImage, EvaluationRequest } from '@decision-gateway/contract';
import { canonicalDecision } from '@decision-gateway/questions';
import { imageIdentity } from '../images/decision-images.ts';

/** A successful decision as the cache keeps it (docs/routes.md#decision-cache). */
export interface CachedDecision {
  answers: Record<string, Answer>;
  /** Who answered it (docs/routes.md): the hit's `x-dg-upstream` and usage record say so too. */
  upstream: string;
  /** Epoch ms when it was stored, for the hit's `age`. */
  storedAt: number;
  /** The request that asked it, and its decision as kept for outcomes: a hit's record points at it. */
  requestId?: string;
  kept?: string;
}

/** Where a decision lives: the hash of its scope, route and canonical request, and who paid for it. */
export interface DecisionKey {
  hash: string;
  /** The API key whose request stored it (a purge by key drops it). */
  owner: string;
}

/**
 * The decision cache behind one interface, in process or in Redis; `decision-cache.contract-tests.ts` is
 * the suite both pass. A cache that cannot answer misses: it never fails a request.
 */
export interface DecisionCache {
  get(key: DecisionKey): Promise<CachedDecision | undefined>;
  set(key: DecisionKey, decision: CachedDecision, ttlSeconds: number): Promise<void>;
  /** Drops every decision, or those one API key stored; how many it dropped. */
  purge(owner?: string): Promise<number>;
  /** Bytes held, where the cache is in process (a gauge). */
  bytes?(): number;
  close?(): Promise<void>;
}

/** `key`: a decision serves only the key that paid for it, its tokens included; `global`: every key. */
export type CacheScope = 'key' | 'global';

/**
 * SHA-256 of scope, route and the canonical request: a key's decisions never answer another key
 * (unless the operator chose `global`), and no route answers for another.
 */
export function decisionKey(
  scope: CacheScope,
  keyId: string,
  route: string,
  request: EvaluationRequest,
  images?: readonly DecisionImage[],
): DecisionKey {
  const hash = createHash('sha256')
    .update(scope === 'key' ? `key:${keyId}` : 'global')
    .update('\n')
    .update(route)
    .update('\n')
    .update(canonicalDecision(request));
  // An image is part of the decision: by its SHA-256 (a URL by its text), never its bytes again.
  if (images !== undefined && images.length > 0) hash.update('\n').update(imageIdentity(images).join('\n'));
  return { hash: hash.digest('hex'), owner: keyId };
}

/** What `Cache-Control` asks of the cache (docs/routes.md#decision-cache): skip the lookup, or skip it and the store. */
export function cacheDirective(header: string | undefined): 'no-cache' | 'no-store' | undefined {
  if (header === undefined) return undefined;
  const directives = header
    .toLowerCase()
    .split(',')
    .map((d) => d.trim());
  if (directives.includes('no-store')) return 'no-store';
  if (directives.includes('no-cache')) return 'no-cache';
  return undefined;
}
