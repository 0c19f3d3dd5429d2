import { createGatewayClient, type EvaluationMeta, GatewayError, image } from '@decision-gateway/client';
import type { Answer, KeyObject } from '@decision-gateway/contract';
import { useEffect, useState } from 'react';
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { AdminError, admin } from './api.ts';
import { Chart } from './Chart.tsx';
import { Field } from './Field.tsx';
import {
  buildQuestions,
  type EditorQuestion,
  EXAMPLE_QUESTION,
  EXAMPLE_STATE,
  IMAGE_REF,
  retype,
} from './questions.ts';

const usable = (key: KeyObject) =>
  key.revokedAt === null &&
  (key.expiresAt === null || Date.parse(key.expiresAt) > Date.now()) &&
  (key.credits === null || key.credits > 0);

interface Asked {
  answers: Record<string, Answer>;
  creditsUsed: number;
  meta: EvaluationMeta;
  /** The image sent, as an object URL, to draw boxes over. */
  picture?: string;
}

/** The image chosen for the next question, read from its file. */
interface Picture {
  bytes: Uint8Array;
  url: string;
  name: string;
}

/** Asks a decision through the gateway's evaluation door with a token minted for the chosen key. */
export function Playground({ keys }: { keys: KeyObject[] }) {
  const [keyId, setKeyId] = useState<string>();
  const [state, setState] = useState(EXAMPLE_STATE);
  // Each editor row keeps a stable id of its own, whatever the question's ID is being edited to.
  const [rows, setRows] = useState<{ uid: number; question: EditorQuestion }[]>([
    { uid: 0, question: EXAMPLE_QUESTION },
  ]);
  const questions = rows.map((row) => row.question);
  const [asked, setAsked] = useState<Asked>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [picture, setPicture] = useState<Picture>();
  useEffect(() => {
    // The newest usable key, at first (keys come newest first).
    if (keyId === undefined || !keys.some((k) => k.id === keyId))
      setKeyId(keys.find(usable)?.id ?? keys[0]?.id);
  }, [keys, keyId]);

  const update = (i: number, question: EditorQuestion) =>
    setRows(rows.map((row, j) => (j === i ? { ...row, question } : row)));

  async function ask() {
    setError(undefined);
    const built = buildQuestions(questions);
    if (!built.ok) return setError(built.problem);
    if (keyId === undefined) return setError('create a key first');
    setBusy(true);
    try {
      // A short-lived token for this page's origin: the page never holds an API key.
      const { token } = await admin.mintToken(keyId, location.origin);
      const client = createGatewayClient({ url: location.origin, token });
      const { result, creditsUsed, meta } = await client.evaluate({
        state,
        questions: built.questions as never,
        ...(picture && { assets: { [IMAGE_REF]: image(picture.bytes) } }),
      });
      setAsked({
        answers: result.answers as Record<string, Answer>,
        creditsUsed,
        meta,
        ...(picture && { picture: picture.url }),
      });
    } catch (caught) {
      setError(
        caught instanceof AdminError || caught instanceof GatewayError ? caught.message : String(caught),
      );
    } finally {
      setBusy(false);
    }
  }

  return (
    <section aria-labelledby="playground-heading">
      <h2 id="playground-heading">Playground</h2>
      <Field label="Key">
        {(id) => (
          <select id={id} value={keyId ?? ''} onChange={(e) => setKeyId(e.target.value)}>
            {keys.map((k) => (
              <option key={k.id} value={k.id}>
                {k.name}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="State">
        {(id) => <textarea id={id} rows={3} value={state} onChange={(e) => setState(e.target.value)} />}
      </Field>
      <Field label={`Image (sent as "${IMAGE_REF}": mention it in the state or instructions)`}>
        {(id) => (
          <input
            id={id}
            type="file"
            accept="image/png,image/jpeg,image/webp"
            onChange={async (e) => {
              const file = e.target.files?.[0];
              if (picture) URL.revokeObjectURL(picture.url);
              setPicture(
                file && {
                  bytes: new Uint8Array(await file.arrayBuffer()),
                  url: URL.createObjectURL(file),
                  name: file.name,
                },
              );
            }}
          />
        )}
      </Field>
      {questions.map((q, i) => (
        <fieldset key={rows[i]?.uid} className="question">
          <legend>Question {i + 1}</legend>
          <Field label="ID">
            {(id) => <input id={id} value={q.id} onChange={(e) => update(i, { ...q, id: e.target.value })} />}
          </Field>
          <Field label="Type">
            {(id) => (
              <select
                id={id}
                value={q.type}
                onChange={(e) => update(i, retype(q, e.target.value as EditorQuestion['type']))}
              >
                <option value="choice">choice</option>
                <option value="score">score</option>
                <option value="noul">noul</option>
                <option value="box">box</option>
              </select>
            )}
          </Field>
          <Field label="Instructions">
            {(id) => (
              <input
                id={id}
                value={q.instructions}
                onChange={(e) => update(i, { ...q, instructions: e.target.value })}
              />
            )}
          </Field>
          {q.type === 'choice' && (
            <Field label="Options (one per line, label: description)">
              {(id) => (
                <textarea
                  id={id}
                  rows={3}
                  value={q.options}
                  onChange={(e) => update(i, { ...q, options: e.target.value })}
                />
              )}
            </Field>
          )}
          {q.type === 'score' && (
            <Field label="Levels (one per line, lowest first)">
              {(id) => (
                <textarea
                  id={id}
                  rows={3}
                  value={q.levels}
                  onChange={(e) => update(i, { ...q, levels: e.target.value })}
                />
              )}
            </Field>
          )}
          <button type="button" onClick={() => setRows(rows.filter((_, j) => j !== i))}>
            Remove question {i + 1}
          </button>
        </fieldset>
      ))}
      <div className="row">
        <button
          type="button"
          disabled={questions.length >= 8}
          onClick={() =>
            setRows([
              ...rows,
              {
                uid: Math.max(0, ...rows.map((row) => row.uid)) + 1,
                question: { id: `q${rows.length + 1}`, type: 'noul', instructions: '' },
              },
            ])
          }
        >
          Add question
        </button>
        <button type="button" onClick={ask} disabled={busy}>
          Ask
        </button>
      </div>
      {error && <p role="alert">{error}</p>}
      {asked && <Answers asked={asked} />}
    </section>
  );
}

/** Each answer's probabilities as a bar chart; a noul as its probability of yes and no. */
function Answers({ asked }: { asked: Asked }) {
  return (
    <div>
      <p>
        {asked.creditsUsed} credits · request {asked.meta.requestId} · x-dg-route {asked.meta.route ?? '–'} ·
        x-dg-upstream {asked.meta.upstream ?? '–'} · x-dg-cache {asked.meta.cache ?? '–'}
      </p>
      {Object.entries(asked.answers).map(([id, answer]) => {
        if (answer.type === 'box')
          return <BoxOver key={id} id={id} answer={answer} picture={asked.picture} />;
        const bars =
          answer.type === 'noul'
            ? [
                { label: 'yes', p: answer.noul },
                { label: 'no', p: 1 - answer.noul },
              ]
            : Object.entries(answer.probabilities).map(([label, p]) => ({ label, p }));
        const headline =
          answer.type === 'choice'
            ? `${answer.choice} (confidence ${answer.confidence.toFixed(2)})`
            : answer.type === 'score'
              ? `score ${answer.score.toFixed(2)} (confidence ${answer.confidence.toFixed(2)})`
              : `${(answer.noul * 100).toFixed(0)}% yes`;
        const summary = `${headline}; ${bars.map((b) => `${b.label} ${(b.p * 100).toFixed(0)}%`).join(', ')}.`;
        return (
          <Chart key={id} name={`Probabilities of ${id}`} summary={summary}>
            <ResponsiveContainer width="100%" height={Math.max(120, 36 * bars.length)}>
              <BarChart data={bars} layout="vertical" margin={{ left: 8, right: 16 }}>
                <CartesianGrid strokeDasharray="3 3" />
                <XAxis type="number" domain={[0, 1]} />
                <YAxis type="category" dataKey="label" width={90} />
                <Tooltip />
                <Bar dataKey="p" name="probability" fill="#3b6ea5" isAnimationActive={false} />
              </BarChart>
            </ResponsiveContainer>
          </Chart>
        );
      })}
    </div>
  );
}

/**
 * A box answer drawn over the image it was asked about: an outline placed by the answer's
 * fractions, and the same in words for a reader that does not see it.
 */
function BoxOver({
  id,
  answer,
  picture,
}: {
  id: string;
  answer: Extract<Answer, { type: 'box' }>;
  picture: string | undefined;
}) {
  const { top, bottom, left, right } = answer.box;
  const percent = (n: number) => `${(n * 100).toFixed(1)}%`;
  const words = `${id}: top ${percent(top)}, bottom ${percent(bottom)}, left ${percent(left)}, right ${percent(right)} (confidence ${answer.confidence.toFixed(2)})`;
  return (
    <figure className="box-answer">
      <div className="box-frame" role="img" aria-label={`Box of ${id}`}>
        {picture && <img src={picture} alt="" />}
        <div
          className="box-outline"
          style={{
            top: percent(top),
            left: percent(left),
            width: percent(right - left),
            height: percent(bottom - top),
          }}
        />
      </div>
      <figcaption>{words}</figcaption>
    </figure>
  );
}
