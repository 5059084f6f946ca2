"""A remote MCP server for tests/api/remote_mcp.rs, on the official MCP Python SDK
(FastMCP, Streamable HTTP): the tools an agent's chat may be given, one that hangs and one
that floods. With REQUIRED_TOKEN set, a request without `Authorization: Bearer <it>` is
answered 401, as a server behind a credential answers.

Usage: python mcp_server.py PORT   (prints "listening" once it serves)
"""

import asyncio
import os
import sys

import uvicorn
from mcp.server.fastmcp import FastMCP
from starlette.responses import JSONResponse

port = int(sys.argv[1])
token = os.environ.get("REQUIRED_TOKEN")
mcp = FastMCP("test-tools", log_level="WARNING")


@mcp.tool()
def add(a: int, b: int) -> str:
    """Adds two whole numbers."""
    return str(a + b)


@mcp.tool()
async def slow(seconds: float) -> str:
    """Answers after a while."""
    await asyncio.sleep(seconds)
    return "done"


@mcp.tool()
def flood(kilobytes: int) -> str:
    """Answers with a lot of text."""
    return "x" * (kilobytes * 1024)


@mcp.tool()
def delete_everything() -> str:
    """A tool its owner keeps from the agent."""
    return "deleted"


app = mcp.streamable_http_app()


async def guarded(scope, receive, send):
    if token and scope["type"] == "http":
        headers = dict(scope.get("headers") or [])
        if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
            refusal = JSONResponse({"error": "invalid_token"}, status_code=401,
                                   headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
            await refusal(scope, receive, send)
            return
    await app(scope, receive, send)


class Announced(uvicorn.Server):
    async def startup(self, sockets=None):
        await super().startup(sockets)
        print("listening", flush=True)


Announced(uvicorn.Config(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")).run()
