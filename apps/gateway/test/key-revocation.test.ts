import { describe, expect, it } from 'vitest';
import { runKeysCli } from '../src/cli/keys.ts';
import { bearer, post, sampleRequest, startGateway } from './harness.ts';

// docs/http-api.md#keys: a revoked key is refused on the next request, on every instance. Each test first has
// the key served, so whatever the instance remembers about it is in place when it is revoked.
describe('revocation reaches every instance at once', () => {
  it('a key revoked through one instance is refused by another on its next request', async () => {
    const a = await startGateway();
    const b = await startGateway({ dbPath: a.dbPath });
    try {
      const { id, key } = await a.createKey();
      expect((await post(b.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
      expect((await post(b.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
      await a.keys.revoke(id);
      const after = await post(b.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(after.body).toMatchObject({ code: 40101, message: 'the API key has been revoked' });
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('a key revoked with the CLI against the database file is refused on its next request', async () => {
    const gw = await startGateway();
    try {
      const { id, key } = await gw.createKey();
      expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
      const code = await runKeysCli(
        ['revoke', id],
        { DATABASE_URL: `file:${gw.dbPath}` },
        () => {},
        () => {},
      );
      expect(code).toBe(0);
      const after = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(after.body).toMatchObject({ code: 40101, message: 'the API key has been revoked' });
    } finally {
      await gw.close();
    }
  });

  it('a key revoked through the same instance (its own connection) is refused on its next request', async () => {
    const gw = await startGateway();
    try {
      const { id, key } = await gw.createKey();
      expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
      await gw.keys.revoke(id);
      const after = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(after.body).toMatchObject({ code: 40101, message: 'the API key has been revoked' });
    } finally {
      await gw.close();
    }
  });
});
