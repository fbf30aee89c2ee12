// A small MCP server, written with the official TypeScript SDK, for the
// evidence end-to-end test (evidence.test.mjs): an identity verification
// service's check_identity (a customer named cus_fail fails it: isError)
// and a payments provider's issue_refund, which appends each refund it
// issues to the file named by $IDV_REFUNDS, so the test sees what reached
// the tool.
import fs from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'idv-payments', version: '1.0.0' });

server.registerTool('check_identity', {
  description: "Verify a customer's identity with a one-time password.",
  inputSchema: { customer_id: z.string() },
  outputSchema: { customer_id: z.string(), verified: z.boolean(), method: z.string(), phone: z.string() },
}, async ({ customer_id }) => {
  if (customer_id === 'cus_fail') {
    return { isError: true, content: [{ type: 'text', text: `customer ${customer_id} did not pass verification` }] };
  }
  const result = { customer_id, verified: true, method: 'otp', phone: '+91 98765 43210' };
  return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
});

server.registerTool('issue_refund', {
  description: 'Issue a refund to the original payment method.',
  inputSchema: { customer_id: z.string(), order_id: z.string(), amount_inr: z.number(), currency: z.string() },
}, async (args) => {
  if (process.env.IDV_REFUNDS) fs.appendFileSync(process.env.IDV_REFUNDS, JSON.stringify(args) + '\n');
  return { content: [{ type: 'text', text: `refunded ${args.amount_inr} ${args.currency} on ${args.order_id}` }] };
});

await server.connect(new StdioServerTransport());
