import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// The README is a front door and docs/ the rooms behind it: every relative link resolves to a file
// of the repository, and every #anchor to a heading of its page, as GitHub numbers them.

const ROOT = join(import.meta.dirname, '../../..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** Markdown links outside code: `[text](target)` and `![alt](target)`. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] as string);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(page: string): Set<string> {
  const text = readFileSync(page, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((match) => slug(match[1] as string)));
}

describe('the README and docs/', () => {
  it('keeps the README a front door of at most about 350 lines', () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(360);
  });

  it.each(PAGES)('%s: every relative link resolves, anchors included, inside the repository', (page) => {
    const from = join(ROOT, page);
    const broken: string[] = [];
    for (const link of linksOf(readFileSync(from, 'utf8'))) {
      if (/^[a-z]+:/i.test(link)) continue; // http(s):, mailto:
      const [path = '', anchor] = link.split('#', 2);
      const target = path === '' ? from : resolve(dirname(from), path);
      if (relative(ROOT, target).startsWith('..')) broken.push(`${link}: outside the repository`);
      else if (!existsSync(target)) broken.push(`${link}: no such file`);
      else if (anchor !== undefined && statSync(target).isFile() && !anchorsOf(target).has(anchor))
        broken.push(`${link}: no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });

  // A fence that opens inside an open block would be pasted along with the commands.
  it.each(PAGES)('%s: every code block closes, and none opens inside another', (page) => {
    const problems: string[] = [];
    let open: number | undefined;
    readFileSync(join(ROOT, page), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const fence = /^\s*```(\S*)/.exec(line);
        if (!fence) return;
        if (open === undefined) open = i + 1;
        else if (fence[1] === '') open = undefined;
        else problems.push(`line ${i + 1}: a fence with a language inside the block opened at line ${open}`);
      });
    if (open !== undefined) problems.push(`the block opened at line ${open} never closes`);
    expect(problems).toEqual([]);
  });
});
