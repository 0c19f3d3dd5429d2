import { stemmer } from 'stemmer';
import { eng } from 'stopword';

const STOP_WORDS = new Set(eng);
const WORD = /[\p{L}\p{N}]+/gu;

/**
 * Text → index terms: Unicode words, lower-cased, English stop words dropped, Porter-stemmed
 * ("refunds", "refunded" → "refund"), so morphological variants match each other.
 */
export function terms(text: string): string[] {
  const out: string[] = [];
  for (const match of text.normalize('NFKC').toLowerCase().matchAll(WORD)) {
    const word = match[0];
    if (STOP_WORDS.has(word)) continue;
    out.push(stemmer(word));
  }
  return out;
}

/** Term → how often it occurs. */
export function termCounts(list: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const term of list) counts.set(term, (counts.get(term) ?? 0) + 1);
  return counts;
}
