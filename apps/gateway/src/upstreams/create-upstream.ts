import { createLexicalUpstream, type Upstream } from '@decision-gateway/questions';
import type { Config } from '../config.ts';

/** The upstream `UPSTREAM` names (SPEC §8). */
export function createUpstream(config: Config['upstream']): Upstream {
  switch (config.kind) {
    case 'lexical':
      return createLexicalUpstream();
    default:
      throw new Error(`UPSTREAM=${config.kind} is not available in this build yet`);
  }
}
