// Talks to an agent through its OpenAI-compatible endpoint with the official TypeScript
// client (npm openai; 6.x, the last major that runs on Node 20), as JavaScript agent
// frameworks do: baseURL set to the agent's, the API key as the client's key.
//
//   node openai.mjs '<request JSON>'
//
// request: { baseUrl, key, model, pay?, calls: [{ messages, stream?: true, params?: {...},
//            hangUpAfter?: N (a stream: stop reading after N chunks),
//            hangUpAfterMs?: N (abort the request after N ms, answered or not) }] }
// pay (the paid endpoint, no key): an x402 payer as x402_payer.mjs takes it; the client's
// fetch is then @x402/fetch's wrapFetchWithPayment, which pays the 402 and asks again.
// Prints one JSON line: { models: [ids], results: [ { content, finishReason, usage,
//   chunks, paymentResponse } or { error: { status, type, code, param, message } } ] }
// (paymentResponse: the decoded PAYMENT-RESPONSE of a paid answer).
import OpenAI from "openai";
import { payer } from "./x402_payer.mjs";

const request = JSON.parse(process.argv[2]);
let paymentResponse = null;
let fetchImpl = fetch;
if (request.pay) {
  const { wrapFetchWithPayment } = await import("@x402/fetch");
  const paying = wrapFetchWithPayment(fetch, await payer(request.pay));
  fetchImpl = async (input, init) => {
    const response = await paying(input, init);
    const header = response.headers.get("payment-response");
    if (header) paymentResponse = JSON.parse(Buffer.from(header, "base64").toString("utf8"));
    return response;
  };
}
const client = new OpenAI({
  baseURL: request.baseUrl,
  apiKey: request.key ?? "paid-with-x402",
  maxRetries: 0,
  timeout: 120_000,
  fetch: fetchImpl,
});

async function call(spec) {
  const params = { model: request.model, messages: spec.messages, ...(spec.params ?? {}) };
  const controller = new AbortController();
  if (spec.hangUpAfterMs) setTimeout(() => controller.abort(), spec.hangUpAfterMs);
  const options = { signal: controller.signal };
  try {
    if (!spec.stream) {
      const answer = await client.chat.completions.create(params, options);
      const choice = answer.choices[0];
      return {
        content: choice.message.content,
        finishReason: choice.finish_reason,
        usage: answer.usage,
        chunks: 0,
        paymentResponse,
      };
    }
    const stream = await client.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      options,
    );
    let content = "", finishReason = null, usage = null, chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      if (spec.hangUpAfter && chunks >= spec.hangUpAfter) {
        stream.controller.abort();
        break;
      }
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        content += choice.delta?.content ?? "";
        finishReason = choice.finish_reason ?? finishReason;
      }
    }
    return { content, finishReason, usage, chunks, paymentResponse };
  } catch (e) {
    if (e instanceof OpenAI.APIUserAbortError) return { aborted: true };
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
