// An A2A agent served the way the JavaScript SDK's README builds one: an AgentExecutor under
// DefaultRequestHandler, its card and JSON-RPC mounted on Express. Run by
// tests/interop/test_js_sdk.py as `node server.mjs`; prints {"port": N} once it listens on
// loopback, and answers every message with "Scribe heard: <the words>", as a completed task
// with the answer as an artifact. A message with "slow" in it is worked on for a minute instead,
// until it is canceled; both are printed ({"working": task id}, {"canceled": task id}).
import express from 'express';
import { AgentCard, Task, TaskStatusUpdateEvent } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

class EchoExecutor {
  working = new Map(); // task id → { contextId, done: what ends its wait }

  async execute(context, bus) {
    const words = context.userMessage.parts
      .map((part) => (part.content?.$case === 'text' ? part.content.value : ''))
      .join('\n');
    if (words.includes('slow')) {
      const task = { id: context.taskId, contextId: context.contextId, status: { state: 'TASK_STATE_WORKING' } };
      bus.publish(AgentEvent.task(Task.fromJSON(task)));
      console.log(JSON.stringify({ working: context.taskId }));
      await new Promise((done) => {
        this.working.set(context.taskId, { contextId: context.contextId, done });
        setTimeout(done, 60_000);
      });
      return;
    }
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

  async cancelTask(taskId, bus) {
    console.log(JSON.stringify({ canceled: taskId }));
    const working = this.working.get(taskId);
    const contextId = working?.contextId ?? '';
    const stopped = { taskId, contextId, status: { state: 'TASK_STATE_CANCELED' } };
    bus.publish(AgentEvent.statusUpdate(TaskStatusUpdateEvent.fromJSON(stopped)));
    bus.finished();
    working?.done();
  }
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
