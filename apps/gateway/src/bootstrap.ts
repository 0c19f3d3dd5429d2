import type { KeyService } from './keys/key-service.ts';
import type { Store } from './store/store.ts';

export const BOOTSTRAP_CREDITS = 100;

/**
 * First run on the embedded default (docs/operating.md#admin-api): with no key in the store, create `bootstrap` with
 * 100 credits and return its plain key, to be printed once. Otherwise undefined.
 */
export async function ensureBootstrapKey(store: Store, keys: KeyService): Promise<string | undefined> {
  if ((await store.countKeys()) > 0) return undefined;
  const created = await keys.create({ name: 'bootstrap', credits: BOOTSTRAP_CREDITS });
  return created.ok ? created.value.key : undefined;
}
