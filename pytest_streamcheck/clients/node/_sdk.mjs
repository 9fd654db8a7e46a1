// What the two Stainless SDKs (openai, @anthropic-ai/sdk) share as an application sees
// them: the request's headers and prompt, and their errors in the kit's vocabulary.

import { describe, promptOf } from './protocol.mjs';

/** The statuses the SDKs' own shouldRetry() retries (x-should-retry overrides them). */
export function sdkRetries(status, headers) {
  const hint = headers?.get?.('x-should-retry') ?? headers?.['x-should-retry'];
  if (hint === 'true') return true;
  if (hint === 'false') return false;
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/** The request as the application makes it: prompt, model, and the case's headers. */
export function sdkRequest(cmd, fallbackModel) {
  const json = cmd.body?.json;
  const model = typeof json?.model === 'string' ? json.model : fallbackModel;
  return { model, prompt: promptOf(cmd.body), headers: { ...(cmd.headers ?? {}) } };
}

/**
 * Report an error the SDK threw. `errors` holds the SDK's classes. Before any chunk: a
 * status the SDK does not retry is `non_retryable_status`; one it retries, or a
 * connection error or timeout (retried too), reached the application only once the
 * retries were spent: `gave_up`. Once chunks were handed over, the answer broke off:
 * `truncated` (the SDKs never retry a stream whose body has begun).
 */
export function reportSdkError(stream, err, errors, { started }) {
  if (stream.ended || stream.signal.aborted) return;
  if (err instanceof errors.APIUserAbortError) return; // the consumer stopped reading
  const detail = describe(err);
  if (started) {
    stream.error('truncated', detail);
    return;
  }
  if (err instanceof errors.APIError && Number.isInteger(err.status)) {
    const kind = sdkRetries(err.status, err.headers) ? 'gave_up' : 'non_retryable_status';
    stream.error(kind, detail, err.status);
    return;
  }
  if (err instanceof errors.APIConnectionError) {
    stream.error('gave_up', detail); // APIConnectionTimeoutError included
    return;
  }
  // In-band error events and failures while reading the body, before any text.
  stream.error('truncated', detail);
}
