"""py-echo: the command-plugin contract in Python, to show the WIT is language-neutral.

`/echo text="..." [shout=true]` answers the text back (upper-cased when shouting) and
logs through the host's `log` capability. Build: see build.sh.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log, types


class Command(exports.Command):
    def manifest(self) -> types.PluginManifest:
        return types.PluginManifest(
            name="py_echo",
            version="0.1.0",
            description="Echoes text back (written in Python)",
            parameters=[
                types.ParamSpec(name="text", kind=types.ParamType.STRING, required=True, description="What to say"),
                types.ParamSpec(name="shout", kind=types.ParamType.BOOLEAN, required=False, description="Upper-case it"),
            ],
            response_format=types.ResponseFormat.TEXT,
            capabilities=[],
            long_running=False,
        )

    def execute(self, invocation: types.Invocation) -> types.Output:
        params = json.loads(invocation.parameters or "{}")
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise Err(types.CommandError_InvalidInput("parameter 'text' must be a non-empty string"))
        if params.get("shout"):
            text = text.upper()
        log.log(log.Level.INFO, f"py-echo answered {len(text)} characters")
        return types.Output(response=f"{text} (from Python)", format=invocation.response_format, media_url=None)
