// A scripted model for the OpenAI Agents SDK: no network, no key. Each
// turn answers the next entry of the script: a tool call
// ({ call: name, args, id }) or a final message ({ say: text }). It keeps
// every input it was given in `seen`, so a test can read what the model
// was told (a tool's result, or writ's receipt instead of it).
import { Usage } from '@openai/agents';

export function scriptedModel(script) {
  let turn = 0;
  const seen = [];
  return {
    seen,
    async getResponse(request) {
      seen.push(request.input);
      const step = script[turn++];
      if (!step) throw new Error(`the script has no turn ${turn}`);
      const output = step.call
        ? [{ type: 'function_call', callId: step.id, name: step.call, arguments: JSON.stringify(step.args), status: 'completed' }]
        : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: step.say }] }];
      return { usage: new Usage(), output, responseId: `resp_${turn}` };
    },
    /** Goes on from turn n, as a model in another process would after a restored run's pause. */
    skip(n) { turn += n; },
    // eslint-disable-next-line require-yield
    async *getStreamedResponse() { throw new Error('the scripted model does not stream'); },
  };
}

/** The tool results the model was given, by call id, as text. */
export function toolResults(model) {
  const out = {};
  for (const input of model.seen) {
    if (!Array.isArray(input)) continue;
    for (const item of input) {
      if (item.type === 'function_call_result') out[item.callId] = typeof item.output === 'string' ? item.output : item.output.text;
    }
  }
  return out;
}
