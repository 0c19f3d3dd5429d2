import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ConfigResult, loadConfig } from '../../src/config/environment.ts';

/**
 * `loadConfig` over a configuration file holding `text`, as `GATEWAY_CONFIG` names one. The file
 * lives in a directory of its own only while it is read: tests leave nothing in the temp dir.
 */
export function loadConfigText(text: string, env: NodeJS.ProcessEnv = {}): ConfigResult {
  const dir = mkdtempSync(join(tmpdir(), 'dg-config-'));
  try {
    const path = join(dir, 'gateway.yaml');
    writeFileSync(path, text);
    return loadConfig({ ...env, GATEWAY_CONFIG: path });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
