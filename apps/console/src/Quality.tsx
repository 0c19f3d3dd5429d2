import type { Calibration, CalibrationGroup, CalibrationMap } from '@decision-gateway/contract';
import { useEffect, useState } from 'react';
import {
  CartesianGrid,
  ComposedChart,
  Legend,
  Line,
  ResponsiveContainer,
  Scatter,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import { AdminError, admin } from './api.ts';
import { Chart } from './Chart.tsx';
import { Field } from './Field.tsx';

/**
 * How right each upstream was (docs/outcomes.md): per upstream and question type
 * the outcomes callers reported, accuracy, Brier score and calibration error; the reliability
 * diagram of the selected row; and, for each route that escalates, the `confidenceBelow` advised
 * for the target accuracy typed in.
 */
export function Quality() {
  const [target, setTarget] = useState('0.9');
  const [report, setReport] = useState<Calibration>();
  const [calibrated, setCalibrated] = useState<Calibration>();
  const [maps, setMaps] = useState<CalibrationMap[]>([]);
  const [selected, setSelected] = useState<string>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    const wanted = Number(target);
    if (!(wanted > 0 && wanted <= 1)) {
      setError('Target accuracy: a number above 0, at most 1');
      return;
    }
    let current = true;
    // The active maps (docs/calibration-maps.md) and the answers as calibrated routes gave them.
    admin.calibrationMaps().then(
      (data) => current && setMaps(data.maps.filter((m) => m.active)),
      () => {},
    );
    admin.calibration(wanted, true).then(
      (data) => current && setCalibrated(data),
      () => {},
    );
    admin.calibration(wanted).then(
      (data) => {
        if (!current) return;
        setReport(data);
        setError(undefined);
      },
      (caught) => current && setError(caught instanceof AdminError ? caught.message : String(caught)),
    );
    return () => {
      current = false;
    };
  }, [target]);

  const rowKey = (g: CalibrationGroup) => `${g.upstream} on ${g.type}`;
  const mapFor = (g: CalibrationGroup) => maps.find((m) => m.upstream === g.upstream && m.type === g.type);
  const calibratedGroup = (g: CalibrationGroup) => calibrated?.groups.find((c) => rowKey(c) === rowKey(g));
  const chosen = report?.groups.find((g) => rowKey(g) === selected) ?? report?.groups[0];
  return (
    <section aria-labelledby="quality-heading">
      <h2 id="quality-heading">Quality</h2>
      <p>
        How well each upstream’s probabilities matched the outcomes callers reported (the last 30 days).
        Report outcomes with <code>POST /v1/outcomes</code>.
      </p>
      {error && <p role="alert">{error}</p>}
      {report && report.groups.length === 0 && <p>No outcomes recorded yet.</p>}
      {report && report.groups.length > 0 && (
        <>
          <div className="table">
            <table aria-label="Calibration" className="fits">
              <thead>
                <tr>
                  <th scope="col">Upstream, type</th>
                  <th scope="col">Outcomes</th>
                  <th scope="col">Accuracy</th>
                  <th scope="col">Brier</th>
                  <th scope="col">ECE</th>
                </tr>
              </thead>
              <tbody>
                {report.groups.map((g) => (
                  <tr key={rowKey(g)} aria-selected={chosen !== undefined && rowKey(g) === rowKey(chosen)}>
                    <td>
                      <button
                        type="button"
                        aria-pressed={chosen !== undefined && rowKey(g) === rowKey(chosen)}
                        aria-label={`Show ${rowKey(g)}`}
                        onClick={() => setSelected(rowKey(g))}
                      >
                        {g.upstream}
                      </button>{' '}
                      {g.type}
                    </td>
                    <td>{g.outcomes}</td>
                    <td>{short(g.accuracy)}</td>
                    <td>{g.brier === null ? '–' : short(g.brier)}</td>
                    <td>{short(g.ece)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {chosen && <Reliability group={chosen} label="raw" />}
          {chosen && mapFor(chosen) && calibratedGroup(chosen) && (
            <Reliability group={calibratedGroup(chosen) as CalibrationGroup} label="calibrated" />
          )}
        </>
      )}
      <h3>Calibration maps</h3>
      {maps.length === 0 ? (
        <p>No active map: a refit makes one where it lowers the held-out log loss.</p>
      ) : (
        <div className="table">
          <table aria-label="Active maps" className="fits">
            <thead>
              <tr>
                <th scope="col">Upstream, type</th>
                <th scope="col">Map</th>
                <th scope="col">Outcomes</th>
                <th scope="col">Held-out ECE before</th>
                <th scope="col">after</th>
              </tr>
            </thead>
            <tbody>
              {maps.map((m) => (
                <tr key={m.id}>
                  <td>
                    {m.upstream} {m.type}
                  </td>
                  <td>
                    {'temperature' in m.params
                      ? `T = ${short(m.params.temperature)}`
                      : `a = ${short(m.params.a)}, b = ${short(m.params.b)}`}
                  </td>
                  <td>{m.outcomes}</td>
                  <td>{short(m.heldOut.before.ece)}</td>
                  <td>{short(m.heldOut.after.ece)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h3>Escalation advice</h3>
      <Field label="Target accuracy">
        {(id) => (
          <input
            id={id}
            inputMode="decimal"
            value={target}
            onChange={(e) => setTarget(e.target.value)}
            aria-describedby="target-help"
          />
        )}
      </Field>
      <p id="target-help" className="summary">
        For each route that escalates: the smallest threshold whose kept answers reach this accuracy.
      </p>
      {report && report.advice.length === 0 && <p>No route that escalates has 20 outcomes of a type yet.</p>}
      <ul aria-label="Advice">
        {report?.advice.map((a) => {
          const threshold =
            a.confidenceBelow !== undefined
              ? a.confidenceBelow === null
                ? 'no confidenceBelow reaches the target'
                : `confidenceBelow: ${a.confidenceBelow}`
              : a.noulWithin
                ? `noulWithin: [${a.noulWithin.join(', ')}]`
                : 'no noulWithin reaches the target';
          return (
            <li key={`${a.route} ${a.upstream} ${a.type}`}>
              Route <strong>{a.route}</strong>, {a.upstream} on {a.type} ({a.outcomes} outcomes): {threshold}
              {a.keptAccuracy !== null &&
                ` — kept answers ${Math.round(a.keptAccuracy * 1000) / 10}% right, ${Math.round((a.escalatedShare ?? 0) * 1000) / 10}% escalated`}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

/** Three decimals are enough to compare upstreams, and keep the table within a phone's width. */
const short = (n: number) => n.toFixed(3);

/** Predicted against observed per bin, beside the diagonal a calibrated upstream would follow. */
function Reliability({ group, label }: { group: CalibrationGroup; label: 'raw' | 'calibrated' }) {
  const points = group.bins
    .filter((b) => b.count > 0)
    .map((b) => ({ predicted: b.meanPredicted, observed: b.observed, count: b.count }));
  const worst = points.reduce<{ predicted: number | null; observed: number | null } | undefined>(
    (top, p) =>
      top === undefined ||
      Math.abs((p.observed ?? 0) - (p.predicted ?? 0)) > Math.abs((top.observed ?? 0) - (top.predicted ?? 0))
        ? p
        : top,
    undefined,
  );
  const summary = `${points.length} of 10 bins hold answers; ECE ${group.ece}${
    worst ? `; the farthest from the diagonal predicts ${worst.predicted} and observed ${worst.observed}` : ''
  }.`;
  return (
    <Chart name={`Reliability of ${group.upstream} on ${group.type}, ${label}`} summary={summary}>
      <ResponsiveContainer width="100%" height={260}>
        <ComposedChart data={points}>
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="predicted" type="number" domain={[0, 1]} name="predicted" />
          <YAxis dataKey="observed" type="number" domain={[0, 1]} width={40} name="observed" />
          <Tooltip />
          <Legend />
          <Line
            data={[
              { predicted: 0, observed: 0 },
              { predicted: 1, observed: 1 },
            ]}
            dataKey="observed"
            name="perfectly calibrated"
            stroke="#999"
            strokeDasharray="4 4"
            dot={false}
            isAnimationActive={false}
          />
          <Scatter dataKey="observed" name="observed" fill="#3b6ea5" isAnimationActive={false} />
        </ComposedChart>
      </ResponsiveContainer>
    </Chart>
  );
}
