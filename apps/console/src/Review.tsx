import type { Answer, Question, ReviewItem, Truth } from '@decision-gateway/contract';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { AdminError, admin } from './api.ts';
import { Field } from './Field.tsx';

/** The open items the link counts (up to 100, then "100+"), read again on each page change. */
export function useOpenReviews(route: string): string | undefined {
  const [count, setCount] = useState<string>();
  // biome-ignore lint/correctness/useExhaustiveDependencies: each page change reads the count again.
  useEffect(() => {
    const read = () =>
      admin.reviews('open').then(
        (page) => setCount(`${page.reviews.length}${page.nextCursor ? '+' : ''}`),
        () => setCount(undefined),
      );
    read();
    // A review submitted on the Review page says so; the count follows.
    addEventListener('dg-reviewed', read);
    return () => removeEventListener('dg-reviewed', read);
  }, [route]);
  return count;
}

type Box = { top: number; bottom: number; left: number; right: number };

/**
 * The review queue (docs/review.md): the oldest open item, its state and images, each marked question
 * with its answer and probabilities and a control for the truth (a radio group, or a box's edges
 * drawn over its image), and `Submit`. Keyboard alone reaches every control.
 */
export function Review() {
  const [item, setItem] = useState<ReviewItem | null>();
  const [error, setError] = useState<string>();
  const [truths, setTruths] = useState<Record<string, Truth>>({});
  const [reviewer, setReviewer] = useState('');

  const load = useCallback(() => {
    admin.reviews('open', 1).then(
      (page) => {
        const next = page.reviews[0] ?? null;
        setItem(next);
        setTruths(next ? initialTruths(next) : {});
        setError(undefined);
      },
      (caught) => setError(caught instanceof AdminError ? caught.message : String(caught)),
    );
  }, []);
  useEffect(load, [load]);

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!item) return;
    try {
      await admin.submitReview(item.id, truths, reviewer);
      dispatchEvent(new Event('dg-reviewed'));
      load();
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
    }
  }

  const images = item ? imagesOf(item) : [];
  return (
    <section aria-labelledby="review-heading">
      <h2 id="review-heading">Review</h2>
      <p>
        Answers a route marked as unsure. Give the truth of each: it is recorded as the decision’s outcome.
      </p>
      {error && <p role="alert">{error}</p>}
      {item === null && <p>Nothing to review.</p>}
      {item && (
        <form onSubmit={submit} className="form review">
          <p className="summary">
            Request <code>{item.requestId}</code> on route <strong>{item.route}</strong>,{' '}
            {new Date(item.at).toLocaleString()}
          </p>
          <h3>State</h3>
          <pre className="state">
            {typeof item.state === 'string' ? item.state : JSON.stringify(item.state, null, 2)}
          </pre>
          {images.map((image) => (
            <figure key={image.ref}>
              {image.src ? (
                <img src={image.src} alt={`The caller’s ${image.ref}`} />
              ) : (
                <p>
                  Image {image.ref}: {image.url}
                </p>
              )}
              <figcaption>{image.ref}</figcaption>
            </figure>
          ))}
          {item.review.map((id) => {
            const question = item.questions[id] as Question;
            const answer = item.answers[id] as Answer;
            return (
              <fieldset key={id}>
                <legend>{id}</legend>
                <p>{instructionsOf(question)}</p>
                <p className="summary">{answerLine(answer)}</p>
                {question.type === 'box' ? (
                  <BoxTruth
                    id={id}
                    box={truths[id] as Box}
                    picture={images[0]?.src}
                    onChange={(box) => setTruths({ ...truths, [id]: box })}
                  />
                ) : (
                  <div role="radiogroup" aria-label={`Truth of ${id}`}>
                    {optionsOf(question).map((option) => (
                      <label key={String(option.value)}>
                        <input
                          type="radio"
                          name={`truth-${id}`}
                          checked={truths[id] === option.value}
                          onChange={() => setTruths({ ...truths, [id]: option.value })}
                        />{' '}
                        {option.label}
                      </label>
                    ))}
                  </div>
                )}
              </fieldset>
            );
          })}
          <Field label="Reviewer">
            {(fieldId) => (
              <input
                id={fieldId}
                value={reviewer}
                maxLength={100}
                onChange={(e) => setReviewer(e.target.value)}
              />
            )}
          </Field>
          <button type="submit">Submit</button>
        </form>
      )}
    </section>
  );
}

/** Each marked question's truth, preset to what the upstream answered: the reviewer changes what is wrong. */
function initialTruths(item: ReviewItem): Record<string, Truth> {
  const truths: Record<string, Truth> = {};
  for (const id of item.review) {
    const answer = item.answers[id] as Answer;
    if (answer.type === 'noul') truths[id] = answer.noul >= 0.5;
    else if (answer.type === 'choice') truths[id] = answer.choice;
    else if (answer.type === 'score') truths[id] = Number(mostLikely(answer.probabilities));
    else truths[id] = { ...answer.box };
  }
  return truths;
}

const mostLikely = (p: Record<string, number>) =>
  Object.entries(p).reduce((best, entry) => (entry[1] > best[1] ? entry : best))[0];

function optionsOf(question: Question): { value: Truth; label: string }[] {
  if (question.type === 'noul')
    return [
      { value: true, label: 'yes' },
      { value: false, label: 'no' },
    ];
  if (question.type === 'choice')
    return Object.keys(question.criteria).map((label) => ({ value: label, label }));
  if (question.type === 'score')
    return question.criteria.map((level, i) => ({
      value: i,
      label: `${i}${level === null ? '' : `: ${typeof level === 'string' ? level : JSON.stringify(level)}`}`,
    }));
  return [];
}

function instructionsOf(question: Question): string {
  const text = question.instructions;
  return text === undefined || text === null ? '' : typeof text === 'string' ? text : JSON.stringify(text);
}

const percent = (p: number) => `${(p * 100).toFixed(0)}%`;

function answerLine(answer: Answer): string {
  if (answer.type === 'noul') return `Answered ${percent(answer.noul)} yes.`;
  if (answer.type === 'box') return `Answered a box with confidence ${answer.confidence.toFixed(2)}.`;
  const head = answer.type === 'choice' ? answer.choice : `score ${answer.score.toFixed(2)}`;
  const bars = Object.entries(answer.probabilities)
    .map(([label, p]) => `${label} ${percent(p)}`)
    .join(', ');
  return `Answered ${head} (confidence ${answer.confidence.toFixed(2)}): ${bars}.`;
}

function imagesOf(item: ReviewItem): { ref: string; src?: string; url?: string }[] {
  return Object.entries(item.assets).map(([ref, asset]) =>
    'data_base64' in asset
      ? { ref, src: `data:image/${asset.format};base64,${asset.data_base64}` }
      : { ref, url: asset.url },
  );
}

/** A box's truth: its four edges as fractions, drawn over the image as they change. */
function BoxTruth({
  id,
  box,
  picture,
  onChange,
}: {
  id: string;
  box: Box;
  picture: string | undefined;
  onChange(box: Box): void;
}) {
  const edge = (name: keyof Box) => (
    <Field label={`${id} ${name}`}>
      {(fieldId) => (
        <input
          id={fieldId}
          type="number"
          min={0}
          max={1}
          step={0.01}
          value={box[name]}
          onChange={(e) => onChange({ ...box, [name]: Number(e.target.value) })}
        />
      )}
    </Field>
  );
  const at = (n: number) => `${(n * 100).toFixed(1)}%`;
  return (
    <div>
      <div className="box-frame" role="img" aria-label={`Truth box of ${id}`}>
        {picture && <img src={picture} alt="" />}
        <div
          className="box-outline"
          style={{
            top: at(box.top),
            left: at(box.left),
            width: at(box.right - box.left),
            height: at(box.bottom - box.top),
          }}
        />
      </div>
      <div className="row">
        {edge('top')}
        {edge('bottom')}
        {edge('left')}
        {edge('right')}
      </div>
    </div>
  );
}
