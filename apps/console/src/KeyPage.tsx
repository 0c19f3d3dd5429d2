import type { KeyObject, UsageReport, UsageSeries } from '@decision-gateway/contract';
import { type FormEvent, useCallback, useEffect, useRef, useState } from 'react';
import { AdminError, admin } from './api.ts';
import { Budgets } from './Budgets.tsx';
import { RANGES, type Range, rangeStart } from './chart-data.ts';
import { Field } from './Field.tsx';
import { RangeButtons, UsageCharts } from './UsageCharts.tsx';

/** One key: its usage charts over 24 h, 7 d or 30 d, its recent requests, credits and revocation. */
export function KeyPage({ id }: { id: string }) {
  const [key, setKey] = useState<KeyObject>();
  const [range, setRange] = useState<Range>('24h');
  const [series, setSeries] = useState<UsageSeries>();
  const [usage, setUsage] = useState<UsageReport>();
  const [error, setError] = useState<string>();

  const load = useCallback(async () => {
    try {
      const [k, s, u] = await Promise.all([
        admin.getKey(id),
        admin.series(id, rangeStart(range, Date.now()), RANGES[range].step),
        admin.usage(id),
      ]);
      setKey(k);
      setSeries(s);
      setUsage(u);
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
    }
  }, [id, range]);
  useEffect(() => {
    void load();
  }, [load]);

  if (error) return <p role="alert">{error}</p>;
  if (!key || !series || !usage) return <p>Loading…</p>;
  return (
    <section aria-labelledby="key-heading">
      <p>
        <a href="#/keys">← All keys</a>
      </p>
      <h2 id="key-heading">{key.name}</h2>
      <p>
        <code>{key.prefix}…</code> · credits {key.credits ?? 'unlimited'} ·{' '}
        {key.revokedAt ? `revoked ${key.revokedAt}` : 'active'}
      </p>
      <KeyActions keyObject={key} onChange={setKey} />
      <h3>Budgets</h3>
      {key.projectId !== null && (
        <p>
          In project <code>{key.projectId}</code> (<a href="#/projects">its budgets</a>).
        </p>
      )}
      <Budgets budgets={key.budgets} holder={key.name} />
      <h3>Usage</h3>
      <RangeButtons range={range} onChange={setRange} />
      <UsageCharts series={series} />
      <h3>Recent requests</h3>
      <div className="table">
        <table>
          <thead>
            <tr>
              <th scope="col">At</th>
              <th scope="col">Status</th>
              <th scope="col">Credits</th>
              <th scope="col">Route</th>
              <th scope="col">Upstream</th>
              <th scope="col">Cache</th>
              <th scope="col">Subject</th>
            </tr>
          </thead>
          <tbody>
            {usage.recent.map((r) => (
              <tr key={r.requestId}>
                <td>{r.at}</td>
                <td>{r.status}</td>
                <td>{r.creditsUsed}</td>
                <td>{r.route ?? '–'}</td>
                <td>{r.upstream ?? '–'}</td>
                <td>{r.cached ? 'hit' : '–'}</td>
                <td>{r.subject ?? '–'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function KeyActions({ keyObject, onChange }: { keyObject: KeyObject; onChange: (key: KeyObject) => void }) {
  const [adding, setAdding] = useState(false);
  const [amount, setAmount] = useState('10');
  const [error, setError] = useState<string>();
  const [confirming, setConfirming] = useState(false);
  // The dialog takes the focus when it opens, on its harmless button.
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming) cancel.current?.focus();
  }, [confirming]);
  const act = async (run: () => Promise<KeyObject>) => {
    try {
      onChange(await run());
      setError(undefined);
      return true;
    } catch (caught) {
      setError(caught instanceof AdminError ? caught.message : String(caught));
      return false;
    }
  };
  async function add(event: FormEvent) {
    event.preventDefault();
    if (await act(() => admin.addCredits(keyObject.id, Number(amount)))) setAdding(false);
  }
  return (
    <div>
      <div className="row">
        <button type="button" aria-expanded={adding} onClick={() => setAdding(!adding)}>
          Add credits
        </button>
        <button type="button" disabled={keyObject.revokedAt !== null} onClick={() => setConfirming(true)}>
          Revoke
        </button>
      </div>
      {adding && (
        <form onSubmit={add} className="form">
          <Field label="Amount">
            {(id) => (
              <input id={id} value={amount} onChange={(e) => setAmount(e.target.value)} inputMode="decimal" />
            )}
          </Field>
          <button type="submit">Add</button>
        </form>
      )}
      {error && <p role="alert">{error}</p>}
      {confirming && (
        <div role="dialog" aria-modal="true" aria-labelledby="revoke-title" className="dialog">
          <p id="revoke-title">
            Revoke {keyObject.name}? Its requests are refused from the next one on, everywhere.
          </p>
          <div className="row">
            <button
              type="button"
              onClick={async () => {
                setConfirming(false);
                await act(() => admin.revoke(keyObject.id));
              }}
            >
              Revoke
            </button>
            <button type="button" ref={cancel} onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        </div>
      )}
    </div>
  );
}
