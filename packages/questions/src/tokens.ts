import { createRequire } from 'node:module';

// o200k_base is the encoding of current OpenAI models; gpt-tokenizer is a pure-JS BPE with no
// native parts or downloads, so token counts work offline and anywhere Node runs. Its tables take
// about 70 MB, so they load on the first count: a gateway on another upstream never pays for them.
type Encoder = { countTokens(text: string): number };
let encoder: Encoder | undefined;

/** A run of this many characters without white space is not ordinary text (a word, a number, a URL). */
const LONG_RUN = /\S{256,}/g;
/** Such a run is counted in slices of this many characters. */
const SLICE = 64;

/**
 * Tokens in `text` under the o200k_base encoding. BPE merges within one pre-token take time that
 * grows faster than its length (160,000 characters of one letter took 30 s), and this runs on the
 * thread that serves requests, so a run of 256 or more characters without white space (base64, a
 * minified blob, a pathological body) is counted in 64-character slices: linear time, and within a
 * token per slice of the exact count. Ordinary text is counted exactly.
 */
export function countTokens(text: string): number {
  if (text.length === 0) return 0;
  encoder ??= createRequire(import.meta.url)('gpt-tokenizer/encoding/o200k_base') as Encoder;
  const bpe = encoder;
  LONG_RUN.lastIndex = 0;
  if (!LONG_RUN.test(text)) return bpe.countTokens(text);
  let count = 0;
  let last = 0;
  LONG_RUN.lastIndex = 0;
  for (let run = LONG_RUN.exec(text); run !== null; run = LONG_RUN.exec(text)) {
    if (run.index > last) count += bpe.countTokens(text.slice(last, run.index));
    for (let at = run.index; at < run.index + run[0].length; at += SLICE)
      count += bpe.countTokens(text.slice(at, Math.min(at + SLICE, run.index + run[0].length)));
    last = run.index + run[0].length;
  }
  if (last < text.length) count += bpe.countTokens(text.slice(last));
  return count;
}
