import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from './real-gateway.ts';

// What an outside user does (docs/http-api.md#the-other-doors): pack the client, install the tarball with npm into an empty
// project, type-check a consumer with that project's own strict tsconfig, and run plain JavaScript
// consumers (ESM and CommonJS) against a real gateway.

const run = promisify(execFile);
const packageDir = resolve(import.meta.dirname, '..');
const repoRoot = resolve(packageDir, '../..');
const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');

let project: string;
let tarball: string;

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), 'dg-consumer-'));
  const packs = join(project, 'packs');
  mkdirSync(packs);
  // pnpm pack builds first (prepack) and rewrites catalog:/workspace: ranges to real versions.
  await run('pnpm', ['pack', '--pack-destination', packs], { cwd: packageDir });
  const [file] = readdirSync(packs).filter((name) => name.endsWith('.tgz'));
  tarball = join(packs, file as string);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type: 'module' }, null, 2),
  );
  await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: project });
}, 240_000);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

const installed = (name: string) => {
  try {
    readFileSync(join(project, 'node_modules', name, 'package.json'));
    return true;
  } catch {
    return false;
  }
};

/** A folder of the consumer project with its own strict tsconfig; resolves to tsc's output. */
async function typeCheck(name: string, resolution: 'nodenext' | 'bundler', files: Record<string, string>) {
  const dir = join(project, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        module: resolution === 'nodenext' ? 'nodenext' : 'preserve',
        moduleResolution: resolution,
        strict: true,
        skipLibCheck: true,
        noEmit: true,
        types: [],
        lib: ['es2022', 'dom'],
      },
      include: ['*.ts', '*.cts'],
    }),
  );
  for (const [file, source] of Object.entries(files)) writeFileSync(join(dir, file), source);
  // The project's own node_modules is found from here, as from any folder inside it.
  const output = await run(process.execPath, [tsc, '-p', dir]).then(
    () => '',
    (error: { stdout: string }) => error.stdout || String(error),
  );
  return { dir, output };
}

describe('the packed @decision-gateway/client, installed with npm into an empty project', () => {
  it('is one tarball that names only public registry packages', async () => {
    const manifest = JSON.parse(
      readFileSync(join(project, 'node_modules/@decision-gateway/client/package.json'), 'utf8'),
    );
    expect(manifest.private).toBeUndefined();
    expect(manifest.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(manifest.sideEffects).toBe(false);
    expect(Object.keys(manifest.dependencies).sort()).toEqual(['@trpc/client', '@trpc/server', 'zod']);
    for (const range of Object.values<string>(manifest.dependencies)) {
      expect(range).toMatch(/^\^?\d/);
    }
    const { stdout } = await run('tar', ['-tzf', tarball]);
    expect(stdout.split('\n').filter(Boolean).sort()).toEqual([
      // The repository's MIT licence, which pnpm packs into every package that has none of its own.
      'package/LICENSE',
      'package/README.md',
      'package/dist/index.cjs',
      'package/dist/index.d.cts',
      'package/dist/index.d.ts',
      'package/dist/index.js',
      'package/package.json',
    ]);
    // No server package and no workspace package came along.
    for (const name of [
      '@decision-gateway/gateway',
      '@decision-gateway/api',
      '@decision-gateway/contract',
      'fastify',
      'better-sqlite3',
      'pino',
    ]) {
      expect(installed(name), name).toBe(false);
    }
    expect(installed('@trpc/client')).toBe(true);
  });

  it.each(['nodenext', 'bundler'] as const)(
    'type-checks a consumer with its own strict tsconfig (%s resolution), and only its own files',
    async (resolution) => {
      const { dir, output } = await typeCheck(`ts-${resolution}`, resolution, {
        'consumer.ts': CONSUMER_TS,
        'consumer.cts': CONSUMER_CTS,
      });
      expect(output).toBe('');
      // Every file tsc read is the consumer's own or an installed package's (TypeScript's own
      // lib files aside: this test runs the repository's tsc).
      const { stdout } = await run(process.execPath, [tsc, '-p', dir, '--listFilesOnly']);
      const files = stdout.split('\n').filter(Boolean);
      const lib = dirname(createRequire(import.meta.url).resolve('typescript/lib/lib.d.ts'));
      expect(files.some((file) => file.includes('@decision-gateway/client/dist/index.d'))).toBe(true);
      expect(files.filter((file) => file.startsWith(repoRoot) && !file.startsWith(lib))).toEqual([]);
    },
    60_000,
  );

  it('refuses what the types forbid (a proof the @ts-expect-error lines are needed)', async () => {
    const { output } = await typeCheck('ts-wrong', 'nodenext', {
      'consumer.ts': CONSUMER_TS.replaceAll('// @ts-expect-error', '// expected'),
    });
    expect(output.match(/error TS/g)?.length).toBe(EXPECTED_ERRORS);
  }, 60_000);

  describe('plain JavaScript against a real gateway', () => {
    let gw: Awaited<ReturnType<typeof startGateway>>;
    beforeAll(async () => {
      gw = await startGateway();
    });
    afterAll(() => gw.close());

    it.each([
      ['consumer.mjs', CONSUMER_MJS],
      ['consumer.cjs', CONSUMER_CJS],
    ])('%s evaluates and reports gateway errors', async (name, source) => {
      writeFileSync(join(project, name), source);
      const { stdout } = await run(process.execPath, [name], {
        cwd: project,
        env: { ...process.env, DG_URL: gw.url, DG_API_KEY: gw.key },
      });
      const printed = JSON.parse(stdout);
      expect(printed.choice).toBe('billing');
      expect(printed.levels).toEqual(['0', '1', '2']);
      expect(printed.noul).toBeGreaterThan(0.5);
      expect(printed.creditsUsed).toBe(printed.inputTokens / 1000);
      expect(printed.error).toEqual({ name: 'GatewayError', code: 40101, status: 401 });
    });
  });
});

const EXPECTED_ERRORS = 4;

const CONSUMER_TS = `import { choice, createGatewayClient, GatewayError, noul, score } from '@decision-gateway/client';

const client = createGatewayClient({ url: 'http://127.0.0.1:8787', apiKey: 'dg_x' });

export async function main(): Promise<void> {
  const { result, creditsUsed } = await client.evaluate({
    state: 'I was charged twice.',
    questions: {
      team: choice('Which team?', { billing: 'payments', technical: null }),
      urgency: score('How urgent?', ['low', 'medium', 'high']),
      refund: noul('Is this a refund request?'),
    },
  });
  const team: 'billing' | 'technical' = result.answers.team.choice;
  const high: number = result.answers.urgency.probabilities['2'];
  const yes: number = result.answers.refund.noul;
  const credits: number = creditsUsed;
  // @ts-expect-error: 'sales' is not a label of this choice
  const wrongLabel: 'sales' = result.answers.team.choice;
  // @ts-expect-error: this score has levels 0–2 only
  result.answers.urgency.probabilities['3'];
  // @ts-expect-error: no question was sent with this id
  result.answers.missing;
  // @ts-expect-error: a noul answer has no confidence
  result.answers.refund.confidence;
  console.log(team, high, yes, credits, wrongLabel);
}

export function describeError(error: unknown): string {
  return error instanceof GatewayError ? \`\${error.code} \${error.type} \${error.requestId ?? ''}\` : String(error);
}
`;

const CONSUMER_CTS = `import client = require('@decision-gateway/client');

export const gateway = client.createGatewayClient({ url: 'http://127.0.0.1:8787', apiKey: 'dg_x' });
export const question = client.choice('Which?', { a: null, b: null });
`;

const CONSUMER_BODY = `
const gateway = createGatewayClient({ url: process.env.DG_URL, apiKey: process.env.DG_API_KEY });
const { result, creditsUsed } = await gateway.evaluate({
  state: 'Hi, I was charged twice for my order last week. Please refund the double charge.',
  questions: {
    team: choice('Which team?', { billing: 'payments, refunds', technical: 'bugs, crashes' }),
    urgency: score('How urgent is it?', ['not urgent', 'soon', 'now']),
    refund: noul('Is this a refund request?'),
  },
});
let error;
try {
  await createGatewayClient({ url: process.env.DG_URL, apiKey: 'dg_wrong' }).listModels();
} catch (e) {
  error = e instanceof GatewayError ? { name: e.name, code: e.code, status: e.status } : String(e);
}
console.log(JSON.stringify({
  choice: result.answers.team.choice,
  levels: Object.keys(result.answers.urgency.probabilities),
  noul: result.answers.refund.noul,
  creditsUsed,
  inputTokens: result.usage.input_tokens,
  error,
}));
`;

const CONSUMER_MJS = `import { choice, createGatewayClient, GatewayError, noul, score } from '@decision-gateway/client';
${CONSUMER_BODY}`;

const CONSUMER_CJS = `const { choice, createGatewayClient, GatewayError, noul, score } = require('@decision-gateway/client');
(async () => {
${CONSUMER_BODY}
})().catch((e) => { console.error(e); process.exit(1); });
`;
