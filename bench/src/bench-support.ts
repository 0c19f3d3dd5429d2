import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createKeyService, openSqliteStore } from '@decision-gateway/gateway';
import { repoRoot } from './processes.ts';

/** A key with ample credits in a new SQLite file at `path`; returns the plain key. */
export async function createBenchKey(path: string): Promise<string> {
  const store = openSqliteStore(path);
  try {
    const created = await createKeyService(store).create({ name: 'bench', credits: 1_000_000_000 });
    if (!created.ok) throw new Error(created.error.message);
    return created.value.key;
  } finally {
    await store.close();
  }
}

/** Replace what the README holds between `<!-- name:start -->` and `<!-- name:end -->`. */
export function updateReadmeSection(name: string, content: string) {
  const path = join(repoRoot, 'README.md');
  const readme = readFileSync(path, 'utf8');
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from === -1 || to === -1) throw new Error(`README.md has no ${start} … ${end} section`);
  writeFileSync(path, `${readme.slice(0, from + start.length)}\n${content}\n${readme.slice(to)}`);
}
