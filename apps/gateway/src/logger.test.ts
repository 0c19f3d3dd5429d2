import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.ts';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  return { logger: createLogger('info', stream), lines };
}

describe('logger', () => {
  it('censors secrets wherever a log call could carry them', () => {
    const { logger, lines } = capture();
    logger.info({
      authorization: 'Bearer dg_secret1',
      headers: { authorization: 'Bearer dg_secret2' },
      req: { headers: { authorization: 'Bearer dg_secret3' } },
      request: { headers: { authorization: 'Bearer dg_secret4' } },
      apiKey: 'dg_secret5',
      adminToken: 'admin-secret-token',
      key: 'dg_secret6',
    });
    const text = JSON.stringify(lines);
    expect(text).not.toMatch(/secret/);
    expect(lines[0]).toMatchObject({ authorization: '[redacted]', headers: { authorization: '[redacted]' } });
  });

  it('keeps everything else', () => {
    const { logger, lines } = capture();
    logger.info({ requestId: 'req_1', keyPrefix: 'dg_abcdefgh', status: 200 }, 'request');
    expect(lines[0]).toMatchObject({
      requestId: 'req_1',
      keyPrefix: 'dg_abcdefgh',
      status: 200,
      msg: 'request',
    });
  });
});
