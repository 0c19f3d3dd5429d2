import { type ReactNode, useId } from 'react';

/**
 * A control with its label tied by `for`/`id`, so its accessible name is exactly the label (a
 * control nested in its label would add its own value to the name, e.g. "Key web-backend").
 */
export function Field({ label, children }: { label: string; children: (id: string) => ReactNode }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(id)}
    </div>
  );
}
