"""The A2A SDK's own client, as tests/framework_adapter_a2a.rs drives a served agent with it:
`a2a_client.py AGENT_URL TEXT [--user U] [--context-id C] [--task-id T]` sends one message
(streaming, as the SDK's client does by default) and prints one JSON line: `{"task": ...}`
(the task as `GetTask` answers after the stream ended) or `{"error": {"type", "message",
"data"}}` (exit 1) when the agent refused the message.
"""

import argparse
import asyncio
import json
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict


async def send(args: argparse.Namespace) -> dict:
    async with httpx.AsyncClient(trust_env=False, timeout=60) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(args.agent)
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=args.text)],
                          context_id=args.context_id or "", task_id=args.task_id or "")
        request = SendMessageRequest(message=message)
        if args.user:
            request.metadata.update({"user": args.user})
        task_id = args.task_id
        try:
            async for event in client.send_message(request):
                for field in ("task", "status_update", "artifact_update"):
                    if event.HasField(field):
                        found = getattr(event, field)
                        task_id = task_id or getattr(found, "id", "") or getattr(found, "task_id", "")
        except A2AError as e:
            return {"error": {"type": type(e).__name__, "message": e.message, "data": e.data}}
        task = await client.get_task(GetTaskRequest(id=task_id))
        await client.close()
        return {"task": MessageToDict(task)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("agent")
    parser.add_argument("text")
    parser.add_argument("--user")
    parser.add_argument("--context-id")
    parser.add_argument("--task-id")
    out = asyncio.run(send(parser.parse_args()))
    print(json.dumps(out), flush=True)
    return 1 if "error" in out else 0


if __name__ == "__main__":
    raise SystemExit(main())
