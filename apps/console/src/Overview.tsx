import type { BudgetState, UsageFigures, UsageSeries, UsageSummary } from '@decision-gateway/contract';
import { type ReactNode, useEffect, useState } from 'react';
import { AdminError, admin } from './api.ts';
import { BudgetBar, pastEightyPercent, sharePercent } from './Budgets.tsx';
import { RANGES, type Range, rangeStart } from './chart-data.ts';
import { RangeButtons, UsageCharts } from './UsageCharts.tsx';

/**
 * The page an operator lands on (docs/console.md): all keys together over 24 h, 7 d or 30 d, the
 * splits by route, by upstream and the keys that spent most, and the cache's share of answers.
 * Everything comes from the usage rollups, so it loads as fast after a year as after a day.
 */
export function Overview() {
  const [range, setRange] = useState<Range>('24h');
  const [series, setSeries] = useState<UsageSeries>();
  const [summary, setSummary] = useState<UsageSummary>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    let current = true;
    const from = rangeStart(range, Date.now());
    Promise.all([admin.allSeries(from, RANGES[range].step), admin.summary(from)]).then(
      ([s, u]) => {
        if (!current) return;
        setSeries(s);
        setSummary(u);
        setError(undefined);
      },
      (caught) => current && setError(caught instanceof AdminError ? caught.message : String(caught)),
    );
    return () => {
      current = false;
    };
  }, [range]);

  return (
    <section aria-labelledby="overview-heading">
      <h2 id="overview-heading">Overview</h2>
      <RangeButtons range={range} onChange={setRange} />
      {error && <p role="alert">{error}</p>}
      {series && summary ? (
        <>
          <p>
            <strong>{summary.totals.requests}</strong> requests, <strong>{summary.totals.errors}</strong>{' '}
            failed, <strong>{summary.totals.creditsUsed}</strong> credits ·{' '}
            <CacheShare totals={summary.totals} />
          </p>
          <UsageCharts series={series} />
          <BudgetsPastEighty />
          <FiguresTable
            title="By route"
            first="Route"
            rows={summary.byRoute.map((r) => ({ key: r.route ?? '', name: r.route ?? '(none)', figures: r }))}
          />
          <FiguresTable
            title="By upstream"
            first="Upstream"
            rows={summary.byUpstream.map((u) => ({
              key: u.upstream ?? '',
              name: u.upstream ?? '(none)',
              figures: u,
            }))}
          />
          <FiguresTable
            title="Top keys"
            first="Key"
            rows={summary.byKey.map((k) => ({
              key: k.keyId,
              name: <a href={`#/keys/${encodeURIComponent(k.keyId)}`}>{k.name}</a>,
              figures: k,
            }))}
          />
        </>
      ) : (
        !error && <p>Loading…</p>
      )}
    </section>
  );
}

/** Every budget of a key or project past 80% of its limit (docs/budgets.md), fullest first. */
function BudgetsPastEighty() {
  const [rows, setRows] = useState<{ holder: string; href: string; budget: BudgetState }[]>();
  useEffect(() => {
    let current = true;
    Promise.all([admin.keysForBudgets(), admin.listProjects()]).then(
      ([keys, projects]) => {
        if (!current) return;
        const held = [
          ...keys.keys.map((k) => ({
            holder: `key ${k.name}`,
            href: `#/keys/${encodeURIComponent(k.id)}`,
            budgets: k.budgets,
          })),
          ...projects.projects.map((p) => ({
            holder: `project ${p.name}`,
            href: '#/projects',
            budgets: p.budgets,
          })),
        ];
        setRows(
          held
            .flatMap(({ holder, href, budgets }) =>
              budgets.filter(pastEightyPercent).map((budget) => ({ holder, href, budget })),
            )
            .sort((a, b) => sharePercent(b.budget) - sharePercent(a.budget)),
        );
      },
      () => current && setRows([]),
    );
    return () => {
      current = false;
    };
  }, []);
  return (
    <section aria-labelledby="budgets-heading">
      <h3 id="budgets-heading">Budgets past 80%</h3>
      {rows === undefined ? (
        <p>Loading…</p>
      ) : rows.length === 0 ? (
        <p>No budget is past 80% of its limit.</p>
      ) : (
        <ul className="budgets">
          {rows.map(({ holder, href, budget }) => (
            <li key={`${holder} ${budget.window}`}>
              <a href={href}>{holder}</a>{' '}
              <BudgetBar budget={budget} label={`${holder}: ${budget.window} budget`} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** The cache's share of the answers given (failed requests gave none). */
function CacheShare({ totals }: { totals: UsageFigures }) {
  const answered = totals.requests - totals.errors;
  if (answered === 0) return <span>no answers yet</span>;
  const share = Math.round((1000 * totals.cacheHits) / answered) / 10;
  return (
    <span>
      the cache gave <strong>{share}%</strong> of answers ({totals.cacheHits} of {answered})
    </span>
  );
}

function FiguresTable({
  title,
  first,
  rows,
}: {
  title: string;
  first: string;
  rows: { key: string; name: ReactNode; figures: UsageFigures }[];
}) {
  const id = `${title.replaceAll(' ', '-').toLowerCase()}-heading`;
  return (
    <section aria-labelledby={id}>
      <h3 id={id}>{title}</h3>
      <div className="table">
        <table aria-labelledby={id}>
          <thead>
            <tr>
              <th scope="col">{first}</th>
              <th scope="col">Requests</th>
              <th scope="col">Errors</th>
              <th scope="col">Credits</th>
              <th scope="col">p95</th>
            </tr>
          </thead>
          <tbody>
            {rows.length === 0 && (
              <tr>
                <td colSpan={5}>No requests in this range.</td>
              </tr>
            )}
            {rows.map((row) => (
              <tr key={row.key}>
                <td>{row.name}</td>
                <td>{row.figures.requests}</td>
                <td>{row.figures.errors}</td>
                <td>{row.figures.creditsUsed}</td>
                <td>{row.figures.p95ElapsedMs === null ? '–' : `${row.figures.p95ElapsedMs} ms`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
