"""The official A2A Python SDK (a2a-sdk) against an agent's A2A endpoint, for tests/api/a2a.rs.

Reads one JSON argument: {"url": the agent's A2A URL, "key": an API key or null,
"steps": [...]}; each step is one of
  {"do": "card"}                                        the card, as the SDK resolves it
  {"do": "send", "text": ..., "skill": ..., "data": {...}, "contextId": ..., "stream": bool,
   "immediately": bool}                                  a message; its events and last task
  {"do": "get", "task": "$N"}                           GetTask of step N's task
  {"do": "cancel", "task": "$N"}                        CancelTask
  {"do": "list", "contextId": ...}                      ListTasks
  {"do": "subscribe", "task": "$N"}                     SubscribeToTask, to the end
  {"do": "push", "task": "$N", "url": ..., "token": ...} CreateTaskPushNotificationConfig,
                                                        then ListTaskPushNotificationConfigs
  {"do": "verify"}                                      the card's signature checked with the
                                                        SDK's verifier, the key from its jku;
                                                        then a changed copy's
and prints {"steps": [...]} with each step's outcome (an SDK error as {"error": ...}).
"""

import asyncio
import base64
import json
import sys
import uuid

import httpx
from google.protobuf import json_format

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)


def as_json(message):
    return json_format.MessageToDict(message)


def event_kind(event):
    """The event's kind as the wire names it (the proto's field names are snake_case)."""
    kind = event.WhichOneof("payload")
    head, *rest = kind.split("_")
    return head + "".join(word.capitalize() for word in rest)


async def main(request):
    headers = {"x-api-key": request["key"]} if request.get("key") else {}
    outcomes = []

    def task_id(ref):
        if isinstance(ref, str) and ref.startswith("$"):
            return outcomes[int(ref[1:])]["task"]["id"]
        return ref

    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, request["url"]).get_agent_card()
        blocking = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        polling = ClientFactory(ClientConfig(httpx_client=http, streaming=False, polling=True)).create(card)
        streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        for step in request["steps"]:
            try:
                outcomes.append(await run(step, card, http, blocking, polling, streaming, task_id))
            except Exception as err:  # the SDK's error is the outcome
                outcomes.append({"error": type(err).__name__, "message": str(err)})
    print(json.dumps({"steps": outcomes}))


async def run(step, card, http, blocking, polling, streaming, task_id):
    kind = step["do"]
    if kind == "card":
        return {"card": as_json(card)}
    if kind == "send":
        parts = []
        if step.get("text") is not None:
            parts.append(Part(text=step["text"]))
        if step.get("data") is not None:
            part = Part()
            json_format.ParseDict({"data": step["data"]}, part)
            parts.append(part)
        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts)
        if step.get("contextId"):
            message.context_id = step["contextId"]
        if step.get("skill"):
            message.metadata.update({"skill": step["skill"]})
        client = streaming if step.get("stream") else polling if step.get("immediately") else blocking
        events, task = [], None
        async for event in client.send_message(SendMessageRequest(message=message)):
            events.append({"kind": event_kind(event), "event": as_json(event)})
            if event.HasField("task"):
                task = as_json(event.task)
        return {"events": events, "task": task}
    if kind == "get":
        return {"task": as_json(await blocking.get_task(GetTaskRequest(id=task_id(step["task"]))))}
    if kind == "cancel":
        return {"task": as_json(await blocking.cancel_task(CancelTaskRequest(id=task_id(step["task"]))))}
    if kind == "list":
        listed = await blocking.list_tasks(ListTasksRequest(context_id=step.get("contextId", "")))
        return {"list": as_json(listed)}
    if kind == "subscribe":
        events = []
        async for event in streaming.subscribe(SubscribeToTaskRequest(id=task_id(step["task"]))):
            events.append({"kind": event_kind(event), "event": as_json(event)})
        return {"events": events}
    if kind == "verify":
        from jwt import PyJWK
        from a2a.utils.signing import create_signature_verifier

        header = json.loads(base64.urlsafe_b64decode(card.signatures[0].protected + "=="))
        keys = (await http.get(header["jku"])).json()["keys"]
        provider = lambda kid, jku: PyJWK(next(k for k in keys if k["kid"] == kid))
        verify = create_signature_verifier(provider, ["EdDSA"])
        verify(card)
        changed = AgentCard()
        changed.CopyFrom(card)
        changed.name = "Someone else"
        try:
            verify(changed)
            return {"verified": True, "changed": "accepted"}
        except Exception as err:
            return {"verified": True, "changed": type(err).__name__}
    if kind == "push":
        config = TaskPushNotificationConfig(task_id=task_id(step["task"]), url=step["url"], token=step["token"])
        made = await blocking.create_task_push_notification_config(config)
        listed = await blocking.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id(step["task"]))
        )
        return {"config": as_json(made), "configs": as_json(listed)}
    raise ValueError(f"unknown step {kind}")


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
