import { setFlagsFromString } from 'node:v8';

// V8's own intrinsics, for this test process only: functions compiled after this line may call them.
setFlagsFromString('--allow-natives-syntax');
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

/**
 * Whether V8 gave two objects one hidden class (its "map"). Objects the hot path makes for every
 * request should: one that gets a class of its own each time is slow to make and slow to read
 * everywhere it goes (docs/performance.md, "Objects that share a shape").
 */
export function sameHiddenClass(a: object, b: object): boolean {
  return haveSameMap(a, b);
}
