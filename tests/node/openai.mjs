// Talks to an agent through its OpenAI-compatible endpoint with the official TypeScript
// client (npm openai; 6.x, the last major that runs on Node 20), as JavaScript agent
// frameworks do: baseURL set to the agent's, the API key as the client's key.
//
//   node openai.mjs '<request JSON>'
//
// request: { baseUrl, key, model, calls: [{ messages, stream?: true, params?: {...} }] }
// Prints one JSON line: { models: [ids], results: [ { content, finishReason, usage,
//   chunks } or { error: { status, type, code, param, message } } ] }.
import OpenAI from "openai";

const request = JSON.parse(process.argv[2]);
const client = new OpenAI({ baseURL: request.baseUrl, apiKey: request.key, maxRetries: 0, timeout: 120_000 });

async function call(spec) {
  const params = { model: request.model, messages: spec.messages, ...(spec.params ?? {}) };
  try {
    if (!spec.stream) {
      const answer = await client.chat.completions.create(params);
      const choice = answer.choices[0];
      return { content: choice.message.content, finishReason: choice.finish_reason, usage: answer.usage, chunks: 0 };
    }
    const stream = await client.chat.completions.create({
      ...params,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "", finishReason = null, usage = null, chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        content += choice.delta?.content ?? "";
        finishReason = choice.finish_reason ?? finishReason;
      }
    }
    return { content, finishReason, usage, chunks };
  } catch (e) {
    if (!(e instanceof OpenAI.APIError)) throw e;
    return {
      error: {
        status: e.status ?? null,
        type: e.type ?? e.error?.type ?? null,
        code: e.code ?? null,
        param: e.param ?? null,
        message: e.error?.message ?? e.message,
      },
    };
  }
}

const models = [];
for await (const model of client.models.list()) models.push(model.id);
const results = [];
for (const spec of request.calls) results.push(await call(spec));
console.log(JSON.stringify({ models, results }));
