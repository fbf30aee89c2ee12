// src/schema.ts is generated from writ's OpenAPI document; this test fails
// when the document changed and `npm run generate` was not run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

test('src/schema.ts is generated from httpapi/openapi.yaml (npm run generate)', () => {
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'writ-schema-')), 'schema.ts');
  execFileSync(process.execPath, [path.join(here, 'node_modules/openapi-typescript/bin/cli.js'),
    '../../httpapi/openapi.yaml', '--empty-objects-unknown', '-o', out], { cwd: here, stdio: 'ignore' });
  assert.equal(readFileSync(path.join(here, 'src/schema.ts'), 'utf8'), readFileSync(out, 'utf8'),
    'src/schema.ts is stale: run npm run generate');
});
