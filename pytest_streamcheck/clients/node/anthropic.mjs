#!/usr/bin/env node
// @anthropic-ai/sdk behind exec protocol v1: the SDK's streaming messages as an
// application calls them, with the SDK's default retries and timeouts:
//   new Anthropic({baseURL: <the case URL>, apiKey}).messages.create(
//     {model, max_tokens, messages: [{role: 'user', content: prompt}], stream: true}, {headers})
// The SDK appends /v1/messages; the kit serves the case's script there in Anthropic's
// wire format. Chunks are the content_block_delta events, as JSON; message_start,
// content_block_start/stop, message_delta, ping and message_stop are framing.

import Anthropic, { APIConnectionError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';

import { packageVersion, serve } from './protocol.mjs';
import { reportSdkError, sdkRequest } from './_sdk.mjs';

const ERRORS = { APIConnectionError, APIError, APIUserAbortError };

async function open(stream, client) {
  const cmd = stream.cmd;
  if (cmd.method !== 'POST') {
    stream.error('other', 'the Anthropic SDK sends its requests as POST');
    return;
  }
  const clients = client(() => new Map()); // one Anthropic per client name and base URL
  if (!clients.has(cmd.url)) clients.set(cmd.url, new Anthropic({ baseURL: cmd.url, apiKey: 'sk-streamcheck' }));
  const anthropic = clients.get(cmd.url);
  const { model, prompt, headers } = sdkRequest(cmd, 'claude-sonnet-4-5');
  let started = false;
  stream.state('connecting');
  try {
    const answer = await anthropic.messages.create(
      { model, max_tokens: 1024, messages: [{ role: 'user', content: prompt }], stream: true },
      { headers, signal: stream.signal },
    );
    for await (const event of answer) {
      if (stream.ended) break;
      if (event?.type !== 'content_block_delta') continue;
      started = true;
      if (!stream.chunk(JSON.stringify(event))) break; // the consumer stops: break closes it
    }
    if (!stream.ended) stream.done(); // the SDK ended the iteration normally
  } catch (err) {
    reportSdkError(stream, err, ERRORS, { started });
  }
}

serve({
  name: 'anthropic-node',
  version: packageVersion('@anthropic-ai/sdk'),
  profile: 'anthropic-node',
  capabilities: ['post'],
  format: 'anthropic', // the kit's plain endpoints (a redirect's target) speak it too
  open,
});
