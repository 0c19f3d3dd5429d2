import { parentPort } from 'node:worker_threads';
import type { JudgedAnswer } from '../outcomes/calibration.ts';
import { judgedAnswers } from '../outcomes/judged-answers.ts';
import type { JudgedDecision } from '../store/store.ts';
import { type Fit, fitMaps } from './refit.ts';

/** What the refit thread is told: a page of decisions to judge, then to fit what it judged. */
export type RefitMessage =
  | { op: 'page'; decisions: JudgedDecision[] }
  | { op: 'fit'; minOutcomes: number }
  | { op: 'reset' };
export type RefitReply = { ok: true; fits: Fit[] } | { ok: false; message: string };

let answers: JudgedAnswer[] = [];
/** Why a page could not be judged: the refit fails with it, rather than fitting part of the window. */
let failed: string | undefined;

parentPort?.on('message', (message: RefitMessage) => {
  if (message.op === 'reset') {
    answers = [];
    failed = undefined;
  } else if (message.op === 'page') {
    try {
      for (const answer of judgedAnswers(message.decisions)) answers.push(answer);
    } catch (error) {
      failed ??= (error as Error).message;
    }
  } else {
    let reply: RefitReply;
    try {
      reply =
        failed === undefined
          ? { ok: true, fits: fitMaps(answers, message.minOutcomes) }
          : { ok: false, message: failed };
    } catch (error) {
      reply = { ok: false, message: (error as Error).message };
    }
    answers = [];
    failed = undefined;
    parentPort?.postMessage(reply);
  }
});
