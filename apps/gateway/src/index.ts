export { type Config, loadConfig } from './config.ts';
export { type Pricing, pricingFromCredits } from './core/credits.ts';
export { buildGateway, type Gateway, type GatewayOptions } from './http/server.ts';
export { createKeyService, type KeyService } from './keys/key-service.ts';
export { createLogger } from './logger.ts';
export { openSqliteStore } from './store/sqlite/sqlite-store.ts';
export type { Store } from './store/store.ts';
export type { AppRouter } from './trpc/router.ts';
