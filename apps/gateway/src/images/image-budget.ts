/**
 * IMAGE_BYTES_IN_FLIGHT (docs/images.md#memory): the bytes of images that requests in flight on
 * this instance may hold together. A request that would pass it is refused (503, nothing charged)
 * rather than queued: memory stays bounded however many callers send photos at once.
 */
export interface ImageBudget {
  /** Takes `bytes` if they fit under the cap; false (and nothing taken) if not. */
  take(bytes: number): boolean;
  /** Gives back bytes taken. */
  give(bytes: number): void;
  /** Bytes held now. */
  held(): number;
  readonly limit: number;
}

export function createImageBudget(limit: number): ImageBudget {
  let held = 0;
  return {
    limit,
    take(bytes) {
      if (held + bytes > limit) return false;
      held += bytes;
      return true;
    },
    give(bytes) {
      held = Math.max(0, held - bytes);
    },
    held: () => held,
  };
}
