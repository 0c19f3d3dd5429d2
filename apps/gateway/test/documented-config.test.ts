import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfigText } from './support/config-text.ts';

// The configuration snippets the README and docs/ show are real configurations: each loads.

const ROOT = join(import.meta.dirname, '../../..');

/** Every ```yaml block of a document that defines upstreams. */
function yamlBlocks(document: string): string[] {
  const text = readFileSync(join(ROOT, document), 'utf8');
  return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .map((match) => match[1] as string)
    .filter((block) => block.includes('upstreams:'));
}

const ENV = {
  CLOUDFLARE_ACCOUNT_ID: 'acc123',
  CLOUDFLARE_API_TOKEN: 'cf-x',
  OPENAI_API_KEY: 'sk-x',
  FIREWORKS_API_KEY: 'fw-x',
  GEMINI_API_KEY: 'g-x',
  FIREWORKS_MODEL: 'accounts/fireworks/models/x',
  OPENROUTER_API_KEY: 'or-x',
  PORTKEY_API_KEY: 'pk-x',
  TYPESAFE_API_KEY: 'ts-x',
};

describe('documented configurations', () => {
  it.each(['README.md', 'docs/upstreams.md', 'docs/openai.md', 'docs/routes.md'])(
    '%s: every snippet loads',
    (document) => {
      const blocks = yamlBlocks(document);
      for (const block of blocks) {
        // A snippet that shows only upstreams gets the smallest route over its first one.
        const text = block.includes('routes:')
          ? block
          : `${block}routes:\n  default: { upstreams: [${/^ {2}([a-z0-9_-]+):/m.exec(block)?.[1]}] }\n`;
        const loaded = loadConfigText(text, ENV);
        expect(loaded.ok ? [] : loaded.problems).toEqual([]);
      }
    },
  );

  it('the README shows every kind of upstream', () => {
    const [block] = yamlBlocks('README.md');
    const loaded = loadConfigText(block as string, ENV);
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    expect(loaded.config.gateway.upstreams.portkey).toMatchObject({
      kind: 'systemone',
      path: '/v1/decisions',
      headers: { 'x-portkey-api-key': 'pk-x', 'x-portkey-provider': 'typesafe' },
    });
    expect(loaded.config.gateway.upstreams.luna).toMatchObject({
      kind: 'openai-decisions',
      maxQuestions: 400,
    });
  });
});
