import { termCounts } from './terms.ts';

/** Okapi BM25's usual constants: term-frequency saturation and length normalisation. */
const K1 = 1.2;
const B = 0.75;
/** Query term-frequency saturation (BM25's k3): a repeated word counts more, but not linearly. */
const K3 = 8;

/**
 * BM25 relevance of each document (an option, a level, a side of a statement) to one query (the
 * state and instructions). The documents are the collection, so a term every option shares carries
 * little weight and a term only one option has carries the most.
 */
export function bm25Scores(query: readonly string[], documents: readonly (readonly string[])[]): number[] {
  const n = documents.length;
  const docCounts = documents.map(termCounts);
  const avgLength = documents.reduce((sum, d) => sum + d.length, 0) / Math.max(1, n) || 1;
  const documentFrequency = new Map<string, number>();
  for (const counts of docCounts) {
    for (const term of counts.keys()) documentFrequency.set(term, (documentFrequency.get(term) ?? 0) + 1);
  }
  const queryCounts = termCounts(query);
  return docCounts.map((counts, i) => {
    const length = (documents[i] as readonly string[]).length;
    let score = 0;
    for (const [term, queryFrequency] of queryCounts) {
      const tf = counts.get(term);
      if (tf === undefined) continue;
      const df = documentFrequency.get(term) ?? 0;
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
      const saturated = (tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * length) / avgLength));
      score += (((K3 + 1) * queryFrequency) / (K3 + queryFrequency)) * idf * saturated;
    }
    return score;
  });
}
