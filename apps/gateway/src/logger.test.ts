import { spawnSync } from 'node:child_process';
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

  describe('on standard output (the default destination)', () => {
    /** A process that logs 3,000 lines over 300 turns of the event loop, then ends as `ending` says. */
    function logThenEnd(ending: string) {
      const script = `
        import { createLogger } from ${JSON.stringify(new URL('./logger.ts', import.meta.url).pathname)};
        const logger = createLogger('info');
        for (let turn = 0; turn < 300; turn++) {
          for (let i = 0; i < 10; i++) logger.info({ n: turn * 10 + i }, 'line');
          await new Promise((resolve) => setImmediate(resolve));
        }
        for (let i = 3000; i < 3005; i++) logger.info({ n: i }, 'last lines of a turn');
        ${ending}
      `;
      const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        encoding: 'utf8',
      });
      const numbers = run.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => (JSON.parse(line) as { n: number }).n);
      return { numbers, status: run.status };
    }
    const all = Array.from({ length: 3005 }, (_, n) => n);

    it('writes every line, in order, by logger.flush()', () => {
      const run = logThenEnd('await new Promise((resolve) => logger.flush(resolve)); process.exit(0);');
      expect(run.status).toBe(0);
      expect(run.numbers).toEqual(all);
    });

    it('writes the lines still held when the process exits at once', () => {
      expect(logThenEnd('process.exit(3);')).toEqual({ numbers: all, status: 3 });
    });

    it('writes the lines still held when the process dies of an uncaught error', () => {
      expect(logThenEnd("throw new Error('boom');")).toEqual({ numbers: all, status: 1 });
    });
  });
});
