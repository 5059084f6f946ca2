"""Talks to an agent through its OpenAI-compatible endpoint with the official Python
client (`openai`), as Python agent frameworks do: base_url set to the agent's, the API
key as the client's key.

    python openai_client.py '<request JSON>'

request: { "baseUrl", "key", "model", "pay"?, "calls": [ { "messages", "stream"?: true,
           "params"?: {extra create() arguments} } ] }
pay (the paid endpoint, no key): { "key" (a Base private key), "networkId", "scheme"?: "upto" }:
the async client then sends its requests through the x402 package's httpx transport, which
pays a 402 (x402 version 2) with the scheme registered (exact, or upto alone) and asks again.
Prints one JSON line: { "models": [ids], "results": [ { "content", "finishReason",
"usage", "chunks" } or { "error": { "status", "type", "code", "param", "message" } } ] }.
"""

import asyncio
import json
import sys

import openai


def call(client, model, spec):
    params = dict(spec.get("params", {}))
    try:
        if not spec.get("stream"):
            answer = client.chat.completions.create(model=model, messages=spec["messages"], **params)
            return {
                "content": answer.choices[0].message.content,
                "finishReason": answer.choices[0].finish_reason,
                "usage": answer.usage.model_dump() if answer.usage else None,
                "chunks": 0,
            }
        stream = client.chat.completions.create(
            model=model,
            messages=spec["messages"],
            stream=True,
            stream_options={"include_usage": True},
            **params,
        )
        content, finish, usage, chunks = "", None, None, 0
        for chunk in stream:
            chunks += 1
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
            for choice in chunk.choices:
                content += choice.delta.content or ""
                finish = choice.finish_reason or finish
        return {"content": content, "finishReason": finish, "usage": usage, "chunks": chunks}
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return {
            "error": {
                "status": e.status_code,
                "type": body.get("type"),
                "code": body.get("code"),
                "param": body.get("param"),
                "message": body.get("message"),
            }
        }
    except openai.APIError as e:
        # A failure inside a stream (an event holding `error`).
        return {"error": {"status": None, "type": "stream", "code": None, "param": None, "message": e.message}}


def main():
    request = json.loads(sys.argv[1])
    if request.get("pay"):
        print(json.dumps(asyncio.run(paid_main(request))))
        return
    client = openai.OpenAI(base_url=request["baseUrl"], api_key=request["key"], max_retries=0, timeout=120)
    models = [m.id for m in client.models.list()]
    results = [call(client, request["model"], spec) for spec in request["calls"]]
    print(json.dumps({"models": models, "results": results}))


async def paid_main(request):
    """The async client, paying through the x402 package's httpx transport."""
    import httpx
    from eth_account import Account
    from x402 import x402Client
    from x402.http.clients import x402_httpx_transport

    pay = request["pay"]
    signer = Account.from_key(pay["key"])
    payments = x402Client()
    if pay.get("scheme") == "upto":
        from x402.mechanisms.evm.upto import UptoEvmScheme

        payments.register(pay["networkId"], UptoEvmScheme(signer))
    else:
        from x402.mechanisms.evm.exact import ExactEvmClientScheme

        payments.register(pay["networkId"], ExactEvmClientScheme(signer))
    async with httpx.AsyncClient(transport=x402_httpx_transport(payments), timeout=120) as http:
        client = openai.AsyncOpenAI(
            base_url=request["baseUrl"], api_key="paid-with-x402", max_retries=0, http_client=http
        )
        results = []
        for spec in request["calls"]:
            results.append(await paid_call(client, request["model"], spec))
        return {"models": [], "results": results}


async def paid_call(client, model, spec):
    try:
        if not spec.get("stream"):
            answer = await client.chat.completions.create(model=model, messages=spec["messages"])
            return {
                "content": answer.choices[0].message.content,
                "finishReason": answer.choices[0].finish_reason,
                "usage": answer.usage.model_dump() if answer.usage else None,
                "chunks": 0,
            }
        stream = await client.chat.completions.create(
            model=model, messages=spec["messages"], stream=True, stream_options={"include_usage": True}
        )
        content, finish, usage, chunks = "", None, None, 0
        async for chunk in stream:
            chunks += 1
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
            for choice in chunk.choices:
                content += choice.delta.content or ""
                finish = choice.finish_reason or finish
        return {"content": content, "finishReason": finish, "usage": usage, "chunks": chunks}
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return {"error": {"status": e.status_code, "code": body.get("code"), "message": body.get("message")}}


main()
