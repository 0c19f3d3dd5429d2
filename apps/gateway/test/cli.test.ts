import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runKeysCli } from '../src/cli/keys.ts';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.ts';
import { usageEntry } from '../src/store/store.contract-tests.ts';

const run = promisify(execFile);

describe('pnpm keys CLI', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'dg-cli-'));
    env = { DATABASE_URL: `file:${join(dir, 'keys.db')}` };
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function cli(...argv: string[]) {
    let stdout = '';
    let stderr = '';
    const code = await runKeysCli(
      argv,
      env,
      (t) => {
        stdout += t;
      },
      (t) => {
        stderr += t;
      },
    );
    return { code, stdout, stderr, json: () => JSON.parse(stdout) };
  }

  it('prints the calibration report, and refuses a bad filter', async () => {
    expect((await cli('calibration')).stdout).toBe('no outcomes recorded in this range\n');
    const key = (await cli('create', '--name', 'svc', '--unlimited', '--json')).json();
    // A decision and its outcome, as the gateway writes them.
    const store = openSqliteStore(join(dir, 'keys.db'));
    const now = Date.now();
    const questions = JSON.stringify({ refund: { type: 'noul', upstream: 'lexical', p: 0.8 } });
    await store.settle(null, usageEntry(key.id, 'req_c1', 0, now), 0, { questions, reused: null });
    await store.recordOutcomes('req_c1', [{ questionId: 'refund', truth: 'true' }], now);
    await store.close();
    const text = await cli('calibration');
    expect(text.stdout).toMatch(/lexical\s+noul\s+1\s+1\.000\s+0\.040/);
    const json = (await cli('calibration', '--type', 'noul', '--json')).json();
    expect(json.groups).toEqual([expect.objectContaining({ upstream: 'lexical', outcomes: 1, brier: 0.04 })]);
    const bad = await cli('calibration', '--type', 'word');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('type');
  });

  it('manages projects and budgets: project create|list|show|delete, budget set|rm on keys and projects', async () => {
    const project = (await cli('project', 'create', 'support', '--json')).json();
    expect(project).toMatchObject({ name: 'support', keyCount: 0, budgets: [] });
    const key = (
      await cli('create', '--name', 'svc', '--credits', '5', '--project', project.id, '--json')
    ).json();
    expect(key.projectId).toBe(project.id);

    const set = await cli('budget', 'set', key.id, 'day', '1.5');
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(
      /budget day \(hard\): 0 of 1\.5 spent, 1\.5 left, resets \d{4}-\d\d-\d\dT00:00:00\.000Z/,
    );
    await cli('budget', 'set', key.id, 'minute', '0.2', '--soft');
    // Setting a window again replaces that budget alone.
    const replaced = (await cli('budget', 'set', key.id, 'day', '2', '--json')).json();
    expect(
      replaced.budgets.map((b: { window: string; limit: number; mode: string }) => [
        b.window,
        b.limit,
        b.mode,
      ]),
    ).toEqual([
      ['minute', 0.2, 'soft'],
      ['day', 2, 'hard'],
    ]);
    expect((await cli('budget', 'rm', key.id, 'minute', '--json')).json().budgets).toHaveLength(1);

    const monthly = (await cli('budget', 'set', project.id, 'month', '100', '--json')).json();
    expect(monthly).toMatchObject({
      id: project.id,
      keyCount: 1,
      budgets: [{ window: 'month', limit: 100 }],
    });
    expect((await cli('project', 'show', project.id)).stdout).toContain(
      'budget month (hard): 0 of 100 spent',
    );
    expect((await cli('project', 'list', '--json')).json().projects).toHaveLength(1);

    // Refusals: an unknown window, a limit ≤ 0, a budget not there, a project with keys, unknown ids.
    const window = await cli('budget', 'set', key.id, 'fortnight', '1');
    expect([window.code, window.stderr]).toEqual([2, 'window: must be minute, hour, day, week or month\n']);
    expect((await cli('budget', 'set', key.id, 'day', '0')).stderr).toBe('limit: must be more than 0\n');
    expect((await cli('budget', 'rm', key.id, 'week')).stderr).toBe(`${key.id} has no week budget\n`);
    const busy = await cli('project', 'delete', project.id);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain('error 40001 (invalid_request): the project has 1 key');
    expect((await cli('project', 'show', 'prj_nope')).stderr).toContain('error 40400');
    expect((await cli('budget', 'set', 'key_nope', 'day', '1')).stderr).toContain('error 40400');
    expect((await cli('create', '--name', 'x', '--credits', '1', '--project', 'prj_nope')).stderr).toContain(
      'projectId: no project with id "prj_nope"',
    );
    expect((await cli('project', 'frobnicate')).code).toBe(2);
  });

  it('prints a usage series with --series, and refuses a bad step', async () => {
    const key = (
      await cli('create', '--name', 'svc', '--credits', '5', '--route', 'default', '--json')
    ).json();
    expect(key.route).toBe('default');
    const series = await cli('usage', key.id, '--series', 'hour', '--json');
    expect(series.code).toBe(0);
    const { step, series: points } = series.json();
    expect(step).toBe('hour');
    // The last 24 hours, `from` rounded down to its hour: 25 started hours.
    expect(points).toHaveLength(25);
    expect(points[0]).toMatchObject({ requests: 0, p50ElapsedMs: null });
    const text = await cli('usage', key.id, '--series', 'day', '--from', '2026-01-01T00:00:00Z');
    expect(text.stdout).toMatch(/^per day: at, requests/);
    const bad = await cli('usage', key.id, '--series', 'week');
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('step: must be minute, hour or day')]);
    expect((await cli('create', '--name', 'x', '--credits', '1', '--route', 'nope')).stderr).toContain(
      'no route named "nope"',
    );
  });

  it('creates, lists, shows, adjusts, revokes and reports usage', async () => {
    const created = await cli('create', '--name', 'svc', '--credits', '5', '--rate-limit', '30', '--json');
    expect(created.code).toBe(0);
    const key = created.json();
    expect(key).toMatchObject({ name: 'svc', credits: 5, rateLimitPerMinute: 30 });
    expect(key.key).toMatch(/^dg_/);

    const list = await cli('list', '--json');
    expect(list.json().keys).toEqual([expect.objectContaining({ id: key.id })]);
    expect(list.stdout).not.toContain(key.key);

    expect((await cli('show', key.id, '--json')).json().id).toBe(key.id);
    expect((await cli('credits', key.id, '2.5', '--json')).json().credits).toBe(7.5);
    expect((await cli('credits', key.id, '-7.5', '--json')).json().credits).toBe(0);
    const negative = await cli('credits', key.id, '-1');
    expect(negative.code).toBe(1);
    expect(negative.stderr).toContain('40001');
    // The ceiling of 1,000,000,000 credits (docs/operating.md#admin-api), reached in two steps: each amount is allowed.
    expect((await cli('credits', key.id, '1000000000', '--json')).json().credits).toBe(1_000_000_000);
    const over = await cli('credits', key.id, '0.000001');
    expect(over.code).toBe(1);
    expect(over.stderr).toContain('the balance may not go above 1000000000 credits');

    expect((await cli('revoke', key.id, '--json')).json().revokedAt).not.toBeNull();
    const usage = await cli('usage', key.id, '--limit', '5', '--json');
    expect(usage.json()).toEqual({
      totals: { requests: 0, creditsUsed: 0, input_tokens: 0, output_tokens: 0 },
      recent: [],
    });
  });

  it('prints readable text without --json, and the plain key once on create', async () => {
    const created = await cli('create', '--name', 'text', '--unlimited');
    expect(created.stdout).toContain('credits: unlimited');
    expect(created.stdout).toMatch(/API key \(shown only this once\):\n {2}dg_/);
    const list = await cli('list');
    expect(list.stdout).toContain('text');
    expect(list.stdout).not.toMatch(/dg_[A-Za-z0-9_-]{43}/);
  });

  it('lists a page at a time (--limit, --cursor) or every page (--all)', async () => {
    for (let i = 0; i < 5; i++) await cli('create', '--name', `k${i}`, '--credits', '1');
    const first = await cli('list', '--limit', '2', '--json');
    expect(first.json().keys).toHaveLength(2);
    const cursor = first.json().nextCursor as string;
    const second = await cli('list', '--limit', '2', '--cursor', cursor, '--json');
    expect(second.json().keys).toHaveLength(2);
    expect(second.json().keys[0].id).not.toBe(first.json().keys[0].id);
    const text = await cli('list', '--limit', '2');
    expect(text.stdout).toContain(`more: pnpm keys list --cursor `);
    const all = await cli('list', '--limit', '2', '--all', '--json');
    expect(all.json().keys).toHaveLength(5);
    expect(all.json().nextCursor).toBeNull();
    expect((await cli('list', '--cursor', 'nonsense')).code).toBe(2);
    expect((await cli('list', '--limit', '0')).stderr).toContain('limit');
  });

  it('refuses bad arguments with exit code 2 and a message', async () => {
    expect((await cli('create', '--name', 'x')).stderr).toContain('--credits N or --unlimited');
    expect((await cli('create', '--name', 'x', '--credits', '-1')).stderr).toContain(
      'credits: must be at least 0',
    );
    expect((await cli('create', '--name', '', '--credits', '1')).code).toBe(2);
    expect((await cli('frobnicate')).code).toBe(2);
    expect((await cli('--bogus')).code).toBe(2);
    expect((await cli()).code).toBe(2);
    expect((await cli('show', 'key_missing')).code).toBe(1);
  });

  it('runs as a process from the repository root (pnpm keys)', async () => {
    const root = resolve(import.meta.dirname, '../../..');
    const { stdout } = await run(
      'pnpm',
      ['--silent', 'keys', 'create', '--name', 'proc', '--credits', '1', '--json'],
      {
        cwd: root,
        env: { ...process.env, ...env },
      },
    );
    expect(JSON.parse(stdout)).toMatchObject({ name: 'proc', credits: 1 });
    const failed = await run('pnpm', ['--silent', 'keys', 'show', 'key_nope'], {
      cwd: root,
      env: { ...process.env, ...env },
    }).catch((error: { code: number; stderr: string }) => error);
    expect(failed).toMatchObject({ code: 1 });
    expect((failed as { stderr: string }).stderr).toContain('40400');
  });
});
