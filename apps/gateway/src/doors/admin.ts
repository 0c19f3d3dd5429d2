import {
  AdjustCreditsBody,
  CachePurgeQuery,
  CalibrationQuery,
  CreateKeyBody,
  CreateProjectBody,
  CreateTokenBody,
  failure,
  type GatewayFailure,
  KeyListQuery,
  LIMITS,
  PatchKeyBody,
  PatchProjectBody,
  parseAdminInput,
  ReviewQuery,
  SubmitReviewBody,
  type UpstreamHealth,
  UsageQuery,
  UsageSeriesQuery,
  UsageSummaryQuery,
} from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { bearerToken, isAdminToken } from '../auth/api-keys.ts';
import type { TokenService } from '../auth/tokens.ts';
import type { BudgetService } from '../budgets/budget-service.ts';
import type { DecisionCache } from '../cache/decision-cache.ts';
import type { CalibrationMaps } from '../calibration-maps/maps-service.ts';
import type { KeyResult, KeyService } from '../keys/key-service.ts';
import type { Outcomes } from '../outcomes/outcome-service.ts';
import type { Reviews } from '../reviews/review-service.ts';
import type { UsageReports } from '../usage/reports.ts';
import { sendSuccess } from './answer.ts';
import { type DoorOptions, door, sendFailure as sendDoorFailure } from './door.ts';

const sendFailure = (reply: FastifyReply, f: GatewayFailure) => sendDoorFailure(reply, f, 'admin');

export interface AdminDoorOptions extends DoorOptions {
  adminToken: string;
  keys: KeyService;
  /** Projects and budgets (docs/budgets.md). */
  budgets: BudgetService;
  reports: UsageReports;
  outcomes: Outcomes;
  /** Calibration maps (docs/calibration-maps.md): their fits, and a refit on demand. */
  calibrationMaps: CalibrationMaps;
  /** Review items and reviewers' truths (docs/review.md). */
  reviews: Reviews;
  /** The decision cache, when a route has one (docs/routes.md#decision-cache). */
  cache?: DecisionCache;
  tokens: TokenService;
  /** The upstreams' health and the routes (docs/operating.md#admin-api), for the console. */
  upstreams(): UpstreamHealth;
}

/** Admin API (docs/operating.md#admin-api); registered only when ADMIN_TOKEN is set, so otherwise every path is 404. */
export async function adminDoor(app: FastifyInstance, opts: AdminDoorOptions) {
  door(app, 'admin', { ...opts, ownsNotFound: false });
  // The token is checked before the body is read: no credential, no parsing.
  app.addHook('onRequest', async (request, reply) => {
    const token = bearerToken(request.headers.authorization);
    if (token === undefined) {
      return sendFailure(reply, failure('missing_api_key', 'send "Authorization: Bearer <ADMIN_TOKEN>"'));
    }
    if (!isAdminToken(token, opts.adminToken)) {
      return sendFailure(reply, failure('invalid_api_key', 'the admin credential is not valid'));
    }
  });

  // JSON bodies, where an empty body (e.g. on revoke) is simply no body.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: LIMITS.maxBodyBytes },
    (_request, body, done) => {
      if (body === '') return done(null, undefined);
      try {
        done(null, JSON.parse(body as string));
      } catch (error) {
        done(
          Object.assign(new Error(`the body is not valid JSON: ${(error as Error).message}`), {
            statusCode: 400,
            code: 'GATEWAY_INVALID_JSON',
          }),
          undefined,
        );
      }
    },
  );

  const reply = <T>(result: KeyResult<T>, res: Parameters<typeof sendSuccess>[0], status = 200) =>
    result.ok ? sendSuccess(res, result.value, status) : sendFailure(res, result.error);

  app.post('/admin/keys', { config: { operation: 'createKey' } }, async (request, res) => {
    const body = parseAdminInput(CreateKeyBody, request.body);
    if (!body.ok) return sendFailure(res, body.error);
    return reply(await opts.keys.create(body.value), res, 201);
  });

  app.get('/admin/keys', { config: { operation: 'listKeys' } }, async (request, res) => {
    const query = parseAdminInput(KeyListQuery, request.query);
    if (!query.ok) return sendFailure(res, query.error);
    return reply(await opts.keys.list(query.value.limit, query.value.cursor), res);
  });

  app.get<{ Params: { id: string } }>(
    '/admin/keys/:id',
    { config: { operation: 'getKey' } },
    async (request, res) => reply(await opts.keys.get(request.params.id), res),
  );

  app.post<{ Params: { id: string } }>(
    '/admin/keys/:id/credits',
    { config: { operation: 'adjustCredits' } },
    async (request, res) => {
      const body = parseAdminInput(AdjustCreditsBody, request.body);
      if (!body.ok) return sendFailure(res, body.error);
      return reply(await opts.keys.adjustCredits(request.params.id, body.value), res);
    },
  );

  app.post<{ Params: { id: string } }>(
    '/admin/keys/:id/revoke',
    { config: { operation: 'revokeKey' } },
    async (request, res) => reply(await opts.keys.revoke(request.params.id), res),
  );

  app.get<{ Params: { id: string } }>(
    '/admin/keys/:id/usage',
    { config: { operation: 'keyUsage' } },
    async (request, res) => {
      const query = parseAdminInput(UsageQuery, request.query);
      if (!query.ok) return sendFailure(res, query.error);
      return reply(await opts.keys.usage(request.params.id, query.value.limit), res);
    },
  );

  // docs/budgets.md: a key's project and budgets.
  app.patch<{ Params: { id: string } }>(
    '/admin/keys/:id',
    { config: { operation: 'patchKey' } },
    async (request, res) => {
      const body = parseAdminInput(PatchKeyBody, request.body ?? {});
      if (!body.ok) return sendFailure(res, body.error);
      return reply(await opts.keys.patch(request.params.id, body.value), res);
    },
  );

  // docs/budgets.md: projects group keys under shared budgets.
  app.post('/admin/projects', { config: { operation: 'createProject' } }, async (request, res) => {
    const body = parseAdminInput(CreateProjectBody, request.body);
    if (!body.ok) return sendFailure(res, body.error);
    return reply(await opts.budgets.createProject(body.value), res, 201);
  });
  app.get('/admin/projects', { config: { operation: 'listProjects' } }, async (_request, res) =>
    reply(await opts.budgets.listProjects(), res),
  );
  app.get<{ Params: { id: string } }>(
    '/admin/projects/:id',
    { config: { operation: 'getProject' } },
    async (request, res) => reply(await opts.budgets.getProject(request.params.id), res),
  );
  app.patch<{ Params: { id: string } }>(
    '/admin/projects/:id',
    { config: { operation: 'patchProject' } },
    async (request, res) => {
      const body = parseAdminInput(PatchProjectBody, request.body ?? {});
      if (!body.ok) return sendFailure(res, body.error);
      return reply(await opts.budgets.patchProject(request.params.id, body.value), res);
    },
  );
  app.delete<{ Params: { id: string } }>(
    '/admin/projects/:id',
    { config: { operation: 'deleteProject' } },
    async (request, res) => reply(await opts.budgets.deleteProject(request.params.id), res),
  );

  // docs/operating.md#admin-api, docs/browsers.md: a token for a key, minted by the operator (the console's playground uses it).
  app.post<{ Params: { id: string } }>(
    '/admin/keys/:id/tokens',
    { config: { operation: 'mintTokenForKey' } },
    async (request, res) => {
      const body = parseAdminInput(CreateTokenBody, request.body ?? {});
      if (!body.ok) return sendFailure(res, body.error);
      const key = await opts.keys.get(request.params.id);
      if (!key.ok) return sendFailure(res, key.error);
      if (key.value.revokedAt !== null)
        return sendFailure(
          res,
          failure('invalid_request', 'the key has been revoked: it cannot mint tokens'),
        );
      const minted = await opts.tokens.mint(key.value.id, body.value);
      return minted.ok ? sendSuccess(res, minted.value, 201) : sendFailure(res, minted.error);
    },
  );

  // docs/operating.md#admin-api: usage summed per step, for the console's charts.
  app.get('/admin/usage/series', { config: { operation: 'usageSeries' } }, async (request, res) => {
    const query = parseAdminInput(UsageSeriesQuery, request.query);
    if (!query.ok) return sendFailure(res, query.error);
    return reply(await opts.reports.series(query.value), res);
  });

  // docs/usage.md: totals, by route, by upstream and top keys, for the console's Overview.
  app.get('/admin/usage/summary', { config: { operation: 'usageSummary' } }, async (request, res) => {
    const query = parseAdminInput(UsageSummaryQuery, request.query);
    if (!query.ok) return sendFailure(res, query.error);
    return reply(await opts.reports.summary(query.value), res);
  });

  // docs/outcomes.md: how well each upstream's probabilities matched the outcomes.
  app.get('/admin/calibration', { config: { operation: 'calibration' } }, async (request, res) => {
    const query = parseAdminInput(CalibrationQuery, request.query);
    if (!query.ok) return sendFailure(res, query.error);
    return reply(await opts.outcomes.calibration(query.value), res);
  });

  // docs/calibration-maps.md: every fit kept, and a refit now (off the serving thread; only this request waits).
  app.get('/admin/calibration/maps', { config: { operation: 'calibrationMaps' } }, async (_request, res) =>
    sendSuccess(res, { maps: await opts.calibrationMaps.list() }),
  );
  app.post('/admin/calibration/refit', { config: { operation: 'refitCalibration' } }, async (_request, res) =>
    sendSuccess(res, { maps: await opts.calibrationMaps.refit() }),
  );

  // docs/review.md: the items routes marked, oldest first; a reviewer's truths become outcomes.
  app.get('/admin/reviews', { config: { operation: 'listReviews' } }, async (request, res) => {
    const query = parseAdminInput(ReviewQuery, request.query);
    if (!query.ok) return sendFailure(res, query.error);
    return reply(await opts.reviews.list(query.value), res);
  });
  app.get('/admin/reviews/:id', { config: { operation: 'getReview' } }, async (request, res) =>
    reply(await opts.reviews.get((request.params as { id: string }).id), res),
  );
  app.post('/admin/reviews/:id', { config: { operation: 'submitReview' } }, async (request, res) => {
    const body = parseAdminInput(SubmitReviewBody, request.body);
    if (!body.ok) return sendFailure(res, body.error);
    return reply(await opts.reviews.submit((request.params as { id: string }).id, body.value), res);
  });

  app.get('/admin/upstreams', { config: { operation: 'upstreamHealth' } }, async (_request, res) =>
    sendSuccess(res, opts.upstreams()),
  );

  // docs/operating.md#admin-api: drops cached decisions, all or one key's; with no cache configured there are none.
  app.delete('/admin/cache', { config: { operation: 'purgeCache' } }, async (request, res) => {
    const query = parseAdminInput(CachePurgeQuery, request.query);
    if (!query.ok) return sendFailure(res, query.error);
    const purged = opts.cache === undefined ? 0 : await opts.cache.purge(query.value.keyId);
    return sendSuccess(res, { purged });
  });
}
