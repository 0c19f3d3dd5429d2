import type { ReactNode } from 'react';

/**
 * A chart as assistive technology meets it: one image with a name (docs/console.md) and a short text
 * summary, while Recharts draws the picture inside.
 */
export function Chart({ name, summary, children }: { name: string; summary: string; children: ReactNode }) {
  return (
    <figure className="chart">
      <div role="img" aria-label={name} aria-describedby={`${name}-summary`.replaceAll(' ', '-')}>
        {children}
      </div>
      <figcaption id={`${name}-summary`.replaceAll(' ', '-')} className="summary">
        {name}: {summary}
      </figcaption>
    </figure>
  );
}
