// The JavaScript SDK's client, used the way its README shows: `ClientFactory.createFromUrl` on
// the address a person was given, then card, send, get, list and cancel. Run by
// tests/interop/test_js_sdk.py as `node client.mjs ADDRESS KEY TEXT`; prints one JSON object:
// each step's result in ProtoJSON, or the error it raised ({"error": name, "message": ...}).
// Requests are built with the SDK's fromJSON, as TypeScript's types make its users do: a bare
// object leaves out the defaults the SDK's own serialisation relies on.
import {
  AgentCard,
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  Task,
} from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';

const [address, key, text] = process.argv.slice(2);

// The door wants its key on every request, the card's included.
const withKey = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${key}`);
  return fetch(url, { ...init, headers });
};

async function step(work, toJSON) {
  try {
    const value = await work();
    return toJSON ? toJSON(value) : value;
  } catch (error) {
    return { error: error?.constructor?.name ?? 'Error', message: String(error?.message ?? error) };
  }
}

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: withKey })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: withKey }),
  }),
);

const out = {};
let client;
try {
  client = await factory.createFromUrl(address);
} catch (error) {
  out.connect = { error: error?.constructor?.name ?? 'Error', message: String(error?.message ?? error) };
  console.log(JSON.stringify(out));
  process.exit(0);
}
// The card declares an extended card, so this asks for it too (GetExtendedAgentCard).
out.card = await step(() => client.getAgentCard(), (c) => AgentCard.toJSON(c));
const message = Message.fromJSON({
  messageId: `js-${Date.now()}`,
  role: 'ROLE_USER',
  parts: [{ text }],
  contextId: 'js-context',
});
out.send = await step(
  () =>
    client.sendMessage(
      SendMessageRequest.fromJSON({
        message: Message.toJSON(message),
        configuration: { acceptedOutputModes: ['text/plain'] },
      }),
    ),
  (r) => ('status' in r ? Task.toJSON(r) : Message.toJSON(r)),
);
const taskId = out.send?.id;
out.get = await step(() => client.getTask(GetTaskRequest.fromJSON({ id: taskId })), (t) => Task.toJSON(t));
out.getAgain = await step(() => client.getTask(GetTaskRequest.fromJSON({ id: taskId })), (t) => Task.toJSON(t));
out.list = await step(() => client.listTasks(ListTasksRequest.fromJSON({})), (l) => ListTasksResponse.toJSON(l));
out.cancel = await step(() => client.cancelTask(CancelTaskRequest.fromJSON({ id: taskId })), (t) => Task.toJSON(t));
out.missing = await step(() => client.getTask(GetTaskRequest.fromJSON({ id: 'no-such-task' })), (t) => Task.toJSON(t));
console.log(JSON.stringify(out));
