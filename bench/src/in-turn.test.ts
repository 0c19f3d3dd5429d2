import { describe, expect, it } from 'vitest';
import { median, range, ratioAgainst, rotated, sharesOf } from './in-turn.ts';

const round = (rps: number, cpu: number) => ({ rps, cpu, rssKb: 0 });

describe('shares taken in turn', () => {
  it('divides each round by the reference’s same round, not medians by medians', () => {
    // The machine moves from round to round and both rows move with it; one round caught the door
    // at a bad moment. Medians divided would read 0.67; round by round the door is 0.9.
    const reference = [round(4000, 200), round(2000, 400), round(3000, 300)];
    const door = [round(2000, 440), round(1800, 440), round(2700, 330)];
    const shares = sharesOf(door, reference);
    expect(shares.rpsShare).toBeCloseTo(0.9);
    expect(shares.rpsShareRange[0]).toBeCloseTo(0.5);
    expect(shares.rpsShareRange[1]).toBeCloseTo(0.9);
    expect(shares.cpuShare).toBeCloseTo(1.1);
    expect(shares.rps).toBe(2000);
    expect(shares.cpu).toBe(440);
  });

  it('reports the rounds’ lowest and highest share around the median', () => {
    const reference = [round(1000, 1), round(1000, 1), round(1000, 1)];
    const shares = sharesOf([round(800, 1), round(950, 1), round(1020, 1)], reference);
    expect(shares.rpsShare).toBeCloseTo(0.95);
    expect(shares.rpsShareRange[0]).toBeCloseTo(0.8);
    expect(shares.rpsShareRange[1]).toBeCloseTo(1.02);
  });

  it('refuses rounds that do not pair with the reference’s', () => {
    expect(() => sharesOf([round(1, 1)], [round(1, 1), round(1, 1)])).toThrow(/as many rounds/);
    expect(() => sharesOf([], [])).toThrow(/as many rounds/);
  });

  it('starts each round with the next target', () => {
    expect(rotated(['a', 'b', 'c'], 0)).toEqual(['a', 'b', 'c']);
    expect(rotated(['a', 'b', 'c'], 1)).toEqual(['b', 'c', 'a']);
    expect(rotated(['a', 'b', 'c'], 4)).toEqual(['b', 'c', 'a']);
  });

  it('takes the upper median and prints ranges as the tables do', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(3);
    expect(() => median([])).toThrow(/no values/);
    expect(range([0.87, 0.97, 0.9])).toBe('0.87–0.97');
    // As precise as the median beside it: 1.014 must not print as 1.01 beside a median of 1.012.
    expect(range([0.96, 1.0141, 1.012], 3)).toBe('0.960–1.014');
  });
});

describe('a ratio printed against its bar', () => {
  it('keeps two decimals unless they would round a miss up onto the bar', () => {
    expect(ratioAgainst(0.8971, 0.9)).toBe('0.897');
    expect(ratioAgainst(0.8949, 0.9)).toBe('0.89');
    expect(ratioAgainst(0.9, 0.9)).toBe('0.90');
    expect(ratioAgainst(0.9049, 0.9)).toBe('0.90');
    expect(ratioAgainst(0.7499, 0.75)).toBe('0.7499');
  });
});
