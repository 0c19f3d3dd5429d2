import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  composeGateway,
  createKeyService,
  createLogger,
  openSqliteStore,
  pricingFromCredits,
} from '@decision-gateway/gateway';
import { singleRoute } from '@decision-gateway/gateway/testing';
import { createLexicalUpstream, type Upstream } from '@decision-gateway/questions';

/** A real gateway on 127.0.0.1 with a fresh SQLite file, the way the quick start runs it. */
export async function startGateway(upstream: Upstream = createLexicalUpstream(), clock?: () => number) {
  const dir = mkdtempSync(join(tmpdir(), 'dg-client-'));
  const store = openSqliteStore(join(dir, 'gateway.db'));
  const logger = createLogger('silent');
  const gateway = composeGateway({
    store,
    routes: singleRoute(upstream, { logger }),
    logger,
    pricing: pricingFromCredits(1, 0),
    rateLimitPerMinute: 0,
    ...(clock && { clock }),
  });
  const url = await gateway.app.listen({ port: 0, host: '127.0.0.1' });
  const keys = createKeyService(store);
  const created = await keys.create({ name: 'client-test', credits: 100 });
  if (!created.ok) throw new Error(created.error.message);
  return {
    url,
    key: created.value.key,
    keys,
    async close() {
      await gateway.app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
