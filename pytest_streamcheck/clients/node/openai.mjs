#!/usr/bin/env node
// openai (npm) behind exec protocol v1: the SDK's streaming chat completions as an
// application calls them, with the SDK's default retries and timeouts:
//   new OpenAI({baseURL: <the case URL>, apiKey}).chat.completions.create(
//     {model, messages: [{role: 'user', content: prompt}], stream: true}, {headers})
// The kit serves the case's script at <URL>/chat/completions in OpenAI's wire format.
// Chunks are the chat.completion.chunk objects that carry delta content, as JSON; the
// role chunk and the finish chunk carry none and are framing.

import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';

import { packageVersion, serve } from './protocol.mjs';
import { reportSdkError, sdkRequest } from './_sdk.mjs';

const ERRORS = { APIConnectionError, APIError, APIUserAbortError };

function hasContent(chunk) {
  return (chunk?.choices ?? []).some((c) => typeof c?.delta?.content === 'string' && c.delta.content !== '');
}

async function open(stream, client) {
  const cmd = stream.cmd;
  if (cmd.method !== 'POST') {
    stream.error('other', 'the OpenAI SDK sends its requests as POST');
    return;
  }
  const clients = client(() => new Map()); // one OpenAI per client name and base URL
  if (!clients.has(cmd.url)) clients.set(cmd.url, new OpenAI({ baseURL: cmd.url, apiKey: 'sk-streamcheck' }));
  const openai = clients.get(cmd.url);
  const { model, prompt, headers } = sdkRequest(cmd, 'gpt-4o-mini');
  let started = false;
  stream.state('connecting');
  try {
    const answer = await openai.chat.completions.create(
      { model, messages: [{ role: 'user', content: prompt }], stream: true },
      { headers, signal: stream.signal },
    );
    for await (const chunk of answer) {
      if (stream.ended) break;
      if (!hasContent(chunk)) continue;
      started = true;
      if (!stream.chunk(JSON.stringify(chunk))) break; // the consumer stops: break closes it
    }
    if (!stream.ended) stream.done(); // the SDK ended the iteration normally
  } catch (err) {
    reportSdkError(stream, err, ERRORS, { started });
  }
}

serve({
  name: 'openai-node',
  version: packageVersion('openai'),
  profile: 'openai-node',
  capabilities: ['post'],
  format: 'openai', // the kit's plain endpoints (a redirect's target) speak it too
  open,
});
