import type { DecisionImage, EvaluationRequest } from '@decision-gateway/contract';
import type { ImageCapabilities, Upstream } from '@decision-gateway/questions';
import { z } from 'zod';

/** What a request asks of the upstreams that may answer it (docs/images.md#upstreams). */
export interface ImageNeeds {
  images: number;
  urls: boolean;
  box: boolean;
}

export function needsOf(
  request: EvaluationRequest,
  images: readonly DecisionImage[] | undefined,
): ImageNeeds {
  let box = false;
  for (const id in request.questions)
    if ((request.questions[id] as { type: string }).type === 'box') box = true;
  return {
    images: images?.length ?? 0,
    urls: images?.some((image) => image.source === 'url') ?? false,
    box,
  };
}

/** Nothing beyond text: every upstream takes it. */
export const asksNothing = (needs: ImageNeeds) => needs.images === 0 && !needs.box;

const NONE: ImageCapabilities = { images: false, imageUrls: false, box: false, maxImages: 0 };

/** What of `needs` an upstream does not take, in words (`images`, `image URLs`, …); empty when it takes all. */
export function missingFor(upstream: Upstream, needs: ImageNeeds): string[] {
  if (asksNothing(needs)) return [];
  const can = upstream.capabilities ?? NONE;
  const missing: string[] = [];
  if (needs.images > 0 && !can.images) missing.push('images');
  else if (needs.images > can.maxImages) missing.push(`${needs.images} images`);
  if (needs.urls && !can.imageUrls) missing.push('image URLs');
  if (needs.box && !can.box) missing.push('box questions');
  return missing;
}

export const takes = (upstream: Upstream, needs: ImageNeeds) => missingFor(upstream, needs).length === 0;

/**
 * Why none of a route's upstreams can answer, or undefined when one can: what the first of them
 * lacks, as `route default has no upstream that takes images`.
 */
export function noCapableUpstream(
  route: string,
  upstreams: readonly Upstream[],
  needs: ImageNeeds,
): string | undefined {
  if (asksNothing(needs) || upstreams.some((upstream) => takes(upstream, needs))) return undefined;
  const lacking = new Set(upstreams.flatMap((upstream) => missingFor(upstream, needs)));
  return `route ${route} has no upstream that takes ${[...lacking].join(' and ')}`;
}

/**
 * The capability fields of every kind's configuration (docs/images.md#upstreams): each optional,
 * the kind's default where left out.
 */
export const capabilityFields = {
  images: z.boolean().optional(),
  imageUrls: z.boolean().optional(),
  box: z.boolean().optional(),
  maxImages: z.int().min(1).max(128).optional(),
};

/** A kind's defaults overridden by what its configuration says. */
export function capabilitiesOf(
  config: Partial<ImageCapabilities>,
  defaults: ImageCapabilities,
): ImageCapabilities {
  const images = config.images ?? defaults.images;
  return {
    images,
    imageUrls: config.imageUrls ?? defaults.imageUrls,
    box: config.box ?? defaults.box,
    maxImages: config.maxImages ?? defaults.maxImages,
  };
}
