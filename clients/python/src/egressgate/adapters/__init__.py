"""egressgate's approval loop inside agent frameworks: each adapter turns the card into the
framework's own pause and the framework's resume into egressgate's exactly-once claim.

- `egressgate.adapters.strands` (`pip install 'egressgate[strands]'`): the approval tool that
  raises `tool_context.interrupt`, its resume branch, and the hook that runs it alone in its
  batch.
- `egressgate.adapters.langgraph` (`pip install 'egressgate[langgraph]'`): the approval node
  that calls `interrupt()` with LangChain's human-in-the-loop shape and resumes with
  `Command(resume={"decisions": [...]})`.
- `egressgate.adapters.agui` (`pip install 'egressgate[agui]'`): an AG-UI agent whose run
  ends with the interrupt outcome and whose next run's `resume` entry claims the card;
  `egressgate.adapters.agui_http` serves it over HTTP (SSE).
- `egressgate.adapters.openai_agents` (`pip install 'egressgate[openai-agents]'`): the approval
  tool as a function tool with `needs_approval`, the run's interruption mapped to the card with
  the serialised `RunState` as its snapshot, `approve`/`reject` applied from the stored
  decision, and a guardrail that runs the approval call alone in its step.
- `egressgate.adapters.a2a` (`pip install 'egressgate[a2a]'`): an A2A SDK agent executor whose
  task waits in `input-required` with the card and continues when the client answers in it;
  `egressgate.adapters.a2a_server` serves it (agent card, JSON-RPC, uvicorn).

All share `egressgate.adapters.claim`: registering the card with the framework's serialised
state as its snapshot, taking over the person's click, heartbeating while the resumed run
works, completing it, and chaining a new card when the resumed run is refused again; where
the turn lives in the framework's state (`TURN_KEY`); and, for the adapters whose approval
step is a tool (Strands, the OpenAI Agents SDK), one `ToolApproval` holding the client, the
batch rule and the tool, with the rule's decision read the same way (`cancelled`).
Importing this package needs nothing beyond the core client; each adapter imports its
framework.
"""
