"""Talks to an agent's MCP endpoint with the official Python SDK (`mcp`), as Python agents
do: connects with a key, lists every tool (following cursors), calls tools.

    python mcp_client.py '<request JSON>'

request: { "url", "key"?, "pay"?: { "key": 0x-hex private key, "networkId" },
           "calls": [ { "name", "arguments"?, "progress"?: true } ] }
Without a key and with `pay`, every call goes through the x402 package's MCP session
(`x402.mcp.x402MCPSession`), which pays a priced tool on Base with an EIP-3009 signature.
Prints one JSON line: { "server", "tools": [names], "results": [ { "isError", "text",
"structuredContent", "progress": [numbers], "paymentResponse" } ] }.
"""

import asyncio
import json
import sys
from datetime import timedelta

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def paying_session(session, pay):
    """The x402 package's MCP session over `session`, paying with an EVM key."""
    from eth_account import Account
    from x402 import x402Client
    from x402.mcp import x402MCPSession
    from x402.mechanisms.evm.exact import ExactEvmClientScheme

    payments = x402Client()
    payments.register(pay["networkId"], ExactEvmClientScheme(Account.from_key(pay["key"])))
    return x402MCPSession(session, payments)


async def main(request):
    headers = {"Authorization": f"Bearer {request['key']}"} if request.get("key") else {}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        async with streamable_http_client(request["url"], http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                tools, cursor = [], None
                while True:
                    page = await session.list_tools(cursor=cursor)
                    tools += [tool.name for tool in page.tools]
                    cursor = page.nextCursor
                    if not cursor:
                        break
                payer = paying_session(session, request["pay"]) if request.get("pay") else None
                results = []
                for call in request["calls"]:
                    if payer is not None:
                        paid = await payer.call_tool(call["name"], call.get("arguments", {}))
                        text = next((b.text for b in paid.content if b.type == "text"), "")
                        receipt = paid.payment_response
                        if receipt is not None and not isinstance(receipt, dict):
                            receipt = receipt.model_dump(by_alias=True)
                        results.append({"isError": bool(paid.is_error), "text": text, "paymentResponse": receipt})
                        continue
                    progress = []

                    async def told(value, total, message, progress=progress):
                        progress.append(value)

                    result = await session.call_tool(
                        call["name"],
                        call.get("arguments", {}),
                        read_timeout_seconds=timedelta(seconds=120),
                        progress_callback=told if call.get("progress") else None,
                    )
                    text = next((block.text for block in result.content if block.type == "text"), "")
                    results.append(
                        {
                            "isError": bool(result.isError),
                            "text": text,
                            "structuredContent": result.structuredContent,
                            "progress": progress,
                        }
                    )
                print(json.dumps({"server": init.serverInfo.name, "tools": tools, "results": results}))


asyncio.run(main(json.loads(sys.argv[1])))
