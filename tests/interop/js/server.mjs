// An A2A agent served the way the JavaScript SDK's README builds one: an AgentExecutor under
// DefaultRequestHandler, its card and JSON-RPC mounted on Express. Run by
// tests/interop/test_js_sdk.py as `node server.mjs`; prints {"port": N} once it listens on
// loopback, and answers every message with "Scribe heard: <the words>", as a completed task
// with the answer as an artifact.
import express from 'express';
import { AgentCard, Task } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

class EchoExecutor {
  async execute(context, bus) {
    const words = context.userMessage.parts
      .map((part) => (part.content?.$case === 'text' ? part.content.value : ''))
      .join('\n');
    bus.publish(
      AgentEvent.task(
        Task.fromJSON({
          id: context.taskId,
          contextId: context.contextId,
          status: { state: 'TASK_STATE_COMPLETED', timestamp: new Date().toISOString() },
          artifacts: [{ artifactId: 'reply', name: 'reply', parts: [{ text: `Scribe heard: ${words}` }] }],
        }),
      ),
    );
    bus.finished();
  }

  async cancelTask() {}
}

let card;
const taskStore = new InMemoryTaskStore();
const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}/a2a`;
  card = AgentCard.fromJSON({
    name: 'Scribe',
    description: 'An agent built with @a2a-js/sdk.',
    version: '1.0.0',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: { streaming: false, pushNotifications: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'echo', name: 'Echo', description: 'Says what it heard.', tags: ['echo'] }],
  });
  const handler = new DefaultRequestHandler(card, taskStore, new EchoExecutor());
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: async () => card }));
  app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log(JSON.stringify({ port: server.address().port }));
});
