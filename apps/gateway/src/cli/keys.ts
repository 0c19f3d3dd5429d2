import { parseArgs } from 'node:util';
import {
  AdjustCreditsBody,
  type BudgetState,
  type Calibration,
  CalibrationQuery,
  CreateKeyBody,
  CreateProjectBody,
  KeyListQuery,
  type KeyObject,
  PatchProjectBody,
  type ProjectObject,
  parseAdminInput,
  UsageQuery,
  UsageSeriesQuery,
} from '@decision-gateway/contract';
import { createBudgetService } from '../budgets/budget-service.ts';
import { loadConfig, loadDotEnv } from '../config/environment.ts';
import { createKeyService, type KeyResult } from '../keys/key-service.ts';
import { createOutcomes, escalatingRoutes } from '../outcomes/outcome-service.ts';
import { openStore } from '../store/open-store.ts';
import { createUsageReports } from '../usage/reports.ts';

/** The CLI runs no requests: a hold older than this is surely a crashed process's, and counts nowhere in what it shows. */
const CLI_STALE_AFTER_MS = 10 * 60_000;

const USAGE = `Usage: pnpm keys <command> [options]

Commands (they act on the configured database directly, like the admin API):
  create --name NAME (--credits N | --unlimited) [--expires-at ISO-8601] [--rate-limit N] [--route NAME]
         [--project ID]
  list [--limit N] [--cursor C] [--all]   (newest first; --all follows every page)
  show ID
  credits ID AMOUNT          (negative AMOUNT removes credits)
  revoke ID
  usage ID [--limit N | --series minute|hour|day [--from ISO-8601]]
  calibration [--from ISO-8601] [--to ISO-8601] [--route R] [--upstream U] [--type choice|score|noul]
              [--key ID] [--target 0.9]   (how right each upstream was, and escalation advice)
  budget set KEY-OR-PROJECT-ID WINDOW LIMIT [--soft]   (WINDOW: minute, hour, day, week or month)
  budget rm KEY-OR-PROJECT-ID WINDOW
  project create NAME | project list | project show ID | project delete ID
  (a key joins a project with: create … --project ID)

Options:
  --json                     print JSON instead of text
  --help                     show this help
`;

/** Runs one CLI command; returns the exit code. Output goes through `out`/`err` for testing. */
export async function runKeysCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  if (values.help || command === undefined) {
    (values.help ? out : err)(USAGE);
    return values.help ? 0 : 2;
  }

  const loaded = loadConfig(env);
  if (!loaded.ok) {
    err(`Invalid configuration:\n${loaded.problems.map((p) => `  ${p}\n`).join('')}`);
    return 1;
  }
  const store = await openStore(loaded.config.database);
  const budgets = createBudgetService(store, Date.now, CLI_STALE_AFTER_MS);
  const keys = createKeyService(store, Date.now, Object.keys(loaded.config.gateway.routes), budgets);
  const reports = createUsageReports(store);
  const outcomes = createOutcomes({
    store,
    clock: Date.now,
    retentionDays: loaded.config.retention.decisionDays,
    escalating: escalatingRoutes(Object.entries(loaded.config.gateway.routes)),
  });
  const print = <T>(result: KeyResult<T>, text: (value: T) => string): number => {
    if (!result.ok) {
      err(`error ${result.error.code} (${result.error.type}): ${result.error.message}\n`);
      return 1;
    }
    out(values.json ? `${JSON.stringify(result.value, null, 2)}\n` : text(result.value));
    return 0;
  };
  const invalid = (message: string) => {
    err(`${message}\n`);
    return 2;
  };

  /**
   * One budget of a key (`key_…`) or a project (`prj_…`) set or removed: the holder's list is read,
   * changed at that window and written back whole, through the same rules as the admin API.
   */
  const setBudget = async (
    id: string,
    change: { window: string; limit?: number; mode?: 'hard' | 'soft'; remove?: true },
  ): Promise<number> => {
    const project = id.startsWith('prj_');
    const current = project ? await budgets.getProject(id) : await keys.get(id);
    if (!current.ok) return print(current, () => '');
    const others = current.value.budgets
      .filter((b) => b.window !== change.window)
      .map(({ window, limit, mode }) => ({ window, limit, mode }));
    if (change.remove && others.length === current.value.budgets.length)
      return invalid(`${id} has no ${change.window} budget`);
    const listed = change.remove
      ? others
      : [...others, { window: change.window, limit: change.limit, mode: change.mode }];
    const body = parseAdminInput(PatchProjectBody, { budgets: listed });
    if (!body.ok) return invalid(body.error.message.replace(/^budgets\.\d+\./, ''));
    const updated = project
      ? await budgets.patchProject(id, { budgets: body.value.budgets ?? [] })
      : await keys.patch(id, { budgets: body.value.budgets ?? [] });
    return print(updated as KeyResult<KeyObject | ProjectObject>, (holder) =>
      'keyCount' in holder ? `${describeProject(holder)}\n` : `${describeKey(holder)}\n`,
    );
  };

  try {
    switch (command) {
      case 'create': {
        if (values.credits !== undefined && values.unlimited)
          return invalid('give --credits or --unlimited, not both');
        if (values.credits === undefined && !values.unlimited)
          return invalid('give --credits N or --unlimited');
        const body = parseAdminInput(CreateKeyBody, {
          name: values.name,
          credits: values.unlimited ? null : Number(values.credits),
          ...(values['expires-at'] !== undefined && { expiresAt: values['expires-at'] }),
          ...(values['rate-limit'] !== undefined && { rateLimitPerMinute: Number(values['rate-limit']) }),
          ...(values.route !== undefined && { route: values.route }),
          ...(values.project !== undefined && { projectId: values.project }),
        });
        if (!body.ok) return invalid(body.error.message);
        return print(
          await keys.create(body.value),
          (key) => `${describeKey(key)}\n\nAPI key (shown only this once):\n  ${key.key}\n`,
        );
      }
      case 'list': {
        const query = parseAdminInput(KeyListQuery, {
          ...(values.limit !== undefined && { limit: values.limit }),
          ...(values.cursor !== undefined && { cursor: values.cursor }),
        });
        if (!query.ok) return invalid(query.error.message);
        let page = await keys.list(query.value.limit, query.value.cursor);
        if (!page.ok) return invalid(page.error.message); // a cursor this gateway did not give
        if (values.all) {
          // Every page, one request after another (each reads one page of the store), shown as one list.
          const all: KeyObject[] = [];
          while (page.ok) {
            all.push(...page.value.keys);
            if (page.value.nextCursor === null) break;
            page = await keys.list(query.value.limit, page.value.nextCursor);
          }
          if (page.ok) page = { ok: true, value: { keys: all, nextCursor: null } };
        }
        return print(page, ({ keys: shown, nextCursor }) =>
          shown.length === 0
            ? 'no keys\n'
            : `${shown.map(describeKey).join('\n\n')}\n${nextCursor === null ? '' : `\nmore: pnpm keys list --cursor ${nextCursor}\n`}`,
        );
      }
      case 'show':
        if (args.length !== 1) return invalid('usage: pnpm keys show ID');
        return print(await keys.get(args[0] as string), (key) => `${describeKey(key)}\n`);
      case 'credits': {
        if (args.length !== 2) return invalid('usage: pnpm keys credits ID AMOUNT');
        const body = parseAdminInput(AdjustCreditsBody, { amount: Number(args[1]) });
        if (!body.ok) return invalid(body.error.message);
        return print(
          await keys.adjustCredits(args[0] as string, body.value),
          (key) => `${describeKey(key)}\n`,
        );
      }
      case 'revoke':
        if (args.length !== 1) return invalid('usage: pnpm keys revoke ID');
        return print(await keys.revoke(args[0] as string), (key) => `${describeKey(key)}\n`);
      case 'usage': {
        if (args.length !== 1)
          return invalid('usage: pnpm keys usage ID [--limit N | --series STEP [--from ISO-8601]]');
        if (values.series !== undefined) {
          // The console's charts as a table: the last day by hour unless told otherwise.
          const span =
            { minute: 3_600_000, hour: 86_400_000, day: 30 * 86_400_000 }[values.series as 'hour'] ??
            86_400_000;
          const now = Date.now();
          const series = parseAdminInput(UsageSeriesQuery, {
            keyId: args[0],
            step: values.series,
            from: values.from ?? new Date(now - span).toISOString(),
            ...(values.from === undefined && { to: new Date(now).toISOString() }),
          });
          if (!series.ok) return invalid(series.error.message);
          return print(await reports.series(series.value), ({ step, series: points }) =>
            [
              `per ${step}: at, requests, errors, credits, input tokens, cache hits, p50 and p95 ms`,
              ...points.map(
                (p) =>
                  `  ${p.at}  ${p.requests}  ${p.errors}  ${p.creditsUsed}  ${p.input_tokens}  ${p.cacheHits}  ${p.p50ElapsedMs ?? '-'}  ${p.p95ElapsedMs ?? '-'}`,
              ),
              '',
            ].join('\n'),
          );
        }
        const query = parseAdminInput(UsageQuery, values.limit === undefined ? {} : { limit: values.limit });
        if (!query.ok) return invalid(query.error.message);
        return print(await keys.usage(args[0] as string, query.value.limit), (report) => {
          const t = report.totals;
          const lines = report.recent.map(
            (r) =>
              `  ${r.at}  ${r.requestId}  status ${r.status}  ${r.questions} questions  ${r.input_tokens}+${r.output_tokens} tokens  ${r.creditsUsed} credits  ${r.elapsedMs} ms  route ${r.route ?? '-'}  upstream ${r.upstream ?? '-'}${r.cached ? '  cached' : ''}${r.subject === null ? '' : `  subject ${r.subject}`}`,
          );
          return `${t.requests} requests, ${t.creditsUsed} credits, ${t.input_tokens} input and ${t.output_tokens} output tokens\n${lines.join('\n')}\n`;
        });
      }
      case 'calibration': {
        const query = parseAdminInput(CalibrationQuery, {
          ...(values.from !== undefined && { from: values.from }),
          ...(values.to !== undefined && { to: values.to }),
          ...(values.route !== undefined && { route: values.route }),
          ...(values.upstream !== undefined && { upstream: values.upstream }),
          ...(values.type !== undefined && { type: values.type }),
          ...(values.key !== undefined && { keyId: values.key }),
          ...(values.target !== undefined && { target: values.target }),
        });
        if (!query.ok) return invalid(query.error.message);
        return print(await outcomes.calibration(query.value), describeCalibration);
      }
      case 'budget': {
        const [action, id, window, limit] = args;
        if (action === 'set' && args.length === 4 && id && window && limit !== undefined)
          return await setBudget(id, { window, limit: Number(limit), mode: values.soft ? 'soft' : 'hard' });
        if (action === 'rm' && args.length === 3 && id && window)
          return await setBudget(id, { window, remove: true });
        return invalid(
          'usage: pnpm keys budget set ID WINDOW LIMIT [--soft] | pnpm keys budget rm ID WINDOW',
        );
      }
      case 'project': {
        const [action, arg] = args;
        if (action === 'create' && args.length === 2) {
          const body = parseAdminInput(CreateProjectBody, { name: arg });
          if (!body.ok) return invalid(body.error.message);
          return print(await budgets.createProject(body.value), (p) => `${describeProject(p)}\n`);
        }
        if (action === 'list' && args.length === 1)
          return print(await budgets.listProjects(), ({ projects }) =>
            projects.length === 0 ? 'no projects\n' : `${projects.map(describeProject).join('\n\n')}\n`,
          );
        if (action === 'show' && args.length === 2)
          return print(await budgets.getProject(arg as string), (p) => `${describeProject(p)}\n`);
        if (action === 'delete' && args.length === 2)
          return print(await budgets.deleteProject(arg as string), (p) => `deleted ${p.id}  ${p.name}\n`);
        return invalid('usage: pnpm keys project create NAME | list | show ID | delete ID');
      }
      default:
        return invalid(`unknown command "${command}"\n\n${USAGE}`);
    }
  } finally {
    await store.close();
  }
}

/** Negative numbers ("credits ID -5") are values, not options: shield them from parseArgs. */
const NEGATIVE = /^-\d/;
const SHIELD = '\u0000';

function parse(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv.map((arg) => (NEGATIVE.test(arg) ? `${SHIELD}${arg}` : arg)),
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      credits: { type: 'string' },
      unlimited: { type: 'boolean' },
      'expires-at': { type: 'string' },
      'rate-limit': { type: 'string' },
      route: { type: 'string' },
      limit: { type: 'string' },
      series: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      upstream: { type: 'string' },
      type: { type: 'string' },
      key: { type: 'string' },
      target: { type: 'string' },
      cursor: { type: 'string' },
      project: { type: 'string' },
      soft: { type: 'boolean' },
      all: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const unshield = (value: string) => (value.startsWith(SHIELD) ? value.slice(1) : value);
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string') (values as Record<string, unknown>)[name] = unshield(value);
  }
  return { values, positionals: positionals.map(unshield) };
}

function describeKey(key: KeyObject): string {
  const status = key.revokedAt
    ? `revoked ${key.revokedAt}`
    : key.expiresAt
      ? `expires ${key.expiresAt}`
      : 'active';
  return [
    `${key.id}  ${key.name}  (${key.prefix}…)`,
    `  credits: ${key.credits === null ? 'unlimited' : key.credits}`,
    `  rate limit: ${key.rateLimitPerMinute === null ? 'default' : `${key.rateLimitPerMinute}/min`}`,
    `  route: ${key.route ?? 'default'}`,
    `  status: ${status}`,
    `  created ${key.createdAt}, last used ${key.lastUsedAt ?? 'never'}`,
    ...(key.projectId === null ? [] : [`  project: ${key.projectId}`]),
    ...key.budgets.map(describeBudget),
  ].join('\n');
}

function describeProject(project: ProjectObject): string {
  return [
    `${project.id}  ${project.name}`,
    `  keys: ${project.keyCount}`,
    `  created ${project.createdAt}`,
    ...project.budgets.map(describeBudget),
  ].join('\n');
}

/** `  budget day (hard): 0.3 of 1 spent, 0.7 left, resets 2026-11-27T00:00:00.000Z` */
function describeBudget(b: BudgetState): string {
  return `  budget ${b.window} (${b.mode}): ${b.spent} of ${b.limit} spent, ${b.remaining} left, resets ${b.resetsAt}`;
}

/** The calibration report as a table, then the advice, one line each. */
function describeCalibration({ groups, advice }: Calibration): string {
  if (groups.length === 0) return 'no outcomes recorded in this range\n';
  const rows = groups.map(
    (g) =>
      `  ${g.upstream.padEnd(16)} ${g.type.padEnd(7)} ${String(g.outcomes).padStart(8)} ${g.accuracy.toFixed(3).padStart(9)} ${(g.brier === null ? '-' : g.brier.toFixed(3)).padStart(7)} ${g.ece.toFixed(3).padStart(7)}${g.mae === null ? '' : `  mae ${g.mae}`}${g.meanIoU === null ? '' : `  meanIoU ${g.meanIoU}`}`,
  );
  const advised = advice.map((a) => {
    const threshold =
      a.confidenceBelow !== undefined
        ? `confidenceBelow: ${a.confidenceBelow ?? 'none reaches the target'}`
        : `noulWithin: ${a.noulWithin ? `[${a.noulWithin.join(', ')}]` : 'none reaches the target'}`;
    const kept =
      a.keptAccuracy === null
        ? ''
        : ` (kept answers ${a.keptAccuracy} accurate, ${a.escalatedShare} escalated)`;
    return `  route ${a.route}, ${a.upstream} on ${a.type} (${a.outcomes} outcomes): ${threshold}${kept}`;
  });
  return [
    `  ${'upstream'.padEnd(16)} ${'type'.padEnd(7)} ${'outcomes'.padStart(8)} ${'accuracy'.padStart(9)} ${'brier'.padStart(7)} ${'ece'.padStart(7)}`,
    ...rows,
    ...(advised.length === 0 ? [] : ['', 'advice:', ...advised]),
    '',
  ].join('\n');
}

// Run when executed directly (pnpm keys …), not when imported by tests.
if (import.meta.url === `file://${process.argv[1]}`) {
  loadDotEnv();
  const code = await runKeysCli(
    process.argv.slice(2),
    process.env,
    (text) => process.stdout.write(text),
    (text) => process.stderr.write(text),
  );
  process.exitCode = code;
}
