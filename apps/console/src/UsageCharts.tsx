import type { UsageSeries } from '@decision-gateway/contract';
import {
  Bar,
  BarChart,
  CartesianGrid,
  Legend,
  Line,
  LineChart,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import { Chart } from './Chart.tsx';
import { pointLabel, RANGES, type Range, summarize } from './chart-data.ts';

/** The range a page's charts cover: 24 h, 7 d or 30 d, one pressed. */
export function RangeButtons({ range, onChange }: { range: Range; onChange: (range: Range) => void }) {
  return (
    <fieldset className="row">
      <legend>Range</legend>
      {(Object.keys(RANGES) as Range[]).map((r) => (
        <button key={r} type="button" aria-pressed={r === range} onClick={() => onChange(r)}>
          {RANGES[r].label}
        </button>
      ))}
    </fieldset>
  );
}

/** Requests, credits and latency over time, for one key or all keys (the Overview and a key's page). */
export function UsageCharts({ series }: { series: UsageSeries }) {
  const rows = series.series.map((p) => ({ ...p, label: pointLabel(p.at, series.step) }));
  return (
    <>
      <Chart name="Requests over time" summary={summarize(series.series, 'requests')}>
        <ResponsiveContainer width="100%" height={200}>
          <BarChart data={rows}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="label" minTickGap={24} />
            <YAxis allowDecimals={false} width={40} />
            <Tooltip />
            <Legend />
            <Bar dataKey="requests" name="requests" fill="#3b6ea5" isAnimationActive={false} />
            <Bar dataKey="errors" name="errors" fill="#b33" isAnimationActive={false} />
          </BarChart>
        </ResponsiveContainer>
      </Chart>
      <Chart name="Credits over time" summary={summarize(series.series, 'credits')}>
        <ResponsiveContainer width="100%" height={200}>
          <LineChart data={rows}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="label" minTickGap={24} />
            <YAxis width={48} />
            <Tooltip />
            <Line
              dataKey="creditsUsed"
              name="credits"
              stroke="#2a7"
              dot={{ r: 3 }}
              isAnimationActive={false}
            />
          </LineChart>
        </ResponsiveContainer>
      </Chart>
      <Chart name="Latency over time" summary={summarize(series.series, 'latency')}>
        <ResponsiveContainer width="100%" height={200}>
          <LineChart data={rows}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="label" minTickGap={24} />
            <YAxis width={56} unit="ms" />
            <Tooltip />
            <Legend />
            <Line
              dataKey="p50ElapsedMs"
              name="p50"
              stroke="#555"
              dot={{ r: 3 }}
              connectNulls
              isAnimationActive={false}
            />
            <Line
              dataKey="p95ElapsedMs"
              name="p95"
              stroke="#c70"
              dot={{ r: 3 }}
              connectNulls
              isAnimationActive={false}
            />
          </LineChart>
        </ResponsiveContainer>
      </Chart>
    </>
  );
}
