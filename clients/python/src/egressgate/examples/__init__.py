"""Runnable examples of the framework adapters, each with a scripted model:
`python -m egressgate.examples.strands`, `python -m egressgate.examples.langgraph`,
`python -m egressgate.examples.agui`, `python -m egressgate.examples.openai_agents`
(`ask --user U --chat C --url URL [--unattended]`, then `resume --interrupt-id ID`)."""
