"""Your MCP servers: the tools of servers you add (stdio or Streamable HTTP), offered to your own
agents' turns under the chat's mode and the guard, through the official `mcp` SDK.

    rules.py       names, what a model is offered of a tool, results fenced as data (pure)
    connection.py  Connection: one running server through the SDK's client; its process group
    service.py     McpServerService: the servers you add (sealed values, the policy), their
                   connections, and what one turn is offered

Whether a call runs, asks or is refused is the one rule of every tool (notebook/rules.py).

May import: core, store, providers, notebook.
"""
