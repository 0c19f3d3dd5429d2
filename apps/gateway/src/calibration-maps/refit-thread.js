// The thread the calibration maps are fitted on (docs/calibration-maps.md): judging up to a window's
// outcomes and fitting them takes longer than a request may wait, so it never runs on the thread
// that serves requests. The work is TypeScript (refit-work.ts); this entry registers tsx first, so
// the thread starts the same under `pnpm start`, Vitest or plain Node.
import { register } from 'tsx/esm/api';

register();
await import('./refit-work.ts');
