import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { UpstreamConfig, UpstreamName } from '../upstreams/kinds/index.ts';

/**
 * Upstreams and routes (docs/routes.md): from the file `GATEWAY_CONFIG` names, or else one upstream
 * from the `UPSTREAM*` variables and one route `default` holding it.
 */
export interface GatewaySetup {
  upstreams: Record<string, UpstreamConfig>;
  routes: Record<string, ResolvedRoute>;
}

export interface ResolvedRoute {
  upstreams: string[];
  weights?: Record<string, number>;
  escalate?: { to: string; confidenceBelow?: number; noulWithin?: [number, number] };
  /** The whole request ends by then (default: twice the largest timeoutMs of its upstreams). */
  deadlineMs: number;
  /** 0 = no decision cache (docs/routes.md#decision-cache). */
  cacheTtlSeconds: number;
  /** Apply the active calibration maps to its answers (docs/calibration-maps.md). */
  calibrate?: boolean;
  /** Mark its unsure final answers for review by a person (docs/review.md). */
  review?: { confidenceBelow?: number; noulWithin?: [number, number] };
}

const probability = z.number().min(0).max(1);

const RouteConfig = z.strictObject({
  upstreams: z.array(UpstreamName).min(1, { error: 'a route tries 1 to 8 upstreams' }).max(8, {
    error: 'a route tries 1 to 8 upstreams',
  }),
  weights: z.record(z.string(), z.number().finite().min(0, { error: 'a weight is a number ≥ 0' })).optional(),
  escalate: z
    .strictObject({
      to: UpstreamName,
      confidenceBelow: probability.optional(),
      noulWithin: z.tuple([probability, probability]).optional(),
    })
    .optional(),
  cache: z.strictObject({ ttlSeconds: z.int().min(0).max(31_536_000) }).optional(),
  calibrate: z.boolean().optional(),
  review: z
    .strictObject({
      confidenceBelow: probability.optional(),
      noulWithin: z.tuple([probability, probability]).optional(),
    })
    .optional(),
  deadlineMs: z.int().min(1, { error: 'must be at least 1' }).max(3_600_000).optional(),
});

const GatewayFile = z
  .strictObject({
    upstreams: z.record(UpstreamName, UpstreamConfig),
    routes: z.record(UpstreamName, RouteConfig),
  })
  .superRefine((file, ctx) => {
    const problem = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: 'custom', path, message });
    const names = Object.keys(file.upstreams);
    const upstreamCount = names.length;
    if (upstreamCount < 1 || upstreamCount > 16) problem(['upstreams'], 'define 1 to 16 upstreams');
    const routeCount = Object.keys(file.routes).length;
    if (routeCount < 1 || routeCount > 32) problem(['routes'], 'define 1 to 32 routes');
    if (!('default' in file.routes)) problem(['routes'], 'one route must be named "default"');
    const known = (name: string) => names.includes(name);
    for (const [routeName, route] of Object.entries(file.routes)) {
      const at = ['routes', routeName];
      route.upstreams.forEach((name, i) => {
        if (!known(name)) problem([...at, 'upstreams', i], `no upstream named "${name}"`);
      });
      if (new Set(route.upstreams).size !== route.upstreams.length)
        problem([...at, 'upstreams'], 'an upstream appears twice');
      if (route.weights !== undefined) {
        for (const name of Object.keys(route.weights)) {
          if (!route.upstreams.includes(name))
            problem([...at, 'weights', name], `"${name}" is not one of this route's upstreams`);
        }
        if (Object.values(route.weights).every((w) => w === 0))
          problem([...at, 'weights'], 'at least one weight must be above 0');
      }
      const escalate = route.escalate;
      if (escalate !== undefined) {
        if (!known(escalate.to)) problem([...at, 'escalate', 'to'], `no upstream named "${escalate.to}"`);
        if (escalate.confidenceBelow === undefined && escalate.noulWithin === undefined)
          problem([...at, 'escalate'], 'say when to escalate: confidenceBelow, noulWithin or both');
        const within = escalate.noulWithin;
        if (within !== undefined && within[0] > within[1])
          problem([...at, 'escalate', 'noulWithin'], 'the lower bound comes first');
      }
      const review = route.review;
      if (review !== undefined) {
        if (review.confidenceBelow === undefined && review.noulWithin === undefined)
          problem([...at, 'review'], 'say what to review: confidenceBelow, noulWithin or both');
        const within = review.noulWithin;
        if (within !== undefined && within[0] > within[1])
          problem([...at, 'review', 'noulWithin'], 'the lower bound comes first');
      }
    }
  });

/** `routes.default.upstreams[1]`: a path as people read it in a configuration file. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : i === 0 ? String(part) : `.${String(part)}`))
    .join('');
}

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Every `${NAME}` in a string value replaced by the environment variable NAME, so secrets stay out
 * of the file; an unset one is a problem naming it. Iterative: the file never drives recursion.
 */
function substitute(root: unknown, env: NodeJS.ProcessEnv, problems: string[]): unknown {
  const holder = { root };
  const stack: {
    parent: Record<string | number, unknown>;
    key: string | number;
    path: (string | number)[];
  }[] = [{ parent: holder as Record<string, unknown>, key: 'root', path: [] }];
  while (stack.length > 0) {
    const { parent, key, path } = stack.pop() as (typeof stack)[number];
    const value = parent[key];
    if (typeof value === 'string') {
      parent[key] = value.replace(REFERENCE, (whole, name: string) => {
        const set = env[name];
        if (set === undefined || set === '') {
          problems.push(
            `${formatPath(path) || 'GATEWAY_CONFIG'}: the environment variable ${name} is not set`,
          );
          return whole;
        }
        return set;
      });
    } else if (Array.isArray(value)) {
      const items = value as unknown as Record<number, unknown>;
      for (let i = 0; i < value.length; i++) stack.push({ parent: items, key: i, path: [...path, i] });
    } else if (typeof value === 'object' && value !== null) {
      for (const child of Object.keys(value))
        stack.push({ parent: value as Record<string, unknown>, key: child, path: [...path, child] });
    }
  }
  return holder.root;
}

export type SetupResult = { ok: true; setup: GatewaySetup } | { ok: false; problems: string[] };

/** The file at `path` (YAML or JSON), validated, or one line per problem naming its place in the file. */
export function loadGatewayFile(path: string, env: NodeJS.ProcessEnv): SetupResult {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return {
      ok: false,
      problems: [`GATEWAY_CONFIG: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`],
    };
  }
  let raw: unknown;
  try {
    // YAML 1.2 is a superset of JSON: one parser reads both.
    raw = parseYaml(text);
  } catch (error) {
    return {
      ok: false,
      problems: [
        `GATEWAY_CONFIG: ${path} is not valid YAML or JSON: ${(error as Error).message.split('\n')[0]}`,
      ],
    };
  }
  const problems: string[] = [];
  const substituted = substitute(raw, env, problems);
  if (problems.length > 0) return { ok: false, problems };
  const parsed = GatewayFile.safeParse(substituted);
  if (!parsed.success) {
    return {
      ok: false,
      problems: parsed.error.issues.map(
        (issue) => `${formatPath(issue.path) || 'GATEWAY_CONFIG'}: ${issue.message}`,
      ),
    };
  }
  return { ok: true, setup: resolve(parsed.data) };
}

/** The routes with every default filled in. */
function resolve(file: z.output<typeof GatewayFile>): GatewaySetup {
  const routes: Record<string, ResolvedRoute> = {};
  for (const [name, route] of Object.entries(file.routes)) {
    const involved = [...route.upstreams, ...(route.escalate ? [route.escalate.to] : [])];
    const longest = Math.max(...involved.map((upstream) => file.upstreams[upstream]?.timeoutMs ?? 0));
    routes[name] = {
      upstreams: route.upstreams,
      ...(route.weights !== undefined && { weights: route.weights }),
      ...(route.escalate !== undefined && { escalate: route.escalate as ResolvedRoute['escalate'] & object }),
      deadlineMs: route.deadlineMs ?? 2 * longest,
      cacheTtlSeconds: route.cache?.ttlSeconds ?? 0,
      ...(route.calibrate === true && { calibrate: true }),
      ...(route.review !== undefined && { review: route.review as NonNullable<ResolvedRoute['review']> }),
    };
  }
  return { upstreams: file.upstreams, routes };
}

/** Without a file: the one upstream of the `UPSTREAM*` variables and the route `default`. */
export function singleUpstreamSetup(
  name: string,
  upstream: UpstreamConfig,
  cacheTtlSeconds: number,
): GatewaySetup {
  return {
    upstreams: { [name]: upstream },
    routes: { default: { upstreams: [name], deadlineMs: 2 * upstream.timeoutMs, cacheTtlSeconds } },
  };
}
