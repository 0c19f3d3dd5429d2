/** What other packages' tests use to start a real gateway over an upstream of their own. */

export { seeded } from './seeded.ts';
export { singleRoute } from './single-route.ts';
