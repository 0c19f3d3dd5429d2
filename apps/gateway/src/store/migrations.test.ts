import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { POSTGRES_MIGRATIONS } from './postgres/migrations.ts';
import { MIGRATIONS } from './sqlite/migrations.ts';

/**
 * A released migration never changes: databases that ran it would differ from those that run it
 * later. Migrations that load a function's current definition (postgres/functions.ts) make this
 * easy to break by editing that file alone; these checksums (of the SQL with white space folded)
 * fail first. To change a function: copy its text into the migration that loaded it, change it in
 * functions.ts, and add a migration that applies it again; then pin the new migration here.
 */
const checksum = (sql: string) =>
  createHash('sha256').update(sql.replace(/\s+/g, ' ').trim()).digest('hex').slice(0, 16);

describe('released migrations', () => {
  it('PostgreSQL: each as it was released', () => {
    expect(POSTGRES_MIGRATIONS.map((m) => [m.version, checksum(m.sql)])).toEqual([
      [1, 'f38884443779bd2e'],
      [2, '95cdf2df97a5af35'],
      [3, '7e1a8f86c1c6132e'],
      [4, 'bcd065e958d1af4d'],
      [5, '2c7371911265880e'],
      [6, 'dabc4627623777b6'],
      [7, 'c10be13dceafd623'],
      [8, '779d373aa659b13b'],
      [9, 'ebdfa940b2b17233'],
      [10, 'a15e363c805b6b58'],
      [11, '0843e2e2f2ff4871'],
      [12, '964a46c17541ec75'],
      [13, '9ce89b423db394ed'],
      [14, '685c7f2bc3740763'],
    ]);
  });

  it('SQLite: each as it was released', () => {
    expect(MIGRATIONS.map((m) => [m.version, checksum(m.sql)])).toEqual([
      [1, 'a31cdcc3b57e3141'],
      [2, 'd76433950b7c6ded'],
      [3, 'ad45579ab16d6d8c'],
      [4, '0b08cb4093603d69'],
      [5, '4df02ea6d2e2eb74'],
      [6, 'a3aae2a0807adedb'],
      [7, 'b6c279ac63b3126a'],
      [8, '6ecdb3de573e9651'],
      [9, 'd5a13b3b9ef67f0b'],
      [10, '4efa9e6af1933258'],
    ]);
  });
});
