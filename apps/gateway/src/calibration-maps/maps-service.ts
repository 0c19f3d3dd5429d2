import { randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import type { CalibratedType, CalibrationMap } from '@decision-gateway/contract';
import type { Logger } from 'pino';
import type { Store, StoredCalibrationMap } from '../store/store.ts';
import type { ActiveMap, MapParams } from './apply.ts';
import type { Fit } from './refit.ts';
import type { RefitMessage, RefitReply } from './refit-work.ts';

const DAY_MS = 86_400_000;
/**
 * Decisions sent to the refit thread at a time: each page is one short read and one message, and
 * the requests waiting are served between pages (with pages of 1,000, a lone caller's p99 rose
 * 27 ms during a refit of 100,000 outcomes, against 10 ms with these).
 */
const PAGE = 200;
/**
 * While callers are being served, a refit rests after each page this many times as long as the
 * page took: its reads, the thread's judging and the database's work then take a seventh of the
 * time, whatever the callers need of the cores (measured: docs/calibration-maps.md). With nobody
 * calling, pages follow each other.
 */
const REST_FACTOR = 6;

export interface CalibrationMapsOptions {
  store: Store;
  logger: Logger;
  clock: () => number;
  /** CALIBRATION_WINDOW_DAYS: the outcomes of decisions made this far back are fitted. */
  windowDays: number;
  /** CALIBRATION_MIN_OUTCOMES: an upstream and type with fewer is not fitted. */
  minOutcomes: number;
  /** CALIBRATION_REFIT_MINUTES: how often a refit runs (0: only on demand). */
  refitMinutes: number;
  /** How often the active maps are read again, so every instance applies the same (default 30 s). */
  reloadMs?: number;
  /** A count that grows with every request the gateway begins: a refit rests between pages while it grows. */
  requestsBegun?: () => number;
  /** How a refit rests between pages (a timer; tests observe it). */
  rest?: (ms: number) => Promise<void>;
}

const keyOf = (upstream: string, type: string) => `${upstream}\u0000${type}`;

/** A stored fit as the admin API shows it. */
export function mapView(stored: StoredCalibrationMap): CalibrationMap {
  return {
    id: stored.id,
    upstream: stored.upstream,
    type: stored.type,
    fittedAt: new Date(stored.fittedAt).toISOString(),
    outcomes: stored.outcomes,
    params: JSON.parse(stored.params) as CalibrationMap['params'],
    heldOut: JSON.parse(stored.heldOut) as CalibrationMap['heldOut'],
    active: stored.active,
  };
}

/**
 * Calibration maps (docs/calibration-maps.md): refits in the background, every
 * CALIBRATION_REFIT_MINUTES and on demand, judged and fitted on a thread of their own; the fits
 * stored; the active maps read from the store, so every instance applies the same ones.
 */
export function createCalibrationMaps(options: CalibrationMapsOptions) {
  const { store, logger, clock } = options;
  const rest =
    options.rest ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.ceil(ms))));
  let active = new Map<string, ActiveMap>();
  let worker: Worker | undefined;
  let running: Promise<CalibrationMap[]> | undefined;
  let timers: NodeJS.Timeout[] = [];
  let closed = false;

  function thread(): Worker {
    if (worker) return worker;
    const started = new Worker(new URL('./refit-thread.js', import.meta.url));
    started.on('error', (error) => {
      logger.error({ err: error }, 'the calibration refit thread stopped; the next refit starts another');
      if (worker === started) worker = undefined;
    });
    // Waiting for work does not keep the process alive.
    started.unref();
    worker = started;
    return started;
  }

  /** The fits of the thread, once it has judged every page sent. */
  function fitted(minOutcomes: number): Promise<Fit[]> {
    const w = thread();
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      w.once('error', onError);
      w.once('message', (reply: RefitReply) => {
        w.off('error', onError);
        if (reply.ok) resolve(reply.fits);
        else reject(new Error(`the refit failed: ${reply.message}`));
      });
      w.postMessage({ op: 'fit', minOutcomes } satisfies RefitMessage);
    });
  }

  async function refitNow(): Promise<CalibrationMap[]> {
    const now = clock();
    const from = now - options.windowDays * DAY_MS;
    thread().postMessage({ op: 'reset' } satisfies RefitMessage);
    let begun = options.requestsBegun?.();
    // Read in pages: each is one short read, and the thread judges it while the next is read.
    for (let after = -1; ; ) {
      const started = performance.now();
      const decisions = await store.judgedDecisions({ from, to: now, after, limit: PAGE });
      if (decisions.length === 0) break;
      thread().postMessage({ op: 'page', decisions } satisfies RefitMessage);
      after = (decisions[decisions.length - 1] as (typeof decisions)[number]).id;
      if (decisions.length < PAGE) break;
      const callers = options.requestsBegun?.();
      if (callers !== begun) {
        begun = callers;
        await rest(REST_FACTOR * (performance.now() - started));
      } else {
        // Requests that arrived meanwhile go first.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    const fits = await fitted(options.minOutcomes);
    const stored: StoredCalibrationMap[] = fits.map((fit) => ({
      id: `cal_${randomBytes(12).toString('hex')}`,
      upstream: fit.upstream,
      type: fit.type,
      fittedAt: now,
      outcomes: fit.outcomes,
      params: JSON.stringify(fit.params),
      heldOut: JSON.stringify(fit.heldOut),
      active: fit.active,
    }));
    await store.saveCalibrationMaps(stored);
    await reload();
    if (stored.length > 0)
      logger.info(
        { fits: stored.map(({ id, upstream, type, active }) => ({ id, upstream, type, active })) },
        'calibration maps refitted',
      );
    return stored.map(mapView);
  }

  async function reload(): Promise<void> {
    const maps = await store.calibrationMaps({ activeOnly: true });
    active = new Map(
      maps.map((map) => [
        keyOf(map.upstream, map.type),
        { id: map.id, params: JSON.parse(map.params) as MapParams },
      ]),
    );
  }

  /** One refit at a time: a second caller waits for the one running and gets its fits. */
  function refit(): Promise<CalibrationMap[]> {
    running ??= refitNow().finally(() => {
      running = undefined;
    });
    return running;
  }

  /** A periodic refit, unless another instance refitted within the period (every instance runs the timer). */
  async function scheduledRefit(): Promise<void> {
    const [newest] = await store.calibrationMaps({ activeOnly: false });
    if (newest !== undefined && clock() - newest.fittedAt < options.refitMinutes * 60_000 * 0.9) return;
    await refit();
  }

  const warned = (what: string) => (error: unknown) =>
    logger.warn({ err: error }, `${what}; it is tried again at the next`);

  return {
    refit,
    /** `GET /admin/calibration/maps`: every fit kept, newest first. */
    async list(): Promise<CalibrationMap[]> {
      return (await store.calibrationMaps({ activeOnly: false })).map(mapView);
    },
    /** The active map of an upstream and type, if there is one (read on the request path: a map lookup). */
    activeFor(upstream: string, type: CalibratedType | string): ActiveMap | undefined {
      return active.get(keyOf(upstream, type));
    },
    /** Reads the active maps, then keeps reading them, and refits every CALIBRATION_REFIT_MINUTES. */
    async start(): Promise<void> {
      await reload().catch(warned('the calibration maps could not be read'));
      if (closed) return;
      timers = [
        setInterval(
          () => void reload().catch(warned('the calibration maps could not be read')),
          options.reloadMs ?? 30_000,
        ),
        ...(options.refitMinutes > 0
          ? [
              setInterval(
                () => void scheduledRefit().catch(warned('the calibration refit failed')),
                options.refitMinutes * 60_000,
              ),
            ]
          : []),
      ];
      for (const timer of timers) timer.unref();
    },
    reload,
    async close(): Promise<void> {
      closed = true;
      for (const timer of timers) clearInterval(timer);
      await running?.catch(() => undefined);
      await worker?.terminate();
      worker = undefined;
    },
  };
}

export type CalibrationMaps = ReturnType<typeof createCalibrationMaps>;
